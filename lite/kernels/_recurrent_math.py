"""What LSTM, GRU and RNN share: the gate activations ONNX allows (value and derivative), and the kernel that
checks shapes, hoists the input projection and runs the time-step loop; each op supplies its cell's step.

Internal layout is time-major, per time step: the pre-activations `gates` [T, B, D, G*H] and the states after each
step `states` [T, B, D, S*H] (hidden state, then the cell state for LSTM), both in time order. A reverse direction
walks the times backwards; with `sequence_lens`, times t >= len[b] keep the state (so a reverse direction starts at
t = len[b] - 1) and give Y = 0, as ONNX and onnxruntime define it. The input projection X W^T + biases of every
time step and direction is one matmul before the loop; a step adds h_{t-1} R^T (one matmul) and applies the gates.
In a training graph `gates` and `states` are outputs, which the gradient kernels (`lite/kernels/grad/`) read.
The compiled siblings of GRU and LSTM (`lite/kernels/compiled/`) run each direction's loop of the default gates
as one compiled call instead of the numpy steps.
"""
from __future__ import annotations

from abc import abstractmethod
from typing import Callable, Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec
from lite.status import InputTensorError, InvalidOpAttrError
from lite.threads import serial_blas
from schema import fb

A = fb.RnnActivation
D = fb.RnnDirection

# ---- activations: y = f(x) and dy/dx, both from x (alpha, beta as in the ONNX doc) ------------------------------
Fn = Callable[[np.ndarray, float, float], np.ndarray]


def _sigmoid(x: np.ndarray, a: float, b: float) -> np.ndarray:
    return 0.5 * np.tanh(0.5 * x) + 0.5          # no overflow in exp for large |x|


def _softplus(x: np.ndarray, a: float, b: float) -> np.ndarray:
    return np.logaddexp(0.0, x).astype(x.dtype)


ACTIVATIONS: dict[int, tuple[Fn, Fn]] = {
    A.SIGMOID: (_sigmoid, lambda x, a, b: (s := _sigmoid(x, a, b)) * (1 - s)),
    A.TANH: (lambda x, a, b: np.tanh(x), lambda x, a, b: 1 - np.tanh(x) ** 2),
    A.RELU: (lambda x, a, b: np.maximum(x, 0), lambda x, a, b: (x > 0).astype(x.dtype)),
    A.AFFINE: (lambda x, a, b: a * x + b, lambda x, a, b: np.full_like(x, a)),
    A.LEAKY_RELU: (lambda x, a, b: np.where(x >= 0, x, a * x), lambda x, a, b: np.where(x >= 0, 1, a).astype(x.dtype)),
    A.THRESHOLDED_RELU: (lambda x, a, b: np.where(x > a, x, 0).astype(x.dtype),
                         lambda x, a, b: (x > a).astype(x.dtype)),
    A.SCALED_TANH: (lambda x, a, b: a * np.tanh(b * x), lambda x, a, b: a * b * (1 - np.tanh(b * x) ** 2)),
    A.HARD_SIGMOID: (lambda x, a, b: np.clip(a * x + b, 0, 1),
                     lambda x, a, b: np.where((a * x + b > 0) & (a * x + b < 1), a, 0).astype(x.dtype)),
    A.ELU: (lambda x, a, b: np.where(x >= 0, x, a * np.expm1(np.minimum(x, 0))).astype(x.dtype),
            lambda x, a, b: np.where(x >= 0, 1, a * np.exp(np.minimum(x, 0))).astype(x.dtype)),
    A.SOFTSIGN: (lambda x, a, b: x / (1 + np.abs(x)), lambda x, a, b: 1 / (1 + np.abs(x)) ** 2),
    A.SOFTPLUS: (_softplus, _sigmoid),
}


