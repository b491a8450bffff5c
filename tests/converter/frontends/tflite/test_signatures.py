"""Signature defs: a file with several entry points, each running its own subgraph, converts into one `.ms` holding
them all (`LiteSession.SelectSignature(key)` runs one), or those `--signatures` keeps, or one of them
(`TFLiteSource.for_signature(key)`), inputs and outputs named as the signature names them; each checked against
LiteRT's `get_signature_runner(key)`, variables shared by the entry points as LiteRT shares them."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tflite", reason="the TFLite frontend reads files with the 'tflite' package")
import lite  # noqa: E402
import lite.session  # noqa: E402
from converter import convert  # noqa: E402
from converter.cli import main  # noqa: E402
from converter.frontends import frontend  # noqa: E402
from lite.inspect import format_summary, summarize  # noqa: E402
from lite.status import RET_OK, GraphFileError, InputTensorError  # noqa: E402
from tests.converter.frontends.tflite.wild_models import WildModel  # noqa: E402
from tests.tflite_models import litert_interpreter, rand  # noqa: E402
from tests.util import relative_to_range  # noqa: E402

W = rand(3, 4)


def _two_entries(unknown_batch: bool = False) -> bytes:
    """"encode": features = relu(x @ W^T) (subgraph 0); "decode": (y, bias) -> y * 2 + bias, and y - bias
    (subgraph 1), whose signature names differ from its tensor names. Batch 2, or unknown (-1) in both."""
    m = WildModel()
    batch = {"signature": [-1, 4]} if unknown_batch else {}
    x, features = m.tensor((2, 4), name="serving_x:0", **batch), m.tensor((2, 3), name="Identity")
    m.op("FULLY_CONNECTED", [x, m.const(W), -1], [features], "FullyConnectedOptions", FusedActivationFunction=1)
    decoded = {}

    def decode(g: WildModel) -> tuple[list[int], list[int]]:
        rows = {"signature": [-1, 3]} if unknown_batch else {}
        y, bias = g.tensor((2, 3), name="decode_y:0", **rows), g.tensor((3,), name="decode_bias:0")
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


def _session(buf: bytes) -> lite.LiteSession:
    return lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=1))


def _run(session: lite.LiteSession, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    for name, x in feeds.items():
        session.GetInputsByTensorName(name).set_data(x)
    session.RunGraph()
    return {name: t.numpy().copy() for name, t in session.GetOutputs().items()}


def test_one_ms_runs_every_signature_like_litert():
    data = _two_entries()
    session = _session(convert(frontend("TFLITE").load(data)))
    assert session.GetSignatures() == ["encode", "decode"]
    interpreter = litert_interpreter().Interpreter(model_content=data)
    for key, feeds in [("decode", {"y": rand(2, 3), "bias": rand(3)}), ("encode", {"x": rand(2, 4)}),
                       ("decode", {"y": rand(2, 3), "bias": rand(3)})]:
        assert session.SelectSignature(key) == RET_OK
        assert sorted(t.tensor_name() for t in session.GetInputs()) == sorted(feeds)
        expected, actual = interpreter.get_signature_runner(key)(**feeds), _run(session, feeds)
        assert set(actual) == set(expected)
        for name, e in expected.items():
            assert actual[name].shape == e.shape and relative_to_range(actual[name], e) <= 1e-6


def test_an_unknown_signature_is_refused_by_the_session():
    session = _session(convert(frontend("TFLITE").load(_two_entries())))
    with pytest.raises(InputTensorError, match=r"no signature 'train' \(signatures: \['encode', 'decode'\]\)"):
        session.SelectSignature("train")


def test_inspect_lists_each_signature_with_its_inputs_and_outputs():
    buf = convert(frontend("TFLITE").load(_two_entries()))
    summary = summarize(lite.Model.Import(buf, len(buf)))
    assert list(summary.signatures) == ["encode", "decode"]
    inputs, outputs = summary.signatures["decode"]
    assert [(t.name, t.shape) for t in inputs] == [("y", (2, 3)), ("bias", (3,))]
    assert [t.name for t in outputs] == ["restored", "residual"]
    text = format_summary(summary)
    assert "signatures: 2" in text and "  decode:" in text and "input   bias" in text, text


def _shared_counter() -> bytes:
    """Two entry points over one variable 'count' [2] (starting at 1, 2): "add" (count += x; out = count) and
    "scaled" (out = count * k, no write)."""
    m = WildModel()

    def init(g: WildModel) -> tuple[list[int], list[int]]:
        handle = g.typed([], "RESOURCE", "init/h")
        g.op("VAR_HANDLE", [], [handle], "VarHandleOptions", SharedName="count")
        g.op("ASSIGN_VARIABLE", [handle, g.const(np.array([1, 2], np.float32))], [])
        return [], []
    once = m.subgraph(init)

    def read_count(g: WildModel) -> tuple[int, int]:
        """CALL_ONCE of the initialisation, then 'count' read: its handle and the tensor read."""
        g.op("CALL_ONCE", [], [], "CallOnceOptions", InitSubgraphIndex=once)
        handle, value = g.typed([], "RESOURCE", "h"), g.tensor((2,), name="value")
        g.op("VAR_HANDLE", [], [handle], "VarHandleOptions", SharedName="count")
        g.op("READ_VARIABLE", [handle], [value])
        return handle, value
    x, total = m.tensor((2,), name="x"), m.tensor((2,), name="total")
    handle, old = read_count(m)
    m.op("ADD", [old, x], [total], "AddOptions")
    m.op("ASSIGN_VARIABLE", [handle, total], [])
    scaled = {}

    def read(g: WildModel) -> tuple[list[int], list[int]]:
        k, out = g.tensor((1,), name="k"), g.tensor((2,), name="out")
        g.op("MUL", [read_count(g)[1], k], [out], "MulOptions")
        scaled.update(k=k, out=out)
        return [k], [out]
    sub = m.subgraph(read)
    return m.build_entries([x], [total], [("add", 0, {"x": x}, {"total": total}),
                                          ("scaled", sub, {"k": scaled["k"]}, {"out": scaled["out"]})])


def test_signatures_share_variables_like_litert_runners():
    data = _shared_counter()
    session = _session(convert(frontend("TFLITE").load(data)))
    interpreter = litert_interpreter().Interpreter(model_content=data)
    rng = np.random.default_rng(2)
    for step in range(6):
        key = "add" if step % 3 != 2 else "scaled"
        feeds = {"x": rng.uniform(-1, 1, 2).astype(np.float32)} if key == "add" else {"k": np.array([3], np.float32)}
        session.SelectSignature(key)
        expected, actual = interpreter.get_signature_runner(key)(**feeds), _run(session, feeds)
        for name, e in expected.items():
            np.testing.assert_allclose(actual[name], e, rtol=1e-6, atol=1e-6)


def test_cli_keeps_the_signatures_named(tmp_path):
    source = tmp_path / "entries.tflite"
    source.write_bytes(_two_entries())
    out = tmp_path / "decode_only"
    assert main(["--fmk=TFLITE", f"--modelFile={source}", f"--outputFile={out}", "--signatures=decode"]) == RET_OK
    session = lite.LiteSession.CreateSession(lite.Context(thread_num=1))
    session.CompileGraph(lite.Model.Load(f"{out}.ms"))
    assert session.GetSignatures() == [] and [t.tensor_name() for t in session.GetInputs()] == ["y", "bias"]
    assert main(["--fmk=TFLITE", f"--modelFile={source}", f"--outputFile={out}", "--signatures=decode,encode"]) == 0
    session.CompileGraph(lite.Model.Load(f"{out}.ms"))
    assert session.GetSignatures() == ["encode", "decode"]


def test_cli_refuses_an_unknown_signature(tmp_path, capsys):
    source = tmp_path / "entries.tflite"
    source.write_bytes(_two_entries())
    assert main(["--fmk=TFLITE", f"--modelFile={source}", f"--outputFile={tmp_path / 'x'}",
                 "--signatures=train"]) != RET_OK
    assert "no signature 'train'" in capsys.readouterr().err


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


def test_a_checkpoint_keeps_every_signature_and_the_shared_state():
    """Save after two "add" steps; the loaded session has both entry points and continues the count."""
    data = _shared_counter()
    session = _session(convert(frontend("TFLITE").load(data)))
    runners = litert_interpreter().Interpreter(model_content=data)
    for x in (np.array([0.5, -1], np.float32), np.array([2, 0.25], np.float32)):
        _run(session, {"x": x})
        runners.get_signature_runner("add")(x=x)
    resumed = _session(session.ExportToBuf())
    assert resumed.GetSignatures() == ["add", "scaled"]
    resumed.SelectSignature("scaled")
    k = np.array([2], np.float32)
    np.testing.assert_allclose(_run(resumed, {"k": k})["out"], runners.get_signature_runner("scaled")(k=k)["out"],
                               rtol=1e-6)


@pytest.fixture
def plans(monkeypatch) -> list[object]:
    """The plans sessions compile, as they are made."""
    made = []
    compile_graph = lite.session.compile_graph

    def counted(*args, **kwargs):
        made.append(compile_graph(*args, **kwargs))
        return made[-1]
    monkeypatch.setattr(lite.session, "compile_graph", counted)
    return made


def _assert_like_litert(actual: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    assert set(actual) == set(expected)
    for name, e in expected.items():
        assert actual[name].shape == e.shape and relative_to_range(actual[name], e) <= 1e-6, name


def _feeds(rng: np.random.Generator, key: str, rows: int) -> dict[str, np.ndarray]:
    """Inputs of `_two_entries`' entry point `key` with `rows` rows."""
    def normal(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)
    return {"x": normal(rows, 4)} if key == "encode" else {"y": normal(rows, 3), "bias": normal(3)}


