"""Resource variables: a streaming model keeps its state in the model (CALL_ONCE initialises it, READ_VARIABLE
and ASSIGN_VARIABLE read and write it) and our session keeps it across RunGraph as LiteRT keeps it across
invocations, step by step; `ResetVariables` starts over."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tflite", reason="the TFLite frontend reads files with the 'tflite' package")
import lite  # noqa: E402
from converter import convert_tflite  # noqa: E402
from lite.status import RET_OK, NotSupportedError  # noqa: E402
from tests.converter.frontends.tflite.wild_models import WildModel, streaming_conv_int8, streaming_mean  # noqa: E402
from tests.tflite_models import litert_interpreter  # noqa: E402
from tests.util import relative_to_range  # noqa: E402

INT8 = (0.05, -3)


class LiteRT:
    """LiteRT's Interpreter invoked chunk by chunk (builtin kernels)."""

    def __init__(self, data: bytes):
        module = litert_interpreter()
        self.interpreter = module.Interpreter(model_content=data, experimental_op_resolver_type=
                                              module.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        self.interpreter.allocate_tensors()

    def __call__(self, x: np.ndarray) -> np.ndarray:
        self.interpreter.set_tensor(self.interpreter.get_input_details()[0]["index"], x)
        self.interpreter.invoke()
        return self.interpreter.get_tensor(self.interpreter.get_output_details()[0]["index"]).copy()


class Ours:
    def __init__(self, data: bytes):
        buf = convert_tflite(data)
        self.session = lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=1))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        self.session.GetInputs()[0].set_data(x)
        self.session.RunGraph()
        return next(iter(self.session.GetOutputs().values())).numpy().copy()


def _chunks(n: int, quant: tuple[float, int] | None) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    if quant is None:
        return [rng.uniform(-1, 1, (1, 1, 2)).astype(np.float32) for _ in range(n)]
    return [rng.integers(-128, 128, (1, 1, 2)).astype(np.int8) for _ in range(n)]


def _close(a: np.ndarray, e: np.ndarray) -> bool:
    if e.dtype == np.int8:              # within one quantum
        return a.dtype == e.dtype and np.abs(a.astype(np.int16) - e).max() <= 1
    return relative_to_range(a, e) <= 1e-6 if np.ptp(e) else np.allclose(a, e, atol=1e-6)


@pytest.mark.parametrize("quant", [None, INT8], ids=["float", "int8"])
def test_streams_50_chunks_step_by_step_like_litert(quant):
    data = streaming_mean(quant=quant)
    theirs, ours = LiteRT(data), Ours(data)
    outputs = []
    for k, x in enumerate(_chunks(50, quant)):
        a, e = ours(x), theirs(x)
        assert _close(a, e), (k, a, e)
        outputs.append(e)
    assert len({o.tobytes() for o in outputs}) > 40       # the state matters: outputs change chunk by chunk


@pytest.mark.parametrize("quant", [None, INT8], ids=["float", "int8"])
def test_reset_variables_starts_over(quant):
    data = streaming_mean(quant=quant)
    ours, chunks = Ours(data), _chunks(4, quant)
    for x in chunks[:3]:
        ours(x)
    assert ours.session.ResetVariables() == RET_OK
    fresh = LiteRT(data)
    for x in chunks:
        assert _close(ours(x), fresh(x))


def test_int8_streaming_convolution_matches_litert_step_by_step():
    """An int8 CONV_2D over the joined window: every output within one quantum of LiteRT's, 50 chunks."""
    data = streaming_conv_int8()
    theirs, ours = LiteRT(data), Ours(data)
    rng, differences, outputs = np.random.default_rng(0), [], set()
    for k in range(50):
        x = rng.integers(-128, 128, (1, 1, 1, 4)).astype(np.int8)
        a, e = ours(x), theirs(x)
        assert a.dtype == e.dtype == np.int8 and a.shape == e.shape
        differences.append(int(np.abs(a.astype(np.int16) - e).max()))
        outputs.add(e.tobytes())
    assert max(differences) <= 1 and len(outputs) > 40, differences


def test_state_survives_a_resize():
    data = streaming_mean()
    ours, theirs = Ours(data), LiteRT(data)
    chunks = _chunks(3, None)
    ours(chunks[0]), theirs(chunks[0])
    ours.session.Resize(ours.session.GetInputs(), [[1, 1, 2]])
    for x in chunks[1:]:
        assert _close(ours(x), theirs(x))


def test_old_value_read_after_an_assignment_is_refused():
    """y = READ(v); ASSIGN(v, x); out = y + 1: `out` needs v's old value after v changed."""
    m = WildModel()
    x, y, out = m.tensor((2,), name="x"), m.tensor((2,), name="y"), m.tensor((2,), name="out")

    def init(g: WildModel) -> tuple[list[int], list[int]]:
        handle = g.typed([], "RESOURCE", "h0")
        g.op("VAR_HANDLE", [], [handle], "VarHandleOptions", SharedName="v")
        g.op("ASSIGN_VARIABLE", [handle, g.const(np.zeros(2, np.float32))], [])
        return [], []
    m.op("CALL_ONCE", [], [], "CallOnceOptions", InitSubgraphIndex=m.subgraph(init))
    handle = m.typed([], "RESOURCE", "h")
    m.op("VAR_HANDLE", [], [handle], "VarHandleOptions", SharedName="v")
    m.op("READ_VARIABLE", [handle], [y])
    m.op("ASSIGN_VARIABLE", [handle, x], [])
    m.op("ADD", [y, m.const(np.ones(2, np.float32))], [out], "AddOptions")
    with pytest.raises(NotSupportedError, match=r"'ADD' at node 'out'.*reads variable 'v' as it was before an "
                                                r"ASSIGN_VARIABLE"):
        convert_tflite(m.build([x], [out]))


def test_variable_read_before_any_assignment_is_refused():
    with pytest.raises(NotSupportedError, match=r"'READ_VARIABLE' at node 'stream/read'.*variable 'state' is read "
                                                r"before anything assigns it"):
        convert_tflite(streaming_mean(initialised=False))
