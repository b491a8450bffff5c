"""Post-training quantization of a LeNet-5 trained on the real MNIST: the converter's default config keeps the
test accuracy within 0.1 points of float at A8W8 and within 0.5 points at A4W8 (4-bit activations) and A8W4
(4-bit weights). Oracle: onnxruntime's accuracy of the float ONNX model on the 10,000 test images."""
from __future__ import annotations

import copy
import sys

import numpy as np
import pytest

from converter import to_graph
from converter.export import to_bytes
from converter.quant import QuantConfig, quantize
from lite.train import load_mnist
from tests.util import MNIST, REPO, run_ort

pytestmark = [pytest.mark.shared_data,
              pytest.mark.skipif(not MNIST.is_dir(), reason="needs the real MNIST in ../shared/datasets/mnist")]
sys.path.insert(0, str(REPO / "bench"))
from bench_quant import MNIST_MEAN, MNIST_STD, accuracy_of, mnist_logits, train_lenet  # noqa: E402


def normalised(images: np.ndarray) -> np.ndarray:
    return ((images.astype(np.float32) / 255 - np.float32(MNIST_MEAN)) / np.float32(MNIST_STD))[:, None]


@pytest.fixture(scope="module")
def lenet():
    """(ONNX LeNet-5 trained one epoch on the 60,000 training images, calibration samples, test images, labels)."""
    pytest.importorskip("torch", reason="PyTorch trains the LeNet-5 (the dev extra)")
    train_x, train_y = load_mnist(MNIST, "train")
    test_x, test_y = load_mnist(MNIST, "test")
    train_x, test_x = normalised(train_x), normalised(test_x)
    model = train_lenet(train_x, train_y, epochs=1)
    calibration = [{"input": train_x[i:i + 100]} for i in range(30_000, 31_000, 100)]
    return model, calibration, test_x, test_y


def float_accuracy(model, images: np.ndarray, labels: np.ndarray) -> float:
    logits = np.concatenate([run_ort(model, {"input": images[i:i + 100]})["logits"]
                             for i in range(0, len(images), 100)])
    return accuracy_of(logits, labels)


@pytest.mark.parametrize("activation_bits, weight_bits, tolerance", [(8, 8, 0.1), (4, 8, 0.5), (8, 4, 0.5)])
def test_default_config_keeps_lenet_accuracy_near_float(lenet, activation_bits, weight_bits, tolerance):
    model, calibration, images, labels = lenet
    config = QuantConfig(activation_bits=activation_bits, weight_bits=weight_bits)
    buf = to_bytes(quantize(to_graph(copy.deepcopy(model)), config, calibration))
    accuracy = accuracy_of(mnist_logits(buf, images), labels)
    reference = float_accuracy(model, images, labels)
    assert reference > 95
    assert accuracy >= reference - tolerance, (accuracy, reference)
