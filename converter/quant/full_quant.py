"""Full quantization: rewrite the optimised float IR into int8 where the runtime has int8 kernels.

Nodes whose op has an `(op, INT8)` kernel (and whose float activations were calibrated) become int8: their
activations get per-tensor asymmetric params, Conv2D/FullConnection/MatMul weights per-channel symmetric params,
biases INT32 with `scale = s_x * s_w[c]`. The constants an int8 kernel lists in `float_inputs` (LayerNorm's
scale and bias, LSTM/GRU's B) stay float32; those in `row_weights` (LSTM/GRU's W and R) get a scale per gate
row. `QuantDTypeCast` nodes convert at every int8 <-> float border, so ops without an int8 kernel stay float in
between. Graph inputs/outputs stay float32 unless asked otherwise.
"""
from __future__ import annotations

import numpy as np

from converter.ir import Graph, Node, Value
from converter.passes.fuse_activation import split_activation
from converter.quant.qparams import activation_param, make_param, quantize_tensor
from converter.quant.weights import quantize_weight, weight_axis
from lite import kernel as kernel_registry
from lite.dtypes import DataType
from lite.traits import traits
from schema import fb
CLAMP_ACTIVATIONS = (fb.ActivationType.NO_ACTIVATION, fb.ActivationType.RELU, fb.ActivationType.RELU6)
BOUNDARY_TYPES = {"FLOAT": DataType.FLOAT32, "INT8": DataType.INT8, "UINT8": DataType.UINT8}
Ranges = dict[str, tuple[float, float]]
# Graph inputs and outputs get at least this many bits whatever `activation_bits`: every tensor is stored in int8
# anyway, and the application hands the inputs and reads the outputs as numbers. An input rounded coarser loses
# what no later layer can recover (EfficientNet-Lite0's normalised image costs more logit SQNR rounded coarser
# than any other activation: A7W7 KL + AdaRound 15.88 -> 17.69 dB with it at 8); at 4 bits, LeNet-5's 16 logit
# levels tie its argmax on 2 % of the MNIST test images and cost 0.7 points on their own (docs/quantization.md).
BOUNDARY_BITS = 8


def has_int8_kernel(op: str) -> bool:
    """True when the runtime has a quantization-aware int8 kernel for `op` (one of `lite.kernels.int8`; a
    dtype-generic kernel that accepts int8 does not know the output's params)."""
    cls = kernel_registry.kernel_for(op, DataType.INT8, quantized=True)
    return cls is not None and cls is not kernel_registry.kernel_for(op, DataType.INT8)


def split_activations(graph: Graph) -> Graph:
    """Int8 kernels fuse only clamps (RELU, RELU6): other fused activations (SWISH, SIGMOID, ...) of ops with
    an int8 kernel become their own Activation node again, so that calibration sees the pre-activation
    range and the activation runs as an int8 lookup table. The float meaning is unchanged."""
    split_activation(graph, keep=lambda node: node.attrs["activation"] in CLAMP_ACTIVATIONS
                     or not has_int8_kernel(node.op))
    return graph


SOFTMAX_SPAN = 16.0     # a Softmax input's range kept below its lowest row maximum: exp(-16) = 1e-7, under any
                        # int8 output level
SOFTMAX_STEP = 0.125    # the coarsest int8 input step of an int8 Softmax: probabilities within about 6 %


def softmax_input_ranges(graph: Graph, ranges: Ranges, row_max_floors: dict[str, float]) -> Ranges:
    """`ranges` fitted to the int8 Softmax. Only a score's distance to its row's maximum matters, and scores more
    than SOFTMAX_SPAN below it round to 0 anyway, so each Softmax input's low end is raised to SOFTMAX_SPAN below
    the smallest row maximum seen in calibration (`row_max_floors`; an attention mask's -10000 would otherwise
    stretch the scale until every real score fell into one level: all-MiniLM-L6-v2, embedding cosine 0.22).
    When the range left is still too wide for SOFTMAX_STEP, the input (up through the same-quant ops sharing its
    params) leaves `ranges`: the Softmax and the op producing its input stay float between casts."""
    out = dict(ranges)
    for node in graph.nodes:
        name = node.inputs[0] if node.op == "Softmax" and node.inputs else ""
        if name not in out:
            continue
        lo, hi = out[name]
        lo = max(lo, min(row_max_floors.get(name, lo + SOFTMAX_SPAN), hi) - SOFTMAX_SPAN)   # no floor: as is
        narrow = (hi - lo) / 255 <= SOFTMAX_STEP
        while name in out:
            if narrow:
                out[name] = (max(out[name][0], lo), out[name][1])
            else:
                del out[name]
            producer = graph.producer(name)
            name = producer.inputs[0] if producer is not None and traits(producer.op).same_quant else ""
    return out


