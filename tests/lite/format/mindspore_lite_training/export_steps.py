"""The MindSpore 2.0 training steps behind lenet_adam and act_lenet_momentum here (needs `mindspore` 2.0.0, in a
separate environment: never in the project's own).

    python -m tests.lite.format.mindspore_lite_training.export_steps OUT_DIR lenet_adam act_lenet_momentum

writes each step's .mindir (`tests.converter.frontends.mindir.oracle.export_step`: TrainOneStepCell exported after
one step) and its .npz: an input and MindSpore's inference output, three batches and the losses of MindSpore's next
three steps, and the weights those steps leave (`after/<parameter>`, MindSpore's layout). `train_convert.cc` turns
the .mindir into the .ms.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from mindspore import nn

from tests.converter.frontends.mindir import nets, oracle


class ActivationLeNet(nets.LeNet):
    """The narrow LeNet with another activation after each layer: Sigmoid, Tanh, HSwish, GeLU."""

    def __init__(self):
        super().__init__(widths=(4, 8, 32, 16))
        self.a1, self.a2, self.a3, self.a4 = nn.Sigmoid(), nn.Tanh(), nn.HSwish(), nn.GELU()

    def construct(self, x):
        x = self.pool(self.a1(self.conv1(x)))
        x = self.pool(self.a2(self.conv2(x)))
        x = self.flatten(x)
        return self.fc3(self.a4(self.fc2(self.a3(self.fc1(x)))))


nets.NETS["act_lenet"] = (ActivationLeNet, (2, 1, 32, 32))
oracle.STEPS.update(lenet_adam=("narrow_lenet", "adam"), act_lenet_momentum=("act_lenet", "momentum"))
_left: dict[str, np.ndarray] = {}
_run_steps = oracle.run_steps


def run_steps(step: nn.Cell, batches: list[tuple[np.ndarray, np.ndarray]]) -> list[float]:
    """MindSpore's steps, keeping the weights they leave."""
    losses = _run_steps(step, batches)
    _left.update({p.name: p.asnumpy().copy() for p in step.weights})
    return losses


oracle.run_steps = run_steps


def main(out: Path, names: list[str]) -> None:
    for name in names:
        path, arrays = oracle.export_step(name, out)
        np.savez(out / f"{name}.npz", **arrays, **{f"after/{k}": v for k, v in _left.items()})
        print(f"wrote {path} and {name}.npz")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
