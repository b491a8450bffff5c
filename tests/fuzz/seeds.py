"""`python -m tests.fuzz.seeds`: rebuild the committed seed corpora (tests/fuzz/corpus/<harness>/) from the
converter, and the dictionaries of format tokens (tests/fuzz/dict/<harness>.dict) from the readers' own tables. The zoo's LeNet is 250 KB of weights at any input size, so the model seeds are a LeNet-shaped net
scaled down (Conv, Relu, MaxPool, Gemm, Softmax; a few KB): small inputs let the fuzzer reach every table
quickly."""
from __future__ import annotations

import io
import shutil
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from converter import convert, convert_for_training, to_graph
from converter.export import to_bytes
from converter.quant import QuantConfig, quantize
from converter.train import TrainParams
from lite import protect
from tests.fuzz.ms import KEY
from tests.fuzz.scratch import scratch_file

CORPUS = Path(__file__).parent / "corpus"
REPO = Path(__file__).resolve().parents[2]


def tiny_lenet() -> onnx.ModelProto:
    """1x1x8x8 -> Conv(4, 3x3) -> Relu -> MaxPool 2 -> Flatten -> Gemm(3) -> Softmax."""
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name) for name, shape in
               (("conv_w", (4, 1, 3, 3)), ("conv_b", (4,)), ("fc_w", (3, 36)), ("fc_b", (3,)))]
    nodes = [helper.make_node("Conv", ["input", "conv_w", "conv_b"], ["c"], kernel_shape=[3, 3]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["g"], transB=1),
             helper.make_node("Softmax", ["g"], ["output"], axis=1)]
    graph = helper.make_graph(nodes, "tiny_lenet",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 1, 8, 8])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def tflite_seeds() -> dict[str, bytes]:
    """Small `.tflite` files made with the schema's builders: one op with a constant, one with a signature."""
    from tests.tflite_models import TFLiteModel, single
    add, _ = single("ADD", [(1, 4), np.ones((1, 4), np.float32)], out_shape=(1, 4), options="AddOptions")
    m = TFLiteModel()
    x = m.tensor((1, 2, 2, 1), np.float32, name="x")
    w = m.const(np.ones((2, 2, 2, 1), np.float32))
    y = m.tensor((1, 1, 1, 2), np.float32, name="y")
    m.op("CONV_2D", [x, w, -1], [y], "Conv2DOptions", Padding=1, StrideW=1, StrideH=1)
    return {"add.tflite": add, "conv_signature.tflite": m.build([x], [y], {"inputs": ["x"], "outputs": ["y"]})}


def tflite_wild_seeds() -> dict[str, bytes]:
    """A streaming model keeping its state in a resource variable (CALL_ONCE, VAR_HANDLE, READ/ASSIGN_VARIABLE)
    and a FULLY_CONNECTED whose weights are block-sparse behind DENSIFY."""
    from tests.converter.frontends.tflite.test_importer import block_sparse
    from tests.converter.frontends.tflite.wild_models import streaming_mean
    from tests.tflite_models import TFLiteModel
    dense = np.arange(48, dtype=np.float32).reshape(6, 8) * np.repeat([[1, 0]], 6, axis=0).repeat(4, axis=1)
    m = TFLiteModel()
    x, y = m.tensor([3, 8], name="x"), m.tensor([3, 6], name="y")
    w = m.tensor([6, 8], np.float32, name="w_sparse", sparse=block_sparse(dense, 4))
    w_dense = m.tensor([6, 8], name="w")
    m.op("DENSIFY", [w], [w_dense])
    m.op("FULLY_CONNECTED", [x, w_dense, m.const(np.ones(6, np.float32))], [y], "FullyConnectedOptions")
    return {"streaming_variable.tflite": streaming_mean(), "sparse_fc.tflite": m.build([x], [y])}


def official(folder: str, names: tuple[str, ...]) -> dict[str, bytes]:
    """Official fixtures of the test suite (files made by MindSpore), under their folder's name."""
    return {f"{Path(folder).name}_{name}": (REPO / folder / name).read_bytes() for name in names}


