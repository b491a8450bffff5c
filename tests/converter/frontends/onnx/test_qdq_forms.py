"""QuantizeLinear / DequantizeLinear of computed tensors (not constants, not written by another quantizing op), in
every parameter form — per tensor, per axis, blocked — and quantized type onnxruntime runs, against onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.util import run_lite, run_ort, session_for

TYPES = {"int8": (np.int8, TensorProto.INT8), "uint8": (np.uint8, TensorProto.UINT8),
         "int16": (np.int16, TensorProto.INT16), "uint16": (np.uint16, TensorProto.UINT16),
         "int4": (np.int8, TensorProto.INT4), "uint4": (np.uint8, TensorProto.UINT4)}
RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "uint16": (0, 65535), "int4": (-8, 7),
          "uint4": (0, 15)}
SHAPE = (6, 8)


PARAMS = {"tensor": ((), {}), "axis": ((8,), {"axis": 1}), "blocked": ((6, 2), {"axis": 1, "block_size": 4})}
FOUR_BITS = ("int4", "uint4")     # onnxruntime gathers and returns no 4-bit tensor: they go Q -> DQ


def _params(name: str, form: str, rng: np.random.Generator, suffix: str) -> tuple[list, dict]:
    """Initializers scale<suffix>, zp<suffix> of `form` for a [6, 8] tensor of type `name`, and the attributes."""
    shape, attrs = PARAMS[form]
    lo, hi = RANGES[name]
    scale = (rng.random(shape) * 0.1 + 0.01).astype(np.float32)
    zero_point = rng.integers(lo, hi + 1, shape)
    return [numpy_helper.from_array(scale, f"scale{suffix}"),
            helper.make_tensor(f"zp{suffix}", TYPES[name][1], shape, zero_point.ravel().tolist())], attrs


def _model(op: str, name: str, form: str, rng: np.random.Generator):
    """A Gather of a table by input rows (quantized for DequantizeLinear, float for QuantizeLinear), then `op`
    with constant params of `form`; 4-bit types: QuantizeLinear then DequantizeLinear of other params."""
    lo, hi = RANGES[name]
    initializers, attrs = _params(name, form, rng, "")
    if op == "DequantizeLinear" and name not in FOUR_BITS:
        table = helper.make_tensor("table", TYPES[name][1], SHAPE, rng.integers(lo, hi + 1, SHAPE).ravel().tolist())
    else:
        table = numpy_helper.from_array((rng.standard_normal(SHAPE) * 3).astype(np.float32), "table")
    nodes = [helper.make_node("Gather", ["table", "rows"], ["picked"]),
             helper.make_node(op, ["picked", "scale", "zp"], ["y"], **attrs)]
    out_type = TensorProto.FLOAT if op == "DequantizeLinear" else TYPES[name][1]
    if name in FOUR_BITS:
        more, attrs = _params(name, form, rng, "2")
        initializers += more
        nodes = [nodes[0], helper.make_node("QuantizeLinear", ["picked", "scale", "zp"], ["q"], **attrs),
                 helper.make_node("DequantizeLinear", ["q", "scale2", "zp2"], ["y"], **attrs)]
        out_type = TensorProto.FLOAT
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("rows", TensorProto.INT64, [6])],
                              [helper.make_tensor_value_info("y", out_type, SHAPE)], [table, *initializers])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


@pytest.mark.parametrize("form", list(PARAMS))
@pytest.mark.parametrize("op, name", [(op, name) for op in ("DequantizeLinear", "QuantizeLinear") for name in TYPES
                                      if not (op == "QuantizeLinear" and name in FOUR_BITS)])
def test_computed_tensor_matches_onnxruntime_exactly(op, name, form):
    rng = np.random.default_rng(len(name) * 7 + len(form))
    model = _model(op, name, form, rng)
    feeds = {"rows": rng.permutation(6).astype(np.int64)}
    want, got = run_ort(model, feeds)["y"], run_lite(session_for(model), feeds)["y"]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