def _int8_kernel(op: str) -> type:
    return kernel_registry.kernel_for(op, DataType.INT8, quantized=True)


def _weighted(node: Node, graph: Graph) -> bool:
    """Ops with a weight input (Conv2D/FullConnection/MatMul, LSTM/GRU's W and R) can only be int8 with a
    constant float weight (2-D for MatMul)."""
    index = traits(node.op).weight_input
    rows = getattr(_int8_kernel(node.op), "row_weights", ())
    for k in rows:
        w = graph.const(node.inputs[k]) if len(node.inputs) > k and node.inputs[k] else None
        if w is None or w.dtype != np.float32 or w.ndim != 3:
            return False
    if index is None:
        return True
    w = graph.const(node.inputs[index])
    return w is not None and w.dtype == np.float32 and (node.op != "MatMul" or w.ndim == 2)


def int8_nodes(graph: Graph, ranges: Ranges) -> list[Node]:
    """The nodes to run in int8: an int8 kernel exists and accepts the node, and every float activation they
    touch was calibrated."""
    chosen = []
    for node in graph.nodes:
        touched = [v for v in (*node.inputs, *node.outputs) if v and graph.const(v) is None]
        if (has_int8_kernel(node.op) and _weighted(node, graph) and touched
                and kernel_registry.kernel_for(node.op, DataType.INT8, quantized=True).accepts(node.attrs,
                                                                                              len(node.outputs))
                and all(graph.values[v].dtype == np.float32 and v in ranges for v in touched)):
            chosen.append(node)
    return chosen


def _set_int8(value: Value, param: fb.QuantParamT) -> None:
    value.dtype, value.quant_params, value.quant_axis = np.dtype(np.int8), [param], 0


def _add_cast(graph: Graph, src: str, dst: str, src_t: int, dst_t: int) -> None:
    graph.nodes.append(Node("QuantDTypeCast", graph.fresh(f"{dst}/QuantDTypeCast"), [src], [dst],
                            {"src_t": int(src_t), "dst_t": int(dst_t)}))


def _quantize_weights(graph: Graph, node: Node, in_param: fb.QuantParamT, bits: int, method: str) -> None:
    """Per-channel int8 weight (scales by `method`, weights.WEIGHT_METHODS); INT32 bias with scale
    s_x * s_w[c] (MatMul's B is stored untransposed)."""
    index = traits(node.op).weight_input
    w = graph.const(node.inputs[index])
    if node.op == "MatMul" and node.attrs.get("transpose_b"):
        w, node.attrs = w.T, {**node.attrs, "transpose_b": False}
    axis = weight_axis(node, w)
    q, params = quantize_weight(w, axis, bits, method)
    source = graph.values[node.inputs[index]]
    wname = graph.add_const(q, f"{source.name}_int8")
    wvalue = graph.values[wname]
    wvalue.quant_params, wvalue.quant_axis, wvalue.format = params, axis, source.format
    wvalue.source_perm = source.source_perm if node.op != "MatMul" else ()
    node.inputs[index] = wname
    b_in = traits(node.op).bias_input
    has_bias = b_in is not None and len(node.inputs) > b_in and node.inputs[b_in]
    bias = graph.const(node.inputs[b_in]) if has_bias else None
    if bias is not None:
        set_int32_bias(graph, node, bias.astype(np.float64), in_param)


BIAS_LIMIT = 2 ** 30      # |bias| in units of s_x * s_w stays below this, leaving int32 room for the products


def widen_weight_scales(graph: Graph, weight: str, min_scales: np.ndarray) -> None:
    """Raise per-channel weight scales to at least `min_scales`, requantizing those channels' integers."""
    value = graph.values[weight]
    old = np.array([p.scale for p in value.quant_params], np.float64)
    new = np.maximum(old, min_scales)
    shape = [1] * value.const.ndim
    shape[value.quant_axis] = -1
    value.const = np.rint(value.const * (old / new).reshape(shape)).astype(value.const.dtype)
    for p, scale in zip(value.quant_params, new):
        p.scale = float(scale)


