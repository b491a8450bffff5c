"""Convolutions as GEMMs over blocks of output rows in the compiled kernels' thread pool: each task writes its
rows' im2col columns, multiplies them with the BLAS library's own sgemm on its own thread, then applies bias
and clamp to the rows it just wrote, while they are in cache.

Why: through numpy, a conv is an im2col copy (numpy, one thread), a BLAS call (BLAS's threads, which then spin
on the cores) and a compiled epilogue (numba's threads, which find those cores busy): three passes and two
thread pools in each other's way. Here there is one pool and one parallel pass.

The sgemm is the one numpy links (found through threadpoolctl, which already bounds its threads): OpenBLAS's
`cblas_sgemm` (its `scipy_...64_` ILP64 build in numpy's wheels, or a plain LP64 one), called through its
address from compiled code (`_call_sgemm`), so the kernels stay cacheable; `openblas_set_num_threads_local(1)`
keeps each call on its calling thread. Without such a library (MKL, Accelerate) `available()` is False and
convs keep the numpy path.
"""
from __future__ import annotations

import ctypes
import functools

import numpy as np

from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from lite.kernels.compiled import Compiled

njit_inline = njit(inline="always", cache=True, nogil=True)
I32, I64, F32 = ir.IntType(32), ir.IntType(64), ir.FloatType()
ROW_MAJOR, NO_TRANS = 101, 111


@functools.lru_cache(maxsize=1)
def _library() -> tuple[int, int, bool] | None:
    """(sgemm address, openblas_set_num_threads_local address, 64-bit integers) of numpy's OpenBLAS, or None."""
    from threadpoolctl import ThreadpoolController
    for lib in ThreadpoolController().lib_controllers:
        if lib.user_api != "blas" or lib.internal_api != "openblas":
            continue
        dll = ctypes.CDLL(lib.filepath)
        for name, ilp64 in (("scipy_cblas_sgemm64_", True), ("cblas_sgemm64_", True), ("cblas_sgemm", False)):
            sgemm = getattr(dll, name, None)
            local = getattr(dll, "openblas_set_num_threads_local", None)
            if sgemm is not None and local is not None:
                address = ctypes.cast(sgemm, ctypes.c_void_p).value
                return address, ctypes.cast(local, ctypes.c_void_p).value, ilp64 and _reports_ilp64(dll, ilp64)
    return None


def _reports_ilp64(dll: ctypes.CDLL, default: bool) -> bool:
    config = getattr(dll, "scipy_openblas_get_config64_", None) or getattr(dll, "openblas_get_config", None)
    if config is None:
        return default
    config.restype = ctypes.c_char_p
    return b"USE64BITINT" in config()


def available() -> bool:
    """Whether convs can run their GEMMs here (numpy's BLAS is an OpenBLAS with a per-thread thread count)."""
    return _library() is not None


@intrinsic
def _call_sgemm(typingctx, address, ilp64, m, n, k, a, lda, b, ldb, c, ldc):
    """C[m, n] = A[m, k] @ B[k, n], row-major, A/B/C given as element addresses (int64) with leading
    dimensions; `ilp64` picks 64-bit or 32-bit integer arguments."""
    sig = types.void(address, ilp64, m, n, k, a, lda, b, ldb, c, ldc)

    def codegen(context, builder, signature, args):
        fn_addr, wide, *rest = args
        pointer = ir.IntType(8).as_pointer()
        with builder.if_else(builder.trunc(wide, ir.IntType(1))) as (then, otherwise):
            for integer, block in ((I64, then), (I32, otherwise)):
                with block:
                    fnty = ir.FunctionType(ir.VoidType(), [I32, I32, I32, integer, integer, integer, F32, pointer,
                                                           integer, pointer, integer, F32, pointer, integer])
                    fn = builder.inttoptr(fn_addr, fnty.as_pointer())
                    mm, nn, kk, aa, la, bb, lb, cc, lc = rest
                    size = lambda v: builder.trunc(v, integer) if integer is I32 else v   # noqa: E731
                    ptr = lambda v: builder.inttoptr(v, pointer)                          # noqa: E731
                    builder.call(fn, [ir.Constant(I32, ROW_MAJOR), ir.Constant(I32, NO_TRANS),
                                      ir.Constant(I32, NO_TRANS), size(mm), size(nn), size(kk),
                                      ir.Constant(F32, 1.0), ptr(aa), size(la), ptr(bb), size(lb),
                                      ir.Constant(F32, 0.0), ptr(cc), size(lc)])
        return context.get_dummy_value()
    return sig, codegen


@intrinsic
def _set_local_threads(typingctx, address, count):
    """openblas_set_num_threads_local(count): returns the calling thread's previous count."""
    sig = types.int64(address, count)

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(I32, [I32])
        fn = builder.inttoptr(args[0], fnty.as_pointer())
        return builder.sext(builder.call(fn, [builder.trunc(args[1], I32)]), I64)
    return sig, codegen


