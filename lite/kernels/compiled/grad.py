"""Compiled gradient kernels: the depthwise convolution's (channel multiplier 1, NHWC, weights as [KH, KW, C]),
the dense convolution's col2im (from columns laid out transposed or as im2col's), pooling, clipping activations,
channels-last BatchNorm and the optimizers' updates.

Depthwise dx is gathered (each input row sums the output positions whose taps read it), so threads over (image,
input row) never write the same element; dW runs one task per tap and sums each channel in float64 before
rounding once, more exactly than a float32 reduction. Both col2im and pooling run one task per image, which owns
its slice of dx.
"""
from __future__ import annotations

import numpy as np

from lite.kernels.compiled import Compiled
from lite.kernels.compiled.llvm import prange


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
def col2im(columns, planes, dx, stride_h, stride_w, dil_h, dil_w, pad_top, pad_left):  # pragma: no cover
    """dx [N, H, W, C] = the sum over taps of each tap's columns at the input positions it read, from columns
    [KH, KW, C, N, OH, OW] (the GEMM W^T @ dy^T). Per image, every (channel, tap, output row) adds one run of
    OW values into `planes` [N, C, H, W] (contiguous when the W stride is 1), taps in scan order from zero;
    then the image is transposed into dx. Indices are unsigned: numba's wraparound of negative signed indices
    kept LLVM from vectorising the runs (2.3x slower)."""
    n, h, wd, c = dx.shape
    kh, kw, _, _, oh, ow = columns.shape
    src_all, dst_all = columns.reshape(-1), planes.reshape(-1)
    u = np.uint64
    for b in prange(n):
        for k in range(u(b * c * h * wd), u((b + 1) * c * h * wd)):
            dst_all[k] = 0.0
        for q in range(c):
            for i in range(kh):
                for j in range(kw):
                    offset = j * dil_w - pad_left
                    lo = 0 if offset >= 0 else (stride_w - 1 - offset) // stride_w
                    hi = min(ow, (wd - 1 - offset) // stride_w + 1)
                    if hi <= lo:
                        continue
                    run, step = u(hi - lo), u(stride_w)
                    for y in range(oh):
                        iy = y * stride_h - pad_top + i * dil_h
                        if iy < 0 or iy >= h:
                            continue
                        dst = u(((b * c + q) * h + iy) * wd + lo * stride_w + offset)
                        src = u(((((i * kw + j) * c + q) * n + b) * oh + y) * ow + lo)
                        if stride_w == 1:
                            for k in range(run):
                                dst_all[dst + k] += src_all[src + k]
                        else:
                            for k in range(run):
                                dst_all[dst + k * step] += src_all[src + k]
        for iy in range(h):
            for ix in range(wd):
                for q in range(c):
                    dx[b, iy, ix, q] = planes[b, q, iy, ix]


@Compiled
def col2im_pixels(columns, dx, stride_h, stride_w, dil_h, dil_w, pad_top, pad_left):  # pragma: no cover
    """dx [N, H, W, C] = the sum over taps of each tap's columns at the input positions it read, from columns
    [N, OH, OW, KH, KW, C] (im2col's layout, the GEMM dy @ W). Per image, every (output pixel, kernel row) adds
    one run of KW*C values into dx when the W dilation is 1 (else KW runs of C), clipped to the data columns;
    unsigned indices as in `col2im`. The image's dx stays in L1 while its columns stream by."""
    n, h, wd, c = dx.shape
    _, oh, ow, kh, kw, _ = columns.shape
    src_all, dst_all = columns.reshape(-1), dx.reshape(-1)
    u = np.uint64
    for b in prange(n):
        for k in range(u(b * h * wd * c), u((b + 1) * h * wd * c)):
            dst_all[k] = 0.0
        for y in range(oh):
            for i in range(kh):
                iy = y * stride_h - pad_top + i * dil_h
                if iy < 0 or iy >= h:
                    continue
                for xo in range(ow):
                    left = xo * stride_w - pad_left
                    src = u((((b * oh + y) * ow + xo) * kh + i) * kw * c)
                    if dil_w == 1:
                        lo = 0 if left >= 0 else -left
                        hi = min(kw, wd - left)
                        if hi <= lo:
                            continue
                        dst, first = u(((b * h + iy) * wd + left + lo) * c), src + u(lo * c)
                        for k in range(u((hi - lo) * c)):
                            dst_all[dst + k] += src_all[first + k]
                        continue
                    for j in range(kw):
                        ix = left + j * dil_w
                        if ix < 0 or ix >= wd:
                            continue
                        dst, first = u(((b * h + iy) * wd + ix) * c), src + u(j * c)
                        for k in range(u(c)):
                            dst_all[dst + k] += src_all[first + k]


@Compiled
def pool_grad(dy, x, y, dx, scale, kh, kw, stride_h, stride_w, dil_h, dil_w, pad_top, pad_left,
              average):  # pragma: no cover
    """Windowed PoolingGrad, NHWC: average adds dy * scale ([OH, OW], 1 / count) to every tap inside the input;
    max routes dy to the first tap in scan order where x equals the pooled y (PyTorch's choice on ties).
    Flat unsigned indices, as in `col2im`."""
    n, h, wd, c = x.shape
    _, oh, ow, _ = dy.shape
    dy1, x1, y1, dx1 = dy.reshape(-1), x.reshape(-1), y.reshape(-1), dx.reshape(-1)
    u, channels = np.uint64, np.uint64(c)
    for b in prange(n):
        share = np.empty(c, np.float32)
        pending = np.empty(c, np.bool_)
        for k in range(u(b * h * wd * c), u((b + 1) * h * wd * c)):
            dx1[k] = 0.0
        for yo in range(oh):
            for xo in range(ow):
                out = u(((b * oh + yo) * ow + xo) * c)
                for o in range(channels):
                    share[o] = dy1[out + o] * scale[yo, xo] if average else dy1[out + o]
                    pending[o] = True
                for i in range(kh):
                    iy = yo * stride_h - pad_top + i * dil_h
                    if iy < 0 or iy >= h:
                        continue
                    for j in range(kw):
                        ix = xo * stride_w - pad_left + j * dil_w
                        if ix < 0 or ix >= wd:
                            continue
                        at = u(((b * h + iy) * wd + ix) * c)
                        if average:
                            for o in range(channels):
                                dx1[at + o] += share[o]
                            continue
                        for o in range(channels):          # branch-free, so the channel loop vectorises
                            hit = (x1[at + o] == y1[out + o]) & pending[o]
                            dx1[at + o] += share[o] * hit
                            pending[o] = pending[o] != hit


@Compiled
def passed_between(dy, x, dx, lo, hi):  # pragma: no cover
    """The gradient of a clip to [lo, hi] on flattened arrays: dy where lo < x < hi, else 0; hi = inf is no
    upper bound (ReLU passes x = inf)."""
    for k in prange(x.size):
        v = x[k]
        dx[k] = dy[k] if v > lo and (v < hi or hi == np.inf) else np.float32(0.0)


@Compiled
def batchnorm_grad(dy, x, scale, mean, invstd, dx, dscale, dbias, parts):  # pragma: no cover
    """BatchNormGrad over channels-last [M, C] arrays in two passes (numpy takes seven): the per-channel sums
    of dy and dy * (x - mean) in float64, over a fixed number of row blocks (`parts` [P, 2, C]: P partial sums,
    so the result does not depend on the thread count), then dx = k dy - ((x - mean) a + b) with k, a, b per
    channel as in the numpy kernel."""
    m, c = x.shape
    blocks = parts.shape[0]
    dy1, x1, dx1 = dy.reshape(-1), x.reshape(-1), dx.reshape(-1)
    u, channels = np.uint64, np.uint64(c)
    for p in prange(blocks):
        total, dot = parts[p, 0], parts[p, 1]
        for k in range(c):
            total[k] = 0.0
            dot[k] = 0.0
        for r in range(u(p * m // blocks), u((p + 1) * m // blocks)):
            base = r * channels
            for k in range(channels):
                g = np.float64(dy1[base + k])
                total[k] += g
                dot[k] += g * (np.float64(x1[base + k]) - mean[k])
    k_dy = np.empty(c, np.float32)
    k_centred = np.empty(c, np.float32)
    shift = np.empty(c, np.float32)
    for k in range(c):
        total, dot = 0.0, 0.0
        for p in range(blocks):
            total += parts[p, 0, k]
            dot += parts[p, 1, k]
        dbias[k] = total
        dscale[k] = dot * invstd[k]
        k_dy[k] = scale[k] * invstd[k]
        k_centred[k] = k_dy[k] * invstd[k] * dscale[k] / m
        shift[k] = k_dy[k] * dbias[k] / m
    for r in prange(m):
        base = u(r) * channels
        for k in range(channels):
            dx1[base + k] = k_dy[k] * dy1[base + k] - ((x1[base + k] - mean[k]) * k_centred[k] + shift[k])


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