def federated_seeds(training: bytes) -> dict[str, bytes]:
    """The messages of one round over the training file's weights, as serialized protobufs: a train request in
    the Message-API layout and in the legacy one (SecAgg+), an evaluate request and a train reply."""
    from flwr.app import ConfigRecord, Message, MessageType, RecordDict
    from flwr.common import FitIns, Parameters
    from flwr.common.serde import message_to_proto
    from flwr.compat.common import recorddict_compat as compat
    from flwr.supercore.task_identity import TaskIdentity

    from lite.context import Context
    from lite.federated.arrays import weights_record
    from lite.federated.wire import train_reply, train_request
    from lite.train.session import TrainSession
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
    with scratch_file(".ms", training) as path:
        session = TrainSession.CreateSession(path, Context(kernels="numpy"))
    arrays = weights_record(session)
    config = ConfigRecord({"server-round": 1, "local-epochs": 1, "batch-size": 8, "lr": 0.01})
    train = Message(RecordDict({"arrays": arrays, "config": config}), dst_node_id=2, message_type=MessageType.TRAIN)
    fitins = FitIns(Parameters([a.data for a in arrays.values()], "numpy.ndarray"), dict(config))
    legacy = Message(compat.fitins_to_recorddict(fitins, keep_input=True), dst_node_id=2,
                     message_type=MessageType.TRAIN)
    evaluate = Message(RecordDict({"arrays": arrays, "config": ConfigRecord({"server-round": 1})}), dst_node_id=2,
                       message_type=MessageType.EVALUATE)
    reply = train_reply(train, train_request(train, list(arrays.keys())), arrays, {"train-loss": 0.5}, 64)
    return {name: message_to_proto(msg).SerializeToString() for name, msg in
            (("train.pb", train), ("train_legacy.pb", legacy), ("evaluate.pb", evaluate), ("reply.pb", reply))}


def corpora() -> dict[str, dict[str, bytes]]:
    from tests.fuzz.converter_cli import seeds as onnx_seeds
    model, more = tiny_lenet(), onnx_seeds()
    plain = convert(model)
    calib = [{"input": np.random.default_rng(k).standard_normal((1, 1, 8, 8)).astype(np.float32)} for k in range(2)]
    int8 = to_bytes(quantize(to_graph(model), QuantConfig(method="MAX_MIN"), calib))
    training = convert_for_training(model, TrainParams())
    return {
        "ms": {"plain.ms": plain, "int8.ms": int8, "integrity.ms": protect.with_integrity(plain),
               "encrypted.ms": protect.encrypt(plain, KEY),
               "training.ms": training, "if.ms": convert(more["if"]), "lstm.ms": convert(more["lstm"])},
        "mindspore_lite": {"plain.ms": convert(model, save_type="MINDIR_LITE"),
                           **official("tests/lite/format/mindspore_lite_control_flow",
                                      ("if_else.ms", "if_matmul.ms", "if_while.ms", "two_whiles.ms", "while.ms",
                                       "while_if.ms")),
                           **official("tests/lite/format/mindspore_lite_training", ("lenet_momentum.ms",))},
        "mindir": {"digits_0to4.mindir": (REPO / "examples" / "mindir" / "digits_0to4.mindir").read_bytes(),
                   **official("tests/converter/frontends/mindir/fixtures/mindspore-2.0.0",
                              ("branches.mindir", "loop.mindir", "more_primitives.mindir", "primitives.mindir")),
                   **official("tests/converter/frontends/mindir/fixtures/mindspore-1.0.0", ("bilstm.mindir",))},
        "tflite": {**tflite_seeds(), **tflite_wild_seeds()},
        "onnx": {"tiny_lenet.onnx": model.SerializeToString(),
                 **{f"{name}.onnx": more[name].SerializeToString() for name in ("lstm", "attention", "if")}},
        "config": {
            "post_training.cfg": b"[common_quant_param]\nquant_type=FULL_QUANT\nbit_num=8\n"
                                 b"[full_quant_param]\nactivation_quant_method=MAX_MIN\nbias_correction=true\n",
            "weight.cfg": b"[common_quant_param]\nquant_type=WEIGHT_QUANT\nbit_num=4\nmin_quant_weight_size=0\n",
            "old_style.cfg": b"batch_count=2\nmethod_x=KL\nthread_num=1\n",
            "train.cfg": b"[train_param]\nloss=mse\nlearning_rate=0.1\noptimizer=sgd\n",
            "mixed_bit.cfg": b"[common_quant_param]\nquant_type=MIXED_BIT_WEIGHT_QUANT\n"
                             b"[mixed_bit_weight_quant_param]\ninit_scale=0.02\n",
            "dynamic.cfg": b"[common_quant_param]\nquant_type=DYNAMIC_QUANT\nbit_num=8\n",
            "preprocess.cfg": b"[common_quant_param]\nquant_type=FULL_QUANT\n[data_preprocess_param]\n"
                              b"calibrate_path=input:.\ncalibrate_size=2\ninput_type=IMAGE\n"
                              b"normalize_mean=[127.5]\nnormalize_std=[127.5]\nresize_width=8\nresize_height=8\n"},
        "benchmark": {"calibration.txt": b"\x00output 2 1 3\n0.1 0.2 0.7\n",
                      "expected.npy": b"\x01" + _saved(np.save, np.array([0.1, 0.2, 0.7], np.float32)),
                      "expected.npz": b"\x02" + _saved(np.savez, output=np.array([0.1, 0.2, 0.7], np.float32)),
                      "input.bin": b"\x03" + np.arange(12, dtype=np.float32).tobytes()},
        "federated": federated_seeds(training),
    }


