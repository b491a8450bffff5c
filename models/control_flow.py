"""A model with data-dependent control flow, built in PyTorch, scripted (``torch.jit.script``) and exported with
``torch.onnx.export`` (TorchScript exporter, opset 17), so its ``if``/``for``/``while`` become ONNX ``If`` and
``Loop`` nodes with subgraphs.

``gated_refiner``: input ``input`` [N, features]; a branch on the input's loudness (``If``: a "loud" or a "quiet"
projection, as a keyword spotter gates on the signal level), ``steps`` refinement steps where ``steps`` is
computed from the data (``Loop`` with a data-dependent trip count, carrying the state and a trace that grows by one
column per step), then a ``while`` loop that halves the state until it is bounded (``Loop`` with a data-dependent
condition). Outputs: ``logits`` [N, classes] and ``trace`` [N, steps + 1] (the mean state after each step).

torch is imported when the builder runs.
"""
from __future__ import annotations

import io
import warnings

import onnx

OPSET = 17
OUTPUTS = ["logits", "trace"]


def gated_refiner(num_classes: int = 4, input_size: int = 8, batch: int | None = 1, seed: int = 0,
                  hidden: int = 16, max_steps: int = 5) -> onnx.ModelProto:
    """The model above with `input_size` features, `hidden` units and at most `max_steps - 1` refinement steps;
    `batch=None` leaves the batch dimension symbolic."""
    import torch
    from torch import nn

    class GatedRefiner(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inp = nn.Linear(input_size, hidden)
            self.loud = nn.Linear(hidden, hidden)
            self.quiet = nn.Linear(hidden, hidden)
            self.step = nn.Linear(hidden, hidden)
            self.head = nn.Linear(hidden, num_classes)
            self.max_steps = max_steps

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = torch.tanh(self.inp(x))
            if bool(x.abs().mean() > 1.0):
                h = torch.relu(self.loud(h))
            else:
                h = torch.sigmoid(self.quiet(h))
            trace = h.mean(1, keepdim=True)
            for _ in range(int((x > 0).sum()) % self.max_steps):
                h = h + torch.tanh(self.step(h)) * 2.0
                trace = torch.cat([trace, h.mean(1, keepdim=True)], 1)
            i = 0
            while i < 8 and bool(h.abs().max() > 1.5):
                h = h * 0.5
                i += 1
            return self.head(h), trace

    torch.manual_seed(seed)
    module = torch.jit.script(GatedRefiner().eval())
    x = torch.randn(batch or 1, input_size)
    buf = io.BytesIO()
    with warnings.catch_warnings():      # the TorchScript exporter warns that it is deprecated
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (x,), buf, input_names=["input"], output_names=OUTPUTS, opset_version=OPSET,
                          dynamo=False, dynamic_axes={"input": {0: "N"}} if batch is None else None)
    return onnx.load_from_string(buf.getvalue())
