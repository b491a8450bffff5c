"""Post-training quantization (docs/quantization.md): calibrate the optimised float graph in `lite`, rewrite it
to int8 (or quantize its weights only), optionally correct biases and report per-layer agreement."""
from __future__ import annotations

import copy
import os
import sys

import onnx

from converter.export import DEFAULT_SAVE_TYPE, to_bytes
from converter.ir import Graph
from converter.frontends import SourceModel
from converter.frontends.onnx import as_source, load_onnx
from converter.load import to_graph
from converter.passes.fuse_prelu import split_prelu
from converter.passes.fuse_residual import split_residuals
from converter.quant.bias_correction import correct_biases_if_better
from converter.quant.calibration import calibrate, load_calibration, shared_ranges
from converter.quant.adaround import adaround_weights, estimate_seconds, plan
from converter.quant.auto import (RANGE_CHOICES, adaround_reason, choose_ranges, estimated_total, resolve,
                                  summary)
from converter.quant.cost import DONE_PASSES, REFERENCE_RATES, graph_work
from converter.quant.config import (AUTO, DYNAMIC_QUANT, MIXED_BIT_WEIGHT_QUANT, POST_TRAINING, WEIGHT_QUANT,
                                    QuantConfig, load_config, parse_config)
from converter.quant.dynamic import dynamic_quantize
from converter.quant.debug import debug_report, format_report, write_report
from converter.quant.equalization import equalize_for_quantization
from converter.quant.full_quant import full_quantize, split_activations
from converter.quant.mixed_precision import search_bits, weight_only_bits
from converter.quant.sensitivity import layer_sensitivity, sensitivity_markdown, write_sensitivity
from converter.quant.weights import weight_only_quantize
from lite.status import ParamInvalidError

__all__ = ["QuantConfig", "convert_quantized", "load_config", "make_config", "parse_config", "quantize",
           "DYNAMIC_QUANT", "MIXED_BIT_WEIGHT_QUANT", "POST_TRAINING", "WEIGHT_QUANT"]


def make_config(config_file: str | os.PathLike | None = None, **flags) -> QuantConfig:
    """The config file's settings (if any) with the converter flags given as QuantConfig fields on top
    (None = not given): `--quantType` -> quant_type, `--bitNum` -> activation_bits and weight_bits,
    `--quantWeightSize` -> min_quant_weight_size, `--quantWeightChannel` -> min_quant_weight_channel,
    `--quantDebug` -> debug_info_save_path, `--inputDataType/--outputDataType` -> input/output_data_type."""
    config = load_config(config_file) if config_file else QuantConfig()
    for key, value in flags.items():
        if key not in QuantConfig.__dataclass_fields__:
            raise TypeError(f"QuantConfig has no field '{key}'")
        if value is not None:
            setattr(config, key, value)
    return config.validate()


def quantize(graph: Graph, config: QuantConfig, calibration_inputs: list[dict] | None = None) -> Graph:
    """Quantize the optimised float `graph` (consumed: use the returned graph). PostTraining needs calibration
    inputs ({input name: float32 array} per sample); WeightQuant needs none."""
    config.validate()
    if config.quant_type == DYNAMIC_QUANT:
        return dynamic_quantize(graph, config.weight_bits, config.min_quant_weight_size,
                                config.min_quant_weight_channel)
    if config.quant_type != POST_TRAINING:
        bits = weight_only_bits(config.init_scale) if config.quant_type == MIXED_BIT_WEIGHT_QUANT else \
            config.weight_bits
        return weight_only_quantize(graph, bits, config.min_quant_weight_size, config.min_quant_weight_channel)
    methods = resolve(config)
    samples = calibration_inputs if calibration_inputs is not None else load_calibration(graph, config)
    if not samples:
        raise ParamInvalidError("calibrate_path: no calibration samples (the calibration folder is empty)")
    split_residuals(split_prelu(graph))
    if methods.cross_layer_equalization:
        equalize_for_quantization(graph, samples)
    float_graph = copy.deepcopy(split_activations(graph))
    floors: dict[str, float] = {}
    reference: list[dict] = []                  # the float outputs of every sample, from the calibration run
    observers = calibrate(float_graph, samples, methods.method or RANGE_CHOICES[0], config.activation_bits, floors,
                          reference)
    pass_seconds = graph_work(float_graph).pass_seconds(len(samples))       # the reference machine's, not measured

    def build(with_ranges: dict, layer_bits: dict[str, int] | None = None, target: Graph | None = None) -> Graph:
        return full_quantize(target or copy.deepcopy(float_graph), with_ranges, config.activation_bits,
                             config.weight_bits, config.input_data_type, config.output_data_type,
                             methods.weight_method, layer_bits or {}, floors)

    method, sqnr = methods.method, {}
    if method is None:
        method, ranges, sqnr = choose_ranges(float_graph, observers, samples, build, reference)
    else:
        ranges = shared_ranges(float_graph, {k: o.range() for k, o in observers.items()})
    layer_bits = (search_bits(float_graph, ranges, config.activation_bits, samples, config.min_output_sqnr,
                              lambda bits: build(ranges, bits)) if config.min_output_sqnr > 0 else {})
    qgraph = build(ranges, layer_bits, graph)
    adaround = methods.adaround
    if adaround is not False:
        layers = plan(float_graph, qgraph, len(samples), config.adaround_iterations)
        seconds = estimate_seconds(layers, pass_seconds, REFERENCE_RATES) if layers else []
    why = f"adaround={str(adaround).lower()} in the config"
    if adaround is None:
        total = estimated_total(methods, DONE_PASSES * pass_seconds, sum(seconds), pass_seconds)
        adaround = bool(layers) and total <= config.time_budget
        why = adaround_reason(len(layers), len(samples), sum(seconds), total, config.time_budget, adaround)
    if methods.preset == AUTO:
        print(summary(methods, method, sqnr, adaround, why), file=sys.stderr, flush=True)
    if adaround:
        adaround_weights(float_graph, qgraph, samples, config.adaround_iterations, layers, seconds)
    if methods.bias_correction:
        qgraph = correct_biases_if_better(float_graph, qgraph, samples, reference)
    if config.debug_info_save_path:
        rows = debug_report(float_graph, qgraph, samples)
        print(format_report(rows))
        write_report(rows, config.debug_info_save_path)
        sensitivity = layer_sensitivity(float_graph, ranges, config.activation_bits, config.weight_bits, samples)
        print(sensitivity_markdown(sensitivity))
        write_sensitivity(sensitivity, config.debug_info_save_path)
    return qgraph


def convert_quantized(model: SourceModel | onnx.ModelProto | str | os.PathLike,
                      config: QuantConfig | str | os.PathLike, input_shapes: dict[str, list[int]] | None = None,
                      calibration_inputs: list[dict] | None = None, save_type: str = DEFAULT_SAVE_TYPE) -> bytes:
    """A frontend's model (or an ONNX model, or an ONNX file's path) quantized as `.ms` bytes (of `save_type`'s
    format); `config` is a QuantConfig or a config file path."""
    if not isinstance(config, QuantConfig):
        config = load_config(config)
    if isinstance(model, (str, os.PathLike)):
        model = load_onnx(model)
    model = as_source(model)
    return to_bytes(quantize(to_graph(model, input_shapes), config, calibration_inputs), model.fmk_type, save_type)
