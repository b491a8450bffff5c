"""Residual sums of official files folded into the op before them, as our converter's `fuse_residual` pass does.

The official converter writes a residual block as Conv2DFusion then AddFusion (carrying the activation). Our
Conv2D and FullConnection kernels add a residual input in their epilogue (`traits(op).residual_input`), which
saves a pass over both operands per block; our own files get that from the converter, official ones get it here,
at read time, under the same conditions: a float32 op without an activation of its own, read only by the Add, and
the residual of the Add's output shape (the file's dims, all known), so nothing broadcasts.
"""
from __future__ import annotations

from typing import Sequence

from lite.dtypes import DataType
from lite.model import NodeDef, TensorDef
from lite.traits import traits


def _absorber(node: NodeDef | None, operand: int, readers: dict[int, int], outputs: set[int]) -> int | None:
    """`node`'s residual input index when it can absorb the Add that alone reads its output `operand`."""
    if node is None or node.quant_type or getattr(node.attrs, "activation", 0):
        return None
    index = traits(node.op).residual_input
    if index is None or len(node.inputs) > index or readers.get(operand) != 1 or operand in outputs:
        return None
    return index


def fuse_residuals(tensors: list[TensorDef], nodes: list[NodeDef], outputs: Sequence[int]) -> list[NodeDef]:
    """`nodes` with each fusable float32 `Add(op(x), r)` folded into `op`, which then writes the Add's output."""
    producer = {o: n for n in nodes for o in n.outputs}
    readers: dict[int, int] = {}
    for n in nodes:
        for i in set(n.inputs):
            readers[i] = readers.get(i, 0) + 1
    graph_outputs, fused = set(outputs), set()
    for add in nodes:
        if add.op != "Add" or add.quant_type or len(add.inputs) != 2 or add.inputs[0] == add.inputs[1]:
            continue
        shapes = [tensors[i].dims for i in (*add.inputs, add.outputs[0])]
        if len(set(shapes)) != 1 or any(d < 0 for d in shapes[0]) or \
                any(tensors[i].data_type != DataType.FLOAT32 for i in (*add.inputs, add.outputs[0])):
            continue
        for operand, other in (add.inputs, add.inputs[::-1]):
            node = producer.get(operand)
            index = _absorber(node, operand, readers, graph_outputs)
            if index is None:
                continue
            node.inputs = [*node.inputs, *[-1] * (index - len(node.inputs)), other]
            node.attrs.activation = add.attrs.activation
            node.outputs = [add.outputs[0], *node.outputs[1:]]
            fused.add(id(add))
            break
    return [n for n in nodes if id(n) not in fused] if fused else nodes
