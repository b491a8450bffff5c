"""The MINDIR frontend without MindSpore: files exported by MindSpore 2.10 (a LeNet; arguments as Constant inputs),
2.0 (a ResNet with BatchNorm and a net of shape, indexing and elementwise primitives; arguments as primitive
attributes) and 1.0 (a LeNet, the ResNet and a bidirectional LSTM; ONNX's protobuf), committed with MindSpore's
outputs, convert with `converter_lite --fmk=MINDIR` and run as MindSpore ran them; external weight files are
read; bad files are refused with a status naming the file (and the node).
MindSpore's exported training steps: `test_training_step.py`."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import lite
from converter import convert_for_training
from converter.cli import main as converter_lite
from converter.frontends import frontend, read_model
from converter.frontends.mindir import mind_ir_pb2 as pb
from converter.frontends.mindir.legacy import is_legacy
from converter.frontends.mindir.reader import parse
from converter.train import TrainParams
from tests.converter.frontends.mindir.steps import session_losses
from tests.util import relative_to_range, run_lite, session_for

FIXTURES = Path(__file__).resolve().with_name("fixtures")
LENET = FIXTURES / "mindspore-2.10.0" / "lenet.mindir"


def lenet_proto() -> pb.ModelProto:
    model = pb.ModelProto()
    model.ParseFromString(LENET.read_bytes())
    return model


def write(model: pb.ModelProto, path: Path) -> Path:
    path.write_bytes(model.SerializeToString())
    return path


def output(session: lite.LiteSession, fixture: Path = LENET) -> tuple[np.ndarray, np.ndarray]:
    """(our output, MindSpore's) for the input committed with `fixture` (the one graph input)."""
    data = np.load(fixture.with_suffix(".npz"))
    (name,) = [t.tensor_name() for t in session.GetInputs()]
    return next(iter(run_lite(session, {name: data["x"]}).values())), data["expected"]


@pytest.mark.parametrize("fixture", sorted(FIXTURES.glob("*/*.mindir")), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_converted_fixture_runs_as_mindspore_ran_it(fixture, tmp_path, capsys):
    assert converter_lite(["--fmk=MINDIR", f"--modelFile={fixture}", f"--outputFile={tmp_path / 'model'}"]) == 0
    assert "CONVERT RESULT SUCCESS:0" in capsys.readouterr().out
    buf = (tmp_path / "model.ms").read_bytes()
    got, want = output(lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=1)), fixture)
    assert got.shape == want.shape and relative_to_range(got, want) <= 1e-4


STEPS = sorted(FIXTURES.glob("*/step_*.mindir"))     # TrainOneStepCell exported after one step
TRAINED = [p for p in sorted(FIXTURES.glob("*/*.mindir")) if "losses" in np.load(p.with_suffix(".npz"))
           and p not in STEPS]


