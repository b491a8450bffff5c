"""DeformConv (deformable convolution v1/v2) on NHWC activations with OHWI weights: every kernel tap of every
output pixel samples x bilinearly (pixel coordinates, zero outside the image) at its regular position plus a
learned offset, optionally scaled by a mask, and the sampled columns meet the weight in one grouped GEMM.
Inputs: x [N, H, W, C], weight [O, KH, KW, C/group], offset [N, OH, OW, offset_group * KH * KW * 2] ((y, x)
pairs, tap-major), bias? [O], mask? [N, OH, OW, offset_group * KH * KW]; output [N, OH, OW, O].
The loop runs over the KH * KW taps (and their 4 bilinear corners); each step covers every pixel and channel.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.conv2d import check_bias, conv_geometry
from lite.kernels.grid_sample import pixel_taps
from lite.status import InvalidOpAttrError
from schema import fb


@register("DeformConv", DataType.FLOAT32)
class DeformConvKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, w, offset = inputs[:3]
        bias, mask = (inputs[k] if len(inputs) > k else None for k in (3, 4))
        self.geo = geo = conv_geometry(self, x, w)
        groups = self.attrs.offset_group
        taps = geo.wh.kernel * geo.ww.kernel
        if groups < 1 or geo.in_channels % groups:
            raise self.error(f"offset_group {groups} must be positive and divide the {geo.in_channels} input "
                             f"channels", InvalidOpAttrError)
        pixels = geo.out_shape[:3]
        if offset.shape != (*pixels, groups * taps * 2):
            raise self.error(f"offset must be {[*pixels, groups * taps * 2]} (NHWC), got {list(offset.shape)}")
        if mask is not None and mask.shape != (*pixels, groups * taps):
            raise self.error(f"mask must be {[*pixels, groups * taps]} (NHWC), got {list(mask.shape)}")
        check_bias(self, bias, geo.out_channels)
        return [TensorSpec(geo.out_shape, x.dtype)]

    def run(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray]) -> None:
        x, w, offset = inputs[:3]
        bias, mask = (inputs[k] if len(inputs) > k else None for k in (3, 4))
        geo, groups, out = self.geo, self.attrs.offset_group, outputs[0]
        n, h, wd, c = x.shape
        oh, ow, kh, kw = geo.wh.out, geo.ww.out, geo.wh.kernel, geo.ww.kernel
        offset = offset.reshape(n, oh, ow, groups, kh, kw, 2)
        mask = mask.reshape(n, oh, ow, groups, kh, kw) if mask is not None else None
        rows = x.reshape(n * h * wd, groups, c // groups)
        base_y = (np.arange(oh) * geo.wh.stride - geo.wh.pad_begin)[None, :, None, None]
        base_x = (np.arange(ow) * geo.ww.stride - geo.ww.pad_begin)[None, None, :, None]
        image = np.arange(n)[:, None, None, None] * h
        cols = np.empty((n, oh, ow, kh, kw, groups, c // groups), x.dtype)
        linear, zeros = fb.ResizeMode.LINEAR, fb.PaddingFill.CONSTANT
        for i in range(kh):
            for j in range(kw):
                ty = pixel_taps(base_y + i * geo.wh.dilation + offset[..., i, j, 0], h, linear, zeros, True)
                tx = pixel_taps(base_x + j * geo.ww.dilation + offset[..., i, j, 1], wd, linear, zeros, True)
                sample = cols[:, :, :, i, j]
                sample.fill(0)
                for a in range(2):
                    for b in range(2):
                        weight = np.where(ty.inside[a] & tx.inside[b], ty.weight[a] * tx.weight[b], 0)
                        if mask is not None:
                            weight = weight * mask[..., i, j]
                        picked = rows[(image + ty.index[a]) * wd + tx.index[b], np.arange(groups)]
                        sample += weight[..., None].astype(x.dtype) * picked
        group = geo.group
        lhs = cols.reshape(n * oh * ow, kh * kw, group, c // group)
        rhs = w.reshape(group, geo.out_channels // group, kh * kw, c // group)
        np.copyto(out.reshape(n * oh * ow, group, -1), np.einsum("mkgc,gokc->mgo", lhs, rhs, optimize=True))
        if bias is not None:
            out += bias
