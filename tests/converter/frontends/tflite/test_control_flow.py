"""TFLite WHILE and IF (a file's body subgraphs) imported as our Loop and If, against LiteRT's Interpreter."""
from __future__ import annotations

import numpy as np
import pytest

import lite
from converter import convert_tflite
from converter.frontends.tflite.importer import import_model
from tests.tflite_models import TFLiteModel, check, run_litert, run_ours

I32, F32, BOOL = np.int32, np.float32, np.bool_


def _less(g: TFLiteModel, shape: tuple[int, ...] = (2,)):
    """cond(i, n, acc) = i < n."""
    i, n, acc = g.tensor([], I32), g.tensor([], I32), g.tensor(shape, F32)
    c = g.tensor([], BOOL)
    g.op("LESS", [i, n], [c])
    return [i, n, acc], [c]


def _step(g: TFLiteModel):
    """body(i, n, acc) = (i + 1, n, acc * 1.5 + 1)."""
    i, n, acc = g.tensor([], I32), g.tensor([], I32), g.tensor([2], F32)
    i1, scaled, acc1 = g.tensor([], I32), g.tensor([2], F32), g.tensor([2], F32)
    g.op("ADD", [i, g.const(np.array(1, I32))], [i1], "AddOptions")
    g.op("MUL", [acc, g.const(np.array(1.5, F32))], [scaled], "MulOptions")
    g.op("ADD", [scaled, g.const(np.ones(2, F32))], [acc1], "AddOptions")
    return [i, n, acc], [i1, n, acc1]


def counter(cond: int | None = None, body: int | None = None) -> bytes:
    """while i < n: i, acc = i + 1, acc * 1.5 + 1, from i = 0, with n and acc graph inputs."""
    m = TFLiteModel()
    n, acc = m.tensor([], I32, name="n"), m.tensor([2], F32, name="acc")
    outs = [m.tensor([], I32, name="i_out"), m.tensor([], I32, name="n_out"), m.tensor([2], F32, name="acc_out")]
    cond_index, body_index = m.subgraph(_less), m.subgraph(_step)
    m.op("WHILE", [m.const(np.array(0, I32)), n, acc], outs, "WhileOptions",
         CondSubgraphIndex=cond_index if cond is None else cond, BodySubgraphIndex=body_index if body is None else body)
    return m.build([n, acc], [outs[0], outs[2]])


@pytest.mark.parametrize("trips", [0, 1, 5])
def test_while_counter_with_data_dependent_trip_count(trips):
    """The trip count comes from an input: zero trips tests the condition before the first iteration."""
    i, acc = check(counter(), [np.array(trips, I32), np.array([0.5, -2.0], F32)])
    assert int(i) == trips


def test_while_session_runs_again_with_another_count():
    data = counter()
    for trips in (3, 0, 4):
        feeds = [np.array(trips, I32), np.array([1.0, 2.0], F32)]
        for a, e in zip(run_ours(data, feeds), run_litert(data, feeds)):
            np.testing.assert_allclose(a, e, rtol=1e-6)


def _branch(op: str, value: float):
    def build(g: TFLiteModel):
        x, y = g.tensor([2, 3], F32), g.tensor([2, 3], F32)
        g.op(op, [x, g.const(np.full((2, 3), value, F32))], [y], f"{op.capitalize()}Options")
        return [x], [y]
    return build


def branchy(cond: np.ndarray | None = None, then: int | None = None) -> bytes:
    """y = x * 2 if c else x - 1, with c a graph input (or the constant `cond`)."""
    m = TFLiteModel()
    c = m.tensor([], BOOL, name="c") if cond is None else m.const(cond)
    x, y = m.tensor([2, 3], F32, name="x"), m.tensor([2, 3], F32, name="y")
    then_index, else_index = m.subgraph(_branch("MUL", 2.0)), m.subgraph(_branch("SUB", 1.0))
    m.op("IF", [c, x], [y], "IfOptions", ThenSubgraphIndex=then_index if then is None else then,
         ElseSubgraphIndex=else_index)
    return m.build([c, x] if cond is None else [x], [y])


@pytest.mark.parametrize("taken", [True, False])
def test_if_on_a_run_time_boolean(taken):
    x = np.arange(6, dtype=F32).reshape(2, 3) - 2.5
    (y,) = check(branchy(), [np.array(taken), x])
    np.testing.assert_array_equal(y, x * 2 if taken else x - 1)


