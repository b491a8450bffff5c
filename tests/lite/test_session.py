"""The MindSpore Lite session API, under its own names."""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

import lite
from converter import convert
from tests.util import run_ort, small_cnn


@pytest.fixture(scope="module")
def buf() -> bytes:
    return convert(small_cnn())


@pytest.fixture
def session(buf: bytes) -> lite.LiteSession:
    return lite.LiteSession.CreateSession(buf, len(buf), lite.Context())


def _feed(session: lite.LiteSession, seed: int = 0, batch: int = 1) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((batch, 3, 8, 8)).astype(np.float32)
    session.GetInputsByTensorName("input").set_data(x)
    return x


def test_create_then_compile_matches_onnxruntime(buf: bytes) -> None:
    session = lite.LiteSession.CreateSession(lite.Context(thread_num=1))
    model = lite.Model.Import(buf, len(buf))
    assert session.CompileGraph(model) == lite.RET_OK
    x = _feed(session)
    assert session.RunGraph() == lite.RET_OK
    expected = run_ort(small_cnn(), {"input": x})
    for name in ("logits", "probs"):
        np.testing.assert_allclose(session.GetOutputByTensorName(name).numpy(), expected[name], rtol=1e-5,
                                   atol=1e-6)


def test_inputs_and_outputs_by_name(session: lite.LiteSession) -> None:
    inputs = session.GetInputs()
    assert [t.tensor_name() for t in inputs] == ["input"]
    assert session.GetInputsByTensorName("input") is inputs[0]
    assert session.GetInputsByTensorName("no_such_input") is None
    assert session.GetOutputTensorNames() == ["logits", "probs"]
    assert set(session.GetOutputs()) == {"logits", "probs"}
    assert session.GetOutputByTensorName("nope") is None


def test_ms_tensor_accessors(session: lite.LiteSession) -> None:
    t = session.GetInputs()[0]
    assert t.data_type() == lite.DataType.FLOAT32 == 43
    assert t.shape() == [1, 3, 8, 8]
    assert t.DimensionSize(1) == 3 and t.DimensionSize(-1) == 8
    assert t.ElementsNum() == 192 and t.Size() == 192 * 4
    data = t.MutableData()
    data[...] = 2.0
    assert np.all(t.numpy() == 2.0)
    assert t[...].shape == (1, 3, 8, 8) and np.shares_memory(t[...], data)
    assert t[0, ..., 0].shape == (3, 8)
    copy = t.numpy()
    copy[...] = 0
    assert np.all(t.MutableData() == 2.0)


def test_callbacks_see_every_node_and_can_stop(session: lite.LiteSession) -> None:
    _feed(session)
    seen: list[tuple[str, str]] = []

    def before(inputs, outputs, param: lite.CallBackParam) -> bool:
        assert all(isinstance(t, lite.MSTensor) for t in inputs + outputs)
        seen.append((param.node_name, param.node_type))
        return True

    assert session.RunGraph(before, None) == lite.RET_OK
    assert ("softmax", "Softmax") in seen and any(t == "Conv2D" for _, t in seen)
    calls = []

    def stop_after_first(inputs, outputs, param) -> bool:
        calls.append(param.node_name)
        return False

    assert session.RunGraph(None, stop_after_first) == lite.RET_SUCCESS_EXIT
    assert len(calls) == 1


def test_after_callback_sees_outputs_computed(session: lite.LiteSession) -> None:
    _feed(session)
    means = {}

    def after(inputs, outputs, param) -> bool:
        means[param.node_name] = float(np.abs(outputs[0].MutableData()).mean())
        return True

    session.RunGraph(after=after)
    assert means["softmax"] == pytest.approx(0.25, rel=1e-5)   # 4 probabilities summing to 1


def test_outputs_by_node_name_is_deprecated(session: lite.LiteSession) -> None:
    _feed(session)
    session.RunGraph()
    with pytest.deprecated_call():
        outs = session.GetOutputsByNodeName("softmax")
    assert [t.tensor_name() for t in outs] == ["probs"]


def test_resize_batch_matches_per_sample_runs(session: lite.LiteSession) -> None:
    x = np.random.default_rng(3).standard_normal((3, 3, 8, 8)).astype(np.float32)
    assert session.Resize(session.GetInputs(), [[3, 3, 8, 8]]) == lite.RET_OK
    assert session.GetInputs()[0].shape() == [3, 3, 8, 8]
    session.GetInputs()[0].set_data(x)
    session.RunGraph()
    batched = session.GetOutputByTensorName("logits").numpy()
    assert batched.shape == (3, 4)
    expected = run_ort(small_cnn(batch="N"), {"input": x})["logits"]
    np.testing.assert_allclose(batched, expected, rtol=1e-5, atol=1e-6)


