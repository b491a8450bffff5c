"""Conv2D on NHWC activations with OHWI weights: dense, grouped and depthwise, bias and fused activation.

`infer` is the shape rule; `select` picks one of three paths, each prebound in `bind` as a callable over fixed
views, so a run only copies and multiplies:
- `Im2colGemm`: windows copied once into im2col columns [G, M, KH*KW*Cg] (M = N*OH*OW), then one (batched)
  matmul against the weight viewed as [G, K, Cout/G]. A 1x1 stride-1 unpadded dense conv skips the copy: the
  NHWC input itself is the [M, C] matrix. A constant weight is packed once as a contiguous [K, Cout] matrix, which
  OpenBLAS multiplies 10-20 % faster than the transposed view of the OHWI weight (MobileNetV2 1x1 convs at M = 49
  and 12544, one thread); small-M products of a changing weight (training) run as out^T = W @ cols^T.
  When a window row is shorter than a SIMD vector (KW*C < 8 floats, a first layer) the columns are built
  transposed, [K, M], one copy per tap (`tap_columns`): LeNet-5's first conv (KW*C = 5) at batch 128 took
  6.0 -> 3.7 ms; the first convs of MobileNetV2 and ResNet (9 and 21 floats) gain nothing.
- Winograd F(2x2, 3x3) (`_winograd`: 2.25x fewer multiplies) for dense 3x3 stride-1 convs with a constant weight,
  in one-thread sessions from `WINOGRAD_MIN_TILES` tiles (its transforms run on one thread).
- `DepthwiseBands` (group == C_in == C_out): KH*KW shifted multiply-adds, in bands of output rows whose input
  is padded into a cache-sized buffer, with per-tap weights pre-tiled along W so numpy runs each product as one
  contiguous loop; bias and activation are applied per band while it is in cache.
The GEMM paths end in `epilogue` (bias + activation), then a fused residual sum (input 3, `fuse_residual`) and
a fused PReLU (input 4, its per-channel slope: `fuse_prelu`). The compiled sibling (`compiled/conv2d.py`)
chooses among its own paths first (direct register tiles, its F(4x4) Winograd, a GEMM with the epilogue fused)
and falls back on these.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register, threads
from lite.kernels import _winograd as winograd
from lite.kernels._conv_math import (PadCopy, Window, epilogue, finish, grouped_columns, make_window, padded_shape,
                                     phased_tap_views, prelu, tap_columns, then, with_residual)
from lite.kernels.activation import activation_fn
from lite.status import InvalidOpAttrError
from lite.traits import declare

BAND_ELEMENTS = 1 << 16   # depthwise output elements per band (~256 KiB of float32: stays in L2)
WINOGRAD_MIN_CHANNELS = 16   # below this the 16 small GEMMs lose to one im2col GEMM
WINOGRAD_MIN_TILES = 32      # nor with fewer tiles (GEMM rows): ResNet-50's 7x7 layer4 (16 tiles) lost 0.6-0.9 ms
WINOGRAD_MAX_THREADS = 1     # its transforms run on one thread: at 2, ResNet-50's convs took 54.8 ms against 48.3
SMALL_M = 128             # GEMMs of a changing weight with fewer rows run transposed (5-25 % faster at M = 49)
SHORT_RUN = 8             # dense convs whose window rows (KW*C floats) are shorter build their columns by tap
COLUMN_BLOCK_BYTES = 256 << 10   # tap-built columns, dW and compiled dx: this many bytes of images at a time


@dataclass
class Geometry:
    """What infer decides for one conv: both spatial windows, channels and groups."""
    wh: Window
    ww: Window
    batch: int
    in_channels: int
    out_channels: int
    group: int

    @property
    def rows(self) -> int:
        """M of the GEMM: one row per output pixel."""
        return self.batch * self.wh.out * self.ww.out

    @property
    def depth(self) -> int:
        """K of the GEMM: one column per (kh, kw, input channel of a group)."""
        return self.wh.kernel * self.ww.kernel * self.in_channels // self.group

    @property
    def out_shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.wh.out, self.ww.out, self.out_channels)

    @property
    def padded(self) -> bool:
        return self.wh.has_padding or self.ww.has_padding


def conv_geometry(kernel: Kernel, x: TensorSpec, w: TensorSpec) -> Geometry:
    """Validate x [N, H, W, C] against OHWI w [O, KH, KW, C/group] and resolve the windows."""
    a = kernel.attrs
    if x.rank != 4 or w.rank != 4:
        raise kernel.error(f"needs a 4-D NHWC input and a 4-D OHWI weight, got ranks {x.rank} and {w.rank}")
    n, h, wd, c = x.shape
    out_c, kh, kw, cg = w.shape
    group = a.group or 1
    if cg * group != c or out_c % group:
        raise kernel.error(f"input has {c} channels and weight {list(w.shape)} with group {group}: channels "
                           f"must equal weight dim 3 x group and output channels divide by group")
    if (a.kernel_h and a.kernel_h != kh) or (a.kernel_w and a.kernel_w != kw):
        raise kernel.error(f"kernel {a.kernel_h}x{a.kernel_w} does not match weight {list(w.shape)}",
                           InvalidOpAttrError)
    try:
        wh = make_window(h, kh, a.stride_h, a.dilation_h, a.pad_mode, a.pad_top, a.pad_bottom)
        ww = make_window(wd, kw, a.stride_w, a.dilation_w, a.pad_mode, a.pad_left, a.pad_right)
    except ValueError as e:
        raise kernel.error(str(e), InvalidOpAttrError) from None
    windows = (n, wh.out, ww.out, kh, kw, c)       # `patches`' one strided view; numpy refuses it past int64 bytes
    if int(np.prod([d for d in windows if d], dtype=object)) * 8 > np.iinfo(np.int64).max:
        raise kernel.error(f"its windows {list(windows)} over input {list(x.shape)} hold more bytes than int64 counts")
    return Geometry(wh, ww, n, c, out_c, group)


def image_blocks(g: Geometry) -> list[slice]:
    """The batch in runs of images whose im2col columns take about COLUMN_BLOCK_BYTES (at least one image)."""
    per_image = 4 * g.group * g.depth * g.wh.out * g.ww.out
    step = max(1, COLUMN_BLOCK_BYTES // per_image)
    return [slice(b, min(b + step, g.batch)) for b in range(0, g.batch, step)] or [slice(0, 0)]


def block_pixels(g: Geometry, images: slice) -> int:
    """Output pixels (GEMM rows) of a run of images."""
    return (images.stop - images.start) * g.wh.out * g.ww.out


def check_bias(kernel: Kernel, bias: TensorSpec | None, channels: int) -> None:
    if bias is not None and bias.shape != (channels,):
        raise kernel.error(f"bias must have shape [{channels}], got {list(bias.shape)}")


def depthwise_band(views: Sequence[np.ndarray], taps: Sequence[np.ndarray], out: np.ndarray,
                   tmp: np.ndarray) -> None:
    """out = sum_k views[k] * taps[k] for one band; `tmp` has out's shape."""
    np.multiply(views[0], taps[0], out=out)
    for view, tap in zip(views[1:], taps[1:]):
        np.multiply(view, tap, out=tmp)
        out += tmp