@pytest.mark.parametrize("fixture", TRAINED, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_first_training_losses_are_those_mindspore_recorded(fixture):
    """`--trainModel=true --optimizer=momentum --learningRate=0.01` (sparse softmax cross entropy): three steps
    lose what MindSpore's TrainOneStepCell with Momentum(0.01, 0.9) lost on the same batches from the same
    weights (the ResNet of MindSpore 2.0: BatchNorm on batch statistics)."""
    data = np.load(fixture.with_suffix(".npz"))
    buf = convert_for_training(read_model("MINDIR", fixture), TrainParams(optimizer="momentum", learning_rate=0.01))
    losses = session_losses(buf, zip(data["train_x"], data["train_labels"]), "x")
    np.testing.assert_allclose(losses, data["losses"], rtol=1e-4)


def test_fixtures_of_every_format_are_committed():
    """MindSpore 2.10 (arguments as inputs), 2.0 (arguments as attributes) and 1.0 (ONNX's protobuf)."""
    assert {p.parent.name for p in TRAINED} == {"mindspore-2.10.0", "mindspore-2.0.0"}
    versions = {p.parent.name: (is_legacy(p.read_bytes()), parse(p.read_bytes(), str(p)).mind_ir_version)
                for p in FIXTURES.glob("*/*.mindir")}
    assert versions == {"mindspore-2.10.0": (False, 3), "mindspore-2.0.0": (False, 1), "mindspore-1.0.0": (True, 0)}


def test_weights_keep_the_names_of_the_network_parameters():
    model = read_model("MINDIR", LENET)
    assert list(model.float_weights()) == ["conv1.weight", "conv2.weight", "fc1.weight", "fc1.bias", "fc2.weight",
                                           "fc2.bias", "fc3.weight", "fc3.bias"]
    readers = {name: weights for name, weights in model.weight_readers() if weights}
    assert sorted(w for ws in readers.values() for w in ws) == sorted(model.float_weights())


def test_external_weights_are_read_from_beside_the_file(tmp_path):
    """Weights past MindSpore's 1 GB limit live in `<name>_variables/data_<n>`: the same LeNet with two of its
    weights moved there computes the same output."""
    model = lenet_proto()
    (tmp_path / "lenet_variables").mkdir()
    blob, offset = bytearray(), {}
    for p in model.graph.parameter:
        if p.name.endswith(("fc1.weight", "conv2.weight")):
            offset[p.name] = len(blob)
            blob += p.raw_data
            p.external_data.location, p.external_data.offset = "lenet_variables/data_0", offset[p.name]
            p.external_data.length = len(p.raw_data)
            p.ClearField("raw_data")
    assert len(offset) == 2
    (tmp_path / "lenet_variables" / "data_0").write_bytes(bytes(blob))
    got, want = output(session_for(read_model("MINDIR", write(model, tmp_path / "lenet.mindir"))))
    assert relative_to_range(got, want) <= 1e-4

    (tmp_path / "lenet_variables" / "data_0").unlink()
    with pytest.raises(lite.GraphFileError, match=r"lenet\.mindir'.*external data file '.*data_0'.*fc1\.weight|"
                                                   r"lenet\.mindir'.*external data file '.*data_0'.*conv2\.weight"):
        read_model("MINDIR", tmp_path / "lenet.mindir")


def test_malformed_protobuf_names_the_file(tmp_path):
    bad = tmp_path / "bad.mindir"
    bad.write_bytes(LENET.read_bytes()[:1000])
    with pytest.raises(lite.GraphFileError, match=r"'.*bad\.mindir' is not a readable MINDIR model"):
        read_model("MINDIR", bad)


def test_an_unknown_format_version_is_refused_naming_file_and_version(tmp_path):
    model = lenet_proto()
    model.mind_ir_version = 9
    with pytest.raises(lite.NotSupportedError, match=r"'.*future\.mindir' has mind_ir_version 9; versions up to 3"):
        read_model("MINDIR", write(model, tmp_path / "future.mindir"))


def test_an_unsupported_primitive_is_refused_naming_primitive_and_node(tmp_path, capsys):
    model = lenet_proto()
    next(p for p in model.primitives if p.op_type == "ReLU").op_type = "CeLU"
    path = write(model, tmp_path / "celu.mindir")
    with pytest.raises(lite.NotSupportedError, match=r"unsupported MindSpore primitive 'CeLU' at node 'CNode_18:5'"):
        read_model("MINDIR", path).to_ir()
    assert converter_lite(["--fmk=MINDIR", f"--modelFile={path}", f"--outputFile={tmp_path / 'out'}"]) \
        == lite.RET_NOT_SUPPORT
    assert "'CeLU' at node 'CNode_18:5'" in capsys.readouterr().err


def test_attributes_on_the_primitive_read_as_attributes_given_as_inputs(tmp_path):
    """MindSpore up to 2.2 keeps MatMul's transpose flags on the primitive; 2.3+ passes them as Constant inputs.
    The same LeNet with the flags moved onto its MatMul primitive computes the same output."""
    model = lenet_proto()
    matmul = next(p for p in model.primitives if p.op_type == "MatMul")
    flags = {}
    for node in model.graph.node:
        if node.op_type == f"REF::{matmul.name}":
            for name, constant in zip(("transpose_a", "transpose_b"), node.input[2:]):
                value = next(n for n in model.graph.node if n.output[0] == constant).attribute[0]
                flags[name] = value.i
            del node.input[2:]
    for name, value in flags.items():
        matmul.attribute.add(name=name, i=value, type=pb.AttributeProto.BOOL)
    assert flags == {"transpose_a": 0, "transpose_b": 1}
    got, want = output(session_for(read_model("MINDIR", write(model, tmp_path / "old_style.mindir"))))
    assert relative_to_range(got, want) <= 1e-4


def test_the_frontend_is_registered_without_an_optional_package():
    assert frontend("MINDIR").requires == ""


def test_the_generated_module_describes_the_proto(tmp_path):
    """The committed mind_ir_pb2.py is regenerated from mind_ir.proto: protoc's descriptor of the .proto is the
    module's (skipped without grpcio-tools, which only regeneration needs)."""
    pytest.importorskip("grpc_tools", reason="protoc comes with grpcio-tools (pip install 'grpcio-tools==1.62.3')")
    from google.protobuf import descriptor_pb2

    from converter.frontends.mindir.regenerate import PROTO, ROOT
    out = tmp_path / "mind_ir.desc"
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT}", f"--descriptor_set_out={out}",
                    str(PROTO.relative_to(ROOT))], check=True)
    compiled = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
    messages = list(compiled.message_type)
    while messages:                 # protoc adds JSON names, which the generated module leaves out
        message = messages.pop()
        messages += message.nested_type
        for field in message.field:
            field.ClearField("json_name")
    assert compiled == descriptor_pb2.FileDescriptorProto.FromString(pb.DESCRIPTOR.serialized_pb)