@Compiled
def conv_gemm(x, cols, w, bias, lo, hi, out, kh, kw, stride_h, stride_w, dil_h, dil_w, pad_top, pad_left, im2col,
              chunk, span, sgemm, local, ilp64):  # pragma: no cover
    """out [M, O] = clamp(cols [M, K] @ w [K, O] + bias, lo, hi), per task a block of `chunk` rows by `span`
    columns: when `im2col`, the task first writes its rows of the columns from the NHWC input (K in (kh, kw, c)
    order, padding taps zero; with column spans, the first span's task of a row block writes them for all),
    then one sgemm on the calling thread, then bias and clamp over the block it just wrote. Without `im2col`,
    cols is the input itself viewed as [M, C] (a 1x1 stride-1 unpadded conv)."""
    n, h, wd, c = x.shape
    _, oh, ow, o = out.shape
    rows, depth = cols.shape
    xf, of = x.reshape(-1), out.reshape(-1)
    spans = (o + span - 1) // span
    if im2col and spans > 1:                     # small M: the columns once, then the spans in parallel
        _columns(xf, cols, 0, rows, h, wd, c, oh, ow, kh, kw, stride_h, stride_w, dil_h, dil_w, pad_top, pad_left)
    for task in prange((rows + chunk - 1) // chunk * spans):
        m0, n0 = task // spans * chunk, task % spans * span
        m1, n1 = min(rows, m0 + chunk), min(o, n0 + span)
        if im2col and spans == 1:
            _columns(xf, cols, m0, m1, h, wd, c, oh, ow, kh, kw, stride_h, stride_w, dil_h, dil_w, pad_top,
                     pad_left)
        before = _set_local_threads(local, 1)
        _call_sgemm(sgemm, ilp64, m1 - m0, n1 - n0, depth, cols.ctypes.data + m0 * depth * 4, depth,
                    w.ctypes.data + n0 * 4, o, of.ctypes.data + (m0 * o + n0) * 4, o)
        _set_local_threads(local, before)
        for m in range(m0, m1):
            row = of[m * o + n0:m * o + n1]
            b = bias[n0:n1]
            for j in range(n1 - n0):
                v = row[j] + b[j]
                if v < lo:
                    v = lo
                elif v > hi:
                    v = hi
                row[j] = v


@njit_inline
def _columns(xf, cols, m0, m1, h, wd, c, oh, ow, kh, kw, stride_h, stride_w, dil_h, dil_w, pad_top,
             pad_left):  # pragma: no cover
    """Rows [m0, m1) of the im2col columns of the flat NHWC input: runs of C floats per tap, zeros for padding."""
    for m in range(m0, m1):
        image, rest = m // (oh * ow), m % (oh * ow)
        y, xo = rest // ow, rest % ow
        dst_row = cols[m]
        for i in range(kh):
            iy = y * stride_h - pad_top + i * dil_h
            for j in range(kw):
                ix = xo * stride_w - pad_left + j * dil_w
                dst = dst_row[(i * kw + j) * c:(i * kw + j + 1) * c]
                if 0 <= iy < h and 0 <= ix < wd:
                    src = xf[((image * h + iy) * wd + ix) * c:((image * h + iy) * wd + ix + 1) * c]
                    for k in range(c):
                        dst[k] = src[k]
                else:
                    for k in range(c):
                        dst[k] = 0.0


def bind(x: np.ndarray, cols: np.ndarray | None, w: np.ndarray, bias: np.ndarray, lo: np.float32, hi: np.float32,
         out: np.ndarray, window: tuple[int, ...], threads: int):
    """`conv_gemm` prebound on NHWC x and out, a contiguous w [K, O] and the columns buffer [M, K] (None for a
    1x1 stride-1 unpadded conv, which multiplies x itself); `window` = (kh, kw, stride_h, stride_w, dil_h,
    dil_w, pad_top, pad_left). One block per thread: the rows split when there are many, else the output
    columns (in whole 16-column panels)."""
    sgemm, local, ilp64 = _library()
    rows, cols_o = out.shape[0] * out.shape[1] * out.shape[2], out.shape[3]
    lhs = x.reshape(rows, -1) if cols is None else cols
    if threads == 1:
        chunk, span = rows, cols_o
    elif rows >= 64 * threads:
        chunk, span = -(-rows // threads), cols_o
    else:
        chunk, span = rows, -(-cols_o // (16 * threads)) * 16
    return conv_gemm.bind(rows * lhs.shape[1] * cols_o, x, lhs, w, bias, lo, hi, out, *window, cols is not None,
                          chunk, span, sgemm, local, ilp64)
