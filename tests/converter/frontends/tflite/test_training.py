"""A float `.tflite` model is made trainable like an ONNX one (`--trainModel=true`): MediaPipe's BlazeFace
(face_detection_short_range: float16 weights behind DEQUANTIZE, activations TFLite fuses into its convolutions,
which training splits off for their gradients) in a TrainSession. Before training its eval output is LiteRT's,
and its first gradients are the finite differences of the loss; fine-tuning the detection-score heads to stop
finding the face of a photo lowers the loss at every step (0.41 -> 0.17 in 20 momentum steps) and the faces found
(8 -> 0); the exported inference model computes what the session computes. (Training the whole network on one
photo diverges even at a learning rate of 1e-5: a change of 1e-4 in one weight moves the loss by 1 %.)
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tflite", reason="the TFLite frontend reads files with the 'tflite' package")
import lite  # noqa: E402
from converter import convert_for_training  # noqa: E402
from converter.cli import main as converter_lite  # noqa: E402
from converter.frontends import frontend  # noqa: E402
from converter.train import TrainParams, to_training_graph  # noqa: E402
from lite.train.session import named  # noqa: E402
from tests.converter.frontends.tflite.test_quantization import MODEL, photo  # noqa: E402
from tests.tflite_models import TFLiteModel, litert_interpreter, mediapipe_model, run_litert  # noqa: E402
from tests.util import relative_to_range  # noqa: E402

litert_interpreter()


@pytest.fixture(scope="module")
def blazeface() -> bytes:
    return mediapipe_model(MODEL)


def test_every_weight_reaching_the_loss_trains_under_its_tensor_name(blazeface):
    """The trained weights are the file's weights, named as its tensors (a float16 weight by the output of the
    DEQUANTIZE that widens it: the tensor the convolutions read) and holding its values. The loss reads the first
    output (regressors), so the classificator heads' weights are not trained."""
    model = frontend("TFLITE").load(blazeface)
    weights = list(model.float_weights())
    assert len(weights) == 74 and set(weights) <= {t.name for t in model.file.tensors}
    graph = to_training_graph(model, TrainParams(loss="mse"))
    trained = [n.inputs[0] for sg in graph.subgraphs if sg.name == "optimizer" for n in sg.nodes]
    assert trained == [w for w in weights if not w.startswith("classificator_")]
    for name in trained:        # in the source layout, or with the permutation back to it (depthwise weights)
        value = graph.values[name]
        stored = value.const.transpose(value.source_perm) if value.source_perm else value.const
        np.testing.assert_array_equal(stored, model.float_weights()[name])


def test_weights_folded_together_train_through_the_op_that_combines_them():
    """y = x @ (w1 * w2).T + b, with w1 float16 behind DEQUANTIZE: folding merges w1 and w2 into one constant, so
    they are imported as graph inputs, kept as the Mul computing from them and made constants again; the first
    step's loss and gradients are numpy's."""
    rng = np.random.default_rng(0)
    x, target = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 4)).astype(np.float32)
    w1, w2, b = (rng.standard_normal(shape).astype(np.float32) for shape in ((4, 3), (4, 3), (4,)))
    w1 = w1.astype(np.float16).astype(np.float32)
    m = TFLiteModel()
    xi, y = m.tensor((2, 3), name="x"), m.tensor((2, 4), name="y")
    half, w1i, w2i, wi = m.const(w1, np.float16, name="w1_half"), m.tensor((4, 3), name="w1"), m.const(w2, name="w2"), \
        m.tensor((4, 3), name="w")
    m.op("DEQUANTIZE", [half], [w1i])
    m.op("MUL", [w1i, w2i], [wi], "MulOptions")
    m.op("FULLY_CONNECTED", [xi, wi, m.const(b, name="b")], [y], "FullyConnectedOptions")
    model = frontend("TFLITE").load(m.build([xi], [y]))
    assert list(model.float_weights()) == ["w1", "w2", "b"]
    buf = convert_for_training(model, TrainParams(loss="mse", learning_rate=0.1))
    session = lite.TrainSession.CreateSession(buf, len(buf), lite.Context(thread_num=1), True)
    loss = first_step(session, x, target, "x")
    dy = 2 * (x @ (w1 * w2).T + b - target) / target.size
    dw = dy.T @ x
    assert loss == pytest.approx(float(((x @ (w1 * w2).T + b - target) ** 2).mean()), rel=1e-5)
    grads = named(session.GetGradients())
    for name, want in (("w1", dw * w2), ("w2", dw * w1), ("b", dy.sum(0))):
        np.testing.assert_allclose(grads[name], want, rtol=1e-4, atol=1e-6, err_msg=name)


