"""If, Loop and Scan: converted ONNX models against onnxruntime, how bodies are compiled (static or dynamic),
constant conditions folded at conversion, and malformed or endless control flow refused (at load where it can
be told), never hanging."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import lite
from converter import convert, to_graph
from lite.format import mspy
from lite.model import Model
from lite.status import RET_GRAPH_FILE_ERR, RET_INFER_ERR, GraphFileError, LiteError
from tests.util import REPO, run_lite, run_ort

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _model(nodes, inputs, outputs, inits=(), opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "cf", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _session(model: onnx.ModelProto) -> lite.LiteSession:
    buf = convert(model)
    return lite.LiteSession.CreateSession(buf, len(buf), lite.Context())


def _matches_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray], session=None) -> lite.LiteSession:
    session = session or _session(model)
    got, expected = run_lite(session, feeds), run_ort(model, feeds)
    for name, want in expected.items():
        assert got[name].shape == want.shape, name
        np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-6, err_msg=name)
    return session


# ---- If ---------------------------------------------------------------------------------------------------------
def _if_model(then_shape=(2, 3)) -> onnx.ModelProto:
    """y = x * 2 (then) or x[:1] + w (else): the branches read outer values and may return different shapes."""
    w = numpy_helper.from_array(np.arange(3, dtype=np.float32), "w")
    two = numpy_helper.from_array(np.array(2, np.float32), "two")
    then = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["t"])], "then", [], [_vi("t", F, None)], [two])
    starts = numpy_helper.from_array(np.array([0], np.int64), "starts")
    ends = numpy_helper.from_array(np.array([1], np.int64), "ends")
    other = helper.make_graph([helper.make_node("Slice", ["x", "starts", "ends"], ["s"]),
                               helper.make_node("Add", ["s", "w"], ["e"])], "else", [], [_vi("e", F, None)],
                              [starts, ends])
    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
    return _model(nodes, [_vi("c", B, []), _vi("x", F, list(then_shape))], [_vi("y", F, None)], [w])


@pytest.mark.parametrize("cond", [True, False])
def test_if_branches_with_different_shapes_match_onnxruntime(cond):
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    session = _matches_ort(_if_model(), {"c": np.array(cond), "x": x})
    _matches_ort(_if_model(), {"c": np.array(not cond), "x": x}, session)     # the same session, other branch


def test_if_with_a_constant_condition_is_inlined():
    model = _if_model()
    cond = numpy_helper.from_array(np.array(False), "c")
    model.graph.initializer.append(cond)
    del model.graph.input[0]
    graph = to_graph(model)
    assert [n.op for n in graph.nodes] == ["Slice", "Add"]
    x = np.ones((2, 3), np.float32)
    _matches_ort(model, {"x": x})


def test_if_whose_branches_agree_is_static():
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [], [_vi("t", F, [2])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [_vi("e", F, [2])])
    model = _model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other),
                    helper.make_node("Exp", ["y"], ["z"])],
                   [_vi("c", B, []), _vi("x", F, [2])], [_vi("z", F, [2])])
    session = _session(model)
    assert session._plan.dynamic is None
    for c in (True, False):
        _matches_ort(model, {"c": np.array(c), "x": np.array([-1, 2], np.float32)}, session)


# ---- Loop -------------------------------------------------------------------------------------------------------
def _loop_body(cond_from_data: bool) -> onnx.GraphProto:
    """acc += x * i; the scan output is acc; the loop goes on while acc < limit (or always, `cond_from_data`
    False)."""
    nodes = [helper.make_node("Cast", ["i"], ["fi"], to=F),
             helper.make_node("Mul", ["x", "fi"], ["xi"]),
             helper.make_node("Add", ["acc", "xi"], ["acc_out"]),
             helper.make_node("Identity", ["acc_out"], ["scan"])]
    if cond_from_data:
        nodes += [helper.make_node("ReduceSum", ["acc_out"], ["total"], keepdims=0),
                  helper.make_node("Less", ["total", "limit"], ["cond_out"])]
    else:
        nodes += [helper.make_node("Identity", ["cond"], ["cond_out"])]
    return helper.make_graph(nodes, "body", [_vi("i", I64, []), _vi("cond", B, []), _vi("acc", F, [3])],
                             [_vi("cond_out", B, []), _vi("acc_out", F, [3]), _vi("scan", F, [3])])


def test_loop_with_a_data_dependent_trip_count_matches_onnxruntime():
    trip = numpy_helper.from_array(np.array(100, np.int64), "trip")
    model = _model([helper.make_node("Loop", ["trip", "", "acc0"], ["acc", "scans"], body=_loop_body(True))],
                   [_vi("acc0", F, [3]), _vi("x", F, [3]), _vi("limit", F, [])],
                   [_vi("acc", F, [3]), _vi("scans", F, None)], [trip])
    session = _session(model)
    x = np.array([0.5, 1, 2], np.float32)
    for limit in (10.0, 50.0, 0.0):     # 3, 5 and 1 iterations: the scan output changes length
        _matches_ort(model, {"acc0": np.zeros(3, np.float32), "x": x, "limit": np.array(limit, np.float32)},
                     session)


def test_loop_with_a_known_trip_count_is_static():
    trip = numpy_helper.from_array(np.array(4, np.int64), "trip")
    model = _model([helper.make_node("Loop", ["trip", "", "acc0"], ["acc", "scans"], body=_loop_body(False)),
                    helper.make_node("Relu", ["scans"], ["r"])],
                   [_vi("acc0", F, [3]), _vi("x", F, [3])], [_vi("acc", F, [3]), _vi("r", F, [4, 3])], [trip])
    session = _session(model)
    assert session._plan.dynamic is None
    assert session.GetOutputByTensorName("r").shape() == [4, 3]
    _matches_ort(model, {"acc0": np.ones(3, np.float32), "x": np.array([1, -2, 3], np.float32)}, session)


def test_loop_carried_value_that_grows():
    """Each iteration appends one element: the body is compiled again for every new shape, and the body's
    Shape is not folded on the first iteration's shape."""
    body = helper.make_graph(
        [helper.make_node("Shape", ["v"], ["n"]),
         helper.make_node("Cast", ["n"], ["nf"], to=F),
         helper.make_node("Concat", ["v", "nf"], ["v_out"], axis=0),
         helper.make_node("Identity", ["cond"], ["cond_out"])],
        "grow", [_vi("i", I64, []), _vi("cond", B, []), _vi("v", F, None)],
        [_vi("cond_out", B, []), _vi("v_out", F, None)])
    model = _model([helper.make_node("Loop", ["m", "", "v0"], ["v"], body=body)],
                   [_vi("m", I64, []), _vi("v0", F, [1])], [_vi("v", F, None)])
    _matches_ort(model, {"m": np.array(4, np.int64), "v0": np.array([7], np.float32)})


