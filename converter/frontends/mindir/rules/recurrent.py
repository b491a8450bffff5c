"""MINDIR rule for MindSpore's LSTM primitive -> our LSTM (ONNX's form).

nn.LSTM runs one primitive per layer and direction in MindSpore 2.x (a reverse direction reverses the sequence
around it), each with its weights flattened into one tensor [w_ih, w_hh, b_ih + b_hh]; MindSpore 1.0 runs both
directions of a layer in one primitive. The rule cuts that constant apart, reorders the gates from MindSpore's
(i, f, g, o) to ONNX's (i, o, f, c) and gives the summed bias as W's bias.
"""
from __future__ import annotations

import numpy as np

from converter.frontends.mindir.registry import ImportContext, mindir_op
from schema import fb

MS_TO_ONNX_GATES = [0, 3, 1, 2]
A = fb.RnnActivation


def _gates(array: np.ndarray, hidden: int) -> np.ndarray:
    """The four gate blocks of `array`'s first axis in ONNX's order."""
    return np.concatenate([array[g * hidden:(g + 1) * hidden] for g in MS_TO_ONNX_GATES])


@mindir_op("LSTM")
def lstm(ctx: ImportContext) -> None:
    """Inputs x [T, N, I] (time-major), h0 and c0 [D, N, H], the flat weights; outputs (y [T, N, D * H], h_n, c_n,
    and two states kept for the gradient, not imported). The flat weights hold every direction's w_ih, then
    every direction's w_hh, then every direction's bias (MindSpore 1.0 allocates a second, unread bias after)."""
    if int(ctx.attrs.get("num_layers", 1)) != 1:
        raise ctx.error("only one layer per primitive is supported (what nn.LSTM exports)")
    if float(ctx.attrs.get("dropout", 0.0)):
        raise ctx.error("dropout between layers is not supported")
    hidden, size = int(ctx.attrs["hidden_size"]), int(ctx.attrs["input_size"])
    directions = 2 if ctx.attrs.get("bidirectional", False) else 1
    flat = np.ravel(ctx.require_const(ctx.input(3), "the flat weights"))
    n_ih, n_hh, n_b = 4 * hidden * size, 4 * hidden * hidden, 4 * hidden if ctx.attrs.get("has_bias", True) else 0
    if flat.size not in (directions * (n_ih + n_hh + n_b), directions * (n_ih + n_hh + 2 * n_b)):
        raise ctx.error(f"the flat weights hold {flat.size} values, not those of hidden size {hidden}, input size "
                        f"{size} and {directions} direction(s)")
    weights, recurrent = flat[:directions * n_ih], flat[directions * n_ih:directions * (n_ih + n_hh)]
    biases = flat[directions * (n_ih + n_hh):][:directions * n_b] if n_b else np.zeros(directions * 4 * hidden,
                                                                                        flat.dtype)
    w = np.stack([_gates(d.reshape(4 * hidden, size), hidden) for d in np.split(weights, directions)])
    r = np.stack([_gates(d.reshape(4 * hidden, hidden), hidden) for d in np.split(recurrent, directions)])
    b = np.stack([np.concatenate([_gates(d, hidden), np.zeros(4 * hidden, flat.dtype)])
                  for d in np.split(biases, directions)])
    params = [ctx.add_const(np.ascontiguousarray(a), hint) for a, hint in ((w, "W"), (r, "R"), (b, "B"))]
    y = ctx.graph.fresh(f"{ctx.name}/y")
    ctx.emit("LSTM", [ctx.input(0), *params, "", ctx.input(1), ctx.input(2)], [y, ctx.item(1), ctx.item(2)],
             hidden_size=hidden, direction=fb.RnnDirection.BIDIRECTIONAL if directions == 2 else
             fb.RnnDirection.FORWARD, activations=[A.SIGMOID, A.TANH, A.TANH] * directions,
             activation_alpha=[0.0] * 3 * directions, activation_beta=[0.0] * 3 * directions, clip=0.0, layout=0,
             input_forget=False)
    if directions == 1:
        ctx.emit("Squeeze", [y, ctx.add_const(np.array([1], np.int64), "directions")], [ctx.item(0)])
        return
    steps = ctx.emit1("Transpose", [y], perm=[0, 2, 1, 3])       # [T, D, N, H] -> [T, N, D, H]
    t, n = ctx.value(ctx.input(0)).shape[:2]
    ctx.emit("Reshape", [steps, ctx.add_const(np.array([t, n, directions * hidden], np.int64), "shape")],
             [ctx.item(0)])
