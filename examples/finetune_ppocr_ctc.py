"""Fine-tune a real Paddle2ONNX text recognizer on device with the CTC loss: converter (`--trainModel=true
--loss=ctc`) + `lite.TrainSession`.

    python examples/finetune_ppocr_ctc.py [--steps 10] [--lr 1e-4] [--trainable REGEX] [--out DIR]

The model is PP-OCRv4's recognizer as the `rapidocr-onnxruntime` package ships it
(`models/ch_PP-OCRv4_rec_infer.onnx`, 10.9 MB, written by Paddle2ONNX: every weight is a Constant node, none an
initializer; 6,625 classes, its character list in the file's metadata). Its graph ends in a Softmax over
[N, T, classes]; CTC reads time-major logits, so the script adds one output, the Softmax's input transposed to
[T, N, classes], and the converter trains through everything before it. The data are text lines rendered with
Pillow's own font (48 px high, as the recognizer reads them). Each step prints the CTC loss; then the exported
inference model (BatchNorm folded) is run and its logits compared with the session's own (Eval mode), and each
line is decoded greedily, before and after. Exits 1 when the loss did not fall, or the export is more than
EXPORT_TOLERANCE of the range from the session or reads differently.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import helper  # noqa: E402

import lite  # noqa: E402
from converter import convert_for_training  # noqa: E402
from converter.train import TrainParams  # noqa: E402
from lite.train.session import TrainSession  # noqa: E402

HEIGHT, WIDTH, LABEL_LENGTH = 48, 160, 10
LOGITS = "logits_tnc"
EXPORT_TOLERANCE = 1e-5     # of the logits' range (Eval runs the model the export writes: they agree exactly)
LINES = ("HELLO 42", "lite 26", "OCR Lite", "ctc 2026")


def recognizer_path() -> Path | None:
    """The recognizer inside the installed rapidocr-onnxruntime (found without importing it: its OpenCV need not
    be installed), or None."""
    spec = importlib.util.find_spec("rapidocr_onnxruntime")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(spec.submodule_search_locations[0]) / "models" / "ch_PP-OCRv4_rec_infer.onnx"
    return path if path.exists() else None


def with_time_major_logits(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with one more output, LOGITS: the final Softmax's input [N, T, C] as [T, N, C]."""
    last = model.graph.node[-1]
    if last.op_type != "Softmax":
        raise SystemExit(f"expected the recognizer to end in a Softmax, not {last.op_type}")
    model.graph.node.append(helper.make_node("Transpose", [last.input[0]], [LOGITS], perm=[1, 0, 2]))
    model.graph.output.append(helper.make_empty_tensor_value_info(LOGITS))
    return model


def characters(model: onnx.ModelProto) -> list[str]:
    """Class k's character: 0 is CTC's blank, then the metadata's list, then the space (PP-OCR's order)."""
    listed = {p.key: p.value for p in model.metadata_props}["character"].splitlines()
    return ["<blank>", *listed, " "]


def render(text: str) -> np.ndarray:
    """A text line as the recognizer's input [3, 48, 160]: black on white, scaled to [-1, 1]."""
    from PIL import Image, ImageDraw, ImageFont
    image = Image.new("RGB", (WIDTH, HEIGHT), "white")
    ImageDraw.Draw(image).text((4, 10), text, fill="black", font=ImageFont.load_default(size=24))
    return (np.asarray(image, np.float32) / 127.5 - 1.0).transpose(2, 0, 1)


def encode(lines: tuple[str, ...], chars: list[str]) -> np.ndarray:
    """Labels int32 [N, LABEL_LENGTH]: each line's classes, padded with the blank."""
    index = {c: k for k, c in enumerate(chars)}
    labels = np.zeros((len(lines), LABEL_LENGTH), np.int32)
    for row, line in enumerate(lines):
        labels[row, :len(line)] = [index[c] for c in line]
    return labels


def decode(logits: np.ndarray, chars: list[str]) -> list[str]:
    """Greedy CTC decoding of time-major logits [T, N, C]: best class per frame, repeats merged, blanks dropped."""
    best = logits.argmax(-1).T
    return ["".join(chars[k] for t, k in enumerate(row) if k and (t == 0 or k != row[t - 1])) for row in best]


def logits_of(session: TrainSession, images: np.ndarray) -> np.ndarray:
    """The session's logits for `images` in Eval mode (BatchNorm on its running statistics)."""
    session.Eval()
    session.GetInputs()[0].set_data(images)
    session.RunGraph()
    return session.GetOutputs()[LOGITS].numpy().copy()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--lr", type=float, default=1e-4, help="Adam learning rate")
    parser.add_argument("--trainable", default="", help="regex of the weights to train (default: all)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=REPO / "examples" / "results")
    args = parser.parse_args(argv)
    path = recognizer_path()
    if path is None:
        print("rapidocr-onnxruntime is not installed: pip install --no-deps rapidocr-onnxruntime==1.4.4")
        return 1
    model = with_time_major_logits(onnx.load(path))
    chars = characters(model)
    images, labels = np.stack([render(line) for line in LINES]), encode(LINES, chars)

    started = time.perf_counter()
    params = TrainParams(loss="ctc", label_length=LABEL_LENGTH, output=LOGITS, optimizer="adam",
                         learning_rate=args.lr, trainable=(args.trainable,) if args.trainable else ())
    training = convert_for_training(model, params, {"x": [len(LINES), 3, HEIGHT, WIDTH]})
    print(f"converted {path.name} for training in {time.perf_counter() - started:.1f} s "
          f"({len(training) / 1e6:.1f} MB with the optimizer state)")
    session = TrainSession.CreateSession(training, len(training), lite.Context(thread_num=args.threads))
    before = decode(logits_of(session, images), chars)
    session.Train()
    losses = []
    for step in range(1, args.steps + 1):
        x, y = session.GetInputs()
        x.set_data(images)
        y.set_data(labels)
        session.RunGraph()
        losses.append(float(session.GetOutputs()["loss"].numpy()))
        print(f"step {step}: CTC loss {losses[-1]:.4f}")

    own = logits_of(session, images)
    args.out.mkdir(parents=True, exist_ok=True)
    exported = args.out / "ppocr_rec_finetuned.ms"
    session.Export(exported, lite.MT_INFERENCE)
    inference = lite.LiteSession.CreateSession(lite.Context(thread_num=args.threads))
    inference.CompileGraph(lite.Model.Load(exported))
    inference.GetInputs()[0].set_data(images)
    inference.RunGraph()
    logits = inference.GetOutputs()[LOGITS].numpy()
    difference = float(np.abs(logits - own).max() / np.ptp(own))
    same = decode(logits, chars) == decode(own, chars)
    print(f"exported {exported.name}: its logits are within {difference:.1e} of the session's (of their range), "
          f"{'the same' if same else 'NOT the same'} text read")
    for line, first, read in zip(LINES, before, decode(logits, chars)):
        print(f"  {line!r}: read {first!r} before, {read!r} after")
    return 0 if losses[-1] < losses[0] and difference <= EXPORT_TOLERANCE and same else 1


if __name__ == "__main__":
    sys.exit(main())
