"""`converter_lite`: convert an ONNX, TFLite or MINDIR model (`converter.frontends`) to `.ms` with MindSpore Lite's
converter flags; every kind quantizes and trains alike.

    converter_lite --fmk=ONNX --modelFile=model.onnx --outputFile=model [--inputShape="input:1,3,224,224"]
    converter_lite --fmk=TFLITE --modelFile=model.tflite --outputFile=model [--inputShape="input:1,224,224,3"]
                   [--signatures=encode,decode]
    converter_lite --fmk=MINDIR --modelFile=model.mindir --outputFile=model [--inputShape="x:1,3,224,224"]
                   [--trainModel=true [--configFile=train.cfg] [--loss=... --optimizer=... --learningRate=...]]
                   [--quantType=PostTraining|WeightQuant [--bitNum=8] [--configFile=quant.cfg]]
                   [--encryptKey=<hex key> [--encryption=true] | --integrity=true] [--saveType=MSPY]

Prints `CONVERT RESULT SUCCESS:0`, or the error (naming the file, op, node and opset) on stderr and then
`CONVERT RESULT FAILED:<status> <meaning>`; returns the MindSpore status (0 on success, negative on failure).
`--encryptKey` writes the model AES-GCM encrypted (the runtime needs the key: `Model.Load(path, dec_key=...)`),
`--integrity=true` appends a SHA-256 footer that the runtime checks (see `lite.protect`).
`--fp16=on` stores float weights as float16 (float inference models only). `--saveType` picks the output format
(`converter.export.SAVE_TYPES`; MSPY, ours, by default). A TFLite file with several signature defs converts into
one `.ms` holding every signature (`LiteSession.SelectSignature`), or those `--signatures` names.
"""
from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import TYPE_CHECKING, Sequence

from converter import convert_file
from converter.export import DEFAULT_SAVE_TYPE, SAVE_TYPES
from converter.frontends import FRONTENDS, frontend
from lite import protect
from converter.train import TrainParams, parse_train_flags
from converter.train.config import LOSSES, OPTIMIZERS
from lite.status import RET_ERROR, RET_OK, GetErrorInfo, LiteError
from lite.tools import Flag, UsageError, parse_flags, usage

if TYPE_CHECKING:
    from converter.quant.config import QuantConfig

PROG = "converter_lite"
DATA_TYPES = ("FLOAT32", "FLOAT", "DEFAULT", "INT8", "UINT8")
FLOAT_TYPES = ("FLOAT32", "FLOAT", "DEFAULT")

FLAGS = (
    Flag("fmk", "framework of the input model: " + "|".join(FRONTENDS)),
    Flag("modelFile", "input model file (.onnx, .tflite or .mindir)"),
    Flag("outputFile", "output model path; '.ms' is appended unless present"),
    Flag("inputShape", "graph input shapes, e.g. \"input:1,3,224,224;mask:1,10\""),
    Flag("inputDataType", "graph input data type of a quantized model", choices=DATA_TYPES),
    Flag("outputDataType", "graph output data type of a quantized model", choices=DATA_TYPES),
    Flag("fp16", "store float weights as float16 (half the file; computed in float32)", default="off",
         choices=("on", "off")),
    Flag("trainModel", "convert to a training model (docs/training.md)", bool, False),
    Flag("loss", f"training loss: {'|'.join(LOSSES)} (their settings: [train_param] of --configFile)"),
    Flag("optimizer", f"training optimizer: {'|'.join(OPTIMIZERS)}"),
    Flag("learningRate", "training learning rate"),
    Flag("trainable", "comma-separated regexes of the weights to train"),
    Flag("freeze", "comma-separated regexes of the weights to freeze"),
    Flag("freezeUntil", "freeze every weight up to and including this node (ONNX: its name; TFLite: its first "
                        "output tensor's)"),
    Flag("quantType", "post-training quantization: PostTraining|WeightQuant|MixedBitWeightQuant|DynamicQuant",
         choices=("PostTraining", "WeightQuant", "MixedBitWeightQuant", "DynamicQuant")),
    Flag("bitNum", "quantization bits (full: 2-8, weight-only: 1-16)", int),
    Flag("quantWeightSize", "weight-only quantization skips weights with fewer elements", int),
    Flag("quantWeightChannel", "weight-only quantization skips weights with fewer channels", int),
    Flag("quantDebug", "write the per-layer quantization report (JSON) to this path"),
    Flag("configFile", "[train_param] for training; quantization settings for --quantType"),
    Flag("encryptKey", "AES-GCM key as hex text (32, 48 or 64 digits): the model is written encrypted"),
    Flag("encryption", "encrypt the model with --encryptKey", bool, True),
    Flag("integrity", "append a SHA-256 integrity footer, checked at load (unencrypted models)", bool, False),
    Flag("signatures", "TFLite: comma-separated signature keys to keep in the .ms (default: every signature)"),
    Flag("saveType", "output format: " + ", ".join(f"{name} ({t.title})" for name, t in SAVE_TYPES.items()),
         default=DEFAULT_SAVE_TYPE),
)
TRAIN_FLAGS = ("loss", "optimizer", "learningRate", "trainable", "freeze", "freezeUntil")
QUANT_FLAGS = ("bitNum", "quantWeightSize", "quantWeightChannel", "quantDebug")


