"""Float weights an ONNX model holds in nodes rather than initializers, for training: exporters such as
Paddle2ONNX write every weight as a Constant node, others put a Cast (float16 storage) or a DequantizeLinear
(quantized storage) between the stored constant and the float weight the network reads."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from converter.frontends.onnx.rules.quant import dequantized_constant

CHAIN_OPS = ("Identity", "Cast", "DequantizeLinear")


def _constant_value(node: onnx.NodeProto) -> np.ndarray | None:
    """The tensor of a Constant node (its `value` or `value_float(s)`), None for other forms."""
    for attr in node.attribute:
        if attr.name == "value":
            return numpy_helper.to_array(attr.t)
        if attr.name in ("value_float", "value_floats"):
            return np.asarray(helper.get_attribute_value(attr), np.float32)
    return None


def _attr(node: onnx.NodeProto, name: str, default: int) -> int:
    return next((helper.get_attribute_value(a) for a in node.attribute if a.name == name), default)


def _chained(node: onnx.NodeProto, arrays: list[np.ndarray]) -> np.ndarray | None:
    """What an Identity, Cast or per-tensor / per-axis DequantizeLinear of constant `arrays` computes (as the
    importer folds it), None for a form this does not fold."""
    if node.op_type == "Identity":
        return arrays[0]
    if node.op_type == "Cast":
        return arrays[0].astype(helper.tensor_dtype_to_np_dtype(_attr(node, "to", 0)))
    if _attr(node, "block_size", 0):
        return None
    q, scale = arrays[:2]
    zero_point = arrays[2] if len(arrays) > 2 else np.zeros((), q.dtype)
    axis = _attr(node, "axis", 1)
    return dequantized_constant(q, scale, zero_point, axis % q.ndim if q.ndim else 0)


def node_weights(graph: onnx.GraphProto, initializers: dict[str, np.ndarray]
                 ) -> tuple[dict[str, np.ndarray], set[str]]:
    """Non-scalar float tensors of the top-level Constant nodes, or made from constants by Identity, Cast or
    DequantizeLinear, named by the last node of each such chain, in node order; and the names such chains read
    (a DequantizeLinear's float scale initializer is a part of the weight, not one of its own). Scalars
    (epsilons, exponents, clip bounds) stay constants; an Identity of a float initializer is the initializer
    itself, already a weight."""
    constants: dict[str, np.ndarray] = {n: a for n, a in initializers.items() if not np.issubdtype(a.dtype,
                                                                                               np.floating)}
    scales = {n: a for n, a in initializers.items() if n not in constants}
    chain_inputs: set[str] = set()
    for node in graph.node:
        if not node.output:
            continue
        if node.op_type == "Constant":
            value = _constant_value(node)
        elif node.op_type in CHAIN_OPS and node.input and node.input[0] in constants and all(
                i in constants or node.op_type == "DequantizeLinear" and i in scales for i in node.input if i):
            try:
                value = _chained(node, [constants.get(i, scales.get(i)) for i in node.input if i])
            except (ValueError, TypeError, KeyError, IndexError):
                continue        # the importer reports what it cannot fold
            if value is not None:
                chain_inputs.update(node.input)
        else:
            continue
        if value is not None:
            constants[node.output[0]] = value
    weights = {name: a for name, a in constants.items() if name not in initializers and name not in chain_inputs
               and np.issubdtype(a.dtype, np.floating) and a.size > 1}
    return weights, chain_inputs
