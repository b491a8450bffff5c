"""`TransferSession`: a frozen inference backbone feeding a trainable head (`CreateTransferSession`).

The backbone runs in its own `LiteSession` (forward only, constants folded, no gradients); its first output is
copied into the head's first input, then the head runs as a `TrainSession` (a training step or a forward). The
session's inputs are the backbone's inputs (and, in train mode, the head's `labels`).
"""
from __future__ import annotations

from typing import Any, Sequence

from lite.context import Context
from lite.model import Model
from lite.session import KernelCallBack, LiteSession, exclusive
from lite.status import RET_OK, InputTensorError, ParamInvalidError
from lite.tensor import MSTensor
from lite.train.export import Piece, inference_bytes
from lite.train.session import MT_INFERENCE, MT_TRAIN, TrainSession, load_model
from schema.train_format import EVAL


class TransferSession(TrainSession):
    """Backbone (inference model) + head (training model). Checkpoints (`SaveToFile`, `Export(MT_TRAIN)`)
    hold the head only; `Export(MT_INFERENCE)` writes backbone and head as one inference model."""

    def CompileTransfer(self, backbone: Model, head: Model) -> int:
        """Compile both; the head's first input must take the backbone's first output (any batch)."""
        self._backbone = LiteSession(self.context)
        self._backbone.CompileGraph(backbone)
        self.CompileGraph(head)
        feature, target = self._feature(), next(iter(self._backbone.GetOutputs().values()))
        if feature.shape()[1:] != target.shape()[1:]:
            raise ParamInvalidError(f"CreateTransferSession: the head's input '{feature.tensor_name()}' "
                                    f"{feature.shape()} does not match the backbone's output "
                                    f"'{target.tensor_name()}' {target.shape()}")
        self._follow_backbone()
        return RET_OK

    def _feature(self) -> MSTensor:
        """The head's input fed by the backbone."""
        return self._tensors[self._views[EVAL].inputs[0]]

    def _follow_backbone(self) -> None:
        """Give the head's input the backbone output's shape (labels follow its batch)."""
        shape = next(iter(self._backbone.GetOutputs().values())).shape()
        if self._feature().shape() != shape:
            super().Resize([self._feature()], [shape])

    def GetInputs(self) -> list[MSTensor]:
        labels = self._labels_id()
        return self._backbone.GetInputs() + ([self._tensors[labels]] if self._train and labels is not None else [])

    @exclusive
    def Resize(self, inputs: Sequence[MSTensor], dims: Sequence[Sequence[int]]) -> int:
        """Resize backbone inputs (the head follows) and, in train mode, `labels`."""
        if len(inputs) != len(dims):
            raise ParamInvalidError(f"Resize got {len(inputs)} tensors but {len(dims)} shapes")
        names = [t.tensor_name() if isinstance(t, MSTensor) else str(t) for t in inputs]
        own = {t.tensor_name() for t in self._backbone.GetInputs()}
        unknown = [n for n in names if n not in own and self.GetInputsByTensorName(n) is None]
        if unknown:
            raise InputTensorError(f"Resize: '{unknown[0]}' is not an input of this session")
        backbone = [(n, d) for n, d in zip(names, dims) if n in own]
        if backbone:
            self._backbone.Resize([n for n, _ in backbone], [d for _, d in backbone])
        self._follow_backbone()
        head = [(n, d) for n, d in zip(names, dims) if n not in own]
        if head:
            super().Resize([n for n, _ in head], [d for _, d in head])
        return RET_OK

    @exclusive
    def RunGraph(self, before: KernelCallBack | None = None, after: KernelCallBack | None = None) -> int:
        self._backbone.RunGraph()
        self._feature().set_data(next(iter(self._backbone.GetOutputs().values())).MutableData())
        return super().RunGraph(before, after)

    def ExportToBuf(self, model_type: int = MT_TRAIN) -> bytes:
        if model_type != MT_INFERENCE:
            return super().ExportToBuf(model_type)
        model, graph = self._backbone.model, self._backbone.graph
        backbone = Piece(model.name, model.tensors, graph.nodes, graph.inputs, graph.outputs)
        return inference_bytes([backbone, self._piece()])


def create_transfer_session(backbone: Any, head: Any, context: Context | None = None,
                            train_mode: bool = False) -> TransferSession:
    """A frozen inference `backbone` (buffer or path) feeding a trainable `head` (a training model whose first
    input takes the backbone's first output): MindSpore's static `TrainSession.CreateTransferSession`, attached
    to `TrainSession` by `lite.train` (a TransferSession is a TrainSession, so the two modules cannot import
    each other)."""
    session = TransferSession(context)
    session.CompileTransfer(load_model(backbone), load_model(head))
    if train_mode:
        session.Train()
    return session