def dictionaries() -> dict[str, list[bytes]]:
    """libFuzzer dictionary entries: file identifiers and magics, config sections and keys."""
    from dataclasses import fields

    from converter.quant.config import OLD_KEYS, SECTIONS
    from converter.train.config import SECTION, TrainParams
    magics = [b"MSPY", b"MSL2", protect.MAGIC_ENCRYPTED, protect.MAGIC_INTEGRITY]
    keys = [*OLD_KEYS, *(k for ks in SECTIONS.values() for k in ks), *(f.name for f in fields(TrainParams))]
    return {"ms": magics, "mindspore_lite": magics, "tflite": [b"TFL3"],
            "config": [f"[{s}]".encode() for s in (*SECTIONS, SECTION)] + [f"{k}=".encode() for k in keys],
            "benchmark": [b"\x93NUMPY", b"PK\x03\x04", b"'descr'", b"'shape'", b"'fortran_order'"],
            "federated": [b"\x93NUMPY", b"numpy.ndarray", b"arrays", b"config", b"metrics", b"fitins.parameters",
                          b"fitins.config", b"num-examples", b"server-round", b"local-epochs", b"batch-size", b"lr",
                          b"train", b"evaluate"]}


def _dict_line(token: bytes) -> str:
    return '"' + "".join(chr(b) if 32 <= b < 127 and b not in b'"\\' else f"\\x{b:02x}" for b in token) + '"\n'


def _saved(save: Callable[..., None], *arrays: np.ndarray, **named: np.ndarray) -> bytes:
    """What numpy's `save` or `savez` writes of the arrays."""
    buf = io.BytesIO()
    save(buf, *arrays, **named)
    return buf.getvalue()


def main() -> None:
    for harness, files in corpora().items():
        folder = CORPUS / harness
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for name, data in files.items():
            (folder / name).write_bytes(data)
    (CORPUS.parent / "dict").mkdir(exist_ok=True)
    for harness, tokens in dictionaries().items():
        (CORPUS.parent / "dict" / f"{harness}.dict").write_text("".join(map(_dict_line, tokens)))


if __name__ == "__main__":
    main()
