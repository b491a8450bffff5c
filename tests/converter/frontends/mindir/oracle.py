"""MindSpore as the oracle of the MINDIR tests (needs `mindspore`): export a network of `nets` with a seeded
input, MindSpore's inference output, and the losses of its own training steps.

``python -m tests.converter.frontends.mindir.oracle [network ...]`` rewrites the committed fixtures of the
installed MindSpore (a network's .mindir, an input and MindSpore's output, in fixtures/mindspore-<version>/), which
let CI check the import without MindSpore: LeNet (with the losses of MindSpore's training steps), an if/else and
a while loop from MindSpore 2.10 (mind_ir_version 3, arguments as inputs); the ResNet (with losses), the nets of
primitives, the if/else and the loop from MindSpore 2.0 (mind_ir_version 1, arguments as attributes; it needs
Python 3.9 or older, numpy<1.24, pillow<10 and protobuf<4):

    python -m tests.converter.frontends.mindir.oracle lenet branches loop               # MindSpore 2.10
    python -m tests.converter.frontends.mindir.oracle resnet primitives more_primitives branches loop   # 2.0
"""
from __future__ import annotations

import sys
from pathlib import Path

import mindspore as ms
import numpy as np
from mindspore import nn

from tests.converter.frontends.mindir.nets import CLASSIFIERS, NETS, randomized

FIXTURES = Path(__file__).resolve().with_name("fixtures")
ms.set_context(mode=ms.GRAPH_MODE)      # compiled as exported (PyNative fails some reshapes with numpy 2)


def network(key: str) -> nn.Cell:
    """A fresh network of `nets.NETS`, seeded, in inference mode."""
    ms.set_seed(0)
    net = randomized(NETS[key][0](), 0)
    net.set_train(False)
    return net


def batch(key: str, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(NETS[key][1]).astype(np.float32)


def export(key: str, directory: Path) -> tuple[Path, np.ndarray, np.ndarray]:
    """(the .mindir of network `key` in `directory`, an input, MindSpore's output for it)."""
    net, x = network(key), batch(key, 1)
    ms.export(net, ms.Tensor(x), file_name=str(directory / key), file_format="MINDIR")
    path = directory / f"{key}.mindir"
    path.chmod(0o644)           # MindSpore writes it owner-read-only
    return path, x, net(ms.Tensor(x)).asnumpy()


def training_batches(key: str, count: int = 3) -> list[tuple[np.ndarray, np.ndarray]]:
    """`count` seeded (input, int32 class labels) batches for network `key`."""
    rng = np.random.default_rng(2)
    return [(batch(key, 10 + k), rng.integers(0, 10, NETS[key][1][0]).astype(np.int32)) for k in range(count)]


def training_losses(key: str, batches: list[tuple[np.ndarray, np.ndarray]], learning_rate: float = 0.01,
                    momentum: float = 0.9) -> list[float]:
    """The losses of MindSpore's own training steps of network `key` from its initial weights:
    TrainOneStepCell(WithLossCell(net, sparse softmax cross entropy, mean), Momentum)."""
    net = network(key)
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    step = nn.TrainOneStepCell(nn.WithLossCell(net, loss), nn.Momentum(net.trainable_params(), learning_rate,
                                                                       momentum))
    step.set_train(True)
    return [float(step(ms.Tensor(x), ms.Tensor(y)).asnumpy()) for x, y in batches]


def main(keys: list[str]) -> int:
    """Export networks `keys` (default: LeNet) with the installed MindSpore into fixtures/mindspore-<version>/,
    each with an input and MindSpore's output; a classifier also with three training batches and the losses of
    MindSpore's training steps on them (`training_losses`)."""
    directory = FIXTURES / f"mindspore-{ms.__version__}"
    directory.mkdir(parents=True, exist_ok=True)
    for key in keys or ["lenet"]:
        path, x, expected = export(key, directory)
        arrays = {"x": x, "expected": expected}
        if key in CLASSIFIERS:
            batches = training_batches(key)
            arrays.update(train_x=np.stack([b[0] for b in batches]), train_labels=np.stack([b[1] for b in batches]),
                          losses=np.array(training_losses(key, batches)))
        np.savez(directory / f"{key}.npz", **arrays)
        print(f"wrote {path.relative_to(FIXTURES)} ({path.stat().st_size} bytes) and {key}.npz")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
