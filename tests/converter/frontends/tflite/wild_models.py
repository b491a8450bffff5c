"""`.tflite` files shaped like those found in the wild, beyond what `tests.tflite_models.TFLiteModel` writes:
tensors of every schema type (RESOURCE, STRING, ...), custom ops with their raw option bytes, and several
signature defs over several subgraphs (`build_entries`)."""
from __future__ import annotations

import struct
from typing import Any

import flatbuffers
import numpy as np
import tflite

from tests.tflite_models import TFLiteModel, offsets, table, vector

# a signature def: key, subgraph index, inputs and outputs as {name: tensor index of that subgraph}
Entry = tuple[str, int, dict[str, int], dict[str, int]]


def int_struct(*values: int) -> bytes:
    """A C struct of int32 fields, as MediaPipe's custom ops keep their options (TfLitePoolParams, ...)."""
    return struct.pack(f"<{len(values)}i", *values)


class WildModel(TFLiteModel):
    """`TFLiteModel` plus `typed` tensors of any schema type name and `custom` options bytes."""

    def typed(self, shape: list[int], type_name: str, name: str, data: bytes | None = None) -> int:
        """A tensor of the schema type `type_name` ("RESOURCE", "STRING", ...), with raw buffer bytes."""
        buffer = 0
        if data is not None:
            self.buffers.append(np.frombuffer(data, np.uint8))
            buffer = len(self.buffers) - 1
        self.tensors.append(dict(shape=list(shape), dtype=type_name, name=name, buffer=buffer, scale=None,
                                 zero_point=None, axis=0, sparse=None, signature=None, variable=False))
        return len(self.tensors) - 1

    def subgraph(self, build: Any) -> int:
        """As `TFLiteModel.subgraph`, the body a `WildModel` too."""
        g = type(self)(buffers=self.buffers, codes=self.codes)
        inputs, outputs = build(g)
        self.bodies.append((g, inputs, outputs))
        return len(self.bodies)

    def custom(self, name: str, inputs: list[int], outputs: list[int], options: bytes = b"") -> None:
        self.op("CUSTOM", inputs, outputs, custom=name)
        self.operators[-1]["custom_options"] = options

    def build_entries(self, inputs: list[int], outputs: list[int], entries: list[Entry]) -> bytes:
        """The file with one signature def per entry (subgraph 0 is this model with `inputs` and `outputs`,
        subgraph k the k-th body added with `subgraph`)."""
        b = flatbuffers.Builder(1024)
        buffers = [table(b, "Buffer", **({} if data is None else {"Data": vector(b, data.reshape(-1).view(np.uint8),
                                                                                 np.uint8)})) for data in self.buffers]
        graphs = [g._subgraph(b, ins, outs, name) for name, (g, ins, outs) in
                  [("main", (self, inputs, outputs)), *((f"body{k + 1}", body) for k, body in enumerate(self.bodies))]]
        codes = [table(b, "OperatorCode", BuiltinCode=builtin, DeprecatedBuiltinCode=min(builtin, 127), Version=v,
                       **({"CustomCode": b.CreateString(custom)} if custom else {}))
                 for builtin, custom, v in self.codes]
        defs = []
        for key, subgraph, ins, outs in entries:
            maps = [offsets(b, [table(b, "TensorMap", Name=b.CreateString(n), TensorIndex=i) for n, i in m.items()])
                    for m in (ins, outs)]
            defs.append(table(b, "SignatureDef", Inputs=maps[0], Outputs=maps[1], SignatureKey=b.CreateString(key),
                              SubgraphIndex=subgraph))
        model = table(b, "Model", Version=3, OperatorCodes=offsets(b, codes), Subgraphs=offsets(b, graphs),
                      Buffers=offsets(b, buffers), SignatureDefs=offsets(b, defs))
        b.Finish(model, file_identifier=b"TFL3")
        return bytes(b.Output())

    def _tensor(self, b: flatbuffers.Builder, t: dict) -> int:
        if not isinstance(t["dtype"], str):
            return super()._tensor(b, t)
        return table(b, "Tensor", Shape=vector(b, t["shape"]), Name=b.CreateString(t["name"]),
                     Type=getattr(tflite.TensorType, t["dtype"]), Buffer=t["buffer"])

    def _operator(self, b: flatbuffers.Builder, op: dict) -> int:
        strings = {k: v for k, v in op["fields"].items() if isinstance(v, str)}
        if strings:         # options with strings (VarHandleOptions' shared_name): all of them strings here
            fields = dict(BuiltinOptions=table(b, op["options"], **{k: b.CreateString(v) for k, v in strings.items()}),
                          BuiltinOptionsType=getattr(tflite.BuiltinOptions, op["options"]))
            return table(b, "Operator", OpcodeIndex=op["code"], Inputs=vector(b, op["inputs"]),
                         Outputs=vector(b, op["outputs"]), **fields)
        if "custom_options" not in op:
            return super()._operator(b, op)
        options = vector(b, np.frombuffer(op["custom_options"], np.uint8), np.uint8)
        return table(b, "Operator", OpcodeIndex=op["code"], Inputs=vector(b, op["inputs"]),
                     Outputs=vector(b, op["outputs"]), CustomOptions=options)


