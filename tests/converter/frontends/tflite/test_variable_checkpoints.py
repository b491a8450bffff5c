"""A streaming model's state in checkpoints: run N chunks, save the session, load the file in a fresh session and
continue — the outputs equal an uninterrupted run's, and both follow LiteRT's interpreter step by step;
`ResetVariables` in the loaded session still starts over from the model's initial state."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tflite", reason="the TFLite frontend reads files with the 'tflite' package")
import lite  # noqa: E402
from converter import convert_for_training, convert_tflite  # noqa: E402
from converter.frontends import frontend  # noqa: E402
from converter.train import TrainParams  # noqa: E402
from lite.variables import STATE_SUFFIX  # noqa: E402
from tests.converter.frontends.tflite.test_resource_variables import INT8, LiteRT, _chunks, _close  # noqa: E402
from tests.converter.frontends.tflite.wild_models import WildModel, streaming_conv_int8, streaming_mean  # noqa: E402


def _session(buf: bytes) -> lite.LiteSession:
    return lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=1))


def _step(session: lite.LiteSession, x: np.ndarray) -> np.ndarray:
    session.GetInputs()[0].set_data(x)
    session.RunGraph()
    return next(iter(session.GetOutputs().values())).numpy().copy()


def _int8_conv_chunks(n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    return [rng.integers(-128, 128, (1, 1, 1, 4)).astype(np.int8) for _ in range(n)]


@pytest.mark.parametrize("data,chunks", [(streaming_mean(), _chunks(12, None)),
                                         (streaming_mean(quant=INT8), _chunks(12, INT8)),
                                         (streaming_conv_int8(), _int8_conv_chunks(12))],
                         ids=["float", "int8", "int8-conv"])
def test_save_load_continue_equals_an_uninterrupted_run_and_litert(tmp_path, data, chunks):
    buf = convert_tflite(data)
    uninterrupted, first, theirs = _session(buf), _session(buf), LiteRT(data)
    expected = [_step(uninterrupted, x) for x in chunks]
    for k, x in enumerate(chunks[:5]):
        assert np.array_equal(_step(first, x), expected[k])
    path = tmp_path / "stream.ms"
    first.SaveToFile(path)
    resumed = lite.LiteSession.CreateSession(lite.Context(thread_num=1))
    resumed.CompileGraph(lite.Model.Load(path))
    continued = [_step(resumed, x) for x in chunks[5:]]
    for k, (x, e) in enumerate(zip(chunks, expected)):
        assert _close(e, theirs(x)), k
    for a, e in zip(continued, expected[5:]):
        assert np.array_equal(a, e)


def _streamed(chunks: int, steps: int) -> tuple[bytes, list[np.ndarray], lite.LiteSession]:
    """The float streaming-mean model, `chunks` chunks of input, and a session that has run the first `steps`."""
    data = streaming_mean()
    inputs = _chunks(chunks, None)
    session = _session(convert_tflite(data))
    for x in inputs[:steps]:
        _step(session, x)
    return data, inputs, session


def test_the_saved_state_is_what_continuing_needs():
    """Without the saved state the loaded session would start over: the 6th output would differ."""
    data, chunks, session = _streamed(6, 5)
    saved = session.ExportToBuf()
    names = [t.name for t in lite.Model.Import(saved).tensors]
    assert sum(n.endswith(STATE_SUFFIX) for n in names) == 1
    restarted = _step(_session(convert_tflite(data)), chunks[5])
    assert not np.array_equal(_step(_session(saved), chunks[5]), restarted)


def test_reset_after_load_starts_from_the_initial_state():
    data, chunks, session = _streamed(4, 3)
    loaded = _session(session.ExportToBuf())
    loaded.ResetVariables()
    fresh = LiteRT(data)
    for x in chunks:
        assert _close(_step(loaded, x), fresh(x))


def test_saving_twice_replaces_the_saved_state():
    data = streaming_mean()
    chunks = _chunks(8, None)
    session, reference = _session(convert_tflite(data)), LiteRT(data)
    for x in chunks[:3]:
        reference(x)
        _step(session, x)
    again = _session(session.ExportToBuf())
    for x in chunks[3:6]:
        reference(x)
        _step(again, x)
    third = _session(again.ExportToBuf())
    assert len(third.model.tensors) == len(again.model.tensors)
    for x in chunks[6:]:
        assert _close(_step(third, x), reference(x))


def _accumulating_classifier() -> bytes:
    """state += x; logits = FC(state): a stateful model with a weight to train."""
    m = WildModel()
    x = m.tensor((1, 2), name="x")

    def init(g: WildModel) -> tuple[list[int], list[int]]:
        handle = g.typed([], "RESOURCE", "init/h")
        g.op("VAR_HANDLE", [], [handle], "VarHandleOptions", SharedName="total")
        g.op("ASSIGN_VARIABLE", [handle, g.const(np.zeros((1, 2), np.float32))], [])
        return [], []
    m.op("CALL_ONCE", [], [], "CallOnceOptions", InitSubgraphIndex=m.subgraph(init))
    handle = m.typed([], "RESOURCE", "h")
    m.op("VAR_HANDLE", [], [handle], "VarHandleOptions", SharedName="total")
    old, new, y = m.tensor((1, 2), name="old"), m.tensor((1, 2), name="new"), m.tensor((1, 3), name="logits")
    m.op("READ_VARIABLE", [handle], [old])
    m.op("ADD", [old, x], [new], "AddOptions")
    m.op("ASSIGN_VARIABLE", [handle, new], [])
    m.op("FULLY_CONNECTED", [new, m.const(np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2)), -1], [y],
         "FullyConnectedOptions")
    return m.build([x], [y])


def test_a_training_checkpoint_keeps_the_state():
    """TrainSession: eval steps follow LiteRT; after a training step the checkpoint resumes both the weights and
    the state exactly where the uninterrupted session is."""
    data = _accumulating_classifier()
    buf = convert_for_training(frontend("TFLITE").load(data), TrainParams())
    session, theirs = lite.TrainSession.CreateSession(buf, len(buf), lite.Context(thread_num=1)), LiteRT(data)
    chunks = _chunks(6, None)
    for x in chunks[:3]:
        assert _close(_step(session, x.reshape(1, 2)), theirs(x.reshape(1, 2)))
    session.Train()
    data_in, labels = session.GetInputs()
    data_in.set_data(chunks[3].reshape(1, 2))
    labels.set_data(np.array([1], labels.numpy().dtype))
    session.RunGraph()
    session.Eval()
    saved = session.ExportToBuf()
    resumed = lite.TrainSession.CreateSession(saved, len(saved), lite.Context(thread_num=1))
    for x in chunks[4:]:
        assert np.array_equal(_step(resumed, x.reshape(1, 2)), _step(session, x.reshape(1, 2)))


def test_a_checkpoint_keeps_control_flow_bodies():
    """A model with WHILE bodies written back by `ExportToBuf` runs as before."""
    from tests.converter.frontends.tflite.test_control_flow import counter
    buf = convert_tflite(counter())
    original = _session(buf)
    copy = _session(original.ExportToBuf())
    assert len(copy.model.bodies) == len(original.model.bodies) > 0
    for session in (original, copy):
        for tensor, x in zip(session.GetInputs(), (np.array(3, np.int32), np.ones(2, np.float32))):
            tensor.set_data(x)
        session.RunGraph()
    for name, out in original.GetOutputs().items():
        assert np.array_equal(out.numpy(), copy.GetOutputs()[name].numpy())
