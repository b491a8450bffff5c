"""Official MindSpore Lite control-flow files (PartialFusion, Switch, Call) read as our If and Loop nodes.

The fixtures in mindspore_lite_control_flow/ are MindSpore 2.0 GRAPH_MODE exports (MINDIR) of nets of pure ops,
converted by the official 2.0.0 converter (`--fmk=MINDIR`): `while` (y = x; while sum|y| < 20: y = 2 tanh(y) + y;
return y - x), `if_else` (sum x > 0: relu(x) * 3, else x * 2 - 1), `if_matmul` (sum x > 0: x @ W, else x * 2),
and nested ones: `while_if` (an if/else in a while body), `if_while` (a while loop in a branch, then a Mul after
the call) and `two_whiles` (the first loop's exit calls the second loop's header). Each `.npz` holds three inputs
that take both paths and MindSpore's outputs; for `while` also the official runtime's, the one file it runs right
(it does not finish the if/else files, fails on `while_if` and is 16 off on `two_whiles`).
"""
from __future__ import annotations

from pathlib import Path

import flatbuffers
import numpy as np
import pytest

from lite.context import Context
from lite.model import Model
from lite.session import LiteSession
from lite.status import GraphFileError, NotSupportedError
from lite.tools.benchmark import main
from schema.mindspore_lite import fb

FIXTURES = Path(__file__).with_name("mindspore_lite_control_flow")


def outputs(model: Model, xs: np.ndarray) -> np.ndarray:
    session = LiteSession.CreateSession(Context())
    session.CompileGraph(model)
    results = []
    for x in xs:
        session.GetInputs()[0].MutableData()[...] = x
        session.RunGraph()
        results.append(next(iter(session.GetOutputs().values())).numpy().copy())
    return np.stack(results)


def relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.ptp(b))


@pytest.mark.parametrize("net, ops", [("while", ["Loop"]), ("if_else", ["If"]), ("if_matmul", ["If"]),
                                      ("while_if", ["Loop", "If"]), ("if_while", ["If", "Loop"]),
                                      ("two_whiles", ["Loop", "Loop"])])
def test_outputs_are_mindspores(net, ops):
    ref = np.load(FIXTURES / f"{net}.npz")
    model = Model.Load(str(FIXTURES / f"{net}.ms"))
    control = [nd.op for graph in (model, *model.bodies) for nd in graph.nodes if nd.op in ("If", "Loop")]
    assert control == ops
    got = outputs(model, ref["x"])
    assert relative(got, ref["mindspore"]) < 1e-5
    if "official" in ref:
        assert relative(got, ref["official"]) < 1e-4


def test_both_branches_run():
    ref = np.load(FIXTURES / "if_else.npz")
    taken = [x.sum() > 0 for x in ref["x"]]
    assert any(taken) and not all(taken)      # the fixture's inputs take each branch


def partial_indices(buf: bytearray) -> list[int]:
    """The byte offsets of the PartialFusion nodes' subGraphIndex fields."""
    root = fb.MetaGraph.GetRootAs(buf, 0)
    found = []
    for k in range(root.NodesLength()):
        primitive = root.Nodes(k).Primitive()
        if primitive.ValueType() == fb.PrimitiveType.PartialFusion:
            table = fb.PartialFusion()
            table.Init(primitive.Value().Bytes, primitive.Value().Pos)
            found.append(table._tab.Pos + table._tab.Offset(4))
    return found


def test_a_loop_on_the_false_branch_is_refused():
    """The while header's Switch with its two partials swapped: the body runs while the condition is false."""
    buf = bytearray((FIXTURES / "while.ms").read_bytes())
    root = fb.MetaGraph.GetRootAs(buf, 0)
    node = next(root.Nodes(k) for k in range(root.NodesLength())
                if root.Nodes(k).Primitive().ValueType() == fb.PrimitiveType.Switch)
    start = node._tab.Vector(node._tab.Offset(10))      # CNode.inputIndex: condition, then, else
    then, other = node.InputIndex(1), node.InputIndex(2)
    flatbuffers.encode.Write(flatbuffers.packer.uint32, buf, start + 4, other)
    flatbuffers.encode.Write(flatbuffers.packer.uint32, buf, start + 8, then)
    with pytest.raises(NotSupportedError, match="loops while its condition is false"):
        Model.Import(buf)


@pytest.mark.parametrize("index, error, words", [(0, NotSupportedError, "calls itself"),
                                                 (9, GraphFileError, "the model has 3 subgraphs")])
def test_other_calls_are_refused(index, error, words):
    buf = bytearray((FIXTURES / "if_else.ms").read_bytes())
    flatbuffers.encode.Write(flatbuffers.packer.int64, buf, partial_indices(buf)[0], index)
    with pytest.raises(error, match=words):
        Model.Import(buf)


def test_benchmark_runs_an_official_control_flow_file(capsys):
    assert main([f"--modelFile={FIXTURES / 'two_whiles.ms'}", "--loopCount=2", "--warmUpLoopCount=0"]) == 0
    assert "Success" in capsys.readouterr().out
