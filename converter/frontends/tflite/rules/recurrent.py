"""TFLite UNIDIRECTIONAL_ / BIDIRECTIONAL_SEQUENCE_LSTM -> our (ONNX) LSTM, the per-gate tensors stacked into
W, R, B and P (one row per direction); UNIDIRECTIONAL_SEQUENCE_RNN -> our (ONNX) RNN.

TFLite keeps one tensor per gate in the order i, f, c, o; ONNX stacks them as i, o, f, c. The fused activation
is the cell-input and cell-output function (ONNX's g and h; the gates stay sigmoid). A coupled input gate (CIFG,
no input-gate tensors) has i = 1 - f, while ONNX's input_forget couples the other way (f = 1 - i): since
1 - sigmoid(z) = sigmoid(-z), the negated forget-gate tensors fill the input slot and input_forget gives TFLite's
forget gate back exactly. What has no exact counterpart is refused naming the node: a non-zero cell_clip (TFLite
clips the cell state, ONNX's clip the gate inputs), projection weights, layer-norm coefficients and diagonal
recurrent weights, the bidirectional op's auxiliary input. The variable state tensors are the initial states,
zeros (LiteRT refuses a variable tensor with data, and so do we). The bidirectional op's backward outputs are in
input time order, as ONNX's reverse direction.
"""
from __future__ import annotations

import numpy as np

from converter.frontends.tflite.registry import FUSED_NAMES, ImportContext, tflite_op
from lite.status import GraphFileError
from schema import fb

RA = fb.RnnActivation
# TFLite ActivationFunctionType -> our RNN activation (LiteRT's NONE is not the identity there: refused)
_ACTIVATIONS = {1: RA.RELU, 4: RA.TANH}
_I, _F, _C, _O = range(4)                           # TFLite gate order
_ONNX_ORDER = (_I, _O, _F, _C)
_REQUIRED = (2, 3, 4, 6, 7, 8, 13, 14, 15)         # forget, cell and output weights, recurrent weights, biases
# input index -> what it is, for the inputs with no ONNX counterpart
_UNIDIRECTIONAL = {16: "projection weights", 17: "projection bias", 20: "input layer-norm coefficients",
                   21: "forget layer-norm coefficients", 22: "cell layer-norm coefficients",
                   23: "output layer-norm coefficients"}
_BIDIRECTIONAL = {16: "forward projection weights", 17: "forward projection bias", 33: "backward projection weights",
                  34: "backward projection bias", 39: "auxiliary input",
                  **{k: "auxiliary input weights" for k in range(40, 48)}}


def _gates(ctx: ImportContext, indices: tuple[int | None, ...], what: str, cifg: bool) -> list[np.ndarray | None]:
    """The per-gate constants at `indices` (i, f, c, o; None: the op has none for that gate); with CIFG the input
    slot holds the negated forget-gate tensor (see the module docstring) and the forget slot zeros."""
    names = ("input", "forget", "cell", "output")
    gates = [None if k is None or not ctx.input(k) else
             ctx.require_const(ctx.input(k), f"{name} {what}").astype(np.float32) for k, name in zip(indices, names)]
    if cifg and gates[_F] is not None:
        gates[_I], gates[_F] = -gates[_F], np.zeros_like(gates[_F])
    return gates


def _check(ctx: ImportContext, unsupported: dict[int, str], states: tuple[int, ...],
           activations: dict[int, int] = _ACTIVATIONS) -> int:
    """Refuse what has no exact counterpart; the activation as ours."""
    for index in states:
        if ctx.input(index):     # the importer passes a variable tensor nothing wrote as omitted (zeros)
            raise ctx.error(f"state input {index} must be a variable tensor without data, as LiteRT requires")
    present = [k for k in unsupported if ctx.input(k)]
    if present:
        raise ctx.error(f"{unsupported[present[0]]} (input {present[0]}) are not supported")
    if float(ctx.opt("CellClip", 0.0)):
        raise ctx.error(f"cell_clip {ctx.opt('CellClip')} is not supported (TFLite clips the cell state, "
                        "our LSTM's clip the gate inputs)")
    if ctx.opt("DiagonalRecurrentTensors", False):
        raise ctx.error("diagonal recurrent weights are not supported")
    fused = int(ctx.opt("FusedActivationFunction", 0))
    if fused not in activations:
        names = " or ".join(FUSED_NAMES[k] for k in sorted(activations))
        raise ctx.error(f"fused activation {FUSED_NAMES.get(fused, fused)} is not supported ({names})")
    return activations[fused]


def _direction(ctx: ImportContext, offset: int) -> tuple[bool, list[np.ndarray]]:
    """One direction's tensors at inputs offset + 1 .. offset + 15: (CIFG, [W, R, B, P]) in ONNX's layout
    without the direction axis (P zeros when the op has no peepholes)."""
    cifg = not ctx.input(offset + 1)
    missing = [offset + k for k in (*_REQUIRED, *(() if cifg else (5, 12))) if not ctx.input(offset + k)]
    if missing:
        raise ctx.error(f"input {missing[0]} (a gate's weights or bias) is missing", GraphFileError)
    w, r, b, peep = (_gates(ctx, tuple(None if k is None else offset + k for k in indices), what, cifg)
                     for indices, what in (((1, 2, 3, 4), "input weights"), ((5, 6, 7, 8), "recurrent weights"),
                                           ((12, 13, 14, 15), "gate bias"), ((9, 10, None, 11), "peephole weights")))
    hidden = w[_F].shape[0]
    zeros = np.zeros(hidden, np.float32)
    return cifg, [np.concatenate([w[k] for k in _ONNX_ORDER]), np.concatenate([r[k] for k in _ONNX_ORDER]),
                  np.concatenate([b[k] for k in _ONNX_ORDER] + [np.zeros(4 * hidden, np.float32)]),
                  np.concatenate([zeros if peep[k] is None else peep[k] for k in (_I, _O, _F)])]


