"""`converter_lite` (converter.cli): MindSpore's flags, result lines, status codes and the written `.ms` file."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import lite
import models
from converter.cli import main
from converter.frontends import FRONTENDS
from converter.train.config import LOSSES, OPTIMIZERS
from tests.util import REPO, run_ort

SUCCESS = "CONVERT RESULT SUCCESS:0"


@pytest.fixture(scope="module")
def lenet_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "lenet5.onnx"
    onnx.save(models.build("lenet5", num_classes=10, input_size=32, batch=None), path)
    return path


def convert_args(model: Path, output: Path, *extra: str) -> list[str]:
    return ["--fmk=ONNX", f"--modelFile={model}", f"--outputFile={output}", *extra]


def unsupported_op_model(path: Path) -> Path:
    """A one-node opset-20 model using ImageDecoder, an op the converter does not import."""
    graph = helper.make_graph(
        [helper.make_node("ImageDecoder", ["data"], ["image"], name="decoder")], "g",
        [helper.make_tensor_value_info("data", TensorProto.UINT8, [100])],
        [helper.make_tensor_value_info("image", TensorProto.UINT8, None)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]), path)
    return path


def test_success_prints_result_line_and_appends_ms(lenet_file, tmp_path, capsys):
    assert main(convert_args(lenet_file, tmp_path / "out")) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == SUCCESS
    assert (tmp_path / "out.ms").is_file()


def test_output_name_ending_in_ms_is_kept(lenet_file, tmp_path):
    assert main(convert_args(lenet_file, tmp_path / "model.ms")) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.ms"]


def test_written_model_loads_and_matches_onnxruntime(lenet_file, tmp_path):
    main(convert_args(lenet_file, tmp_path / "out"))
    session = lite.LiteSession.CreateSession(lite.Context())
    session.CompileGraph(lite.Model.Load(tmp_path / "out.ms"))
    x = np.random.default_rng(0).standard_normal((1, 1, 32, 32)).astype(np.float32)
    session.GetInputs()[0].set_data(x)
    session.RunGraph()
    expected = run_ort(onnx.load(lenet_file), {"input": x})["logits"]
    np.testing.assert_allclose(session.GetOutputByTensorName("logits").numpy(), expected, rtol=1e-4, atol=1e-5)


def test_input_shape_fixes_graph_input(lenet_file, tmp_path):
    assert main(convert_args(lenet_file, tmp_path / "out", "--inputShape=input:3,1,32,32")) == 0
    session = lite.LiteSession.CreateSession(lite.Context())
    session.CompileGraph(lite.Model.Load(tmp_path / "out.ms"))
    assert session.GetInputs()[0].shape() == [3, 1, 32, 32]


def test_malformed_input_shape_is_a_usage_error(lenet_file, tmp_path, capsys):
    assert main(convert_args(lenet_file, tmp_path / "out", "--inputShape=input:1,x")) == lite.RET_INPUT_PARAM_INVALID
    assert "CONVERT RESULT FAILED:-600" in capsys.readouterr().out


def test_input_shape_of_unknown_input_fails(lenet_file, tmp_path, capsys):
    assert main(convert_args(lenet_file, tmp_path / "out", "--inputShape=image:1,1,32,32")) < 0
    captured = capsys.readouterr()
    assert "CONVERT RESULT FAILED" in captured.out and "image" in captured.err


def test_missing_model_file(tmp_path, capsys):
    missing = tmp_path / "absent.onnx"
    assert main(convert_args(missing, tmp_path / "out")) == lite.RET_GRAPH_FILE_ERR
    captured = capsys.readouterr()
    assert "CONVERT RESULT FAILED:-200" in captured.out
    assert str(missing) in captured.err and "Traceback" not in captured.err
    assert not (tmp_path / "out.ms").exists()


def test_unsupported_op_names_op_node_and_opset(tmp_path, capsys):
    model = unsupported_op_model(tmp_path / "grid.onnx")
    assert main(convert_args(model, tmp_path / "out")) == lite.RET_NOT_SUPPORT
    captured = capsys.readouterr()
    assert "CONVERT RESULT FAILED:-7" in captured.out
    assert "ImageDecoder" in captured.err and "decoder" in captured.err and "opset 20" in captured.err


def test_unknown_flag_lists_valid_flags(lenet_file, tmp_path, capsys):
    assert main(convert_args(lenet_file, tmp_path / "out", "--modelPath=x")) == lite.RET_INPUT_PARAM_INVALID
    captured = capsys.readouterr()
    assert "CONVERT RESULT FAILED:-600" in captured.out
    assert "--modelPath" in captured.err and "--modelFile" in captured.err and "--inputShape" in captured.err


def test_flag_without_value_is_a_usage_error(tmp_path, capsys):
    assert main(["--fmk=ONNX", "--modelFile", f"--outputFile={tmp_path / 'out'}"]) == lite.RET_INPUT_PARAM_INVALID


def test_missing_required_flag(lenet_file, capsys):
    assert main(["--fmk=ONNX", f"--modelFile={lenet_file}"]) == lite.RET_INPUT_PARAM_INVALID
    assert "--outputFile" in capsys.readouterr().err


def test_unsupported_fmk(lenet_file, tmp_path, capsys):
    args = ["--fmk=CAFFE", f"--modelFile={lenet_file}", f"--outputFile={tmp_path / 'out'}"]
    assert main(args) == lite.RET_NOT_SUPPORT
    captured = capsys.readouterr()
    assert "CONVERT RESULT FAILED:-7" in captured.out and "fmk must be ONNX|TFLITE|MINDIR" in captured.err


@pytest.mark.parametrize("flag", ["--trainModel=false", "--fp16=off", "--inputDataType=FLOAT32",
                                  "--outputDataType=FLOAT"])
def test_float_inference_settings_are_accepted(flag, lenet_file, tmp_path):
    assert main(convert_args(lenet_file, tmp_path / "out", flag)) == 0


def test_train_model_writes_a_training_model(lenet_file, tmp_path, capsys):
    args = convert_args(lenet_file, tmp_path / "train", "--trainModel=true", "--optimizer=adam",
                        "--learningRate=0.001")
    assert main(args) == 0
    model = lite.Model.Load(tmp_path / "train.ms")
    assert set(model.subgraphs) == {"eval", "gradients", "optimizer"}
    assert sum(n.op == "Adam" for n in model.nodes) == 10          # LeNet-5: 5 weights and 5 biases
    lr = next(t for t in model.tensors if t.name == "learning_rate")
    assert float(lr.data) == pytest.approx(0.001)


def test_train_flags_need_train_model(lenet_file, tmp_path, capsys):
    assert main(convert_args(lenet_file, tmp_path / "out", "--loss=mse")) == lite.RET_INPUT_PARAM_INVALID
    assert "--loss needs --trainModel=true" in capsys.readouterr().err


def test_bad_train_parameter_names_the_flag(lenet_file, tmp_path, capsys):
    args = convert_args(lenet_file, tmp_path / "out", "--trainModel=true", "--optimizer=rmsprop")
    assert main(args) == lite.RET_PARAM_INVALID
    err = capsys.readouterr().err
    assert "'optimizer'" in err and "rmsprop" in err


def test_train_config_file_section_and_flags_combine(lenet_file, tmp_path):
    cfg = tmp_path / "train.cfg"
    cfg.write_text("[train_param]\noptimizer = momentum\nlearning_rate = 0.5\n")
    assert main(convert_args(lenet_file, tmp_path / "train", "--trainModel=true", f"--configFile={cfg}",
                             "--learningRate=0.25")) == 0
    model = lite.Model.Load(tmp_path / "train.ms")
    assert any(n.op == "ApplyMomentum" for n in model.nodes)
    assert float(next(t for t in model.tensors if t.name == "learning_rate").data) == 0.25


def test_weight_quant_writes_int8_weights(lenet_file, tmp_path):
    assert main(convert_args(lenet_file, tmp_path / "wq", "--quantType=WeightQuant", "--bitNum=8",
                             "--quantWeightSize=0", "--quantWeightChannel=0")) == 0
    model = lite.Model.Load(tmp_path / "wq.ms")
    assert any(t.is_const and t.data.dtype == np.int8 and t.quant_params for t in model.tensors)
    assert (tmp_path / "wq.ms").stat().st_size < 0.4 * (lenet_file.stat().st_size)


def test_quant_flags_need_quant_type(lenet_file, tmp_path, capsys):
    assert main(convert_args(lenet_file, tmp_path / "out", "--bitNum=8")) == lite.RET_INPUT_PARAM_INVALID
    assert "--bitNum needs --quantType" in capsys.readouterr().err


def test_help_lists_flags(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(f"--{name}" in out for name in ("fmk", "modelFile", "outputFile", "inputShape"))


def test_help_lists_every_loss_optimizer_and_framework(capsys):
    """--help names every value the training config and the frontend registry accept (ctc included)."""
    assert main(["--help"]) == 0
    lines = {line.split("=")[0].strip(): line for line in capsys.readouterr().out.splitlines()}
    assert all(loss in lines["--loss"] for loss in LOSSES) and "ctc" in lines["--loss"]
    assert all(name in lines["--optimizer"] for name in OPTIMIZERS)
    assert all(fmk in lines["--fmk"] for fmk in FRONTENDS)


def run_module(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "converter.cli", *args], cwd=REPO, capture_output=True, text=True)


def test_module_entry_point_exits_zero_on_success(lenet_file, tmp_path):
    done = run_module(*convert_args(lenet_file, tmp_path / "out"))
    assert done.returncode == 0 and SUCCESS in done.stdout


def test_module_entry_point_exits_nonzero_without_traceback(lenet_file, tmp_path):
    done = run_module("--fmk=CAFFE", f"--modelFile={lenet_file}", f"--outputFile={tmp_path / 'out'}")
    assert done.returncode != 0 and "CONVERT RESULT FAILED:-7" in done.stdout and "Traceback" not in done.stderr
