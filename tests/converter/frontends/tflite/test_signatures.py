"""Signature defs: a file with several entry points, each running its own subgraph, converts one of them at a
time (`TFLiteSource.for_signature(key)`), with its inputs and outputs named as the signature names them;
checked against LiteRT's `get_signature_runner(key)`."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tflite", reason="the TFLite frontend reads files with the 'tflite' package")
import lite  # noqa: E402
from converter import convert  # noqa: E402
from converter.frontends import frontend  # noqa: E402
from lite.inspect import format_summary, summarize  # noqa: E402
from lite.status import GraphFileError, InputTensorError  # noqa: E402
from tests.converter.frontends.tflite.wild_models import WildModel  # noqa: E402
from tests.tflite_models import litert_interpreter, rand  # noqa: E402
from tests.util import relative_to_range  # noqa: E402

W = rand(3, 4)


def _two_entries() -> bytes:
    """"encode": features = relu(x @ W^T) (subgraph 0); "decode": (y, bias) -> y * 2 + bias, and y - bias
    (subgraph 1), whose signature names differ from its tensor names."""
    m = WildModel()
    x, features = m.tensor((2, 4), name="serving_x:0"), m.tensor((2, 3), name="Identity")
    m.op("FULLY_CONNECTED", [x, m.const(W), -1], [features], "FullyConnectedOptions", FusedActivationFunction=1)
    decoded = {}

    def decode(g: WildModel) -> tuple[list[int], list[int]]:
        y, bias = g.tensor((2, 3), name="decode_y:0"), g.tensor((3,), name="decode_bias:0")
        doubled, out, diff = g.tensor((2, 3), name="d"), g.tensor((2, 3), name="Identity"), g.tensor((2, 3),
                                                                                                      name="Identity_1")
        g.op("MUL", [y, g.const(np.full((1, 1), 2, np.float32))], [doubled], "MulOptions")
        g.op("ADD", [doubled, bias], [out], "AddOptions")
        g.op("SUB", [y, bias], [diff], "SubOptions")
        decoded.update(y=y, bias=bias, out=out, diff=diff)
        return [y, bias], [out, diff]
    sub = m.subgraph(decode)
    return m.build_entries([x], [features], [
        ("encode", 0, {"x": x}, {"features": features}),
        ("decode", sub, {"y": decoded["y"], "bias": decoded["bias"]},
         {"restored": decoded["out"], "residual": decoded["diff"]})])


def _ours(data: bytes, key: str, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    buf = convert(frontend("TFLITE").load(data).for_signature(key))
    session = lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=1))
    for name, x in feeds.items():
        session.GetInputsByTensorName(name).set_data(x)
    session.RunGraph()
    return {name: t.numpy().copy() for name, t in session.GetOutputs().items()}


@pytest.mark.parametrize("key,feeds", [("encode", {"x": rand(2, 4)}),
                                       ("decode", {"y": rand(2, 3), "bias": rand(3)})])
def test_each_signature_matches_litert(key, feeds):
    data = _two_entries()
    interpreter = litert_interpreter().Interpreter(model_content=data)
    assert set(interpreter.get_signature_list()) == {"encode", "decode"}
    expected = interpreter.get_signature_runner(key)(**feeds)
    actual = _ours(data, key, feeds)
    assert set(actual) == set(expected)
    for name, e in expected.items():
        assert actual[name].shape == e.shape and relative_to_range(actual[name], e) <= 1e-6


def test_signatures_are_listed_and_an_unknown_one_is_refused():
    source = frontend("TFLITE").load(_two_entries())
    assert source.signatures == ["encode", "decode"]
    with pytest.raises(InputTensorError, match=r"no signature 'train' \(signatures: \['encode', 'decode'\]\)"):
        source.for_signature("train")


def test_a_converted_signature_names_the_model():
    """`python -m lite.inspect` shows which entry point a converted file holds."""
    buf = convert(frontend("TFLITE").load(_two_entries()).for_signature("decode"))
    summary = format_summary(summarize(lite.Model.Import(buf, len(buf))))
    assert summary.splitlines()[0].startswith("model 'decode'"), summary


def test_default_is_subgraph_0_named_by_its_signature():
    buf = convert(frontend("TFLITE").load(_two_entries()))
    session = lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=1))
    assert [t.tensor_name() for t in session.GetInputs()] == ["x"]
    assert list(session.GetOutputs()) == ["features"]


def test_signature_of_a_missing_subgraph_is_a_file_error():
    m = WildModel()
    x, y = m.tensor((2,), name="x"), m.tensor((2,), name="y")
    m.op("RELU", [x], [y])
    with pytest.raises(GraphFileError, match="signature 'extra' runs subgraph 3 of 1"):
        frontend("TFLITE").load(m.build_entries([x], [y], [("extra", 3, {"x": x}, {"y": y})]))
