"""Transfer learning on device: a frozen ImageNet EfficientNet-Lite0 backbone and a new trainable head.

    python examples/transfer_learning.py [--model ../shared/models/efficientnet_lite0.onnx] [--epochs 5]
                                         [--size 224] [--out examples/results]

The backbone is the real EfficientNet-Lite0 cut after its global average pooling (1280 features), converted as
an inference model. The head — Flatten and a new 1280 -> 2 fully connected layer — is converted with
`--trainModel=true`. `TrainSession.CreateTransferSession(backbone, head)` runs the backbone in eval mode and
trains only the head. The data is `skimage.data.lfw_subset()`: 100 faces and 100 non-faces (25x25 grey), split
150 / 50, upscaled to the backbone's input and normalised as for ImageNet. Prints the test accuracy before and
after training, and exports backbone + trained head as one inference model to `<out>/transfer_faces.ms`.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import lite  # noqa: E402
from converter import convert, convert_for_training  # noqa: E402
from converter.train import TrainParams  # noqa: E402

DEFAULT_MODEL = REPO.parent / "shared" / "models" / "efficientnet_lite0.onnx"
FEATURES = "/_avg_pooling/GlobalAveragePool_output_0"     # [N, 1280, 1, 1], the input of the ImageNet head
WIDTH = 1280
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)
BATCH = 10


def backbone(path: Path, size: int) -> bytes:
    """EfficientNet-Lite0 up to its pooled features, as an inference `.ms` for [BATCH, 3, size, size]."""
    model = onnx.utils.Extractor(onnx.shape_inference.infer_shapes(onnx.load(path))).extract_model(
        ["input"], [FEATURES])
    return convert(model, {"input": [BATCH, 3, size, size]})


def head(classes: int, seed: int = 0) -> bytes:
    """Flatten -> Gemm(1280 -> classes), small random weights, as a training `.ms` (Adam)."""
    rng = np.random.default_rng(seed)
    weight = (rng.standard_normal((classes, WIDTH)) * 0.01).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Flatten", ["features"], ["flat"], name="flatten"),
         helper.make_node("Gemm", ["flat", "head.weight", "head.bias"], ["logits"], name="head", transB=1)],
        "head", [helper.make_tensor_value_info("features", TensorProto.FLOAT, [BATCH, WIDTH, 1, 1])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [BATCH, classes])],
        [numpy_helper.from_array(weight, "head.weight"),
         numpy_helper.from_array(np.zeros(classes, np.float32), "head.bias")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return convert_for_training(model, TrainParams(optimizer="adam", learning_rate=1e-3))


def faces(size: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """lfw_subset as ImageNet-normalised RGB [N, 3, size, size] with labels 1 = face: (train x, y, test x, y)."""
    from skimage.data import lfw_subset
    from skimage.transform import resize
    images = lfw_subset()                                    # [200, 25, 25] in [0, 1]; faces first
    labels = np.array([1] * 100 + [0] * 100, np.int32)
    rgb = np.stack([resize(im, (size, size), order=1, anti_aliasing=False) for im in images]).astype(np.float32)
    x = ((rgb[..., None] - IMAGENET_MEAN) / IMAGENET_STD).transpose(0, 3, 1, 2).copy()
    order = np.random.default_rng(seed).permutation(len(x))
    train, test = order[:150], order[150:]
    return x[train], labels[train], x[test], labels[test]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--size", type=int, default=224, help="backbone input size (upscaled 25x25 images)")
    parser.add_argument("--out", type=Path, default=REPO / "examples" / "results")
    args = parser.parse_args(argv)
    if not args.model.is_file():
        parser.error(f"EfficientNet-Lite0 not found at {args.model}: pass --model")

    train_x, train_y, test_x, test_y = faces(args.size)
    session = lite.TrainSession.CreateTransferSession(backbone(args.model, args.size), head(2),
                                                      lite.Context(thread_num=2))
    loop = lite.TrainLoop(session)
    test = lite.Dataset(test_x, test_y, batch_size=BATCH)
    (before,) = loop.Eval(test)
    print(f"test accuracy before training the head: {before:.1%}")
    loop.Train(args.epochs, lite.Dataset(train_x, train_y, batch_size=BATCH, shuffle=True))
    (after,) = loop.Eval(test)
    print(f"test accuracy after {args.epochs} epochs: {after:.1%}")
    args.out.mkdir(parents=True, exist_ok=True)
    exported = args.out / "transfer_faces.ms"
    session.Export(exported, lite.MT_INFERENCE)
    plain = lite.LiteSession.CreateSession(lite.Context(thread_num=2))
    plain.CompileGraph(lite.Model.Load(exported))
    plain.Resize(plain.GetInputs(), [list(test_x.shape)])
    plain.GetInputs()[0].set_data(test_x)
    plain.RunGraph()
    accuracy = float(np.mean(plain.GetOutputs()["logits"].MutableData().argmax(axis=1) == test_y))
    print(f"exported backbone + head as one inference model: {exported} (test accuracy {accuracy:.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
