"""MindSpore as the oracle of the MINDIR tests (needs `mindspore`): export a network of `nets` with a seeded
input, MindSpore's inference output, and the losses of its own training steps.

``python -m tests.converter.frontends.mindir.oracle [network ...]`` rewrites the committed fixtures of the
installed MindSpore (a network's .mindir, an input and MindSpore's output, in fixtures/mindspore-<version>/), which
let CI check the import without MindSpore:
- MindSpore 2.10 (mind_ir_version 3, arguments as inputs): LeNet (with the losses of MindSpore's training steps),
  an if/else, a while loop, and training steps (`STEPS`: TrainOneStepCell exported after a step, with the losses
  of the next three steps);
- MindSpore 2.0 (mind_ir_version 1, arguments as attributes; it needs Python 3.9 or older, numpy<1.24, pillow<10
  and protobuf<4): the ResNet (with losses), the nets of primitives, the if/else, the loop and the ResNet's
  training step;
- MindSpore 1.0 (ONNX's protobuf, mind_ir_version 0): a narrow LeNet, the ResNet and a bidirectional LSTM.

    python -m tests.converter.frontends.mindir.oracle lenet branches loop               # MindSpore 2.10
    python -m tests.converter.frontends.mindir.oracle step_lenet_momentum step_lenet_adam step_resnet_momentum
    python -m tests.converter.frontends.mindir.oracle resnet primitives more_primitives branches loop   # 2.0
    python -m tests.converter.frontends.mindir.oracle step_resnet_momentum                           # 2.0
    DNNL_MAX_CPU_ISA=AVX2 python -m tests.converter.frontends.mindir.oracle narrow_lenet resnet bilstm  # 1.0

MindSpore 1.0 is the one 1.x release on PyPI: a CPU wheel for Python 3.7 that needs protobuf<4 and
libssl.so.1.1/libcrypto.so.1.1 to load (only its encryption calls them; stubs exporting those symbols do), and
oneDNN 1.5 limited to AVX2 (its AVX-512 Winograd check fails on AMD processors: "x2APIC is not supported").
"""
from __future__ import annotations

import sys
from pathlib import Path

import mindspore as ms
import numpy as np
from mindspore import context, nn
from mindspore.common import set_seed
from mindspore.train.serialization import export as ms_export     # where MindSpore 1.0 has these too

from tests.converter.frontends.mindir.nets import CLASSIFIERS, NETS, randomized

FIXTURES = Path(__file__).resolve().with_name("fixtures")
# compiled as exported (PyNative fails some reshapes with numpy 2)
context.set_context(mode=context.GRAPH_MODE, device_target="CPU")


def network(key: str) -> nn.Cell:
    """A fresh network of `nets.NETS`, seeded, in inference mode."""
    set_seed(0)
    net = randomized(NETS[key][0](), 0)
    net.set_train(False)
    return net


