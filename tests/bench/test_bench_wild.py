"""A smoke run of the wild bench on its smallest model (Silero VAD, when its package is installed): both engines
in their own processes, and the report's row says ours matches onnxruntime."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.mark.skipif(importlib.util.find_spec("silero_vad") is None,
                    reason="silero-vad is not installed (pip install --no-deps silero-vad==6.2.3)")
def test_the_wild_bench_measures_silero_vad(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import bench_wild
    report = tmp_path / "wild.md"
    assert bench_wild.main(["--models", "silero_vad", "--rounds", "1", "--runs", "2", "--min-seconds", "0",
                            "--batch", "0", "--output", str(report)]) == 0
    row = next(line for line in report.read_text().splitlines() if line.startswith("| silero_vad |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:3] == ["silero_vad", "onnx", "1"] and cells[4] == "onnxruntime"
    assert float(cells[3]) > 0 and float(cells[5]) > 0 and float(cells[7]) < 1e-4
    sys.modules.pop("bench_wild", None)
