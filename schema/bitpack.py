"""Bit packing of low-bit quantized constants (`WeightQuantCompressType.BITPACKING`): an int8 tensor whose values
are b-bit integers (b < 8) is stored as the low b bits of each value, least significant bit first, so 4-bit
weights take half the bytes of int8 ones. The reader unpacks them once at load (a copy, not a view of the file).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np


def low_bits(params: Sequence[Any]) -> int | None:
    """The num_bits all of `params` share when it is below 8 (what a packed tensor's values take), else None."""
    bits = {p.numBits for p in params}
    return bits.pop() if len(bits) == 1 and 1 <= min(bits) < 8 else None


def packed_bits(data: np.ndarray | None, params: Sequence[Any]) -> int | None:
    """The bit width to pack an int8 constant with: `low_bits` of its quant params when every value fits that
    many bits (two's complement); None to store it as it is."""
    if data is None or data.dtype != np.int8 or data.size == 0:
        return None
    b = low_bits(params)
    if b is None or data.min() < -(1 << (b - 1)) or data.max() >= 1 << (b - 1):
        return None
    return b


def packed_size(count: int, bits: int) -> int:
    return (count * bits + 7) // 8


def pack(values: np.ndarray, bits: int) -> bytes:
    """The low `bits` bits of each int8 value, in order, least significant bit first."""
    low = values.reshape(-1).view(np.uint8)[:, None]
    planes = np.unpackbits(low, axis=1, count=bits, bitorder="little")
    return np.packbits(planes.reshape(-1), bitorder="little").tobytes()


def unpack(data: np.ndarray, bits: int, count: int) -> np.ndarray:
    """`count` int8 values from `packed_size(count, bits)` bytes of `pack`, sign-extended."""
    planes = np.unpackbits(data, count=count * bits, bitorder="little").reshape(count, bits)
    low = np.packbits(planes, axis=1, bitorder="little")[:, 0].astype(np.int16)
    sign = 1 << (bits - 1)
    return ((low ^ sign) - sign).astype(np.int8)