def batch(key: str, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(NETS[key][1]).astype(np.float32)


def export(key: str, directory: Path) -> tuple[Path, np.ndarray, np.ndarray]:
    """(the .mindir of network `key` in `directory`, an input, MindSpore's output for it)."""
    net, x = network(key), batch(key, 1)
    path = mindir(net, directory / key, ms.Tensor(x))
    return path, x, net(ms.Tensor(x)).asnumpy()


def mindir(cell: nn.Cell, stem: Path, *inputs: ms.Tensor) -> Path:
    """`cell` exported for `inputs` as `stem`.mindir (MindSpore 1.0 writes `stem` itself), readable by all."""
    ms_export(cell, *inputs, file_name=str(stem), file_format="MINDIR")
    path = stem.with_suffix(".mindir")
    if stem.exists():
        stem.rename(path)
    path.chmod(0o644)           # MindSpore writes it owner-read-only
    return path


def training_batches(key: str, count: int = 3) -> list[tuple[np.ndarray, np.ndarray]]:
    """`count` seeded (input, int32 class labels) batches for network `key`."""
    rng = np.random.default_rng(2)
    return [(batch(key, 10 + k), rng.integers(0, 10, NETS[key][1][0]).astype(np.int32)) for k in range(count)]


OPTIMIZERS = {"momentum": lambda params: nn.Momentum(params, 0.01, 0.9),
              "adam": lambda params: nn.Adam(params, 0.001)}
# committed training steps: fixture name -> (network, optimizer)
STEPS = {"step_lenet_momentum": ("narrow_lenet", "momentum"), "step_lenet_adam": ("narrow_lenet", "adam"),
         "step_resnet_momentum": ("narrow_resnet", "momentum")}


def training_step(net: nn.Cell, optimizer: str = "momentum") -> nn.Cell:
    """MindSpore's training step of `net`: TrainOneStepCell(WithLossCell(net, sparse softmax cross entropy,
    mean), `OPTIMIZERS[optimizer]`), in training mode."""
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    step = nn.TrainOneStepCell(nn.WithLossCell(net, loss), OPTIMIZERS[optimizer](net.trainable_params()))
    step.set_train(True)
    return step


def run_steps(step: nn.Cell, batches: list[tuple[np.ndarray, np.ndarray]]) -> list[float]:
    return [float(step(ms.Tensor(x), ms.Tensor(y)).asnumpy()) for x, y in batches]


def training_losses(key: str, batches: list[tuple[np.ndarray, np.ndarray]], optimizer: str = "momentum") \
        -> list[float]:
    """The losses of MindSpore's own training steps of network `key` from its initial weights
    (`training_step`: Momentum(0.01, 0.9) or Adam(0.001))."""
    return run_steps(training_step(network(key), optimizer), batches)


def export_step(name: str, directory: Path, warm_up: int = 1) -> tuple[Path, dict[str, np.ndarray]]:
    """A training step of `STEPS` exported after `warm_up` steps (so it holds optimizer state), with an input and
    the network's output for it (inference mode), and three batches and the losses of the following steps."""
    key, optimizer = STEPS[name]
    net = network(key)
    step = training_step(net, optimizer)
    batches = training_batches(key, warm_up + 3)
    run_steps(step, batches[:warm_up])
    x, labels = batches[warm_up]
    path = mindir(step, directory / name, ms.Tensor(x), ms.Tensor(labels))
    net.set_train(False)
    expected = net(ms.Tensor(x)).asnumpy()
    step.set_train(True)
    later = batches[warm_up:]
    return path, dict(x=x, expected=expected, train_x=np.stack([b[0] for b in later]),
                                              train_labels=np.stack([b[1] for b in later]),
                                              losses=np.array(run_steps(step, later)))


def main(keys: list[str]) -> int:
    """Export networks `keys` (default: LeNet) with the installed MindSpore into fixtures/mindspore-<version>/,
    each with an input and MindSpore's output; a classifier also with three training batches and the losses of
    MindSpore's training steps on them (`training_losses`)."""
    directory = FIXTURES / f"mindspore-{ms.__version__}"
    directory.mkdir(parents=True, exist_ok=True)
    for key in keys or ["lenet"]:
        if key in STEPS:
            path, arrays = export_step(key, directory)
            np.savez(directory / f"{key}.npz", **arrays)
            print(f"wrote {path.relative_to(FIXTURES)} ({path.stat().st_size} bytes) and {key}.npz")
            continue
        path, x, expected = export(key, directory)
        arrays = {"x": x, "expected": expected}
        if key in CLASSIFIERS:
            batches = training_batches(key)
            try:
                losses = training_losses(key, batches)
            except RuntimeError as e:       # MindSpore 1.0's CPU backend lacks some gradient kernels (Tile)
                print(f"{key}: no training losses, MindSpore cannot train it: {str(e).splitlines()[0]}")
            else:
                arrays.update(train_x=np.stack([b[0] for b in batches]),
                              train_labels=np.stack([b[1] for b in batches]), losses=np.array(losses))
        np.savez(directory / f"{key}.npz", **arrays)
        print(f"wrote {path.relative_to(FIXTURES)} ({path.stat().st_size} bytes) and {key}.npz")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
