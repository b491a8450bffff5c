"""Shared test helpers: tiny ONNX models, running them through onnxruntime and through our runtime."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import lite
from converter import convert, convert_for_training
from converter.train import TrainParams

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
EFFICIENTNET = SHARED / "models" / "efficientnet_lite0.onnx"
MNIST = SHARED / "datasets" / "mnist"


def session_for(model: onnx.ModelProto, input_shapes: dict[str, list[int]] | None = None,
                thread_num: int = 2) -> lite.LiteSession:
    buf = convert(model, input_shapes)
    return lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=thread_num))


def run_lite(session: lite.LiteSession, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    tensors = {name: session.GetInputsByTensorName(name) for name in feeds}
    changed = [name for name, t in tensors.items() if t.shape() != list(feeds[name].shape)]
    if changed:         # one Resize for all: each Resize resets input data
        session.Resize([tensors[n] for n in changed], [list(feeds[n].shape) for n in changed])
    for name, array in feeds.items():
        tensors[name].set_data(array)
    session.RunGraph()
    return {name: t.numpy() for name, t in session.GetOutputs().items()}


def run_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray], *, disabled_optimizers: tuple[str, ...] = ()
            ) -> dict[str, np.ndarray]:
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    sess = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"],
                                disabled_optimizers=list(disabled_optimizers))
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def relative_to_range(actual: np.ndarray, expected: np.ndarray) -> float:
    """max |actual - expected| as a fraction of the expected output's range."""
    span = float(expected.max() - expected.min()) or 1.0
    return float(np.abs(actual.astype(np.float64) - expected).max()) / span


def small_cnn(batch: int | str = 1, seed: int = 0) -> onnx.ModelProto:
    """Conv+BN+Relu -> MaxPool -> Conv -> GlobalAveragePool -> Flatten -> Gemm -> Softmax, opset 13; input
    `input` [batch, 3, 8, 8], outputs `logits` and `probs` [batch, 4]."""
    rng = np.random.default_rng(seed)

    def init(name: str, *shape: int, scale: float = 0.3) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [init("w1", 6, 3, 3, 3), init("b1", 6), init("gamma", 6), init("beta", 6), init("mean", 6),
             numpy_helper.from_array(rng.uniform(0.5, 2, 6).astype(np.float32), "var"),
             init("w2", 8, 6, 3, 3), init("fc_w", 4, 8), init("fc_b", 4)]
    nodes = [
        helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "gamma", "beta", "mean", "var"], ["bn1"], name="bn1"),
        helper.make_node("Relu", ["bn1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["c2"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes, "small_cnn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 4]),
         helper.make_tensor_value_info("probs", TensorProto.FLOAT, [batch, 4])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def run_reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The outputs of onnx.reference, the ONNX project's own evaluator of the operator definitions."""
    from onnx.reference import ReferenceEvaluator
    names = [o.name for o in model.graph.output]
    return dict(zip(names, ReferenceEvaluator(model).run(None, feeds)))


def assert_matches_oracles(model: onnx.ModelProto, feeds: dict[str, np.ndarray], rtol: float = 1e-5,
                           atol: float = 1e-6, oracles: tuple[str, ...] = ("onnxruntime", "reference")) -> None:
    """Our converter + runtime agree with onnxruntime and onnx.reference on every output: dtype, shape and
    values (exactly for integer and bool outputs; NaN where they have NaN). An op/dtype onnxruntime has no kernel
    for is checked against onnx.reference alone."""
    from onnxruntime.capi.onnxruntime_pybind11_state import NotImplemented as OrtNotImplemented
    got = run_lite(session_for(model), feeds)
    runners = {"onnxruntime": run_ort, "reference": run_reference}
    for oracle in oracles:
        try:
            outputs = runners[oracle](model, feeds)
        except OrtNotImplemented:
            assert "reference" in oracles
            continue
        for name, expected in outputs.items():
            expected = np.asarray(expected)
            assert got[name].dtype == expected.dtype and got[name].shape == expected.shape, (oracle, name)
            if expected.dtype.kind == "f":
                np.testing.assert_allclose(got[name], expected, rtol=rtol, atol=atol, err_msg=f"{oracle} {name}")
            else:
                np.testing.assert_array_equal(got[name], expected, err_msg=f"{oracle} {name}")


def train_session_for(model: onnx.ModelProto, params: TrainParams) -> lite.TrainSession:
    """A TrainSession on `model` converted for training with `params`."""
    buf = convert_for_training(model, params)
    return lite.TrainSession.CreateSession(buf, len(buf), lite.Context(), train_mode=True)


def train_step(session: lite.TrainSession, x: np.ndarray, labels: np.ndarray) -> float:
    """One training step on (x, labels) through the `input` and `labels` graph inputs; returns the loss."""
    session.GetInputsByTensorName("input").set_data(x)
    session.GetInputsByTensorName("labels").set_data(labels)
    session.RunGraph()
    return float(session.GetOutputByTensorName("loss").numpy())