def set_int32_bias(graph: Graph, node: Node, bias: np.ndarray, in_param: fb.QuantParamT) -> None:
    """Give `node` the INT32 version of the float `bias` (scale s_x * s_w[c], zero point 0). A channel whose
    weights are so small that its bias would not fit int32 gets a larger weight scale first (as MindSpore does)."""
    t = traits(node.op)
    weight = node.inputs[t.weight_input]
    widen_weight_scales(graph, weight, np.abs(bias) / (in_param.scale * BIAS_LIMIT))
    scales = np.array([in_param.scale * p.scale for p in graph.values[weight].quant_params], np.float64)
    q = np.rint(bias / scales).astype(np.int32)
    name = graph.add_const(q, f"{node.name}/bias_int32")
    graph.values[name].quant_params = [make_param(s, 0, 0.0, 0.0, 32, False) for s in scales]
    graph.values[name].format = fb.Format.ND
    while len(node.inputs) <= t.bias_input:
        node.inputs.append("")
    node.inputs[t.bias_input] = name


def _quantize_row_weight(graph: Graph, name: str, bits: int, method: str) -> str:
    """A recurrent op's W or R [D, G*H, in] as int8 with one symmetric scale per gate row (axis 1)."""
    q, params = quantize_weight(graph.const(name), 1, bits, method)
    qname = graph.add_const(q, f"{name}_int8")
    graph.values[qname].quant_params, graph.values[qname].quant_axis = params, 1
    return qname


def _quantize_const_input(graph: Graph, name: str, bits: int, param: fb.QuantParamT | None = None) -> str:
    """A float constant operand of an int8 op, quantized per tensor with `param` (default: over its own
    range; ops that keep their input's params, such as Pad's fill value, pass the data input's)."""
    c = graph.const(name)
    param = param or activation_param(float(c.min()), float(c.max()), bits)
    qname = graph.add_const(quantize_tensor(c, param), f"{name}_int8")
    graph.values[qname].quant_params, graph.values[qname].format = [param], graph.values[name].format
    return qname


def full_quantize(graph: Graph, ranges: Ranges, activation_bits: int = 8, weight_bits: int = 8,
                  input_type: str = "FLOAT", output_type: str = "FLOAT", weight_method: str = "MAX_MIN",
                  layer_bits: dict[str, int] | None = None,
                  row_max_floors: dict[str, float] | None = None) -> Graph:
    """Rewrite `graph` (mutated and returned) with calibrated float `ranges` of its activations; `layer_bits`
    gives some weighted layers (by node name) their own weight bit width, and a layer it maps to 0 (or less)
    stays float; `row_max_floors` are the Softmax inputs' smallest row maxima (`softmax_input_ranges`). Graph
    inputs and outputs keep at least BOUNDARY_BITS."""
    graph.sort()
    layer_bits = layer_bits or {}
    ranges = softmax_input_ranges(graph, ranges, row_max_floors or {})
    chosen = [n for n in int8_nodes(graph, ranges) if layer_bits.get(n.name, weight_bits) > 0]
    chosen_ids = {id(n) for n in chosen}
    params: dict[str, fb.QuantParamT] = {}
    int8_of: dict[str, str] = {}            # float activation -> its int8 version read by int8 nodes

    def bits_of(name: str) -> int:
        boundary = name in graph.inputs or name in graph.outputs
        return max(activation_bits, BOUNDARY_BITS) if boundary else activation_bits

    def int8_input(name: str) -> str:
        if name in params:                  # produced by an int8 node
            return name
        if name not in int8_of:
            qname = graph.fresh(f"{name}_int8")
            value = graph.values[name]
            graph.values[qname] = Value(qname, value.shape, np.dtype(np.int8), format=value.format)
            _set_int8(graph.values[qname], activation_param(*ranges[name], bits_of(name)))
            _add_cast(graph, name, qname, DataType.FLOAT32, DataType.INT8)
            int8_of[name] = qname
        return int8_of[name]

    for node in chosen:
        for i, name in enumerate(node.inputs):
            if name and graph.const(name) is None:
                node.inputs[i] = int8_input(name)
        in_param = graph.values[node.inputs[0]].quant_params[0]
        t, kernel = traits(node.op), _int8_kernel(node.op)
        kept_float, rows = getattr(kernel, "float_inputs", ()), getattr(kernel, "row_weights", ())
        for i, name in enumerate(node.inputs):
            if not name or t.weight_input is not None or graph.const(name) is None \
                    or graph.const(name).dtype != np.float32 or i in kept_float:
                continue
            if i in rows:
                node.inputs[i] = _quantize_row_weight(graph, name, layer_bits.get(node.name, weight_bits),
                                                      weight_method)
            else:
                shared = in_param if t.same_quant else None
                node.inputs[i] = _quantize_const_input(graph, name, activation_bits, shared)
        if t.weight_input is not None:
            _quantize_weights(graph, node, in_param, layer_bits.get(node.name, weight_bits), weight_method)
        for name in node.outputs:
            params[name] = in_param if t.same_quant else activation_param(*ranges[name], bits_of(name))
            _set_int8(graph.values[name], params[name])
    for name in params:
        _float_readers_through_cast(graph, name, chosen_ids)
    graph.sort()
    retype_boundaries(graph, BOUNDARY_TYPES[input_type], BOUNDARY_TYPES[output_type])
    graph.prune()
    graph.sort()
    return graph