def test_switching_back_to_a_signature_compiles_nothing(plans):
    """Call by call alternation: one plan per entry point, made when it is first selected."""
    data = _two_entries()
    session = _session(convert(frontend("TFLITE").load(data)))
    runners = litert_interpreter().Interpreter(model_content=data)
    rng = np.random.default_rng(3)
    for key in ["decode", "encode"] * 3:
        feeds = _feeds(rng, key, 2)
        assert session.SelectSignature(key) == RET_OK
        _assert_like_litert(_run(session, feeds), runners.get_signature_runner(key)(**feeds))
    assert len(plans) == 2


def test_a_signatures_tensors_keep_their_data_while_another_runs():
    """The tensors "encode" handed out stay its own: after "decode" ran, its output still holds its result and a
    run with no new input reads the input set before, as LiteRT's runners keep each subgraph's tensors."""
    data = _two_entries()
    session = _session(convert(frontend("TFLITE").load(data)))
    interpreter = litert_interpreter().Interpreter(model_content=data)
    encode, decode = interpreter.get_signature_runner("encode"), interpreter.get_signature_runner("decode")
    x, y, bias = rand(2, 4), rand(2, 3), rand(3)
    (given,), taken = session.GetInputs(), session.GetOutputs()["features"]
    expected = encode(x=x)["features"]
    given.set_data(x)
    session.RunGraph()
    decode(y=y, bias=bias)
    session.SelectSignature("decode")
    _assert_like_litert(_run(session, {"y": y, "bias": bias}), decode(y=y, bias=bias))
    kept = interpreter.get_tensor(encode.get_output_details()["features"]["index"], 0)
    np.testing.assert_array_equal(kept, expected)                   # LiteRT keeps it...
    session.SelectSignature("encode")
    assert session.GetInputs()[0] is given and session.GetOutputs()["features"] is taken
    assert relative_to_range(taken.numpy(), kept) <= 1e-6           # ... and so do we
    np.testing.assert_array_equal(given.numpy(), x)
    session.RunGraph()
    assert relative_to_range(taken.numpy(), expected) <= 1e-6