def test_a_graph_calling_itself_outside_a_loop_is_refused(tmp_path):
    """MindSpore writes a loop as a header graph that switches to a body calling the header back (our Loop); a
    graph that calls itself otherwise is refused naming graph and node."""
    model = pb.ModelProto(mind_ir_version=3)
    main, body = model.graph, model.functions.add()
    main.name, body.name = "main", "body"
    for g, x, y in ((main, "main:x", "main:y"), (body, "body:x", "body:y")):
        g.input.add(name=x).tensor.add(dims=[2], data_type=pb.TensorProto.FLOAT)
        g.node.add(op_type="body", input=[x], output=[y], name=y)
        g.output.add(name=y)
    with pytest.raises(lite.NotSupportedError, match=r"'.*loop\.mindir': graph 'body' calls itself at node 'y', "
                                                     r"not as a loop's header"):
        read_model("MINDIR", write(model, tmp_path / "loop.mindir")).to_ir()


def test_input_shape_overrides_the_exported_batch(tmp_path):
    """MindSpore exports for the input it was given (batch 2); `--inputShape=x:1,1,32,32` converts for batch 1."""
    assert converter_lite(["--fmk=MINDIR", f"--modelFile={LENET}", f"--outputFile={tmp_path / 'one'}",
                           "--inputShape=x:1,1,32,32"]) == lite.RET_OK
    data = np.load(LENET.with_suffix(".npz"))
    buf = (tmp_path / "one.ms").read_bytes()
    session = lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=1))
    assert session.GetInputsByTensorName("x").shape() == [1, 1, 32, 32]
    got = next(iter(run_lite(session, {"x": data["x"][:1]}).values()))
    assert relative_to_range(got, data["expected"][:1]) <= 1e-4


def test_a_malformed_tuple_read_is_refused_naming_the_node(tmp_path):
    model = lenet_proto()
    get = next(n for n in model.graph.node if n.op_type == "REF::" + next(
        p.name for p in model.primitives if p.op_type == "MakeTuple"))
    get.op_type = "REF::" + model.primitives.add(name="TupleGetItem:99", op_type="TupleGetItem").name
    with pytest.raises(lite.GraphFileError, match=r"'.*tuple\.mindir': TupleGetItem node 'CNode_33:32' cannot be "
                                                  r"resolved"):
        read_model("MINDIR", write(model, tmp_path / "tuple.mindir")).to_ir()




def test_undecodable_text_is_a_graph_file_error_under_protobufs_pure_python_parser(tmp_path: Path) -> None:
    """The pure-Python protobuf parser decodes string fields while it reads (upb leaves them for later): a name
    that is not UTF-8 is a GraphFileError under both (fuzz finding)."""
    model = pb.ModelProto()
    node = model.graph.node.add()
    node.op_type, node.domain = "REF::ReLU:1", "AAAA"
    (tmp_path / "bad.mindir").write_bytes(model.SerializeToString().replace(b"AAAA", b"\x92AAA"))
    script = ("from converter.frontends.mindir.reader import parse\n"
              "from lite.status import GraphFileError\n"
              "try:\n    parse(open('bad.mindir', 'rb').read(), 'bad.mindir')\n"
              "except GraphFileError as e:\n    print('refused:', e)\n")
    env = {**os.environ, "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION": "python",
           "PYTHONPATH": str(Path(__file__).resolve().parents[4])}
    run = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "refused: 'bad.mindir' is not a readable MINDIR model" in run.stdout


def test_a_mindspore_1_0_file_that_is_cut_short_or_malformed_names_file_and_node(tmp_path):
    """MindSpore 1.0's files are ONNX's protobuf: a truncated one is a GraphFileError naming the file; an attribute
    whose structure is not 1.0's is refused naming attribute and node."""
    import onnx
    source = FIXTURES / "mindspore-1.0.0" / "narrow_lenet.mindir"
    (tmp_path / "cut.mindir").write_bytes(source.read_bytes()[:3000])
    with pytest.raises(lite.GraphFileError, match=r"'.*cut\.mindir' is not a readable MINDIR model"):
        read_model("MINDIR", tmp_path / "cut.mindir")
    model = onnx.load_from_string(source.read_bytes())
    conv = next(n for n in model.graph.node if n.op_type == "Conv2D")
    next(a for a in conv.attribute if a.name == "group").ref_attr_name = "scalar:Tuple[value1,"
    (tmp_path / "odd.mindir").write_bytes(model.SerializeToString())
    with pytest.raises(lite.GraphFileError, match=rf"'.*odd\.mindir': attribute 'group' of node '{conv.name}' "
                                                  r"\(Conv2D\) does not match its structure"):
        read_model("MINDIR", tmp_path / "odd.mindir")