def _float_readers_through_cast(graph: Graph, name: str, chosen_ids: set[int]) -> None:
    """Give the float readers (and graph outputs) of the int8 activation `name` a dequantized copy; a graph
    output keeps its name on the float side."""
    readers = [n for n in graph.nodes if name in n.inputs and id(n) not in chosen_ids
               and n.op != "QuantDTypeCast"]
    is_output = name in graph.outputs
    if not readers and not is_output:
        return
    value = graph.values[name]
    if is_output:
        qname = graph.fresh(f"{name}_int8")
        graph.rename_value(name, qname)
        graph.outputs = [name if o == qname else o for o in graph.outputs]
        fname = name
    else:
        qname, fname = name, graph.fresh(f"{name}_float")
    graph.values[fname] = Value(fname, value.shape, np.dtype(np.float32), format=value.format)
    for n in readers:
        n.inputs = [fname if i in (name, qname) else i for i in n.inputs]
    _add_cast(graph, qname, fname, DataType.INT8, DataType.FLOAT32)


def _shift_to_uint8(param: fb.QuantParamT) -> fb.QuantParamT:
    return make_param(param.scale, param.zeroPoint + 128, param.min, param.max, param.numBits, False)


def retype_boundaries(graph: Graph, input_type: int, output_type: int) -> None:
    """Make graph inputs read only by float->int8 casts (and outputs written by int8->float casts) INT8 or
    UINT8 tensors as asked: INT8 drops the cast, UINT8 turns it into a uint8<->int8 cast."""
    if input_type != DataType.FLOAT32:
        for name in graph.inputs:
            readers = graph.consumers(name)
            if not readers or any(n.op != "QuantDTypeCast" for n in readers) or name in graph.outputs:
                continue
            param = graph.values[readers[0].outputs[0]].quant_params[0]
            for cast in readers[1:]:
                graph.replace_uses(cast.outputs[0], readers[0].outputs[0])
                graph.remove_node(cast)
            _retype(graph, graph.values[name], readers[0], param, input_type, at_input=True)
    if output_type != DataType.FLOAT32:
        for name in graph.outputs:
            cast = graph.producer(name)
            if cast is None or cast.op != "QuantDTypeCast" or graph.values[name].dtype != np.float32:
                continue
            readers = graph.consumers(name)
            if readers:                     # float readers of the output keep a dequantized copy of their own
                value = graph.values[name]
                fname = graph.fresh(f"{name}_float")
                graph.values[fname] = Value(fname, value.shape, value.dtype, format=value.format)
                _add_cast(graph, cast.inputs[0], fname, DataType.INT8, DataType.FLOAT32)
                for n in readers:
                    n.inputs = [fname if i == name else i for i in n.inputs]
            param = graph.values[cast.inputs[0]].quant_params[0]
            _retype(graph, graph.values[name], cast, param, output_type, at_input=False)


def _retype(graph: Graph, value: Value, cast: Node, param: fb.QuantParamT, data_type: int, at_input: bool) -> None:
    """Make the boundary `value` (graph input or output next to `cast`) INT8 (no cast) or UINT8."""
    if data_type == DataType.INT8:
        graph.remove_node(cast)
        if at_input:
            graph.replace_uses(cast.outputs[0], value.name)
            _set_int8(value, param)
        else:
            graph.values.pop(value.name)
            graph.rename_value(cast.inputs[0], value.name)
        return
    value.dtype, value.quant_params = np.dtype(np.uint8), [_shift_to_uint8(param)]
    cast.attrs = ({"src_t": int(DataType.UINT8), "dst_t": int(DataType.INT8)} if at_input else
                  {"src_t": int(DataType.INT8), "dst_t": int(DataType.UINT8)})