def test_sizes_seen_before_are_not_replanned_per_signature(plans):
    """Unknown batch in both entry points: each size of each entry point is planned once, across switches."""
    data = _two_entries(unknown_batch=True)
    session = _session(convert(frontend("TFLITE").load(data)))
    runners = litert_interpreter().Interpreter(model_content=data)
    rng = np.random.default_rng(4)
    before = len(plans)
    for key, n in [("encode", 3), ("decode", 5), ("encode", 1), ("decode", 2), ("encode", 3), ("decode", 5),
                   ("encode", 1), ("decode", 2)]:
        feeds = _feeds(rng, key, n)
        session.SelectSignature(key)
        _assert_like_litert(_run(session, feeds), runners.get_signature_runner(key)(**feeds))
    assert len(plans) - before == 4


def test_a_parked_signatures_input_takes_a_new_size():
    """set_data of a new size on an input of an entry point not selected: it plans for it when selected again."""
    data = _two_entries(unknown_batch=True)
    session = _session(convert(frontend("TFLITE").load(data)))
    (x,) = session.GetInputs()
    session.SelectSignature("decode")
    inputs = rand(4, 4)
    x.set_data(inputs)
    session.SelectSignature("encode")
    session.RunGraph()
    expected = litert_interpreter().Interpreter(model_content=data).get_signature_runner("encode")(x=inputs)
    assert relative_to_range(session.GetOutputs()["features"].numpy(), expected["features"]) <= 1e-6