def test_nested_bodies_capture_values_across_two_scopes():
    """A Loop body holding an If whose branch reads a graph input (`scale`) two scopes out."""
    then = helper.make_graph([helper.make_node("Mul", ["acc", "scale"], ["t"])], "then", [], [_vi("t", F, [2])])
    other = helper.make_graph([helper.make_node("Add", ["acc", "scale"], ["e"])], "else", [], [_vi("e", F, [2])])
    two = numpy_helper.from_array(np.array(2, np.int64), "two")
    zero = numpy_helper.from_array(np.array(0, np.int64), "zero")
    body = helper.make_graph(
        [helper.make_node("Mod", ["i", "two"], ["r"]),
         helper.make_node("Equal", ["r", "zero"], ["even"]),
         helper.make_node("If", ["even"], ["acc_out"], then_branch=then, else_branch=other),
         helper.make_node("Identity", ["cond"], ["cond_out"])],
        "body", [_vi("i", I64, []), _vi("cond", B, []), _vi("acc", F, [2])],
        [_vi("cond_out", B, []), _vi("acc_out", F, [2])], [two, zero])
    model = _model([helper.make_node("Loop", ["m", "", "acc0"], ["acc"], body=body)],
                   [_vi("m", I64, []), _vi("acc0", F, [2]), _vi("scale", F, [2])], [_vi("acc", F, [2])])
    _matches_ort(model, {"m": np.array(5, np.int64), "acc0": np.array([1, -1], np.float32),
                         "scale": np.array([1.5, 2], np.float32)})


# ---- Scan -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("in_axis,in_dir,out_axis,out_dir", [(0, 0, 0, 0), (1, 1, 1, 0), (-1, 0, 0, 1)])
def test_scan_axes_and_directions_match_onnxruntime(in_axis, in_dir, out_axis, out_dir):
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "xs"], ["s_out"]),
         helper.make_node("Mul", ["s_out", "w"], ["y"])],
        "body", [_vi("s", F, [4]), _vi("xs", F, [4])], [_vi("s_out", F, [4]), _vi("y", F, [4])])
    w = numpy_helper.from_array(np.linspace(-1, 1, 4).astype(np.float32), "w")
    model = _model([helper.make_node("Scan", ["s0", "x"], ["s", "ys"], body=body, num_scan_inputs=1,
                                     scan_input_axes=[in_axis], scan_input_directions=[in_dir],
                                     scan_output_axes=[out_axis], scan_output_directions=[out_dir])],
                   [_vi("s0", F, [4]), _vi("x", F, [4, 4])], [_vi("s", F, [4]), _vi("ys", F, [4, 4])], [w])
    rng = np.random.default_rng(1)
    session = _matches_ort(model, {"s0": rng.standard_normal(4).astype(np.float32),
                                   "x": rng.standard_normal((4, 4)).astype(np.float32)})
    assert session._plan.dynamic is None


