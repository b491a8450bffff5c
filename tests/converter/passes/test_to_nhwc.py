"""to_nhwc: DepthToSpace and SpaceToDepth between NHWC convs run in NHWC (Reshape, Transpose, Reshape) in both
channel orders, and the result is onnxruntime's."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import lite
from converter import to_graph
from converter.export import to_bytes
from tests.util import run_lite, run_ort


def _between_convs(op: str, mode: str) -> object:
    """x [1, 3, 6, 4] -> 1x1 Conv to 8 channels -> `op` (block 2, `mode`) -> 1x1 Conv -> y."""
    rng = np.random.default_rng(0)
    channels = 2 if op == "DepthToSpace" else 32
    consts = {"a": rng.standard_normal((8, 3, 1, 1)).astype(np.float32),
              "b": rng.standard_normal((5, channels, 1, 1)).astype(np.float32)}
    attrs = {"mode": mode} if op == "DepthToSpace" else {}
    nodes = [helper.make_node("Conv", ["x", "a"], ["h"]), helper.make_node(op, ["h"], ["m"], blocksize=2, **attrs),
             helper.make_node("Conv", ["m", "b"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, n) for n, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("op,mode", [("DepthToSpace", "DCR"), ("DepthToSpace", "CRD"), ("SpaceToDepth", "")])
def test_block_moves_run_in_nhwc(op: str, mode: str) -> None:
    model = _between_convs(op, mode)
    graph = to_graph(model)
    ops = [n.op for n in graph.nodes]
    assert op not in ops and ops.count("Transpose") == 3, ops   # the block move's own and the two borders
    x = np.random.default_rng(1).standard_normal((1, 3, 6, 4)).astype(np.float32)
    data = to_bytes(graph)
    got = run_lite(lite.LiteSession.CreateSession(data, len(data), lite.Context()), {"x": x})["y"]
    np.testing.assert_allclose(got, run_ort(model, {"x": x})["y"], rtol=1e-5, atol=1e-5)
