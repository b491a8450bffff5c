"""Per-channel quantization: in memory a list of `QuantParamT`, one per channel along the tensor's quant axis (what
the kernels and the quantizer read); in the file one `ChannelQuant` of flat vectors with the shared fields once.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from schema import fb

SHARED = ("numBits", "narrowRange", "inited", "varCorr", "meanCorr", "dstDtype")   # one value for all channels


def compact(params: Sequence[Any]) -> fb.ChannelQuantT:
    """The file form of per-channel params; ValueError names what it cannot hold (it is lossless otherwise)."""
    first = params[0]
    for name in SHARED:
        if any(getattr(p, name) != getattr(first, name) for p in params):
            raise ValueError(f"its channels differ in {name}, which the file keeps once for all channels")
    if any(p.min or p.max for p in params):
        raise ValueError("its channels have min/max, which the file keeps for per-tensor params only")
    zero_points = np.array([p.zeroPoint for p in params], np.int32)
    return fb.ChannelQuantT(np.array([p.scale for p in params], np.float64),
                            zero_points if zero_points.any() else None,
                            **{name: getattr(first, name) for name in SHARED})


def expand(table: fb.ChannelQuant) -> list[fb.QuantParamT]:
    """One `QuantParamT` per channel; ValueError when there are no scales or the zero points do not match them."""
    count, zp_count = table.ScalesLength(), table.ZeroPointsLength()
    if not count:
        raise ValueError("per-channel quantization has no scales")
    if zp_count not in (0, count):
        raise ValueError(f"per-channel quantization has {count} scales but {zp_count} zero points")
    scales = table.ScalesAsNumpy().tolist()
    zero_points = table.ZeroPointsAsNumpy().tolist() if zp_count else [0] * count
    shared = {name: getattr(table, name[:1].upper() + name[1:])() for name in SHARED}
    return [fb.QuantParamT(scale=s, zeroPoint=z, **shared) for s, z in zip(scales, zero_points)]


def implied_bias(x: Sequence[Any], weight: Sequence[Any]) -> list[fb.QuantParamT] | None:
    """The params an INT32 bias of an int8 Conv2D / FullConnection has by definition, scale s_x * s_w[c] with
    zero point 0 (docs/quantization.md), so that the file need not store them; None unless `x` is quantized per
    tensor and `weight` per channel."""
    if len(x) != 1 or len(weight) < 2:
        return None
    return [fb.QuantParamT(scale=x[0].scale * w.scale, zeroPoint=0, numBits=32, narrowRange=False, inited=True)
            for w in weight]


def same(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Equal in every field."""
    return len(a) == len(b) and all(vars(p) == vars(q) for p, q in zip(a, b))