def first_step(session: lite.TrainSession, x: np.ndarray, target: np.ndarray, input_name: str = "input") \
        -> float:
    session.GetInputsByTensorName(input_name).set_data(x)
    session.GetInputsByTensorName("labels").set_data(target)
    session.RunGraph()
    return float(session.GetOutputByTensorName("loss").numpy())


@pytest.fixture(scope="module")
def astronaut(blazeface) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The photo, LiteRT's detection scores, and the target: no face where LiteRT finds one."""
    x = photo("astronaut")
    _, scores = run_litert(blazeface, [x])
    return x, scores, np.where(scores > 0, -5.0, scores).astype(np.float32)


@pytest.mark.slow
def test_gradients_are_the_finite_differences_of_the_loss(blazeface, astronaut):
    """For a depthwise kernel (stored transposed, float16 in the file) and a score head's kernel and bias."""
    x, _, target = astronaut
    buf = convert_for_training(frontend("TFLITE").load(blazeface),
                               TrainParams(loss="mse", output="classificators", learning_rate=0.1))
    session = lite.TrainSession.CreateSession(buf, len(buf), lite.Context(thread_num=2), True)
    session.SetLearningRate(0.0)
    first_step(session, x, target)
    grads, weights = named(session.GetGradients()), {k: v.copy() for k, v in named(session.GetFeatureMaps()).items()}
    eps = 1e-3
    for name in ("depthwise_conv2d_7/Kernel_dequantize", "classificator_8/Kernel_dequantize",
                 "classificator_8/Bias_dequantize"):
        at = np.unravel_index(np.abs(grads[name]).argmax(), grads[name].shape)
        losses = []
        for step in (eps, -eps):
            w = weights[name].copy()
            w[at] += step
            session.UpdateFeatureMaps([(name, w)])
            losses.append(first_step(session, x, target))
        session.UpdateFeatureMaps([(name, weights[name])])
        assert grads[name][at] == pytest.approx((losses[0] - losses[1]) / (2 * eps), rel=1e-2), name


@pytest.mark.slow
def test_fine_tuning_lowers_the_loss_and_exports_what_the_session_computes(blazeface, astronaut, tmp_path):
    x, want, target = astronaut
    source, config = tmp_path / "blazeface.tflite", tmp_path / "train.cfg"
    source.write_bytes(blazeface)
    config.write_text("[train_param]\noutput = classificators\n")
    assert converter_lite(["--fmk=TFLITE", f"--modelFile={source}", f"--outputFile={tmp_path / 'train'}",
                           "--trainModel=true", "--loss=mse", "--optimizer=momentum", "--learningRate=0.01",
                           "--trainable=classificator_.*", f"--configFile={config}"]) == lite.RET_OK
    buf = (tmp_path / "train.ms").read_bytes()
    session = lite.TrainSession.CreateSession(buf, len(buf), lite.Context(thread_num=2), True)

    def scores() -> np.ndarray:
        session.Eval()
        session.GetInputsByTensorName("input").set_data(x)
        session.RunGraph()
        return session.GetOutputByTensorName("classificators").numpy().copy()
    assert relative_to_range(scores(), want) <= 1e-4

    session.Train()
    losses = [first_step(session, x, target) for _ in range(20)]
    assert np.all(np.diff(losses) < 0) and losses[-1] < 0.5 * losses[0], losses
    tuned = scores()
    assert (tuned > 0).sum() == 0 < (want > 0).sum()

    session.Export(tmp_path / "inference.ms", lite.MT_INFERENCE)
    inference = lite.LiteSession.CreateSession(lite.Context(thread_num=2))
    inference.CompileGraph(lite.Model.Load(tmp_path / "inference.ms"))
    inference.GetInputs()[0].set_data(x)
    inference.RunGraph()
    assert relative_to_range(inference.GetOutputByTensorName("classificators").numpy(), tuned) <= 1e-5
