"""An int8 model file is little more than its int8 weights: per-channel params do not swell it, and are kept exactly."""
from __future__ import annotations

import numpy as np
import pytest

import models
from converter import to_graph
from converter.export import to_bytes
from converter.ir import Graph
from converter.quant import WEIGHT_QUANT, QuantConfig, quantize
from lite.model import Model


@pytest.fixture(scope="module")
def mobilenet_v2() -> tuple[bytes, Graph, bytes]:
    """(float file, int8 graph, int8 file) of MobileNetV2 (3.5 M weights, 17 k output channels) at 32x32."""
    model = models.build("mobilenet_v2", input_size=32)
    float_bytes = to_bytes(to_graph(model))
    rng = np.random.default_rng(0)
    samples = [{"input": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)} for _ in range(2)]
    graph = quantize(to_graph(model), QuantConfig(method="MAX_MIN"), samples)
    return float_bytes, graph, to_bytes(graph)


def test_int8_file_is_at_most_0_27_of_the_float_file(mobilenet_v2) -> None:
    float_bytes, _, int8_bytes = mobilenet_v2
    assert len(int8_bytes) <= 0.27 * len(float_bytes), f"{len(int8_bytes)} / {len(float_bytes)}"


def test_int8_file_keeps_every_quant_param_of_the_quantizer(mobilenet_v2) -> None:
    _, graph, int8_bytes = mobilenet_v2
    model = Model.Import(int8_bytes)
    per_channel = 0
    for t in model.tensors:
        value = graph.values[t.name]
        assert [vars(p) for p in t.quant_params] == [vars(p) for p in value.quant_params], t.name
        assert not value.quant_params or t.quant_axis == value.quant_axis, t.name
        per_channel += len(value.quant_params) > 1
    assert per_channel > 100     # every conv's weight and bias


def test_4_bit_weights_take_half_the_bytes_and_run_as_stored_whole(mobilenet_v2, monkeypatch) -> None:
    """A8W4: bit-packed weights (format 1.3) halve the int8 file; the packed model computes exactly what the
    same model with its weights stored one per byte does."""
    from lite import Context, LiteSession
    from schema import bitpack
    model = models.build("mobilenet_v2", input_size=32)
    rng = np.random.default_rng(0)
    samples = [{"input": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)} for _ in range(2)]
    graph = quantize(to_graph(model), QuantConfig(method="MAX_MIN", weight_bits=4), samples)
    packed = to_bytes(graph)
    monkeypatch.setattr(bitpack, "packed_bits", lambda data, params: None)
    whole = to_bytes(graph)
    _, _, int8_bytes = mobilenet_v2
    assert len(whole) > 0.95 * len(int8_bytes) and len(packed) <= 0.55 * len(int8_bytes), (len(packed), len(whole))
    outputs = []
    for buf in (packed, whole):
        session = LiteSession.CreateSession(buf, len(buf), Context(thread_num=1))
        session.GetInputs()[0].set_data(samples[0]["input"])
        session.RunGraph()
        outputs.append(next(iter(session.GetOutputs().values())).numpy().copy())
    assert np.array_equal(*outputs)


def test_4_bit_weight_only_files_are_bit_packed_too() -> None:
    """WeightQuant at 4 bits (int8 weights + QuantDTypeCast in memory) stores half the bytes of 8 bits."""
    model = models.build("mobilenet_v2", input_size=32)
    sizes = {bits: len(to_bytes(quantize(to_graph(model), QuantConfig(quant_type=WEIGHT_QUANT, weight_bits=bits))))
             for bits in (8, 4)}
    assert sizes[4] <= 0.55 * sizes[8], sizes
