"""bprop rules of LSTM, GRU and RNN: one gradient node (backpropagation through time) reading the upstream
gradients of Y, Y_h[, Y_c], the forward inputs and the gates and states the training forward saves."""
from __future__ import annotations

from converter.train.bprop.rule import Bprop, Grads, bprop

_SHAPE = {"LSTM": (8, 3), "GRU": (6, 2), "RNN": (6, 2)}     # forward inputs, forward outputs (before saved ones)


@bprop("LSTM", "GRU", "RNN", wrt=(0, 1, 2, 3, 5, 6, 7))
def recurrent(g: Bprop) -> Grads:
    """dX, dW, dR, dB, dinitial_h[, dinitial_c, dP] for the present inputs (sequence_lens has none)."""
    n_in, n_out = _SHAPE[g.node.op]
    inputs = list(g.node.inputs) + [""] * (n_in - len(g.node.inputs))
    upstream = [dy or "" for dy in g.dys[:n_out]]
    wrt = [k for k, name in enumerate(inputs) if name and k != 4]
    return g.grads(g.node.op + "Grad", upstream + inputs + list(g.node.outputs[n_out:]), wrt)