@dataclass
class Im2colGemm:
    """Prebound im2col + GEMM: pad, then per block (one, or runs of images for tap-built columns) copy the
    columns and run one (batched) matmul, then unpack into NHWC when needed. `product` (a dense conv's constant
    weight) prebinds another GEMM on (columns [M, K], weight [K, O], out [M, O]) instead of numpy's matmul: the
    compiled sibling's, with the epilogue fused."""
    pad: PadCopy | None
    blocks: list[tuple[list[tuple[np.ndarray, np.ndarray]], Callable[[], None]]]
    unpack: tuple[np.ndarray, np.ndarray] | None

    @staticmethod
    def padding(g: Geometry, x: np.ndarray, work: list[np.ndarray]) -> tuple[np.ndarray, PadCopy | None]:
        """The input as [1, N, Hp, Wp, C] (the next work buffer, filled with zero padding, when padded) and the
        copy that fills it."""
        source = work.pop(0) if g.padded else x[None]
        return source, PadCopy.build(source, x, g.wh, g.ww, 0.0) if g.padded else None

    @staticmethod
    def build(g: Geometry, direct: bool, transposed: bool, narrow: bool, const_weight: bool, x: np.ndarray,
              w: np.ndarray, out: np.ndarray, work: list[np.ndarray],
              product: Callable[[np.ndarray, np.ndarray, np.ndarray], Callable[[], None]] | None = None
              ) -> "Im2colGemm":
        source, pad = Im2colGemm.padding(g, x, work)
        groups, cog = g.group, g.out_channels // g.group
        weight = w.reshape(groups, cog, g.depth)                                  # [G, O/G, K] view
        out2d = out.reshape(g.rows, g.out_channels)
        rhs = weight[0].T                                                          # [K, O] view
        if const_weight and groups == 1 and product is None:
            rhs = np.ascontiguousarray(rhs)        # packed once for BLAS (another GEMM packs its own panels)
        matmul = lambda lhs, rhs, product: functools.partial(np.matmul, lhs, rhs, out=product)  # noqa: E731
        if narrow:   # per run of images, columns^T [K, m] (in L2); out = columns @ W^T, BLAS reading them transposed
            flat, blocks = work.pop(0), []
            for images in image_blocks(g):
                rows = block_pixels(g, images)
                columns_t = flat[:g.depth * rows].reshape(g.depth, rows)
                first = images.start * g.wh.out * g.ww.out
                blocks.append((tap_columns(source[0][images], g.wh, g.ww, columns_t),
                               matmul(columns_t.T, rhs, out2d[first:first + rows])))
            return Im2colGemm(pad, blocks, None)
        columns = []
        if direct:
            lhs = x.reshape(1, g.rows, g.in_channels)
        else:
            lhs = work.pop(0)
            columns = [grouped_columns(source[0], g.wh, g.ww, groups, lhs)]
        if product is not None:
            return Im2colGemm(pad, [(columns, product(lhs[0], rhs, out2d))], None)
        if transposed:            # out^T = W @ cols^T: BLAS blocks better when M is the small side
            return Im2colGemm(pad, [(columns, matmul(weight[0], lhs[0].T, work[0]))], (out2d, work[0].T))
        if groups == 1:
            return Im2colGemm(pad, [(columns, matmul(lhs[0], rhs, out2d))], None)
        return Im2colGemm(pad, [(columns, matmul(lhs, weight.transpose(0, 2, 1), work[0]))],
                          (out2d.reshape(g.rows, groups, cog), work[0].transpose(1, 0, 2)))

    def __call__(self) -> None:
        if self.pad is not None:
            self.pad()
        for columns, multiply in self.blocks:
            for dst, src in columns:
                np.copyto(dst, src)
            multiply()
        if self.unpack is not None:
            np.copyto(*self.unpack)


