"""Sequence models built in PyTorch and exported with ``torch.onnx.export`` (TorchScript exporter, opset 17), as a
user's keyword-spotting or text-recognition export looks: the recurrent layers become ONNX LSTM / GRU nodes whose
W, R and B are sliced and concatenated from PyTorch's own parameters (so a training graph trains those).

``kws_gru`` / ``kws_lstm``: keyword spotting. Input ``input`` [N, frames, features] (MFCC-like frames), a 2-layer
GRU (LSTM) over time, the last layer's final hidden state into a linear head; output ``logits`` [N, num_classes].

``crnn``: text-line recognition. Input ``input`` [N, 1, 32, W] (a grey text line), three conv-BN-ReLU-max-pool
blocks (height 32 -> 4, width W -> W / 4), the columns as a sequence into a bidirectional LSTM, a linear layer per
column; output ``logits`` [W / 4, N, num_classes] time-major, class 0 the CTC blank (train with loss ``ctc``).

``streaming_gru``: ``kws_gru``'s recurrent core as a streaming step: inputs ``input`` [1, chunk, features] and
``state`` [2, 1, hidden]; outputs ``logits`` [1, num_classes] and ``next_state`` [2, 1, hidden], fed back as the next
chunk's ``state``.

torch is imported when a builder runs: ``models`` itself does not depend on it.
"""

from __future__ import annotations

import io
import warnings

import onnx

OPSET = 17


def kws_gru(num_classes: int = 12, frames: int = 49, features: int = 40, hidden: int = 64, batch: int | None = 1,
            seed: int = 0) -> onnx.ModelProto:
    """Keyword spotting with a 2-layer GRU (a small Speech Commands style model)."""
    return _export(_kws("GRU", num_classes, features, hidden, seed), (batch or 1, frames, features), batch)


def kws_lstm(num_classes: int = 12, frames: int = 49, features: int = 40, hidden: int = 64, batch: int | None = 1,
             seed: int = 0) -> onnx.ModelProto:
    """Keyword spotting with a 2-layer LSTM."""
    return _export(_kws("LSTM", num_classes, features, hidden, seed), (batch or 1, frames, features), batch)


def crnn(num_classes: int = 37, width: int = 64, hidden: int = 32, batch: int | None = 1,
         seed: int = 0) -> onnx.ModelProto:
    """CNN + BiLSTM + per-column classifier (CTC head); 37 classes: blank, 0-9, a-z."""
    return _export(crnn_module(num_classes, hidden, seed), (batch or 1, 1, 32, width), batch)


def streaming_gru(num_classes: int = 12, chunk: int = 4, features: int = 40, hidden: int = 64,
                  seed: int = 0) -> onnx.ModelProto:
    """One streaming step of the 2-layer GRU classifier: the state in and out."""
    import torch

    module = _kws("GRU", num_classes, features, hidden, seed)

    class Step(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn, self.head = module.rnn, module.head

        def forward(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            _, h = self.rnn(x, state)
            return self.head(h[-1:].squeeze(0)), h

    state = torch.zeros(2, 1, hidden)
    return _to_onnx(Step(), (torch.zeros(1, chunk, features), state), ["input", "state"], ["logits", "next_state"],
                    None)


# ---- PyTorch modules (the training tests' oracle builds the same ones) -----------------------------------------------
def kws_module(cell: str, num_classes: int = 12, features: int = 40, hidden: int = 64,
               seed: int = 0) -> "torch.nn.Module":  # noqa: F821
    return _kws(cell, num_classes, features, hidden, seed)


def _kws(cell: str, num_classes: int, features: int, hidden: int, seed: int) -> "torch.nn.Module":  # noqa: F821
    import torch
    from torch import nn

    class KWS(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = getattr(nn, cell)(features, hidden, num_layers=2, batch_first=True)
            self.head = nn.Linear(hidden, num_classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            _, state = self.rnn(x)
            h = state[0] if isinstance(state, tuple) else state
            return self.head(h[-1:].squeeze(0))      # the last layer (a Slice: trainable without a Gather rule)

    torch.manual_seed(seed)
    return KWS()


def crnn_module(num_classes: int = 37, hidden: int = 32, seed: int = 0) -> "torch.nn.Module":  # noqa: F821
    import torch
    from torch import nn

    def block(cin: int, cout: int, pool: tuple[int, int]) -> nn.Sequential:
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(pool))

    class CRNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.features = nn.Sequential(block(1, 16, (2, 2)), block(16, 32, (2, 2)), block(32, 32, (2, 1)))
            self.rnn = nn.LSTM(32 * 4, hidden, bidirectional=True)
            self.head = nn.Linear(2 * hidden, num_classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            f = self.features(x)                                  # [N, 32, 4, W/4]
            seq = f.flatten(1, 2).permute(2, 0, 1)                # [W/4, N, 128]
            y, _ = self.rnn(seq)
            return self.head(y)                                   # [W/4, N, classes]

    torch.manual_seed(seed)
    module = CRNN()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():      # norm layers are not identities
        for m in module.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.8, 1.2, generator=generator)
                m.bias.normal_(0, 0.1, generator=generator)
                m.running_mean.normal_(0, 0.1, generator=generator)
                m.running_var.uniform_(0.5, 2, generator=generator)
    return module


def _export(module: "torch.nn.Module", shape: tuple[int, ...], batch: int | None) -> onnx.ModelProto:  # noqa: F821
    import torch

    axis = 1 if len(shape) == 4 and module.__class__.__name__ == "CRNN" else 0
    dynamic = None if batch else {"input": {0: "N"}, "logits": {axis: "N"}}
    return _to_onnx(module, (torch.zeros(shape),), ["input"], ["logits"], dynamic)


def _to_onnx(module: "torch.nn.Module", args: tuple, inputs: list[str], outputs: list[str],  # noqa: F821
             dynamic: dict | None) -> onnx.ModelProto:
    """Exported in eval mode without constant folding, so the initializers are PyTorch's parameters by name."""
    import torch

    buf = io.BytesIO()
    with warnings.catch_warnings():      # the TorchScript exporter warns that it is deprecated
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), args, buf, input_names=inputs, output_names=outputs, opset_version=OPSET,
                          dynamo=False, do_constant_folding=False, training=torch.onnx.TrainingMode.EVAL,
                          dynamic_axes=dynamic)
    return onnx.load_from_string(buf.getvalue())