class Activation:
    """One gate function with its alpha and beta; `clip` > 0 clips its input first (ONNX `clip`)."""

    def __init__(self, kind: int, alpha: float, beta: float, clip: float):
        self.kind, self.alpha, self.beta, self.clip = kind, float(alpha), float(beta), float(clip)
        self.fn, self.dfn = ACTIVATIONS[kind]

    def _clipped(self, x: np.ndarray) -> np.ndarray:
        return np.clip(x, -self.clip, self.clip) if self.clip > 0 else x

    def __call__(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        y = self.fn(self._clipped(x), self.alpha, self.beta)
        if out is None:
            return y
        np.copyto(out, y, casting="unsafe")
        return out

    def grad(self, x: np.ndarray) -> np.ndarray:
        """dy/dx at the (unclipped) input x; 0 where the clip cuts x."""
        d = self.dfn(self._clipped(x), self.alpha, self.beta)
        return d * (np.abs(x) <= self.clip) if self.clip > 0 else d


# ---- the kernel ---------------------------------------------------------------------------------------------------
class RecurrentKernel(Kernel):
    """The shape rule, input projection and time-step loop of one ONNX recurrent op.

    Subclasses set `gates` (G: gate blocks in W), `states` (S: 1, or 2 for LSTM's cell), `functions` (activations
    per direction) and implement `step`."""

    gates: int
    states: int
    functions: int
    unclipped: tuple[int, ...] = ()     # functions that do not read a gate (LSTM's h, on the cell state)
    foldable = False

    # ---- compile time -------------------------------------------------------------------------------------------
    def check_inputs(self, inputs: Sequence[TensorSpec | None]) -> None:
        """Check the forward inputs and attributes; sets the sizes T, B, I, D, H and the activations."""
        a = self.attrs
        x, w, r = inputs[:3]
        if a.layout not in (0, 1):
            raise self.error(f"layout {a.layout} is not 0 or 1", InvalidOpAttrError)
        if a.hidden_size <= 0:
            raise self.error(f"hidden_size {a.hidden_size} must be positive", InvalidOpAttrError)
        if x.rank != 3:
            raise self.error(f"X must be rank 3, not {list(x.shape)}")
        t, b = (x.shape[0], x.shape[1]) if a.layout == 0 else (x.shape[1], x.shape[0])
        dirs, h, g = (2 if a.direction == D.BIDIRECTIONAL else 1), a.hidden_size, self.gates
        self.T, self.B, self.I, self.D, self.H = t, b, x.shape[2], dirs, h
        optional = list(inputs[3:]) + [None] * (8 - len(inputs))
        expected = {"W": (w, (dirs, g * h, self.I)), "R": (r, (dirs, g * h, h)),
                    "B": (optional[0], (dirs, 2 * g * h)), "sequence_lens": (optional[1], (b,)),
                    "initial_h": (optional[2], self._state_shape()), "initial_c": (optional[3], self._state_shape()),
                    "P": (optional[4], (dirs, 3 * h))}
        for name, (spec, shape) in expected.items():
            if spec is not None and tuple(spec.shape) != shape:
                raise self.error(f"{name} has shape {list(spec.shape)}, expected {list(shape)}")
        if optional[1] is not None and optional[1].dtype.kind not in "iu":
            raise self.error(f"sequence_lens must be integers, not {optional[1].dtype}")
        n = self.functions * dirs
        if not len(a.activations) == len(a.activation_alpha) == len(a.activation_beta) == n:
            raise self.error(f"needs {n} activations with their alpha and beta, has {len(a.activations)}",
                             InvalidOpAttrError)
        if any(k not in ACTIVATIONS for k in a.activations):
            raise self.error(f"unknown activation in {list(a.activations)}", InvalidOpAttrError)
        self.acts = [[Activation(k, al, be, 0.0 if j in self.unclipped else a.clip) for j, (k, al, be) in
                      enumerate(zip(*(v[d * self.functions:(d + 1) * self.functions]
                                      for v in (a.activations, a.activation_alpha, a.activation_beta))))]
                     for d in range(dirs)]

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        self.check_inputs(inputs)
        x = inputs[0]
        t, dirs, b, h = self.T, self.D, self.B, self.H
        base = 1 + self.states
        self.training = len(self.node.outputs) == base + 2
        if len(self.node.outputs) not in (base, base + 2):
            raise self.error(f"has {base} outputs (or {base + 2} in training), not {len(self.node.outputs)}")
        y = (t, dirs, b, h) if self.attrs.layout == 0 else (b, t, dirs, h)
        outs = [TensorSpec(y, x.dtype)] + [TensorSpec(self._state_shape(), x.dtype)] * self.states
        return outs + self._saved() * self.training

    def _state_shape(self) -> tuple[int, ...]:
        return (self.D, self.B, self.H) if self.attrs.layout == 0 else (self.B, self.D, self.H)

    def _saved(self) -> list[TensorSpec]:
        f32 = np.dtype(np.float32)
        return [TensorSpec((self.T, self.B, self.D, self.gates * self.H), f32),
                TensorSpec((self.T, self.B, self.D, self.states * self.H), f32)]

    def scratch(self) -> list[TensorSpec]:
        f32 = np.dtype(np.float32)
        step = TensorSpec((self.B, self.gates * self.H), f32)
        return ([] if self.training else self._saved()) + [step, step]

    def bind(self, inputs, outputs, scratch) -> None:
        self.gates_buf, self.states_buf = (outputs[-2:] if self.training else scratch[:2])
        self.tmp, self.act = scratch[-2:]

    # ---- views and the loop ---------------------------------------------------------------------------------------
    def time_major(self, x: np.ndarray) -> np.ndarray:
        """X [T, B, I] (a view when layout is 1)."""
        return x if self.attrs.layout == 0 else x.transpose(1, 0, 2)

    def direction_major(self, s: np.ndarray) -> np.ndarray:
        """A state tensor as [D, B, H] (a view when layout is 1)."""
        return s if self.attrs.layout == 0 else s.transpose(1, 0, 2)

    def mask(self, lens: np.ndarray | None) -> np.ndarray | None:
        """[T, B] True where a time step is inside its sequence; None when every sequence is full length."""
        if lens is None:
            return None
        if np.any(lens < 0) or np.any(lens > self.T):
            raise self.error(f"sequence_lens {lens.tolist()} must lie in [0, {self.T}]", InputTensorError)
        return None if np.all(lens == self.T) else np.arange(self.T)[:, None] < lens[None, :]

    def initial(self, inputs: Sequence[np.ndarray | None]) -> np.ndarray:
        """[D, B, S*H]: initial_h (and initial_c), zeros where omitted."""
        init = np.zeros((self.D, self.B, self.states * self.H), np.float32)
        for k, s in enumerate(inputs[5:5 + self.states]):
            if s is not None:
                init[:, :, k * self.H:(k + 1) * self.H] = self.direction_major(s)
        return init

    def project(self, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None) -> None:
        """gates[t, b, d] = x_t W_d^T + bias_d for every time step and direction (x time-major): one matmul, on
        one BLAS thread when it is small (`serial_blas`)."""
        pre = self.gates_buf.reshape(self.T, self.B, -1)
        wt = w.reshape(-1, self.I).T
        with serial_blas(pre.size * self.I):
            if x.flags.c_contiguous:
                np.matmul(x.reshape(-1, self.I), wt, out=pre.reshape(self.T * self.B, -1))
            else:
                np.matmul(x, wt, out=pre)
        if bias is not None:
            self.gates_buf += bias[None, None]

    def run(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray]) -> None:
        ins = list(inputs) + [None] * (8 - len(inputs))
        x, w, r, b = ins[:4]
        mask = self.mask(ins[4])
        self.project(self.time_major(x), w, self.folded_bias(b))
        init = self.initial(ins)
        for d in range(self.D):
            self.loop(d, r[d], b, ins, init[d], mask)
        s = self.states_buf
        y = outputs[0].transpose((0, 2, 1, 3) if self.attrs.layout == 0 else (1, 0, 2, 3))    # [T, B, D, H]
        np.copyto(y, s[..., :self.H])
        if mask is not None:
            y *= mask[:, :, None, None]
        for k, out in enumerate(outputs[1:1 + self.states]):
            out_d = self.direction_major(out)
            for d in range(self.D):
                out_d[d] = s[self.last(d), :, d, k * self.H:(k + 1) * self.H]

    def reverse(self, d: int) -> bool:
        return self.attrs.direction == D.REVERSE or d == 1

    def last(self, d: int) -> int:
        """The time of direction d's last step."""
        return 0 if self.reverse(d) else self.T - 1

    def times(self, d: int) -> range:
        return range(self.T - 1, -1, -1) if self.reverse(d) else range(self.T)

    def loop(self, d: int, r: np.ndarray, b: np.ndarray | None, ins: list, init: np.ndarray,
             mask: np.ndarray | None) -> None:
        """Direction d's time steps, from `init` [B, S*H], into `states_buf`."""
        prev = init
        for t in self.times(d):
            cur = self.states_buf[t, :, d]
            self.step(self.gates_buf[t, :, d], prev, cur, r, b, ins, d)
            if mask is not None:
                np.copyto(cur, prev, where=~mask[t][:, None])
            prev = cur

    # ---- per op ---------------------------------------------------------------------------------------------------
    def folded_bias(self, b: np.ndarray | None) -> np.ndarray | None:
        """[D, G*H] added in the hoisted projection: Wb + Rb (GRU keeps Rb_h out when linear_before_reset)."""
        if b is None:
            return None
        gh = self.gates * self.H
        return b[:, :gh] + b[:, gh:]

    def default_gates(self, *kinds: int) -> bool:
        """Whether every direction's activations are `kinds`, unclipped."""
        return all(tuple(f.kind for f in acts) == kinds and all(f.clip == 0 for f in acts) for acts in self.acts)

    @abstractmethod
    def step(self, pre: np.ndarray, prev: np.ndarray, cur: np.ndarray, r: np.ndarray, b: np.ndarray | None,
             ins: list, d: int) -> None:
        """One time step of direction d: pre [B, G*H] holds x_t W^T + bias and gets the recurrent term added in
        place (it stays the pre-activation the gradient reads); prev / cur are the states [B, S*H]."""


