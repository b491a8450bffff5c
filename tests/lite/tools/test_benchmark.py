"""`benchmark_lite` (lite.tools.benchmark): timing line, accuracy mode against onnxruntime outputs, time profiling
and Resize through `--inputShapes`."""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import numpy as np
import onnx
import pytest

import lite
import models
from converter import convert_file
from lite.tools.benchmark import main, mean_bias
from tests.util import run_ort

TIMING = re.compile(r"^Model = lenet5\.ms, NumThreads = (\d+), MinRunTime = (\d+\.\d{6}) ms, "
                    r"MaxRuntime = (\d+\.\d{6}) ms, AvgRunTime = (\d+\.\d{6}) ms$", re.M)


@pytest.fixture(scope="module")
def lenet(tmp_path_factory: pytest.TempPathFactory) -> tuple[onnx.ModelProto, Path]:
    """LeNet-5 with a free batch dim, as ONNX and as `lenet5.ms` (input compiled at batch 1)."""
    model = models.build("lenet5", num_classes=10, input_size=32, batch=None)
    directory = tmp_path_factory.mktemp("benchmark")
    onnx.save(model, directory / "lenet5.onnx")
    return model, Path(convert_file(directory / "lenet5.onnx", directory / "lenet5"))


def input_file(path: Path, batch: int = 1, seed: int = 0) -> tuple[Path, np.ndarray]:
    x = np.random.default_rng(seed).standard_normal((batch, 1, 32, 32)).astype(np.float32)
    x.astype("<f4").tofile(path)
    return path, x


def write_calibration(path: Path, outputs: dict[str, np.ndarray]) -> Path:
    """MindSpore's calibration text: `<name> <rank> <dims...>` then the values, per output."""
    with open(path, "w") as f:
        for name, array in outputs.items():
            f.write(f"{name} {array.ndim} {' '.join(map(str, array.shape))}\n")
            f.write(" ".join(repr(float(v)) for v in array.ravel()) + "\n")
    return path


def accuracy_args(model: Path, data: Path, expected: Path, *extra: str) -> list[str]:
    return [f"--modelFile={model}", f"--inDataFile={data}", f"--benchmarkDataFile={expected}", *extra]


@pytest.fixture
def ort_case(lenet, tmp_path) -> tuple[Path, np.ndarray]:
    """An input file and onnxruntime's logits for it."""
    data, x = input_file(tmp_path / "input.bin")
    return data, run_ort(lenet[0], {"input": x})["logits"]


def test_mean_bias_averages_only_elements_beyond_tolerance():
    """MindSpore's CompareData: relative error of the wrong elements only (here 0.1 on one of four)."""
    expected = np.array([1.0, 1.0, 1.0, 1.0])
    assert mean_bias(np.array([1.1, 1.0, 1.0, 1.0]), expected) == pytest.approx(0.1)


def test_mean_bias_uses_absolute_error_at_zero_and_ignores_tiny_ones():
    expected = np.array([1.0, 2.0, 0.0, 0.0])
    actual = np.array([1.0, 2.2, 0.5, 1e-6])      # wrong: 0.2 / 2 (relative) and 0.5 (absolute, at zero)
    assert mean_bias(actual, expected) == pytest.approx((0.1 + 0.5) / 2)


def test_timing_line_format(lenet, capsys):
    assert main([f"--modelFile={lenet[1]}", "--loopCount=4", "--warmUpLoopCount=1", "--numThreads=1"]) == 0
    match = TIMING.search(capsys.readouterr().out)
    assert match and match.group(1) == "1"
    low, high, mean = map(float, match.group(2, 3, 4))
    assert low <= mean <= high


def test_accuracy_passes_against_onnxruntime(lenet, ort_case, tmp_path, capsys):
    data, expected = ort_case
    calibration = write_calibration(tmp_path / "expected.out", {"logits": expected})
    assert main(accuracy_args(lenet[1], data, calibration)) == 0
    out = capsys.readouterr().out
    assert re.search(r"^Mean bias of node/tensor logits : [\d.e+-]+%$", out, re.M)
    assert re.search(r"^Mean bias of all nodes/tensors: [\d.e+-]+%$", out, re.M)


def test_accuracy_fails_on_perturbed_expectation(lenet, ort_case, tmp_path, capsys):
    data, expected = ort_case
    calibration = write_calibration(tmp_path / "expected.out", {"logits": expected * 1.1})
    assert main(accuracy_args(lenet[1], data, calibration)) != 0
    captured = capsys.readouterr()
    bias = float(re.search(r"Mean bias of all nodes/tensors: ([\d.e+-]+)%", captured.out).group(1))
    assert bias == pytest.approx(100 * 0.1 / 1.1, rel=1e-3)     # |1.1e - e| / |1.1e| for every element
    assert "too big" in captured.err


def test_perturbation_within_threshold_passes(lenet, ort_case, tmp_path):
    data, expected = ort_case
    calibration = write_calibration(tmp_path / "expected.out", {"logits": expected * 1.001})
    assert main(accuracy_args(lenet[1], data, calibration)) == 0


