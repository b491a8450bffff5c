"""MINDIR rule for MindSpore's LSTM primitive -> our LSTM (ONNX's form).

nn.LSTM runs one primitive per layer and direction (a reverse direction reverses the sequence around it), each
with its weights flattened into one tensor [w_ih, w_hh, b_ih + b_hh]: the rule cuts that constant apart, reorders
the gates from MindSpore's (i, f, g, o) to ONNX's (i, o, f, c) and gives the summed bias as W's bias.
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
    """Inputs x [T, N, I] (time-major), h0 and c0 [1, N, H], the flat weights; outputs (y [T, N, H], h_n, c_n,
    and two states kept for the gradient, not imported)."""
    if int(ctx.attrs.get("num_layers", 1)) != 1 or ctx.attrs.get("bidirectional", False):
        raise ctx.error("only one layer in one direction per primitive is supported (what nn.LSTM exports)")
    if float(ctx.attrs.get("dropout", 0.0)):
        raise ctx.error("dropout between layers is not supported")
    hidden, size = int(ctx.attrs["hidden_size"]), int(ctx.attrs["input_size"])
    flat = np.ravel(ctx.require_const(ctx.input(3), "the flat weights"))
    n_ih, n_hh = 4 * hidden * size, 4 * hidden * hidden
    bias = flat[n_ih + n_hh:] if ctx.attrs.get("has_bias", True) else np.zeros(4 * hidden, flat.dtype)
    if bias.size != 4 * hidden:
        raise ctx.error(f"the flat weights hold {flat.size} values, not those of hidden size {hidden} and input "
                        f"size {size}")
    w = _gates(flat[:n_ih].reshape(4 * hidden, size), hidden)[None]
    r = _gates(flat[n_ih:n_ih + n_hh].reshape(4 * hidden, hidden), hidden)[None]
    b = np.concatenate([_gates(bias, hidden), np.zeros(4 * hidden, flat.dtype)])[None]
    params = [ctx.add_const(np.ascontiguousarray(a), hint) for a, hint in ((w, "W"), (r, "R"), (b, "B"))]
    y = ctx.graph.fresh(f"{ctx.name}/y")
    ctx.emit("LSTM", [ctx.input(0), *params, "", ctx.input(1), ctx.input(2)], [y, ctx.item(1), ctx.item(2)],
             hidden_size=hidden, direction=fb.RnnDirection.FORWARD, activations=[A.SIGMOID, A.TANH, A.TANH],
             activation_alpha=[0.0] * 3, activation_beta=[0.0] * 3, clip=0.0, layout=0, input_forget=False)
    ctx.emit("Squeeze", [y, ctx.add_const(np.array([1], np.int64), "directions")], [ctx.item(0)])
