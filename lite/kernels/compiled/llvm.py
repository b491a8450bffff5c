"""What the register-tile kernels (`conv`, `gemm`, `int8`) share to write LLVM IR: the scalar types, array
addresses, broadcasting a scalar into a vector, and the host's vector width."""
from __future__ import annotations

from llvmlite import binding, ir
from numba.core import cgutils

I8, I16, I32, I64 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
F32, F64 = ir.FloatType(), ir.DoubleType()

# AVX-512: 32 vector registers of 16 float32 lanes. Elsewhere (AVX2, NEON) tiles are sized for 16 registers of 8
# lanes (two NEON registers each); LLVM lowers the same IR on every target.
_FEATURES = binding.get_host_cpu_features()
WIDE = _FEATURES.get("avx512f", False)
LANES = 16 if WIDE else 8
# AVX-512 VNNI: vpdpbusd sums four uint8 x int8 products into each int32 lane, 64 per instruction.
VNNI = WIDE and _FEATURES.get("avx512vnni", False)


def address(context, builder, array_type, array):
    """(data address as i64, strides) of a numba array value."""
    proxy = cgutils.create_struct_proxy(array_type)(context, builder, value=array)
    return builder.ptrtoint(proxy.data, I64), proxy.strides


def splat(builder, value, vector):
    """`value` in every lane of a `vector`-typed value."""
    one = builder.insert_element(ir.Constant(vector, None), value, ir.Constant(I32, 0))
    return builder.shuffle_vector(one, ir.Constant(vector, None), ir.Constant(ir.VectorType(I32, vector.count),
                                                                              [0] * vector.count))