@pytest.mark.parametrize("taken", [True, False])
def test_if_on_a_constant_condition_is_inlined(taken):
    data = branchy(np.array(taken))
    check(data, [np.ones((2, 3), F32)])
    assert "If" not in [n.op for n in import_model(data).nodes]


def _error(data: bytes) -> lite.LiteError:
    with pytest.raises(lite.LiteError) as info:
        convert_tflite(data, source="model.tflite")
    return info.value


@pytest.mark.parametrize("data, option", [
    (counter(body=7), "BodySubgraphIndex 7"),
    (counter(cond=0), "CondSubgraphIndex 0"),
    (counter(cond=-1), "CondSubgraphIndex -1"),
    (branchy(then=9), "ThenSubgraphIndex 9"),
])
def test_malformed_subgraph_index_names_the_node(data, option):
    e = _error(data)
    assert e.status == lite.RET_GRAPH_FILE_ERR and option in str(e)
    assert "i_out" in str(e) or "'y'" in str(e)


def test_a_body_that_runs_itself_is_refused():
    m = TFLiteModel()
    c, x, y = m.tensor([], BOOL, name="c"), m.tensor([], F32, name="x"), m.tensor([], F32, name="y")

    def recursive(g: TFLiteModel):
        a, b, out = g.tensor([], BOOL), g.tensor([], F32), g.tensor([], F32, name="inner")
        g.op("IF", [a, a, b], [out], "IfOptions", ThenSubgraphIndex=1, ElseSubgraphIndex=1)
        return [a, b], [out]
    m.subgraph(recursive)
    m.op("IF", [c, c, x], [y], "IfOptions", ThenSubgraphIndex=1, ElseSubgraphIndex=1)
    e = _error(m.build([c, x], [y]))
    assert e.status == lite.RET_GRAPH_FILE_ERR and "'inner'" in str(e) and "cycle" in str(e)


def test_while_whose_carried_value_grows():
    """acc doubles its length every iteration: the loop's output shape is known only by running it."""
    m = TFLiteModel()
    n, acc = m.tensor([], I32, name="n"), m.tensor([2], F32, name="acc", signature=[-1])
    outs = [m.tensor([], I32, name="i_out"), m.tensor([], I32, name="n_out"), m.tensor([2], F32, name="acc_out", signature=[-1])]

    def grow(g: TFLiteModel):
        i, k, a = g.tensor([], I32), g.tensor([], I32), g.tensor([2], F32, signature=[-1])
        i1, a1 = g.tensor([], I32), g.tensor([4], F32, signature=[-1])
        g.op("ADD", [i, g.const(np.array(1, I32))], [i1], "AddOptions")
        g.op("CONCATENATION", [a, a], [a1], "ConcatenationOptions", Axis=0)
        return [i, k, a], [i1, k, a1]
    m.op("WHILE", [m.const(np.array(0, I32)), n, acc], outs, "WhileOptions",
         CondSubgraphIndex=m.subgraph(_less), BodySubgraphIndex=m.subgraph(grow))
    i, out = check(m.build([n, acc], [outs[0], outs[2]]), [np.array(3, I32), np.array([1.0, -1.0], F32)])
    assert out.shape == (16,)


def test_a_body_disagreeing_in_dtype_is_refused():
    m = TFLiteModel()
    c, x, y = m.tensor([], BOOL, name="c"), m.tensor([2], I32, name="x"), m.tensor([2], I32, name="y")
    branch = m.subgraph(_branch("MUL", 2.0))            # float32 [2, 3] in and out
    m.op("IF", [c, x], [y], "IfOptions", ThenSubgraphIndex=branch, ElseSubgraphIndex=branch)
    e = _error(m.build([c, x], [y]))
    assert e.status == lite.RET_GRAPH_FILE_ERR and "'y'" in str(e) and "int32" in str(e)