@dataclass
class WinogradConv:
    """Prebound Winograd F(2x2, 3x3): pad into whole tiles, then transform, 16 GEMMs, transform back."""
    pad: PadCopy
    compute: winograd.Winograd

    @staticmethod
    def windows(g: Geometry) -> tuple[Window, Window]:
        """The conv windows with the end padding grown to whole 2x2 output tiles."""
        return tuple(replace(win, extra_end=win.extra_end + 2 * winograd.tiles(win.out) - win.out)
                     for win in (g.wh, g.ww))

    @staticmethod
    def scratch(g: Geometry) -> list[TensorSpec]:
        wh, ww = WinogradConv.windows(g)
        return [TensorSpec(padded_shape(g.batch, g.in_channels, wh, ww), np.dtype(np.float32)),
                *winograd.scratch_specs(g.batch, wh.out, ww.out, g.in_channels, g.out_channels)]

    @staticmethod
    def build(g: Geometry, x: np.ndarray, w: np.ndarray, out: np.ndarray, work: list[np.ndarray]) -> "WinogradConv":
        wh, ww = WinogradConv.windows(g)
        buffer = work[0]
        return WinogradConv(PadCopy.build(buffer, x, wh, ww, 0.0),
                            winograd.Winograd.build(buffer[0], winograd.transform_weight(w), out, work[1:]))

    def __call__(self) -> None:
        self.pad()
        self.compute()


