"""Compiled gradients of the depthwise convolution (channel multiplier 1), NHWC, weights as [KH, KW, C].

dx is gathered (each input row sums the output positions whose taps read it), so threads over (image, input
row) never write the same element; dW runs one task per tap and sums each channel in float64 before rounding
once, more exactly than a float32 reduction.
"""
from __future__ import annotations

import numpy as np
from numba import prange

from lite.kernels.compiled import Compiled


@Compiled
def depthwise_dx(dy, w, dx, stride_h, stride_w, dil_h, dil_w, pad_top, pad_left):  # pragma: no cover
    n, h, wd, c = dx.shape
    kh, kw, _ = w.shape
    _, oh, ow, _ = dy.shape
    for task in prange(n * h):
        b, iy = task // h, task % h
        for ix in range(wd):
            for o in range(c):
                dx[b, iy, ix, o] = 0.0
        for i in range(kh):
            t = iy + pad_top - i * dil_h
            if t < 0 or t % stride_h:
                continue
            y = t // stride_h
            if y >= oh:
                continue
            for j in range(kw):
                for ix in range(wd):
                    u = ix + pad_left - j * dil_w
                    if u < 0 or u % stride_w:
                        continue
                    xo = u // stride_w
                    if xo >= ow:
                        continue
                    for o in range(c):
                        dx[b, iy, ix, o] += dy[b, y, xo, o] * w[i, j, o]


@Compiled
def depthwise_dw(dy, x, dw, stride_h, stride_w, dil_h, dil_w, pad_top, pad_left):  # pragma: no cover
    n, h, wd, c = x.shape
    kh, kw, _ = dw.shape
    _, oh, ow, _ = dy.shape
    for tap in prange(kh * kw):
        i, j = tap // kw, tap % kw
        acc = np.zeros(c, np.float64)
        for b in range(n):
            for y in range(oh):
                iy = y * stride_h - pad_top + i * dil_h
                if iy < 0 or iy >= h:
                    continue
                for xo in range(ow):
                    ix = xo * stride_w - pad_left + j * dil_w
                    if ix < 0 or ix >= wd:
                        continue
                    for o in range(c):
                        acc[o] += dy[b, y, xo, o] * np.float64(x[b, iy, ix, o])
        for o in range(c):
            dw[i, j, o] = acc[o]


@Compiled
def adam(w, m, v, g, decay, c1, b1, c2, b2, root_bias2, epsilon, step_size):  # pragma: no cover
    """`adam_step` element by element (flattened arrays, float32 scalars), in numpy's order of float32 steps:
    one pass instead of eleven."""
    for k in prange(w.size):
        if decay != 1:
            w[k] *= decay
        m[k] = m[k] * b1 + g[k] * c1
        v[k] = v[k] * b2 + (g[k] * g[k]) * c2
        w[k] -= m[k] / (np.sqrt(v[k]) / root_bias2 + epsilon) * step_size


@Compiled
def sgd(w, g, buf, weight_decay, momentum, damp, nesterov, first, lr):  # pragma: no cover
    """`sgd_step` element by element (flattened arrays, float32 scalars), in numpy's order of float32 steps."""
    for k in prange(w.size):
        d = g[k]
        if weight_decay != 0:
            d = w[k] * weight_decay + g[k]
        step = d
        if momentum != 0:
            if first:
                buf[k] = d
            else:
                buf[k] = buf[k] * momentum + d * damp
            step = buf[k] * momentum + d if nesterov else buf[k]
        w[k] -= step * lr