def test_context_devices_fall_back_to_cpu(buf: bytes, caplog) -> None:
    ctx = lite.Context(thread_num=1, device_list=[
        lite.DeviceContext(lite.DeviceType.DT_GPU, lite.GpuDeviceInfo()),
        lite.DeviceContext(lite.DeviceType.DT_CPU, lite.CpuDeviceInfo(enable_float16=False,
                                                                     cpu_bind_mode=lite.CpuBindMode.MID_CPU))])
    with caplog.at_level(logging.WARNING, logger="lite"):
        session = lite.LiteSession.CreateSession(buf, len(buf), ctx)
    assert session.device.device_type == lite.DeviceType.DT_CPU
    assert sum("falling back to CPU" in r.message for r in caplog.records) == 1
    session.BindThread(True)
    _feed(session)
    assert session.RunGraph() == lite.RET_OK


def test_thread_num_bounds_blas_threads(session: lite.LiteSession) -> None:
    from threadpoolctl import threadpool_info
    session.context.thread_num = 1
    seen = []

    def probe(inputs, outputs, param) -> bool:
        seen.extend(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")
        return True

    _feed(session)
    session.RunGraph(before=probe)
    assert seen and set(seen) == {1}



def test_a_run_gives_the_users_thread_settings_back(session: lite.LiteSession) -> None:
    """thread_num holds during the run only: the user's own BLAS count (and numba's, once the compiled
    kernels loaded it) is what it was before the run, after a plain run and after one a callback stopped."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from lite.kernels import compiled

    def blas() -> set[int]:
        return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}

    numba = compiled.loaded()
    session.context.thread_num = 1
    _feed(session)
    with threadpool_limits(limits=3, user_api="blas"):
        user = blas()
        if numba is not None:
            numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        seen: list[tuple[set[int], int]] = []

        def probe(inputs, outputs, param) -> bool:
            seen.append((blas(), numba.get_num_threads() if numba is not None else 1))
            return True

        assert session.RunGraph(before=probe) == lite.RET_OK
        assert seen and all(s == ({1}, 1) for s in seen)
        assert blas() == user
        assert session.RunGraph(after=lambda i, o, p: False) == lite.RET_SUCCESS_EXIT
        assert session.RunGraph() == lite.RET_OK
        assert blas() == user
        if numba is not None:
            assert numba.get_num_threads() == numba.config.NUMBA_NUM_THREADS

def test_version_and_error_info() -> None:
    assert lite.Version().startswith("MindSpore Lite")
    assert lite.GetErrorInfo(lite.RET_INPUT_TENSOR_ERROR) == "Failed to check input tensor."
    assert lite.GetErrorInfo(12345) == "Unknown error code."
    assert lite.RET_OK == 0 and lite.RET_GRAPH_FILE_ERR == -200 and lite.RET_INFER_ERR == -500


def test_model_load_maps_weights_without_copy(tmp_path, buf: bytes) -> None:
    path = tmp_path / "m.ms"
    path.write_bytes(buf)
    model = lite.Model.Load(path)
    weights = [t.data for t in model.tensors if t.is_const and t.data.size > 16]
    assert weights and all(not w.flags.owndata and not w.flags.writeable for w in weights)
    assert all(w.ctypes.data % 64 == 0 for w in weights)
    session = lite.LiteSession.CreateSession(lite.Context())
    session.CompileGraph(model)
    _feed(session)
    assert session.RunGraph() == lite.RET_OK


def test_thread_num_also_bounds_a_blas_loaded_after_the_first_run() -> None:
    import subprocess
    import sys
    code = ("import numpy as np, lite, models\n"
            "from converter import convert\n"
            "from threadpoolctl import threadpool_info\n"
            "s = lite.LiteSession.CreateSession(convert(models.build('lenet5')), None, lite.Context(thread_num=1))\n"
            "s.GetInputs()[0].set_data(np.zeros((1, 1, 32, 32), np.float32)); s.RunGraph()\n"
            "import scipy.linalg  # brings its own OpenBLAS\n"
            "seen = []\n"
            "s.RunGraph(before=lambda i, o, p: seen.extend(\n"
            "    t['num_threads'] for t in threadpool_info() if t['user_api'] == 'blas') or True)\n"
            "print(sorted(set(seen)), len({t['filepath'] for t in threadpool_info() if t['user_api'] == 'blas'}))\n")
    pytest.importorskip("scipy", reason="scipy (brought by scikit-image in the dev extra) is the second BLAS here")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2]).stdout.split()
    assert out == ["[1]", "2"]
