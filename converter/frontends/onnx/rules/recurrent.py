"""ONNX LSTM, GRU and RNN (opsets 1, 3, 7, 14, 22) -> our ops of the same names, with ONNX's inputs.

The rule resolves what ONNX leaves implicit, so the kernel sees one explicit form: the activation list per
direction (the op's default, or one direction's list repeated for bidirectional), each activation's alpha and beta
(the listed values are consumed in order by the activations that take them, the rest get ONNX's defaults), and
every output (an omitted output gets a name of its own). Opset 1's `output_sequence` only says whether Y is wanted,
which the node's outputs already say.
"""
from __future__ import annotations

from converter.frontends.onnx.registry import ImportContext, onnx_op
from lite.status import InvalidOpAttrError
from schema import fb

A = fb.RnnActivation
_NAMES = {"sigmoid": A.SIGMOID, "tanh": A.TANH, "relu": A.RELU, "affine": A.AFFINE, "leakyrelu": A.LEAKY_RELU,
          "thresholdedrelu": A.THRESHOLDED_RELU, "scaledtanh": A.SCALED_TANH, "hardsigmoid": A.HARD_SIGMOID,
          "elu": A.ELU, "softsign": A.SOFTSIGN, "softplus": A.SOFTPLUS}
# (alpha, beta) defaults of the activations that read them; None: the activation reads no beta
_DEFAULTS = {A.AFFINE: (1.0, 0.0), A.LEAKY_RELU: (0.01, None), A.THRESHOLDED_RELU: (1.0, None),
             A.SCALED_TANH: (1.0, 1.0), A.HARD_SIGMOID: (0.2, 0.5), A.ELU: (1.0, None)}
_DIRECTIONS = {"forward": fb.RnnDirection.FORWARD, "reverse": fb.RnnDirection.REVERSE,
               "bidirectional": fb.RnnDirection.BIDIRECTIONAL}
# op -> (default activations of one direction, outputs)
_OPS = {"LSTM": (("sigmoid", "tanh", "tanh"), 3), "GRU": (("sigmoid", "tanh"), 2), "RNN": (("tanh", "tanh"), 2)}


def _activations(ctx: ImportContext, default: tuple[str, ...], directions: int) -> dict[str, list]:
    # ONNX's RNN lists f and g by default but uses only f
    per_direction = 1 if ctx.node.op_type == "RNN" else len(default)
    listed = ctx.attr("activations", list(default[:per_direction]) * directions)
    names = [(n.decode() if isinstance(n, bytes) else n).lower() for n in listed]
    if len(names) == per_direction and directions == 2:
        names *= 2
    if len(names) != per_direction * directions:
        raise ctx.error(f"needs {per_direction * directions} activations, has {names}", InvalidOpAttrError)
    unknown = [n for n in names if n not in _NAMES]
    if unknown:
        raise ctx.error(f"activation {unknown[0]!r} is not one of {', '.join(_NAMES)}", InvalidOpAttrError)
    kinds = [_NAMES[n] for n in names]
    alphas, betas = iter(ctx.attr("activation_alpha", [])), iter(ctx.attr("activation_beta", []))
    alpha, beta = [], []
    for kind in kinds:
        a, b = _DEFAULTS.get(kind, (None, None))
        alpha.append(float(next(alphas, a)) if a is not None else 0.0)
        beta.append(float(next(betas, b)) if b is not None else 0.0)
    return dict(activations=kinds, activation_alpha=alpha, activation_beta=beta)


@onnx_op("LSTM", "GRU", "RNN")
def recurrent(ctx: ImportContext) -> None:
    op = ctx.node.op_type
    default, n_outputs = _OPS[op]
    hidden = ctx.attr("hidden_size")
    if hidden is None:
        raise ctx.error("attribute 'hidden_size' is required", InvalidOpAttrError)
    direction = ctx.attr("direction", "forward")
    if direction not in _DIRECTIONS:
        raise ctx.error(f"direction {direction!r} is not one of {', '.join(_DIRECTIONS)}", InvalidOpAttrError)
    attrs = dict(hidden_size=int(hidden), direction=_DIRECTIONS[direction], clip=float(ctx.attr("clip", 0.0)),
                 layout=int(ctx.attr("layout", 0)),
                 **_activations(ctx, default, 2 if direction == "bidirectional" else 1))
    if ctx.has_attr("clip") and attrs["clip"] <= 0:
        raise ctx.error(f"clip {attrs['clip']} must be positive", InvalidOpAttrError)
    if op == "LSTM":
        attrs["input_forget"] = bool(ctx.attr("input_forget", 0))
    if op == "GRU":
        attrs["linear_before_reset"] = bool(ctx.attr("linear_before_reset", 0))
    inputs = ctx.inputs[:12 if op == "LSTM" else 6]     # LSTM's 9th-12th: DynamicQuantizeLSTM's weight params
    while inputs and not inputs[-1]:
        inputs.pop()
    wanted = ctx.outputs + [""] * (n_outputs - len(ctx.outputs))
    outputs = [o or ctx.graph.fresh(f"{ctx.name}/unused") for o in wanted]
    ctx.emit(op, inputs, outputs, **attrs)
