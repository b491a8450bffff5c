"""TFLite UNIDIRECTIONAL_SEQUENCE_LSTM -> our (ONNX) LSTM, its per-gate tensors stacked into W, R, B and P.

TFLite keeps one tensor per gate in the order i, f, c, o; ONNX stacks them as i, o, f, c. The fused activation
is the cell-input and cell-output function (ONNX's g and h; the gates stay sigmoid). A coupled input gate (CIFG,
no input-gate tensors) has i = 1 - f, while ONNX's input_forget couples the other way (f = 1 - i): since
1 - sigmoid(z) = sigmoid(-z), the negated forget-gate tensors fill the input slot and input_forget gives TFLite's
forget gate back exactly. What has no exact counterpart is refused naming the node: a non-zero cell_clip (TFLite
clips the cell state, ONNX's clip the gate inputs), projection weights, layer-norm coefficients and diagonal
recurrent weights. The variable output_state / cell_state tensors are the initial states, zeros (LiteRT refuses
a variable tensor with data, and so do we).
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
_UNSUPPORTED = {16: "projection weights", 17: "projection bias", 20: "input layer-norm coefficients",
                21: "forget layer-norm coefficients", 22: "cell layer-norm coefficients",
                23: "output layer-norm coefficients"}


def _gates(ctx: ImportContext, indices: tuple[int | None, ...], what: str, cifg: bool) -> list[np.ndarray | None]:
    """The per-gate constants at `indices` (i, f, c, o; None: the op has none for that gate); with CIFG the input
    slot holds the negated forget-gate tensor (see the module docstring) and the forget slot zeros."""
    names = ("input", "forget", "cell", "output")
    gates = [None if k is None or not ctx.input(k) else
             ctx.require_const(ctx.input(k), f"{name} {what}").astype(np.float32) for k, name in zip(indices, names)]
    if cifg and gates[_F] is not None:
        gates[_I], gates[_F] = -gates[_F], np.zeros_like(gates[_F])
    return gates


@tflite_op("UNIDIRECTIONAL_SEQUENCE_LSTM")
def unidirectional_sequence_lstm(ctx: ImportContext) -> None:
    for index, what in ((18, "output_state"), (19, "cell_state")):
        if ctx.input(index):     # the importer passes a variable tensor nothing wrote as omitted (zeros)
            raise ctx.error(f"{what} (input {index}) must be a variable tensor without data, as LiteRT requires")
    present = [k for k in _UNSUPPORTED if ctx.input(k)]
    if present:
        raise ctx.error(f"{_UNSUPPORTED[present[0]]} (input {present[0]}) are not supported")
    if float(ctx.opt("CellClip", 0.0)):
        raise ctx.error(f"cell_clip {ctx.opt('CellClip')} is not supported (TFLite clips the cell state, "
                        "our LSTM's clip the gate inputs)")
    if ctx.opt("DiagonalRecurrentTensors", False):
        raise ctx.error("diagonal recurrent weights are not supported")
    fused = int(ctx.opt("FusedActivationFunction", 0))
    if fused not in _ACTIVATIONS:
        raise ctx.error(f"fused activation {FUSED_NAMES.get(fused, fused)} is not supported "
                        f"(RELU or TANH)")
    cifg = not ctx.input(1)
    missing = [k for k in (*_REQUIRED, *(() if cifg else (5, 12))) if not ctx.input(k)]
    if missing:
        raise ctx.error(f"input {missing[0]} (a gate's weights or bias) is missing", GraphFileError)
    w = _gates(ctx, (1, 2, 3, 4), "input weights", cifg)
    r = _gates(ctx, (5, 6, 7, 8), "recurrent weights", cifg)
    b = _gates(ctx, (12, 13, 14, 15), "gate bias", cifg)
    peep = _gates(ctx, (9, 10, None, 11), "peephole weights", cifg)
    hidden = w[_F].shape[0]
    time_major = bool(ctx.opt("TimeMajor", False))
    onnx_w = np.concatenate([w[k] for k in _ONNX_ORDER])[None]
    onnx_r = np.concatenate([r[k] for k in _ONNX_ORDER])[None]
    onnx_b = np.concatenate([b[k] for k in _ONNX_ORDER] + [np.zeros(4 * hidden, np.float32)])[None]
    inputs = [ctx.input(0), ctx.add_const(onnx_w, "W"), ctx.add_const(onnx_r, "R"), ctx.add_const(onnx_b, "B")]
    if any(p is not None for p in peep):       # sequence_lens, initial_h, initial_c omitted
        inputs += ["", "", ""]
        zeros = np.zeros(hidden, np.float32)
        inputs.append(ctx.add_const(np.concatenate([zeros if peep[k] is None else peep[k] for k in (_I, _O, _F)])[None],
                                    "P"))
    kind = _ACTIVATIONS[fused]
    y = ctx.graph.fresh(f"{ctx.name}/Y")
    ctx.emit("LSTM", inputs, [y, ctx.graph.fresh(f"{ctx.name}/Y_h"), ctx.graph.fresh(f"{ctx.name}/Y_c")],
             hidden_size=hidden, direction=fb.RnnDirection.FORWARD, clip=0.0, layout=0 if time_major else 1,
             activations=[RA.SIGMOID, kind, kind], activation_alpha=[0.0] * 3,
             activation_beta=[0.0] * 3, input_forget=cifg)
    # Y is [T, 1, B, H] (layout 0) or [B, T, 1, H] (layout 1): drop the direction axis
    axis = ctx.add_const(np.array([1 if time_major else 2], np.int64), "axes")
    ctx.emit("Squeeze", [y, axis], ctx.outputs[:1])