# ---- backpropagation through time ------------------------------------------------------------------------------------
class RecurrentGradKernel(RecurrentKernel):
    """The gradient of a recurrent op (a subclass of the forward kernel, for its sizes and views).

    inputs: dY, dY_h[, dY_c] ("" where no gradient arrives), the forward's inputs in ONNX order ("" where omitted),
    gates, states (the training forward's extra outputs). outputs: the gradient of every present forward input
    but sequence_lens, in order. Walking the steps backwards, a step turns the gradient of its new state into the
    gradient of its pre-activations (`dpre`, and `drec` where the recurrent term differs from it) and of the
    previous state (one matmul with R); dX, dW, dR and dB are then one matmul or sum over all steps."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        n = 1 + self.states
        forward = list(inputs[n:-2])
        self.check_inputs(forward)
        self.present = [k for k, s in enumerate(forward) if s is not None and k != 4]
        if len(self.node.outputs) != len(self.present):
            raise self.error(f"has {len(self.node.outputs)} outputs for {len(self.present)} gradients")
        saved = self._saved()
        for what, spec, want in zip(("gates", "states"), inputs[-2:], saved):
            if spec is None or spec.shape != want.shape:
                raise self.error(f"{what} must have shape {list(want.shape)}")
        return [TensorSpec(forward[k].shape, np.dtype(np.float32)) for k in self.present]

    separate_drec = False     # the recurrent term's gradient differs from dpre (GRU)

    def scratch(self) -> list[TensorSpec]:
        return [self._saved()[0]] * (1 + self.separate_drec)

    def bind(self, inputs, outputs, scratch) -> None:
        self.dpre, self.drec = scratch[0], scratch[-1]

    def previous(self, states: np.ndarray, init: np.ndarray, d: int) -> np.ndarray:
        """[T, B, S*H]: the state each step of direction d started from."""
        s = states[:, :, d]
        return np.concatenate([s[1:], init[None]]) if self.reverse(d) else np.concatenate([init[None], s[:-1]])

    def run(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray]) -> None:
        n = 1 + self.states
        dys, ins = inputs[:n], list(inputs[n:-2]) + [None] * (8 - len(inputs[n:-2]))
        gates, states = inputs[-2:]
        x, w, r, b = ins[:4]
        mask = self.mask(ins[4])
        init = self.initial(ins)
        dy = None if dys[0] is None else dys[0].transpose((0, 2, 1, 3) if self.attrs.layout == 0 else (1, 0, 2, 3))
        hs = self.H
        grads = {k: np.zeros(self._grad_shape(k, ins), np.float32) for k in (1, 2, 3, 5, 6, 7)}
        for d in range(self.D):
            prev = self.previous(states, init[d], d)
            self.prepare_grad(gates[:, :, d], prev, r[d], b, d, ins)
            carry = np.zeros((self.B, self.states * hs), np.float32)
            for k, s in enumerate(dys[1:]):
                if s is not None:
                    carry[:, k * hs:(k + 1) * hs] = self.direction_major(s)[d]
            for t in reversed(self.times(d)):
                if dy is not None:
                    carry[:, :hs] += dy[t, :, d] if mask is None else dy[t, :, d] * mask[t][:, None]
                new = carry if mask is None else carry * mask[t][:, None]
                back = self.step_grad(t, d, new, prev[t], r[d], ins)
                carry = back if mask is None else back + carry * ~mask[t][:, None]
            for k in range(self.states):
                grads[5 + k][d] = carry[:, k * hs:(k + 1) * hs]
            self.weight_grads(d, prev, grads, ins)
        xt = self.time_major(x)
        gh = self.gates * hs
        dpre2d = self.dpre.reshape(self.T * self.B, self.D * gh)
        grads[1][:] = (dpre2d.T @ xt.reshape(-1, self.I)).reshape(self.D, gh, self.I) if xt.flags.c_contiguous \
            else np.einsum("tbg,tbi->gi", self.dpre.reshape(self.T, self.B, -1), xt).reshape(self.D, gh, self.I)
        grads[3][:, :gh] = self.dpre.sum(axis=(0, 1))
        dx = (dpre2d @ w.reshape(-1, self.I)).reshape(self.T, self.B, self.I)
        for out, k in zip(outputs, self.present):
            if k == 0:
                np.copyto(self.time_major(out), dx)
            elif k in (5, 6):
                np.copyto(self.direction_major(out), grads[k])
            else:
                np.copyto(out, grads[k])

    def _grad_shape(self, k: int, ins: list) -> tuple[int, ...]:
        """Gradients are accumulated in the forward's shapes, states direction-major."""
        gh = self.gates * self.H
        return {1: (self.D, gh, self.I), 2: (self.D, gh, self.H), 3: (self.D, 2 * gh), 5: (self.D, self.B, self.H),
                6: (self.D, self.B, self.H), 7: (self.D, 3 * self.H)}[k]

    def weight_grads(self, d: int, prev: np.ndarray, grads: dict[int, np.ndarray], ins: list) -> None:
        """dR[d] and the recurrent bias dRb[d] from `drec` and the previous hidden states (one matmul)."""
        drec = self.drec[:, :, d].reshape(self.T * self.B, -1)
        grads[2][d] = drec.T @ prev[..., :self.H].reshape(-1, self.H)
        grads[3][d, self.gates * self.H:] = drec.sum(axis=0)

    # ---- per op ---------------------------------------------------------------------------------------------------
    @abstractmethod
    def prepare_grad(self, pre: np.ndarray, prev: np.ndarray, r: np.ndarray, b: np.ndarray | None, d: int,
                     ins: list) -> None:
        """Everything of direction d the backward steps read that does not depend on the carried gradient
        (gate values and derivatives for all steps), from pre [T, B, G*H] and prev [T, B, S*H]."""

    @abstractmethod
    def step_grad(self, t: int, d: int, dnew: np.ndarray, prev: np.ndarray, r: np.ndarray, ins: list) -> np.ndarray:
        """Gradient of step t's new state dnew [B, S*H] -> writes dpre[t, :, d] (and drec) and returns the
        gradient of the previous state [B, S*H]."""