def test_threshold_flag_is_in_percent(lenet, ort_case, tmp_path):
    data, expected = ort_case
    calibration = write_calibration(tmp_path / "expected.out", {"logits": expected * 1.1})
    assert main(accuracy_args(lenet[1], data, calibration, "--accuracyThreshold=10")) == 0


def test_nan_output_fails(lenet, ort_case, tmp_path, capsys):
    _, expected = ort_case
    data = tmp_path / "nan.bin"
    np.full((1, 1, 32, 32), np.nan, "<f4").tofile(data)
    calibration = write_calibration(tmp_path / "expected.out", {"logits": expected})
    assert main(accuracy_args(lenet[1], data, calibration)) != 0
    assert "NaN or Inf" in capsys.readouterr().err


def test_nan_in_expected_data_fails(lenet, ort_case, tmp_path, capsys):
    data, expected = ort_case
    expected = expected.copy()
    expected[0, 3] = np.nan
    calibration = write_calibration(tmp_path / "expected.out", {"logits": expected})
    assert main(accuracy_args(lenet[1], data, calibration)) != 0
    assert "NaN or Inf" in capsys.readouterr().err


@pytest.mark.parametrize("suffix", [".npy", ".npz"])
def test_numpy_expected_data(suffix, lenet, ort_case, tmp_path):
    data, expected = ort_case
    path = tmp_path / f"expected{suffix}"
    if suffix == ".npy":
        np.save(path, expected)
    else:
        np.savez(path, logits=expected)
    assert main(accuracy_args(lenet[1], data, path)) == 0


def test_expected_output_name_not_in_model_fails(lenet, ort_case, tmp_path, capsys):
    data, expected = ort_case
    calibration = write_calibration(tmp_path / "expected.out", {"probabilities": expected})
    assert main(accuracy_args(lenet[1], data, calibration)) != 0
    assert "probabilities" in capsys.readouterr().err


def test_input_file_of_wrong_size_fails(lenet, ort_case, tmp_path, capsys):
    _, expected = ort_case
    data, _ = input_file(tmp_path / "batch2.bin", batch=2)
    calibration = write_calibration(tmp_path / "expected.out", {"logits": expected})
    assert main(accuracy_args(lenet[1], data, calibration)) == lite.RET_PARAM_INVALID
    assert "8192 bytes" in capsys.readouterr().err


def test_input_shapes_resizes_before_loading_inputs(lenet, tmp_path):
    data, x = input_file(tmp_path / "batch4.bin", batch=4, seed=1)
    calibration = write_calibration(tmp_path / "expected.out", run_ort(lenet[0], {"input": x}))
    assert main(accuracy_args(lenet[1], data, calibration, "--inputShapes=4,1,32,32")) == 0


PROFILED_LOOPS = 3


@pytest.fixture(scope="module")
def profile_output(lenet) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([f"--modelFile={lenet[1]}", f"--loopCount={PROFILED_LOOPS}", "--warmUpLoopCount=0",
                     "--timeProfiling"]) == 0
    return out.getvalue()


def table_rows(out: str, title: str) -> list[list[str]]:
    """The cells of each row of the profiling table whose header starts with `title`."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == [title]) + 1
    rows = []
    for line in lines[start:]:
        if line.startswith(("-", "Model =")):
            break
        rows.append(line.split())
    return rows


def test_time_profiling_times_every_node_each_loop(lenet, profile_output):
    rows = table_rows(profile_output, "opName")
    assert sorted(row[0] for row in rows) == sorted(n.name for n in lite.Model.Load(lenet[1]).nodes)
    assert all(row[3] == str(PROFILED_LOOPS) for row in rows)


def test_time_profiling_op_type_table_is_sorted_by_total_time(lenet, profile_output):
    rows = table_rows(profile_output, "opType")
    assert sorted(row[0] for row in rows) == sorted({n.op for n in lite.Model.Load(lenet[1]).nodes})
    totals = [float(row[4]) for row in rows]
    assert totals == sorted(totals, reverse=True)
    assert sum(float(row[2].rstrip("%")) for row in rows) == pytest.approx(100, abs=0.1)


def test_time_profiling_still_prints_timing_line(profile_output):
    assert TIMING.search(profile_output)


def test_random_inputs_are_seeded_uniform(lenet, tmp_path):
    """Without --inDataFile the input is uniform [0.1, 1) from numpy's default_rng(0): onnxruntime's outputs for
    that input pass as the expectation."""
    x = np.random.default_rng(0).uniform(0.1, 1.0, (1, 1, 32, 32)).astype(np.float32)
    calibration = write_calibration(tmp_path / "expected.out", run_ort(lenet[0], {"input": x}))
    assert main([f"--modelFile={lenet[1]}", f"--benchmarkDataFile={calibration}"]) == 0


def test_unknown_flag_is_a_usage_error(lenet, capsys):
    assert main([f"--modelFile={lenet[1]}", "--calibDataPath=x"]) == lite.RET_INPUT_PARAM_INVALID
    assert "--benchmarkDataFile" in capsys.readouterr().err