def _require(opts: SimpleNamespace, *names: str) -> None:
    for name in names:
        if not getattr(opts, name):
            raise UsageError(f"--{name} is required")


def _encrypt_key(opts: SimpleNamespace) -> bytes | None:
    """The key to encrypt with (MindSpore Lite's pair: --encryptKey, and --encryption, true by default)."""
    if opts.encryptKey is None or not opts.encryption:
        return None
    if opts.integrity:
        raise UsageError("--integrity is for unencrypted models: an encrypted model is authenticated already")
    try:
        return protect.parse_key(opts.encryptKey)
    except LiteError as e:
        raise UsageError(f"--encryptKey: {e}") from None


def _given(opts: SimpleNamespace, names: Sequence[str]) -> list[str]:
    return [name for name in names if getattr(opts, name) is not None]


def _train_params(opts: SimpleNamespace) -> TrainParams | None:
    if not opts.trainModel:
        stray = _given(opts, TRAIN_FLAGS)
        if stray:
            raise UsageError(f"--{stray[0]} needs --trainModel=true")
        return None
    if opts.quantType is not None:
        raise UsageError("--trainModel=true and --quantType cannot be combined")
    return parse_train_flags({name: str(getattr(opts, name)) for name in _given(opts, TRAIN_FLAGS)},
                             opts.configFile)


def _quant_config(opts: SimpleNamespace) -> "QuantConfig | None":
    typed = [f"--{n}={getattr(opts, n)}" for n in ("inputDataType", "outputDataType")
             if getattr(opts, n) not in (None, *FLOAT_TYPES)]
    if opts.quantType is None:
        stray = _given(opts, QUANT_FLAGS) or typed
        if stray:
            raise UsageError(f"{stray[0] if typed else '--' + stray[0]} needs --quantType")
        return None
    from converter.quant import make_config
    bits = opts.bitNum
    data_type = {n: "FLOAT" if getattr(opts, n) in FLOAT_TYPES else getattr(opts, n)
                 for n in ("inputDataType", "outputDataType")}
    return make_config(opts.configFile, quant_type=opts.quantType, activation_bits=bits, weight_bits=bits,
                       min_quant_weight_size=opts.quantWeightSize, min_quant_weight_channel=opts.quantWeightChannel,
                       debug_info_save_path=opts.quantDebug, input_data_type=data_type["inputDataType"],
                       output_data_type=data_type["outputDataType"])


def parse_input_shapes(text: str | None) -> dict[str, list[int]] | None:
    """`name:1,3,224,224;name2:1,10` -> {name: [1, 3, 224, 224], name2: [1, 10]} (None when not given)."""
    if text is None:
        return None
    shapes = {}
    for item in filter(None, text.split(";")):
        name, _, dims = item.rpartition(":")
        try:
            shape = [int(d) for d in dims.split(",")]
        except ValueError:
            shape = []
        if not name or not shape or any(d <= 0 for d in shape):
            raise UsageError(f"--inputShape item '{item}' must be name:d1,d2,... with positive dims")
        shapes[name] = shape
    return shapes


def run(opts: SimpleNamespace) -> str:
    """Convert as the flags say; returns the written `.ms` path."""
    _require(opts, "fmk", "modelFile", "outputFile")
    frontend(opts.fmk)         # an unknown --fmk is refused before any other flag is read
    shapes = parse_input_shapes(opts.inputShape)
    train_params, quant_config = _train_params(opts), _quant_config(opts)
    key = _encrypt_key(opts)
    fp16 = opts.fp16 == "on"
    if fp16 and (train_params or quant_config):
        other = "--trainModel" if train_params else "--quantType"
        raise UsageError(f"--fp16=on cannot be combined with {other}: it stores the weights of float inference "
                         "models")
    try:
        return convert_file(opts.modelFile, opts.outputFile, shapes, train_params, quant_config, key,
                            opts.integrity, opts.fmk, fp16, save_type=opts.saveType,
                            signatures=[k for k in (opts.signatures or "").split(",") if k])
    except OSError as e:
        raise LiteError(f"cannot write '{opts.outputFile}': {e.strerror or e}") from e


def main(argv: Sequence[str] | None = None) -> int:
    """The `converter_lite` entry point: returns the MindSpore status."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        opts = parse_flags(argv, FLAGS)
        if opts.help:
            print(usage(PROG, FLAGS))
            return RET_OK
        run(opts)
    except LiteError as e:
        print(f"ERROR: {e}", file=sys.stderr)
        if isinstance(e, UsageError):
            print(usage(PROG, FLAGS), file=sys.stderr)
        print(f"CONVERT RESULT FAILED:{e.status} {GetErrorInfo(e.status)}")
        return e.status or RET_ERROR
    print(f"CONVERT RESULT SUCCESS:{RET_OK}")
    return RET_OK


if __name__ == "__main__":
    sys.exit(main())