def run_litert_delegated(data: bytes, feeds: list[np.ndarray]) -> list[np.ndarray]:
    """LiteRT's outputs with its default delegate (XNNPACK), which has MediaPipe's custom ops
    (Convolution2DTransposeBias, MaxPoolingWithArgmax2D, MaxUnpooling2D) built in."""
    import pytest
    module: Any = pytest.importorskip("ai_edge_litert.interpreter", reason="LiteRT (ai-edge-litert) is the oracle")
    interpreter = module.Interpreter(model_content=data, num_threads=1)
    interpreter.allocate_tensors()
    for detail, x in zip(interpreter.get_input_details(), feeds):
        interpreter.set_tensor(detail["index"], x)
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]).copy() for d in interpreter.get_output_details()]


def streaming_mean(frames: int = 2, channels: int = 2, quant: tuple[float, int] | None = None,
                   initialised: bool = True) -> bytes:
    """A streaming model keeping its state in a resource variable, as TFLite exports them: CALL_ONCE runs
    subgraph 1 (VAR_HANDLE 'state', ASSIGN_VARIABLE of a constant) on the first invocation; each invocation
    reads the state (the last `frames` chunks), outputs the mean of them and the new chunk, and assigns the last
    `frames` back. `quant` (scale, zero point): every tensor int8 with these params (a full-int8 model)."""
    m = WildModel()
    dtype, q = (np.float32, {}) if quant is None else (np.int8, dict(scale=quant[0], zero_point=quant[1]))
    x = m.tensor((1, 1, channels), dtype, name="chunk", **q)
    state = (1, frames, channels)
    start = np.arange(frames * channels).reshape(state) % 5 + (0 if quant is None else quant[1])

    def init(g: WildModel) -> tuple[list[int], list[int]]:
        handle = g.typed([], "RESOURCE", "init/state")
        g.op("VAR_HANDLE", [], [handle], "VarHandleOptions", SharedName="state")
        g.op("ASSIGN_VARIABLE", [handle, g.const(start.astype(dtype), **q)], [])
        return [], []
    if initialised:
        m.op("CALL_ONCE", [], [], "CallOnceOptions", InitSubgraphIndex=m.subgraph(init))
    handle = m.typed([], "RESOURCE", "stream/states")
    m.op("VAR_HANDLE", [], [handle], "VarHandleOptions", SharedName="state")
    old, joined = m.tensor(state, dtype, name="stream/read", **q), m.tensor((1, frames + 1, channels), dtype,
                                                                           name="stream/joined", **q)
    m.op("READ_VARIABLE", [handle], [old])
    m.op("CONCATENATION", [old, x], [joined], "ConcatenationOptions", Axis=1)
    mean, new = m.tensor((1, channels), dtype, name="mean", **q), m.tensor(state, dtype, name="stream/new", **q)
    m.op("MEAN", [joined, m.const(np.array([1], np.int32))], [mean], "ReducerOptions")
    m.op("SLICE", [joined, m.const(np.array([0, 1, 0], np.int32)), m.const(np.array(state, np.int32))], [new])
    m.op("ASSIGN_VARIABLE", [handle, new], [])
    return m.build([x], [mean])


def streaming_conv_int8(frames: int = 3, channels: int = 4, filters: int = 8) -> bytes:
    """A full-int8 streaming layer as streaming keyword spotters keep it: the state variable holds the last
    `frames` chunks [1, frames, 1, C]; each invocation joins the new chunk, runs an int8 CONV_2D (per-channel
    weights, int32 bias, RELU) over the whole window and stores the last `frames` back."""
    rng = np.random.default_rng(1)
    m, q = WildModel(), dict(scale=0.05, zero_point=-3)
    state = (1, frames, 1, channels)
    x = m.tensor((1, 1, 1, channels), np.int8, name="chunk", **q)

    def init(g: WildModel) -> tuple[list[int], list[int]]:
        handle = g.typed([], "RESOURCE", "init/states")
        g.op("VAR_HANDLE", [], [handle], "VarHandleOptions", SharedName="stream/states")
        g.op("ASSIGN_VARIABLE", [handle, g.const(np.full(state, -3, np.int8), **q)], [])
        return [], []
    m.op("CALL_ONCE", [], [], "CallOnceOptions", InitSubgraphIndex=m.subgraph(init))
    handle = m.typed([], "RESOURCE", "stream/handle")
    m.op("VAR_HANDLE", [], [handle], "VarHandleOptions", SharedName="stream/states")
    old = m.tensor(state, np.int8, name="stream/read", **q)
    joined = m.tensor((1, frames + 1, 1, channels), np.int8, name="stream/joined", **q)
    m.op("READ_VARIABLE", [handle], [old])
    m.op("CONCATENATION", [old, x], [joined], "ConcatenationOptions", Axis=1)
    w_scale = rng.uniform(0.002, 0.01, filters)
    weights = m.const(rng.integers(-127, 128, (filters, frames + 1, 1, channels)).astype(np.int8), scale=w_scale,
                      zero_point=np.zeros(filters, np.int64), axis=0)
    bias = m.const(rng.integers(-500, 500, filters).astype(np.int32), scale=0.05 * w_scale,
                   zero_point=np.zeros(filters, np.int64))
    y = m.tensor((1, 1, 1, filters), np.int8, name="features", scale=0.02, zero_point=-128)
    m.op("CONV_2D", [joined, weights, bias], [y], "Conv2DOptions", Padding=1, StrideW=1, StrideH=1,
         FusedActivationFunction=1)
    new = m.tensor(state, np.int8, name="stream/new", **q)
    m.op("SLICE", [joined, m.const(np.array([0, 1, 0, 0], np.int32)), m.const(np.array(state, np.int32))], [new])
    m.op("ASSIGN_VARIABLE", [handle, new], [])
    return m.build([x], [y])
