"""The compiled sibling of float32 Conv2D: its own paths first, the numpy kernel's otherwise.

- Direct (`DirectCompiled`: depthwise, group == C_in, any channel multiplier; dense first layers with at most
  `DENSE_TILE_CHANNELS` input channels): one threaded pass reads the unpadded input and writes the finished
  output, as register tiles where it can.
- Winograd F(4x4, 3x3) (`winograd`: 4x fewer multiplies; bias, residual and clamp fused) for dense 3x3 stride-1
  convs of a constant weight from `COMPILED_WINOGRAD_TILES` tiles (ResNet-50 at 2 threads, against the
  implicit-im2col GEMM: batch 16 520 -> 428 ms a run, batch 1 33.7 -> 31.8); numpy's F(2x2) never runs here.
- A dense conv of a constant weight: its columns (or its input, for a 1x1 conv) go to the compiled GEMM (`gemm`)
  with bias, residual and clamp in the same pass (MobileNetV2 at 2 threads: 6.6 -> 4.6 ms a run, with the thread
  split of `lite.threads.compiled_first`). Where a window's kernel row is `GATHER_RUN` floats or more (KW x C
  contiguous in NHWC) that GEMM builds no columns at all: it reads each window from the (padded) input through
  row and run offsets (`window_offsets`), an implicit im2col (ResNet-50 at 2 threads: 55.7 -> 42.7 ms a run; the
  columns were copied on one thread and pushed the weights out of cache; its 7x7 stem, 3 channels, 0.95 -> 0.81
  ms against the register tiles; a 3x3 conv of 8 channels at 112x112 0.76 -> 0.23 ms against columns).
Every other conv takes the numpy kernel's path, with bias and clamp in one compiled pass (`epilogue`).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import TensorSpec, register, threads
from lite.kernels._conv_math import constant_view, padded_shape, then, with_residual
from lite.kernels.activation import activation_fn, clamp_bounds
from lite.kernels.compiled import Bound
from lite.kernels.compiled import epilogue as epilogues
from lite.kernels.compiled.epilogue import epilogue
from lite.kernels.conv2d import Conv2DKernel, Geometry, Im2colGemm
from lite.memory_plan import aligned_copy

COMPILED_WINOGRAD_TILES = 17   # F(4x4) from this many tiles: its weights are 4x the conv's, read from memory in a
#                                network; below, the GEMM: ResNet-50's 7x7x512 conv at 4 tiles (batch 1) took
#                                0.75 -> 1.07 ms on F(4x4), and the whole batch-1 run 30.6 -> 29.8 ms at 17, not 8
#                                (its 14x14 layers, 16 tiles, back on the GEMM)
GATHER_RUN = 16           # the compiled GEMM reads windows in place (no im2col) from runs this long (`window_run`)
DENSE_TILE_CHANNELS = 4   # dense convs with at most this many input channels run as register tiles
DEPTHWISE_COST = 3        # a depthwise tap's time in GEMM multiply-adds, the unit of the threading threshold: it
#                           loads its input vector as well as its weights (BlazeFace's 32x32x36 3x3: 21.6 us for
#                           331k taps on one core; the GEMM ~12 us for 524k)


def winograd_tiles(g: Geometry) -> int:
    """4x4 output tiles of the F(4x4, 3x3)."""
    return g.batch * -(-g.wh.out // 4) * -(-g.ww.out // 4)


def window_run(g: Geometry) -> int:
    """Floats a window's tap reads in one run of NHWC memory: a whole kernel row (KW x C) when its taps touch
    (dilation 1 along W), else C."""
    return g.ww.kernel * g.in_channels if g.ww.dilation == 1 else g.in_channels


def window_offsets(g: Geometry, source: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Element offsets into the (padded) NHWC `source` of every output pixel's window origin, [N*OH*OW], and of
    each run of `window_run` floats from it (one per kernel row, or per tap): row m of the im2col matrix is the
    runs starting at rows[m] + runs[t], in (kh, kw, c) order."""
    sn, sh, sw, sc = (step // source.itemsize for step in source.strides)
    assert sc == 1 and sw == g.in_channels, "pixels and channels must be contiguous"
    rows = (np.arange(g.batch)[:, None, None] * sn + np.arange(g.wh.out)[None, :, None] * (g.wh.stride * sh)
            + np.arange(g.ww.out)[None, None, :] * (g.ww.stride * sw))
    kw = 1 if g.ww.dilation == 1 else g.ww.kernel
    runs = np.arange(g.wh.kernel)[:, None] * (g.wh.dilation * sh) + np.arange(kw)[None, :] * (g.ww.dilation * sw)
    return rows.reshape(-1).astype(np.int64), runs.reshape(-1).astype(np.int64)


def tiled_depthwise(g: Geometry) -> bool:
    """Whether the int8 register-tile kernel takes this depthwise conv: one output channel per input channel, a
    whole number of 8-lane vectors of them (float tiles take any number)."""
    return g.out_channels == g.in_channels and g.in_channels % 8 == 0


def tiled_dense(g: Geometry) -> bool:
    """Whether the register tiles take this dense conv: a first layer (few input channels, whose im2col rows
    are too short for BLAS to run well) with whole 8-lane vectors of output channels. MobileNetV2's 3x3
    stride-2 stem: 0.59 -> 0.30 ms on one core."""
    return g.group == 1 and g.in_channels <= DENSE_TILE_CHANNELS and g.out_channels % 8 == 0


def depthwise_taps(w: np.ndarray) -> np.ndarray:
    """OHWI depthwise weights [O, KH, KW, 1] as the direct kernel's [KH, KW, O] view."""
    return w[..., 0].transpose(1, 2, 0)


def dense_taps(w: np.ndarray) -> np.ndarray:
    """OHWI weights [O, KH, KW, C] as the dense register tiles' [KH, KW, C, O] view."""
    return w.transpose(1, 2, 3, 0)


@dataclass
class DirectCompiled:
    """Prebound direct conv (no im2col), depthwise or a dense first layer: taps skip the padding, bias and a
    clamp activation are fused, other activations follow (`epilogue.activation`). A weight that changes between runs
    (training) is re-laid out each run."""
    call: Callable[[], None]
    refresh: tuple[np.ndarray, np.ndarray] | None
    after: Callable[[], None] | None
    tiled: bool

    @staticmethod
    def build(g: Geometry, const_weight: bool, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None,
              out: np.ndarray, kind: int) -> "DirectCompiled":
        from lite.kernels.compiled import conv
        layout = dense_taps if g.group == 1 else depthwise_taps
        taps = aligned_copy(np.asarray(layout(w), np.float32))
        bias = np.zeros(g.out_channels, np.float32) if bias is None else constant_view(bias)
        bounds = clamp_bounds(kind)
        lo, hi = (np.float32(b) for b in (bounds or clamp_bounds(0)))
        window = (g.wh.stride, g.ww.stride, g.wh.dilation, g.ww.dilation, g.wh.pad_begin, g.ww.pad_begin)
        work = out.size * g.depth * (1 if g.group == 1 else DEPTHWISE_COST)
        tiled = g.group == 1 or g.out_channels == g.in_channels    # float tiles take any number of channels
        if tiled:
            unused = np.zeros(1)
            call = conv.conv_tiled.bind(work, x, False, x, np.int32(0), taps, bias, unused, unused, lo, hi, out,
                                        *window)
        else:
            call = conv.depthwise_f32.bind(work, x, taps, bias, out, *window, lo, hi)
        after = None if bounds is not None else epilogues.activation(out, kind, activation_fn(kind))
        return DirectCompiled(call, None if const_weight else (taps, layout(w)), after, tiled)

    def __call__(self) -> None:
        if self.refresh is not None:
            np.copyto(*self.refresh)
        self.call()
        if self.after is not None:
            self.after()


@register("Conv2D", DataType.FLOAT32, backend="compiled")
class Conv2DCompiled(Conv2DKernel):
    epilogue = staticmethod(epilogue)
    prelu = staticmethod(epilogues.prelu)

    def select(self, inputs: Sequence[TensorSpec | None]) -> None:
        g, x = self.geo, inputs[0]
        bias = inputs[2] if len(inputs) > 2 else None
        fusable = (g.group == 1 and self.const_weight and (bias is None or bias.value is not None)
                   and x.dtype == np.float32)
        gather = window_run(g) >= GATHER_RUN         # then the GEMM below beats the tiles (ResNet's stem)
        tiles = tiled_dense(g) and not (fusable and gather)
        self.compiled_direct = g.group > 1 and g.group == g.in_channels or tiles
        self.depthwise = (g.group > 1 and g.group == g.in_channels == g.out_channels
                          and not self.compiled_direct)
        self.winograd = False
        self.winograd_fused = (self.winograd_shape() and fusable and not self.narrow_residual
                               and winograd_tiles(g) >= COMPILED_WINOGRAD_TILES)
        self.select_gemm()
        self.fused_gemm = fusable and not (self.compiled_direct or self.winograd_fused or self.narrow)
        self.gathered = self.fused_gemm and not self.direct and gather

    def inplace_input(self) -> int | None:
        """The residual, when the compiled GEMM or Winograd adds it in their epilogue: each output element is
        written where its residual term was just read (one stream less: ResNet-50's layer1 conv3 0.51 -> 0.45 ms);
        not a residual of fewer channels, whose rows are shorter than the output's."""
        fused = (self.fused_gemm or self.winograd_fused) and not self.narrow_residual
        return 3 if fused and len(self.node.inputs) > 3 and self.node.inputs[3] >= 0 else None

    def scratch(self) -> list[TensorSpec]:
        g = self.geo
        if self.compiled_direct:
            return []
        if self.winograd_fused:
            from lite.kernels.compiled import winograd
            return winograd.scratch_specs(*g.out_shape[:3], g.in_channels, g.out_channels, threads())
        if self.gathered:            # only the padded input: the GEMM reads the windows from it
            return [TensorSpec(padded_shape(g.batch, g.in_channels, g.wh, g.ww), np.dtype(np.float32))] * g.padded
        return super().scratch()

    def bind(self, inputs, outputs, scratch) -> None:
        fused = self.fused_gemm or self.winograd_fused
        if not (self.compiled_direct or fused):
            super().bind(inputs, outputs, scratch)
            self.compiled = isinstance(self.finish, Bound)
            return
        g, x, w, out, work = self.geo, inputs[0], inputs[1], outputs[0], list(scratch)
        self.bias = inputs[2] if len(inputs) > 2 else None
        residual = inputs[3] if len(inputs) > 3 else None
        slope = inputs[4] if len(inputs) > 4 else None
        kind = self.attrs.activation
        if self.compiled_direct:         # the residual sum comes before the activation: added after it runs
            self.compute = DirectCompiled.build(g, self.const_weight, x, w, self.bias, out,
                                                0 if residual is not None else kind)
            self.finish = (None if residual is None else
                           with_residual(None, out, residual, activation_fn(kind)))
        else:                            # bias, residual and a clamp in the epilogue, another activation after it
            bounds = clamp_bounds(kind)
            lo, hi = bounds or clamp_bounds(0)
            if self.winograd_fused:
                from lite.kernels.compiled import winograd
                self.compute = winograd.bind(x, w, self.bias, lo, hi, out, (g.wh.pad_begin, g.ww.pad_begin), work,
                                             residual)
            else:
                rows = None if residual is None else residual.reshape(g.rows, residual.shape[-1])
                self.compute = self.fused_gemm_call(x, w, out, work, lo, hi, rows, constant_view(slope))
                slope = None                     # applied in the GEMM's epilogue
            self.finish = None if bounds is not None else epilogues.activation(out, kind, self.activation)
        if slope is not None:
            self.finish = then(self.finish, self.prelu(out, slope))
        self.compiled = True
        self.macs = out.size * g.depth
        self.blas_macs = 0

    def fused_gemm_call(self, x: np.ndarray, w: np.ndarray, out: np.ndarray, work: list[np.ndarray], lo: float,
                        hi: float, residual: np.ndarray | None, slope: np.ndarray | None) -> Im2colGemm:
        """The compiled GEMM with bias, residual, clamp and a PReLU slope, on im2col columns (or the input of a 1x1
        conv), or reading each window from the (padded) input itself (`gathered`)."""
        from lite.kernels.compiled import gemm
        g = self.geo
        if not self.gathered:
            product = functools.partial(_fused_gemm, gemm.bind, self.bias, lo, hi, residual, slope)
            return Im2colGemm.build(g, self.direct, False, False, True, x, w, out, work, product)
        source, pad = Im2colGemm.padding(g, x, work)
        rows_at, runs_at = window_offsets(g, source[0])
        rhs = w.reshape(g.out_channels, g.depth).T
        return Im2colGemm(pad, [([], gemm.bind_gathered(source[0], rows_at, runs_at, window_run(g), rhs, self.bias,
                                                        lo, hi, out.reshape(g.rows, g.out_channels), residual,
                                                        slope))], None)


def _fused_gemm(bind: Callable, bias: np.ndarray | None, lo: float, hi: float, residual: np.ndarray | None,
                slope: np.ndarray | None, lhs: np.ndarray, rhs: np.ndarray, out: np.ndarray) -> Callable[[], None]:
    return bind(lhs, rhs, bias, lo, hi, out, residual, slope)