def test_scan8_sequence_lens_is_refused_naming_the_node():
    """Scan-8 runs every batch row the full length: a sequence_lens input is refused rather than ignored."""
    body = helper.make_graph([helper.make_node("Add", ["s", "xs"], ["s_out"])], "body",
                             [_vi("s", F, [2]), _vi("xs", F, [2])], [_vi("s_out", F, [2])])
    model = _model([helper.make_node("Scan", ["lens", "s0", "x"], ["s"], body=body, num_scan_inputs=1, name="scan")],
                   [_vi("lens", I64, [1]), _vi("s0", F, [1, 2]), _vi("x", F, [1, 3, 2])], [_vi("s", F, [1, 2])],
                   opset=8)
    with pytest.raises(LiteError, match="scan.*sequence_lens"):
        convert(model)


# ---- malformed control flow -------------------------------------------------------------------------------------
def _rewrite(buf: bytes, edit) -> bytes:
    """`buf` read back, changed by `edit(model, nodes)` and written again (its bodies keep their indices)."""
    model = Model.Import(buf)
    nodes = [*model.nodes, *(n for b in model.bodies for n in b.nodes)]
    edit(model, nodes)
    return mspy.write(model.name, model.tensors, nodes, model.inputs, model.outputs, model.bodies)


def _if_buffer() -> bytes:
    return convert(_if_model())


def _if_node(model: Model):
    return next(n for n in model.nodes if n.op == "If")


def _refused(buf: bytes, status: int, words: str) -> None:
    with pytest.raises(LiteError) as info:
        lite.LiteSession.CreateSession(buf, len(buf), lite.Context())
    assert info.value.status == status and words in str(info.value), str(info.value)


def test_a_subgraph_reference_out_of_range_is_refused():
    def edit(model, nodes):
        _if_node(model).attrs.else_branch = 7
    _refused(_rewrite(_if_buffer(), edit), RET_GRAPH_FILE_ERR, "refers to subgraph 7")


def test_a_cycle_between_subgraphs_is_refused():
    def edit(model, nodes):            # the then-branch gets a node that runs the then-branch again
        body = model.bodies[0]
        inner = lite.model.NodeDef("again", "If", _if_node(model).attrs, list(_if_node(model).inputs), [])
        inner.outputs = list(body.outputs)
        body.nodes.append(inner)
        nodes.append(inner)
    _refused(_rewrite(_if_buffer(), edit), RET_GRAPH_FILE_ERR, "runs itself")


def test_a_branch_with_the_wrong_output_count_is_refused():
    def edit(model, nodes):
        model.bodies[1].outputs = model.bodies[1].outputs * 2
    _refused(_rewrite(_if_buffer(), edit), RET_GRAPH_FILE_ERR, "has 2 outputs, 1 expected")


def test_a_branch_with_the_wrong_output_dtype_is_refused():
    def edit(model, nodes):
        model.tensors[model.bodies[0].outputs[0]].data_type = lite.DataType.INT32
    _refused(_rewrite(_if_buffer(), edit), RET_GRAPH_FILE_ERR, "is float32, but output 0")


def test_a_body_reading_a_tensor_of_the_main_graph_is_refused():
    def edit(model, nodes):
        body_node = model.bodies[1].nodes[-1]
        body_node.inputs[0] = model.inputs[1]       # x itself instead of its captured copy
        model.bodies[1].inputs = []
        _if_node(model).inputs = _if_node(model).inputs[:1]
        _if_node(model).attrs.implicit_inputs = 0
        model.bodies[0].inputs = []
    _refused(_rewrite(_if_buffer(), edit), RET_GRAPH_FILE_ERR, "nothing in subgraph")


def test_a_body_input_of_the_wrong_dtype_is_refused_at_compile():
    trip = numpy_helper.from_array(np.array(2, np.int64), "trip")
    model = _model([helper.make_node("Loop", ["trip", "", "acc0"], ["acc", "scans"], body=_loop_body(False))],
                   [_vi("acc0", F, [3]), _vi("x", F, [3])], [_vi("acc", F, [3]), _vi("scans", F, None)], [trip])

    def edit(model, nodes):
        model.tensors[model.bodies[0].inputs[0]].data_type = lite.DataType.FLOAT32    # the iteration number
    _refused(_rewrite(convert(model), edit), RET_INFER_ERR, "is float32, but it is given int64")


def test_a_malformed_body_never_reaches_the_kernels():
    def edit(model, nodes):
        model.bodies[0].outputs = [len(model.tensors) + 5]
    with pytest.raises(GraphFileError):
        Model.Import(_rewrite(_if_buffer(), edit))


