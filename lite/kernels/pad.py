"""Pad: grow (or, with negative pads, crop) every axis of `x`. Any dtype; layout-agnostic.

inputs: x, pads (1-D ints [begin_0.., end_0..], 2 * rank of them), constant_value? (scalar, default 0), axes?
(1-D ints: pads then holds begins and ends of these axes only; the importer spreads constant ones itself).
Modes: CONSTANT fills with the value, REFLECT mirrors without repeating the edge, EDGE repeats the edge,
WRAP continues periodically. A run copies the surviving part of x once into the output, then writes only the
borders: constant slabs, or, axis by axis, gathers from the part already written (the other modes are separable).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.reshape import normalize_axes
from lite.status import InvalidOpAttrError
from lite.traits import BEGIN_END, PER_AXIS, Layout, declare
from schema import fb

_NUMPY_MODE = {fb.PaddingFill.REFLECT: "reflect", fb.PaddingFill.EDGE: "edge", fb.PaddingFill.WRAP: "wrap"}
_MODE_NAMES = {v: k.lower() for k, v in vars(fb.PaddingFill).items() if not k.startswith("_")}
Index = tuple[slice, ...]


def crop_and_place(shape: Sequence[int], begins: Sequence[int], ends: Sequence[int]) -> tuple[Index, Index]:
    """(source slice of x, destination slice of the output) of the part of x that survives the pads."""
    src = tuple(slice(max(-b, 0), n - max(-e, 0)) for n, b, e in zip(shape, begins, ends))
    dst = tuple(slice(max(b, 0), max(b, 0) + s.stop - s.start) for b, s in zip(begins, src))
    return src, dst


def border_slabs(out_shape: Sequence[int], begins: Sequence[int], ends: Sequence[int]) -> list[Index]:
    """Slices of the output covering every padded border (they may overlap at the corners)."""
    slabs = []
    for axis, (n, b, e) in enumerate(zip(out_shape, begins, ends)):
        lead = (slice(None),) * axis
        if b > 0:
            slabs.append(lead + (slice(0, b),))
        if e > 0:
            slabs.append(lead + (slice(n - e, n),))
    return slabs


def border_gathers(begins: Sequence[int], ends: Sequence[int], dst: Index, mode: str
                   ) -> list[tuple[Index, Index, int, np.ndarray]]:
    """For reflect / edge / wrap: (border slice, region slice, axis, output positions along the axis to copy
    into the border) per padded side, in axis order. Each region spans the axes done before in full and the
    later ones over the interior, so corners come out right."""
    gathers = []
    region = list(dst)
    for axis, (b, e) in enumerate(zip(begins, ends)):
        region[axis] = slice(None)
        b, e = max(b, 0), max(e, 0)
        if b + e == 0:
            continue
        kept = np.arange(dst[axis].stop - dst[axis].start)
        # output position of every output element's source: its index in the kept part plus where that landed
        position = np.pad(kept, (b, e), mode=mode) + dst[axis].start
        for border in (slice(0, b), slice(len(position) - e, len(position))):
            if border.stop > border.start:
                target = tuple(region[:axis]) + (border,) + tuple(region[axis + 1:])
                gathers.append((target, tuple(region), axis, position[border]))
    return gathers


def pad_constant(x: np.ndarray, out: np.ndarray, src: Index, dst: Index, slabs: list[Index], fill: np.generic
                 ) -> None:
    for slab in slabs:
        out[slab] = fill
    out[dst] = x[src]


def pad_gather(x: np.ndarray, out: np.ndarray, src: Index, dst: Index,
               gathers: list[tuple[Index, Index, int, np.ndarray]]) -> None:
    out[dst] = x[src]
    for target, region, axis, positions in gathers:
        out[target] = np.take(out[region], positions, axis=axis)


declare("Pad", layout=Layout(PER_AXIS, per_axis=((1, BEGIN_END),)), same_quant=True)


def spread_pads(pads: list[int], axes: list[int], rank: int) -> list[int]:
    """Pads [begins..., ends...] given for (normalised) `axes` only, spread over all `rank` axes (others 0);
    ValueError when the counts differ."""
    if len(pads) != 2 * len(axes):
        raise ValueError(f"pads has {len(pads)} values for {len(axes)} axes")
    full = [0] * (2 * rank)
    for k, a in enumerate(axes):
        full[a], full[a + rank] = pads[k], pads[k + len(axes)]
    return full


@register("Pad")
class PadKernel(Kernel):
    native_dtypes = True

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = inputs[0]
        pads = [int(p) for p in self.known(inputs[1] if len(inputs) > 1 else None, "pads").ravel()]
        if len(inputs) > 3 and inputs[3] is not None:
            axes = normalize_axes(self, self.known(inputs[3], "axes").ravel(), x.rank, "axes")
            try:
                pads = spread_pads(pads, axes, x.rank)
            except ValueError as e:
                raise self.error(str(e)) from None
        if len(pads) != 2 * x.rank:
            raise self.error(f"pads has {len(pads)} values, a rank-{x.rank} input needs {2 * x.rank}")
        begins, ends = pads[:x.rank], pads[x.rank:]
        shape = tuple(n + b + e for n, b, e in zip(x.shape, begins, ends))
        if min(shape, default=0) < 0:
            raise self.error(f"pads {pads} crop more than the input shape {list(x.shape)}")
        self.src, self.dst = crop_and_place(x.shape, begins, ends)
        mode = self.attrs.mode
        if mode == fb.PaddingFill.CONSTANT:
            value = inputs[2] if len(inputs) > 2 else None
            fill = self.known(value, "constant_value").ravel() if value is not None else np.zeros(1)
            self.fill = fill[0].astype(x.dtype) if fill.size else x.dtype.type(0)
            self.slabs, self.gathers = border_slabs(shape, begins, ends), None
        elif mode in _NUMPY_MODE:
            if any(s.stop == s.start and max(b, 0) + max(e, 0) > 0 for s, b, e in zip(self.src, begins, ends)):
                raise self.error(f"{_MODE_NAMES[mode]} padding needs a non-empty input along every padded axis")
            self.gathers = border_gathers(begins, ends, self.dst, _NUMPY_MODE[mode])
        else:
            raise self.error(f"unknown padding mode {mode}", InvalidOpAttrError)
        return [TensorSpec(shape, x.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        if self.gathers is None:
            pad_constant(inputs[0], outputs[0], self.src, self.dst, self.slabs, self.fill)
        else:
            pad_gather(inputs[0], outputs[0], self.src, self.dst, self.gathers)