def _lstm(ctx: ImportContext, offsets: tuple[int, ...], activation: int, time_major: bool) -> str:
    """Our LSTM over the directions at `offsets`; its Y ([T, D, B, H] time-major, else [B, T, D, H])."""
    directions = [_direction(ctx, offset) for offset in offsets]
    if len({cifg for cifg, _ in directions}) > 1:
        raise ctx.error("one direction has an input gate and the other not (CIFG)")
    w, r, b, p = (np.stack(t) for t in zip(*(tensors for _, tensors in directions)))
    inputs = [ctx.input(0), ctx.add_const(w, "W"), ctx.add_const(r, "R"), ctx.add_const(b, "B")]
    if any(ctx.input(offset + k) for offset in offsets for k in (9, 10, 11)):
        inputs += ["", "", "", ctx.add_const(p, "P")]       # sequence_lens, initial_h, initial_c omitted
    y = ctx.graph.fresh(f"{ctx.name}/Y")
    bidirectional = len(offsets) == 2
    ctx.emit("LSTM", inputs, [y, ctx.graph.fresh(f"{ctx.name}/Y_h"), ctx.graph.fresh(f"{ctx.name}/Y_c")],
             hidden_size=w.shape[1] // 4, clip=0.0, layout=0 if time_major else 1,
             direction=fb.RnnDirection.BIDIRECTIONAL if bidirectional else fb.RnnDirection.FORWARD,
             activations=[RA.SIGMOID, activation, activation] * len(offsets),
             activation_alpha=[0.0] * 3 * len(offsets), activation_beta=[0.0] * 3 * len(offsets),
             input_forget=directions[0][0])
    return y


@tflite_op("UNIDIRECTIONAL_SEQUENCE_LSTM")
def unidirectional_sequence_lstm(ctx: ImportContext) -> None:
    activation = _check(ctx, _UNIDIRECTIONAL, (18, 19))
    time_major = bool(ctx.opt("TimeMajor", False))
    y = _lstm(ctx, (0,), activation, time_major)
    # drop the direction axis
    ctx.emit("Squeeze", [y, ctx.add_const(np.array([1 if time_major else 2], np.int64), "axes")], ctx.outputs[:1])


@tflite_op("BIDIRECTIONAL_SEQUENCE_LSTM")
def bidirectional_sequence_lstm(ctx: ImportContext) -> None:
    """Forward tensors at inputs 1-17, backward at 18-34, states at 35-38. merge_outputs concatenates the
    directions' outputs on the last axis (one output), else forward and backward are two outputs."""
    activation = _check(ctx, _BIDIRECTIONAL, (35, 36, 37, 38))
    time_major = bool(ctx.opt("TimeMajor", True))
    y = _lstm(ctx, (0, 17), activation, time_major)
    axis = 1 if time_major else 2
    if ctx.opt("MergeOutputs", False):
        if time_major:
            y = ctx.emit1("Transpose", [y], perm=[0, 2, 1, 3])
        ctx.emit("Reshape", [y, ctx.add_const(np.array([0, 0, -1], np.int64), "shape")], ctx.outputs[:1])
        return
    for k, out in enumerate(ctx.outputs[:2]):
        ctx.emit("Gather", [y, ctx.add_const(np.array(k, np.int64), "direction")], [out], axis=axis)


@tflite_op("UNIDIRECTIONAL_SEQUENCE_RNN")
def unidirectional_sequence_rnn(ctx: ImportContext) -> None:
    """h_t = act(W x_t + R h_(t-1) + b) from a zero state (input 4, a variable tensor), TFLite's fused
    activation as ONNX's f: NONE, which LiteRT's basic RNN applies as the identity, is Affine(1, 0)."""
    activation = _check(ctx, {}, (4,), {**_ACTIVATIONS, 0: RA.AFFINE})
    w, r, bias = (ctx.require_const(ctx.input(k), what).astype(np.float32) for k, what in
                  ((1, "input weights"), (2, "recurrent weights"), (3, "bias")))
    time_major = bool(ctx.opt("TimeMajor", False))
    y = ctx.graph.fresh(f"{ctx.name}/Y")
    ctx.emit("RNN", [ctx.input(0), ctx.add_const(w[None], "W"), ctx.add_const(r[None], "R"),
                     ctx.add_const(np.concatenate([bias, np.zeros_like(bias)])[None], "B")],
             [y, ctx.graph.fresh(f"{ctx.name}/Y_h")], hidden_size=w.shape[0], clip=0.0,
             layout=0 if time_major else 1, direction=fb.RnnDirection.FORWARD, activations=[activation],
             activation_alpha=[1.0 if activation == RA.AFFINE else 0.0], activation_beta=[0.0])
    ctx.emit("Squeeze", [y, ctx.add_const(np.array([1 if time_major else 2], np.int64), "axes")], ctx.outputs[:1])