# ---- loops that would never end ---------------------------------------------------------------------------------
def _endless_loop(cond: onnx.NodeProto | None, trip: bool = False, const_cond: bool = False) -> onnx.ModelProto:
    """acc += 1 while the body's condition (`cond`, computed from the body's cond and the captured `limit`;
    None: the condition input passed through) holds; no max_trip_count unless `trip`."""
    nodes = [helper.make_node("Add", ["acc", "one"], ["acc_out"]),
             cond or helper.make_node("Identity", ["cond"], ["cond_out"])]
    body = helper.make_graph(nodes, "body", [_vi("i", I64, []), _vi("cond", B, []), _vi("acc", F, [1])],
                             [_vi("cond_out", B, []), _vi("acc_out", F, [1])],
                             [numpy_helper.from_array(np.ones(1, np.float32), "one")])
    inits = [numpy_helper.from_array(np.array(True), "c")] if const_cond else []
    inits += [numpy_helper.from_array(np.array(3, np.int64), "trip")] if trip else []
    inputs = [_vi("acc0", F, [1]), _vi("limit", F, [])] + ([] if const_cond else [_vi("c", B, [])])
    return _model([helper.make_node("Loop", ["trip" if trip else "", "c", "acc0"], ["acc"], body=body)],
                  inputs, [_vi("acc", F, [1])], inits)


def _outcome(model: onnx.ModelProto, feeds: dict[str, np.ndarray], tmp_path) -> str:
    """Load and run the converted model in a process of its own, which must end within two minutes (a hang
    fails the test instead of stalling the suite): 'ran' or the status code of the LiteError and where."""
    (tmp_path / "m.ms").write_bytes(convert(model))
    np.savez(tmp_path / "feeds.npz", **feeds)
    script = f"""
import numpy as np
import lite
from tests.util import run_lite
buf = open({str(tmp_path / "m.ms")!r}, "rb").read()
try:
    session = lite.LiteSession.CreateSession(buf, len(buf), lite.Context())
except lite.LiteError as e:
    print("load", e.status, e)
else:
    try:
        run_lite(session, dict(np.load({str(tmp_path / "feeds.npz")!r})))
        print("ran")
    except lite.LiteError as e:
        print("run", e.status, e)
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _feeds(c: bool = True, limit: float = 1.0) -> dict[str, np.ndarray]:
    return {"acc0": np.zeros(1, np.float32), "limit": np.array(limit, np.float32), "c": np.array(c)}


def test_a_loop_with_neither_trip_count_nor_condition_is_refused_at_load(tmp_path):
    model = _endless_loop(None)
    model.graph.node[0].input[1] = ""
    outcome = _outcome(model, {"acc0": np.zeros(1, np.float32), "limit": np.array(1, np.float32)}, tmp_path)
    assert outcome.startswith(f"load {RET_INFER_ERR}") and "Loop_0" in outcome and "never end" in outcome, outcome


def test_a_loop_whose_constant_true_condition_the_body_passes_on_is_refused_at_load(tmp_path):
    """The reported hang: no max_trip_count, the condition a constant true, the body returning it unchanged."""
    outcome = _outcome(_endless_loop(None, const_cond=True), _feeds(), tmp_path)
    assert outcome.startswith(f"load {RET_INFER_ERR}") and "Loop_0" in outcome and "never end" in outcome, outcome


@pytest.mark.parametrize("cond", [None, helper.make_node("Greater", ["limit", "zero"], ["cond_out"])],
                         ids=["passed-on", "from-captured-values"])
def test_a_loop_whose_condition_never_changes_is_refused_when_it_runs_on(cond, tmp_path):
    """A condition read from a graph input (so unknown at load) or computed from values no iteration changes:
    true after the first iteration means true forever."""
    model = _endless_loop(cond)
    model.graph.node[0].attribute[0].g.initializer.append(numpy_helper.from_array(np.array(0, np.float32), "zero"))
    outcome = _outcome(model, _feeds(), tmp_path)
    assert outcome.startswith(f"run {RET_INFER_ERR}") and "Loop_0" in outcome and "never end" in outcome, outcome


def test_a_loop_that_could_run_forever_matches_onnxruntime_when_it_does_not():
    """The same loops with the condition false, with a max_trip_count, or with a condition on the changing
    carried value run as onnxruntime runs them."""
    from_acc = [helper.make_node("ReduceSum", ["acc_out"], ["total"], keepdims=0),
                helper.make_node("Less", ["total", "limit"], ["cond_out"])]
    _matches_ort(_endless_loop(None), _feeds(c=False))
    _matches_ort(_endless_loop(None, trip=True), _feeds())
    model = _endless_loop(None)
    body = model.graph.node[0].attribute[0].g
    del body.node[1]
    body.node.extend(from_acc)
    _matches_ort(model, _feeds(limit=5.0))
