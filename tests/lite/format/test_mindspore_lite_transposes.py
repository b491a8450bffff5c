"""The read-time rewrites of official files, on hand-made graphs: Transpose pairs around elementwise regions cancel
(`transposes.py`) only when every way in and out goes through them, and residual Adds fold into the op before
them (`residuals.py`) only under our converter's conditions."""
from __future__ import annotations

import numpy as np

from lite.dtypes import DataType
from lite.format.mindspore_lite.residuals import fuse_residuals
from lite.format.mindspore_lite.transposes import cancel_transposes
from lite.model import NodeDef, TensorDef
from schema import attrs as op_attrs
from schema import fb

NHWC, NCHW = (1, 4, 4, 8), (1, 8, 4, 4)
TO_NCHW, TO_NHWC = [0, 3, 1, 2], [0, 2, 3, 1]


def _tensors(*dims: tuple[int, ...]) -> list[TensorDef]:
    return [TensorDef(k, f"t{k}", fb.NodeType.CNODE, DataType.FLOAT32, d, fb.Format.ND) for k, d in enumerate(dims)]


def _node(op: str, inputs: list[int], outputs: list[int], **attrs) -> NodeDef:
    return NodeDef(f"{op}_{outputs[0]}", op, op_attrs.build(op, attrs), inputs, outputs)


def _residual_block() -> tuple[list[TensorDef], list[NodeDef]]:
    """t0, t1 (NHWC) -> Transposes to NCHW t2, t3 -> Add t4 -> Transpose back t5 -> Relu t6."""
    tensors = _tensors(NHWC, NHWC, NCHW, NCHW, NCHW, NHWC, NHWC)
    nodes = [_node("Transpose", [0], [2], perm=TO_NCHW), _node("Transpose", [1], [3], perm=TO_NCHW),
             _node("Add", [2, 3], [4]), _node("Transpose", [4], [5], perm=TO_NHWC),
             _node("Activation", [5], [6], type=fb.ActivationType.RELU)]
    return tensors, nodes


def test_a_region_between_inverse_transposes_runs_before_them() -> None:
    tensors, nodes = _residual_block()
    kept = cancel_transposes(tensors, nodes, [6])
    assert [(n.op, n.inputs, n.outputs) for n in kept] == [("Add", [0, 1], [4]), ("Activation", [4], [6])]
    assert tensors[4].dims == NHWC


def test_a_region_read_outside_the_transposes_is_left_alone() -> None:
    tensors, nodes = _residual_block()
    assert cancel_transposes(tensors, nodes, [4, 6]) == nodes      # the Add's NCHW output is a graph output
    tensors, nodes = _residual_block()
    nodes[1] = _node("Transpose", [1], [3], perm=TO_NHWC)          # inputs through different perms
    assert cancel_transposes(tensors, nodes, [6]) == nodes
    assert tensors[4].dims == NCHW


def test_a_residual_add_folds_into_the_convolution_before_it() -> None:
    tensors = _tensors(NHWC, (8, 1, 1, 8), NHWC, NHWC, NHWC)
    tensors[1].data = np.ones((8, 1, 1, 8), np.float32)
    conv = _node("Conv2D", [0, 1], [2], kernel_h=1, kernel_w=1, in_channel=8, out_channel=8)
    add = _node("Add", [2, 3], [4], activation=fb.ActivationType.RELU6)
    assert fuse_residuals(tensors, [conv, add], [4]) == [conv]
    assert (conv.inputs, conv.outputs, conv.attrs.activation) == ([0, 1, -1, 3], [4], fb.ActivationType.RELU6)


def test_a_residual_add_stays_when_the_convolution_activates_or_is_read_elsewhere() -> None:
    tensors = _tensors(NHWC, (8, 1, 1, 8), NHWC, NHWC, NHWC)
    tensors[1].data = np.ones((8, 1, 1, 8), np.float32)
    conv = _node("Conv2D", [0, 1], [2], kernel_h=1, kernel_w=1, in_channel=8, out_channel=8,
                 activation=fb.ActivationType.RELU)
    add = _node("Add", [2, 3], [4])
    assert fuse_residuals(tensors, [conv, add], [4]) == [conv, add]
    conv.attrs.activation = 0
    assert fuse_residuals(tensors, [conv, add], [4, 2]) == [conv, add]
