"""`converter_lite`: convert an ONNX model to `.ms` with MindSpore Lite's converter flags.

    converter_lite --fmk=ONNX --modelFile=model.onnx --outputFile=model [--inputShape="input:1,3,224,224"]

Prints `CONVERT RESULT SUCCESS:0`, or the error (naming the file, op, node and opset) on stderr and then
`CONVERT RESULT FAILED:<status> <meaning>`; returns the MindSpore status (0 on success, negative on failure).
Flags of later work (quantization, training, fp16, encryption) are recognised and refused with RET_NOT_SUPPORT.
"""
from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Sequence

from converter import convert_file
from lite.status import RET_ERROR, RET_OK, GetErrorInfo, LiteError, NotSupportedError
from lite.tools import Flag, UsageError, parse_flags, usage

PROG = "converter_lite"
DATA_TYPES = ("FLOAT32", "FLOAT", "DEFAULT", "INT8", "UINT8")
FLOAT_TYPES = ("FLOAT32", "FLOAT", "DEFAULT")

FLAGS = (
    Flag("fmk", "framework of the input model; only ONNX is supported"),
    Flag("modelFile", "input model file (.onnx)"),
    Flag("outputFile", "output model path; '.ms' is appended unless present"),
    Flag("inputShape", "graph input shapes, e.g. \"input:1,3,224,224;mask:1,10\""),
    Flag("inputDataType", "graph input data type (only float is supported yet)", choices=DATA_TYPES),
    Flag("outputDataType", "graph output data type (only float is supported yet)", choices=DATA_TYPES),
    Flag("fp16", "store weights as float16 (not supported yet)", default="off", choices=("on", "off")),
    Flag("trainModel", "convert to a training model (not supported yet)", bool, False),
    Flag("quantType", "quantization type (not supported yet)"),
    Flag("bitNum", "quantization bit number (not supported yet)"),
    Flag("configFile", "quantization / training config file (not supported yet)"),
    Flag("encryptKey", "AES-GCM key to encrypt the model (not supported yet)"),
)
_LATER_WORK = ("quantType", "bitNum", "configFile", "encryptKey")


def _require(opts: SimpleNamespace, *names: str) -> None:
    for name in names:
        if not getattr(opts, name):
            raise UsageError(f"--{name} is required")


def _later_work(opts: SimpleNamespace) -> list[str]:
    """The requested features this converter does not have yet, spelled as their flags."""
    requested = [f"--{name}" for name in _LATER_WORK if getattr(opts, name) is not None]
    if opts.trainModel:
        requested.append("--trainModel=true")
    if opts.fp16 == "on":
        requested.append("--fp16=on")
    for name in ("inputDataType", "outputDataType"):
        value = getattr(opts, name)
        if value not in (None, *FLOAT_TYPES):
            requested.append(f"--{name}={value}")
    return requested


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
    if opts.fmk != "ONNX":
        raise NotSupportedError(f"--fmk={opts.fmk}: only ONNX models are supported")
    later = _later_work(opts)
    if later:
        raise NotSupportedError(f"{', '.join(later)}: not supported yet")
    shapes = parse_input_shapes(opts.inputShape)
    try:
        return convert_file(opts.modelFile, opts.outputFile, shapes)
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
