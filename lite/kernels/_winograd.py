"""Winograd F(2x2, 3x3) for 3x3 stride-1 convolutions (Lavin & Gray, 2016), as MindSpore Lite's fp32 CPU
kernels do: each 2x2 output tile is A^T [(G g G^T) * (B^T d B)] A over its 4x4 input tile d, so the GEMM work
is 16 products of [tiles, C] @ [C, O] instead of one [pixels, 9C] @ [9C, O] -- 2.25x fewer multiply-adds,
bought with cheap add/subtract passes over the input and output.

Layout (NHWC throughout): the padded input xp [N, 2T+2, 2T'+2, C] covers T x T' tiles; `V` holds the
transformed tiles [16, N*T*T', C], `M` the 16 products [16, N*T*T', O].
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lite.kernel import TensorSpec

# F(2x2, 3x3) transform matrices; B^T and A^T are applied as the add/subtract patterns below
G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])


def tiles(out_size: int) -> int:
    """Tiles along an axis of `out_size` outputs (each tile yields 2)."""
    return -(-out_size // 2)


def transform_weight(w: np.ndarray) -> np.ndarray:
    """OHWI [O, 3, 3, C] -> U = G g G^T laid out [16, C, O], computed in float64 once."""
    u = np.einsum("ai,oijc,bj->abco", G, w.astype(np.float64), G)
    return np.ascontiguousarray(u.reshape(16, w.shape[3], w.shape[0]), dtype=np.float32)


def scratch_specs(batch: int, out_h: int, out_w: int, channels: int, out_channels: int) -> list[TensorSpec]:
    """Work buffers: row-transformed input [4, N, T, 2T'+2, C], V [16, P, C], M [16, P, O], row-reduced
    products [2, 4, P, O] (P = N*T*T')."""
    th, tw = tiles(out_h), tiles(out_w)
    p, f32 = batch * th * tw, np.dtype(np.float32)
    return [TensorSpec((4, batch, th, 2 * tw + 2, channels), f32), TensorSpec((16, p, channels), f32),
            TensorSpec((16, p, out_channels), f32), TensorSpec((2, 4, p, out_channels), f32)]


def _input_pattern(d: list[np.ndarray], out: np.ndarray) -> list[tuple]:
    """B^T applied along one axis: (d0 - d2, d1 + d2, d2 - d1, d1 - d3) into out[0..3]."""
    return [(np.subtract, d[0], d[2], out[0]), (np.add, d[1], d[2], out[1]),
            (np.subtract, d[2], d[1], out[2]), (np.subtract, d[1], d[3], out[3])]


def _apply(steps: list[tuple]) -> None:
    for ufunc, a, b, dst in steps:
        ufunc(a, b, out=dst)


@dataclass
class Winograd:
    """out [N, OH, OW, O] = conv3x3(xp) for padded xp [N, 2T+2, 2T'+2, C]; every view is made once."""
    transform_in: list[tuple]           # (ufunc, a, b, out) add/subtract passes
    operands: tuple[np.ndarray, np.ndarray]
    products: np.ndarray
    transform_out: list[tuple]

    @staticmethod
    def build(xp: np.ndarray, u: np.ndarray, out: np.ndarray, work: list[np.ndarray]) -> "Winograd":
        rows, v, m, s = work
        n, oh, ow, o = out.shape
        th, tw = tiles(oh), tiles(ow)
        transform_in = _input_pattern([xp[:, r:r + 2 * th:2] for r in range(4)], rows)
        v6 = v.reshape(4, 4, n, th, tw, -1)
        for i in range(4):
            transform_in += _input_pattern([rows[i][:, :, k:k + 2 * tw:2] for k in range(4)], v6[i])
        m4 = m.reshape(4, 4, -1, o)                           # [row i, column j, tile, O]
        transform_out = [(np.add, m4[0], m4[1], s[0]), (np.add, s[0], m4[2], s[0]),        # A^T on rows
                         (np.subtract, m4[1], m4[2], s[1]), (np.subtract, s[1], m4[3], s[1])]
        for a in range(2):                                                                  # A^T on columns
            for b in range(2):
                dst = out[:, a::2, b::2]
                j = [s[a, k].reshape(n, th, tw, o)[:, :dst.shape[1], :dst.shape[2]] for k in range(4)]
                if b == 0:
                    transform_out += [(np.add, j[0], j[1], dst), (np.add, dst, j[2], dst)]
                else:
                    transform_out += [(np.subtract, j[1], j[2], dst), (np.subtract, dst, j[3], dst)]
        return Winograd(transform_in, (v, u), m, transform_out)

    def __call__(self) -> None:
        _apply(self.transform_in)
        np.matmul(*self.operands, out=self.products)
        _apply(self.transform_out)
