"""The converter fuzz's short budget (the 10,000-case campaign is `python -m tests.fuzz.converter_cli`), and its
findings: a control-flow node without its graph or count attribute is refused with a status naming the node."""
from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

from converter.cli import main as converter_lite
from lite.status import RET_INVALID_OP_ATTR
from tests.fuzz.converter_cli import campaign, seeds


def test_short_campaign_ends_every_case_in_a_status():
    outcome = campaign(300, seed=7)
    assert outcome.cases == 300 and not outcome.tracebacks and not outcome.hangs, outcome.tracebacks[:3]
    assert outcome.converted and outcome.statuses      # both ends are reached


def _info(name: str) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 3])


@pytest.mark.parametrize("node", [
    helper.make_node("Loop", ["", "cond", "x"], ["y"]),
    helper.make_node("If", ["cond"], ["y"]),
    helper.make_node("Scan", ["x"], ["y"], body=helper.make_graph([], "body", [], []))],
    ids=["Loop without body", "If without branches", "Scan without num_scan_inputs"])
def test_control_flow_without_its_attributes_is_refused(node, tmp_path, capsys):
    graph = helper.make_graph([node], "g", [_info("x"), helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
                              [_info("y")])
    source = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), source)
    status = converter_lite(["--fmk=ONNX", f"--modelFile={source}", f"--outputFile={tmp_path / 'm'}"])
    assert status == RET_INVALID_OP_ATTR
    assert f"ONNX op '{node.op_type}'" in capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(seeds()))
def test_seed_converts(name, tmp_path):
    """The structural edits start from sound models."""
    source = tmp_path / "m.onnx"
    onnx.save(seeds()[name], source)
    assert converter_lite(["--fmk=ONNX", f"--modelFile={source}", f"--outputFile={tmp_path / 'm'}"]) == 0
