"""examples/stream_audio.py: a stateful TFLite VAD streamed chunk by chunk, its state kept by the model. Its
outputs follow LiteRT's interpreter chunk by chunk and the detector's own math written in numpy; the run finds the
two voiced stretches and resumes from its checkpoint exactly."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tflite", reason="the example writes its model with the 'tflite' package's builders")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from stream_audio import (CHUNK, CONTEXT, RATE, SILENCE, band_weights, litert_steps, main, open_session,  # noqa: E402
                          recording, step, streaming_vad)
from tests.tflite_models import litert_interpreter  # noqa: E402


def _numpy_vad(chunks: np.ndarray, threshold: float = -3.6, slope: float = 3.0) -> np.ndarray:
    """The detector's math in float64: log band powers, mean over this chunk and the CONTEXT - 1 before (silence
    before the first), logistic of slope * (mean - threshold)."""
    n, freqs = np.arange(CHUNK), np.linspace(250, 4000, 16)
    phase = 2 * np.pi * freqs[:, None] * n[None, :] / RATE
    window = np.hanning(CHUNK)
    power = (chunks @ (np.cos(phase) * window).T) ** 2 + (chunks @ (np.sin(phase) * window).T) ** 2
    logs = np.concatenate([np.full((CONTEXT - 1, 16), np.log(SILENCE)), np.log(power + SILENCE)])
    means = np.array([logs[k:k + CONTEXT].mean() for k in range(len(chunks))])
    return 1 / (1 + np.exp(-slope * (means - threshold)))


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("vad")
    assert main(["--seconds", "2", "--keep", str(folder)]) == 0
    return folder


def _chunks(seconds: float) -> np.ndarray:
    audio, _ = recording(seconds)
    return audio[: audio.size // CHUNK * CHUNK].reshape(-1, CHUNK)


def test_band_weights_are_a_windowed_dft():
    dft, pairs = band_weights()
    assert dft.shape == (32, CHUNK) and pairs.shape == (16, 32)
    tone = np.sin(2 * np.pi * 1000 * np.arange(CHUNK) / RATE)
    power = pairs @ (dft @ tone) ** 2
    assert np.argmax(power) == np.argmin(np.abs(np.linspace(250, 4000, 16) - 1000))


def test_streamed_outputs_follow_the_detector_math_and_litert(files):
    litert_interpreter()
    chunks = _chunks(2)
    session = open_session(files / "streaming_vad.ms")
    ours = np.array([step(session, c) for c in chunks])
    np.testing.assert_allclose(ours, _numpy_vad(chunks.astype(np.float64)), atol=2e-4)
    assert np.abs(ours - litert_steps(files / "streaming_vad.tflite", chunks)).max() <= 1e-5


def test_the_run_finds_both_voiced_stretches_and_resumes_exactly(tmp_path, capsys):
    assert main(["--seconds", "2", "--keep", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "\r" not in out
    starts = [float(t) for t in re.findall(r"([\d.]+) s  speech starts", out)]
    ends = [float(t) for t in re.findall(r"([\d.]+) s  speech ends", out)]
    voiced = recording(2)[1]
    assert len(starts) == len(ends) == 2, out
    for (a, b), start, end in zip(voiced, starts, ends):
        assert a <= start <= a + 0.2 and b <= end <= b + 0.2, out
    assert "outputs equal the uninterrupted run" in out
    assert (tmp_path / "checkpoint.ms").is_file()


def test_the_model_keeps_its_state_in_a_resource_variable():
    from converter.frontends import frontend
    graph = frontend("TFLITE").load(streaming_vad()).to_ir()
    assert [n.op for n in graph.nodes if n.op == "Assign"] == ["Assign"]
    assert [name for name, v in graph.values.items() if v.variable] == ["vad/bands"]