def test_quantized_values_through_a_body_are_not_supported():
    m = TFLiteModel()
    c = m.tensor([], BOOL, name="c")
    x, y = (m.tensor([2], np.int8, name=n, scale=0.1, zero_point=0) for n in ("x", "y"))

    def passthrough(g: TFLiteModel):
        v = g.tensor([2], np.int8, scale=0.1, zero_point=0)
        return [v], [v]
    branch = m.subgraph(passthrough)
    m.op("IF", [c, x], [y], "IfOptions", ThenSubgraphIndex=branch, ElseSubgraphIndex=branch)
    e = _error(m.build([c, x], [y]))
    assert e.status == lite.RET_NOT_SUPPORT and "'y'" in str(e) and "quantized" in str(e)


def test_if_nested_in_a_while_body():
    """Bodies import recursively: acc = acc * 2 while i < 2, acc - 1 after, for n iterations."""
    m = TFLiteModel()
    then, other = m.subgraph(_branch("MUL", 2.0)), m.subgraph(_branch("SUB", 1.0))

    def body(g: TFLiteModel):
        i, n, acc = g.tensor([], I32), g.tensor([], I32), g.tensor([2, 3], F32)
        i1, early, acc1 = g.tensor([], I32), g.tensor([], BOOL), g.tensor([2, 3], F32)
        g.op("ADD", [i, g.const(np.array(1, I32))], [i1], "AddOptions")
        g.op("LESS", [i, g.const(np.array(2, I32))], [early])
        g.op("IF", [early, acc], [acc1], "IfOptions", ThenSubgraphIndex=then, ElseSubgraphIndex=other)
        return [i, n, acc], [i1, n, acc1]
    n, acc = m.tensor([], I32, name="n"), m.tensor([2, 3], F32, name="acc")
    outs = [m.tensor([], I32, name="i_out"), m.tensor([], I32, name="n_out"), m.tensor([2, 3], F32, name="acc_out")]
    m.op("WHILE", [m.const(np.array(0, I32)), n, acc], outs, "WhileOptions",
         CondSubgraphIndex=m.subgraph(lambda g: _less(g, (2, 3))), BodySubgraphIndex=m.subgraph(body))
    x = np.arange(6, dtype=F32).reshape(2, 3)
    _, out = check(m.build([n, acc], [outs[0], outs[2]]), [np.array(4, I32), x])
    np.testing.assert_allclose(out, x * 4 - 2)


def _call_once(init: int | None = None, inputs: bool = False) -> bytes:
    """y = x + x after a CALL_ONCE of an init subgraph that has no operators (index `init` when given)."""
    m = TFLiteModel()
    x, y = m.tensor([2, 3], name="x"), m.tensor([2, 3], name="y")
    index = m.subgraph(lambda g: ([], []))
    m.op("CALL_ONCE", [x] if inputs else [], [], "CallOnceOptions", InitSubgraphIndex=index if init is None else init)
    m.op("ADD", [x, x], [y], "AddOptions")
    return m.build([x], [y])


def test_call_once_imports_as_nothing():
    """CALL_ONCE's init subgraph only sets state that every op reading it is refused for, so it adds no node."""
    data = _call_once()
    x = np.arange(6, dtype=F32).reshape(2, 3)
    check(data, [x])
    assert [n.op for n in import_model(data).nodes] == ["Add"]


@pytest.mark.parametrize("init,inputs,message", [(5, False, "InitSubgraphIndex 5"), (0, False, "InitSubgraphIndex 0"),
                                                 (None, True, "no inputs")])
def test_call_once_naming_no_init_subgraph_or_with_inputs_is_refused(init, inputs, message):
    e = _error(_call_once(init, inputs))
    assert e.status == lite.RET_GRAPH_FILE_ERR and "CALL_ONCE" in str(e) and message in str(e)


def test_call_is_refused_naming_the_node():
    """CALL (a legacy builtin LiteRT has no kernel for) is refused with that reason, naming the node."""
    m = TFLiteModel()
    x, y = m.tensor([2, 3], name="x"), m.tensor([2, 3], name="called/y")

    def body(g: TFLiteModel):
        a, b = g.tensor([2, 3]), g.tensor([2, 3])
        g.op("ADD", [a, a], [b], "AddOptions")
        return [a], [b]
    m.op("CALL", [x], [y], "CallOptions", Subgraph=m.subgraph(body))
    e = _error(m.build([x], [y]))
    assert e.status == lite.RET_NOT_SUPPORT and "'CALL'" in str(e) and "called/y" in str(e)
    assert "legacy call of a subgraph" in str(e) and "LiteRT has no kernel" in str(e)