@dataclass
class DepthwiseBands:
    """Prebound depthwise conv: per band, pad its input rows, multiply-add the taps, then `finish` it."""
    bands: list[tuple[PadCopy, list[np.ndarray], np.ndarray, np.ndarray]]
    taps: list[np.ndarray]
    finish: Callable[[np.ndarray], None]

    @staticmethod
    def band_rows(g: Geometry) -> int:
        """Output rows of one image per band: about BAND_ELEMENTS outputs."""
        return max(1, min(g.wh.out, BAND_ELEMENTS // (g.ww.out * g.out_channels)))

    @staticmethod
    def scratch(g: Geometry) -> list[TensorSpec]:
        """The band's padded input (phase-split by the W stride) and one product buffer."""
        rows, f32 = DepthwiseBands.band_rows(g), np.dtype(np.float32)
        band_input = replace(g.wh, size=(rows - 1) * g.wh.stride + g.wh.span, pad_begin=0, pad_end=0, extra_end=0)
        return [TensorSpec(padded_shape(1, g.in_channels, band_input, g.ww, g.ww.stride), f32),
                TensorSpec((1, rows, g.ww.out, g.out_channels), f32)]

    @staticmethod
    def build(g: Geometry, const_weight: bool, x: np.ndarray, w: np.ndarray, out: np.ndarray,
              work: list[np.ndarray], finish: Callable[[np.ndarray], None]) -> "DepthwiseBands":
        buffer, tmp = work
        taps = w.reshape(g.out_channels, g.wh.kernel * g.ww.kernel).T                   # [KH*KW, C] view
        if const_weight:           # tile along W once so every product is one contiguous inner loop
            taps = np.ascontiguousarray(np.broadcast_to(taps[:, None, :], (len(taps), g.ww.out, g.out_channels)))
        rows, bands = tmp.shape[1], []
        for n in range(g.batch):
            for top in range(0, g.wh.out, rows):
                count = min(rows, g.wh.out - top)
                first = top * g.wh.stride - g.wh.pad_begin                 # input row of the band's first tap
                last = first + (count - 1) * g.wh.stride + g.wh.span        # one past its last
                lo, hi = max(first, 0), min(last, g.wh.size)
                band_h = replace(g.wh, size=hi - lo, pad_begin=lo - first, pad_end=last - hi, extra_end=0,
                                 out=count)
                band_buffer = buffer[:, :, :last - first]
                bands.append((PadCopy.build(band_buffer, x[n:n + 1, lo:hi], band_h, g.ww, 0.0),
                              phased_tap_views(band_buffer, band_h, g.ww), out[n:n + 1, top:top + count],
                              tmp[:, :count]))
        return DepthwiseBands(bands, list(taps), finish)

    def __call__(self) -> None:
        for fill, views, band, tmp in self.bands:
            fill()
            depthwise_band(views, self.taps, band, tmp)
            self.finish(band)


declare("Conv2D", weight_input=1, weight_axis=0, bias_input=2, bias_correction=True, fused_activation=True,
        batchnorm_folds=True, absorbs_pad=True, residual_input=3)


@register("Conv2D", DataType.FLOAT32)
class Conv2DKernel(Kernel):
    float16_compute = True
    epilogue = staticmethod(epilogue)    # bias + activation after a GEMM path (a sibling may fuse them)
    prelu = staticmethod(prelu)          # a fused PReLU's pass, where a path does not apply the slope itself

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, w = inputs[0], inputs[1]
        bias = inputs[2] if len(inputs) > 2 else None
        residual = inputs[3] if len(inputs) > 3 else None
        slope = inputs[4] if len(inputs) > 4 else None
        g = conv_geometry(self, x, w)
        check_bias(self, bias, g.out_channels)
        if slope is not None and (slope.shape != (g.out_channels,) or slope.dtype != x.dtype):
            raise self.error(f"PReLU slope input must be {np.dtype(x.dtype).name} [{g.out_channels}], got "
                             f"{slope.dtype.name} {list(slope.shape)}")
        if residual is not None and (tuple(residual.shape[:-1]) != tuple(g.out_shape[:-1]) or residual.rank != 4
                                     or not 0 < residual.shape[-1] <= g.out_channels or residual.dtype != x.dtype):
            raise self.error(f"residual input must be {np.dtype(x.dtype).name} {list(g.out_shape)} like the "
                             f"output (or fewer channels, added to the first ones), got {residual.dtype.name} "
                             f"{list(residual.shape)}")
        self.narrow_residual = residual is not None and residual.shape[-1] < g.out_channels
        self.geo = g
        self.const_weight = w.value is not None
        self.whole_weight = self.const_weight and bool(np.array_equal(w.value, np.rint(w.value)))
        self.activation: Callable | None = activation_fn(self.attrs.activation)
        return [TensorSpec(g.out_shape, x.dtype)]

    def select(self, inputs: Sequence[TensorSpec | None]) -> None:
        g = self.geo
        self.depthwise = g.group > 1 and g.group == g.in_channels == g.out_channels
        self.winograd = (self.winograd_shape()
                         and g.batch * winograd.tiles(g.wh.out) * winograd.tiles(g.ww.out) >= WINOGRAD_MIN_TILES
                         and threads() <= WINOGRAD_MAX_THREADS)
        self.select_gemm()

    def winograd_shape(self) -> bool:
        """Whether a Winograd 3x3 transform computes this conv (dense 3x3, stride and dilation 1, a constant
        weight, enough channels); not for whole-number weights, the integer form of QLinearConv / ConvInteger,
        whose exact integer sums the transforms would round."""
        g = self.geo
        return (self.const_weight and not self.whole_weight and g.group == 1 and g.wh.kernel == g.ww.kernel == 3
                and g.wh.stride == g.ww.stride == g.wh.dilation == g.ww.dilation == 1
                and min(g.in_channels, g.out_channels) >= WINOGRAD_MIN_CHANNELS)

    def select_gemm(self) -> None:
        """How the GEMM path lays out its product (after `depthwise` and `winograd` are chosen)."""
        g = self.geo
        self.direct = (g.group == 1 and g.wh.kernel == g.ww.kernel == 1 and g.wh.stride == g.ww.stride == 1
                       and not g.padded)
        self.transposed = (not (self.depthwise or self.winograd or self.const_weight) and g.group == 1
                           and g.rows < SMALL_M)
        self.narrow = (g.group == 1 and g.ww.kernel * g.in_channels < SHORT_RUN
                       and not (self.direct or self.transposed or self.winograd))

    def scratch(self) -> list[TensorSpec]:
        g, f32 = self.geo, np.dtype(np.float32)
        if self.depthwise:
            return DepthwiseBands.scratch(g)
        if self.winograd:
            return WinogradConv.scratch(g)
        specs = [TensorSpec(padded_shape(g.batch, g.in_channels, g.wh, g.ww), f32)] if g.padded else []
        if self.narrow:
            specs.append(TensorSpec((g.depth * block_pixels(g, image_blocks(g)[0]),), f32))
        elif not self.direct:
            specs.append(TensorSpec((g.group, g.rows, g.depth), f32))
        if self.transposed:
            specs.append(TensorSpec((g.out_channels, g.rows), f32))
        elif g.group > 1:
            specs.append(TensorSpec((g.group, g.rows, g.out_channels // g.group), f32))
        return specs

    def bind(self, inputs, outputs, scratch) -> None:
        x, w, out, work = inputs[0], inputs[1], outputs[0], list(scratch)
        self.bias = inputs[2] if len(inputs) > 2 else None
        residual = inputs[3] if len(inputs) > 3 else None
        kind = self.attrs.activation
        # a residual sum comes before the activation: the paths run without it and `with_residual` adds the
        # sum, then applies it
        inner = 0 if residual is not None else kind
        if self.depthwise:
            inner_fn = activation_fn(inner)
            self.compute = DepthwiseBands.build(self.geo, self.const_weight, x, w, out, work,
                                                lambda band: finish(band, self.bias, inner_fn))
            self.finish = None             # the bands finish inside
        else:
            self.compute = (WinogradConv.build(self.geo, x, w, out, work) if self.winograd else
                            Im2colGemm.build(self.geo, self.direct, self.transposed, self.narrow,
                                             self.const_weight, x, w, out, work))
            self.finish = self.epilogue(out, self.bias, inner)
        if residual is not None:
            self.finish = with_residual(self.finish, out, residual, activation_fn(kind))
        if len(inputs) > 4 and inputs[4] is not None:
            self.finish = then(self.finish, self.prelu(out, inputs[4]))
        self.macs = out.size * self.geo.depth
        self.blas_macs = 0 if self.depthwise else self.macs

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        self.compute()
        if self.finish is not None:
            self.finish()
