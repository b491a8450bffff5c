"""Bit packing of low-bit quantized constants (`WeightQuantCompressType.BITPACKING`): an int8 tensor whose values
are b-bit integers (b < 8) is stored as the low b bits of each value, least significant bit first, so 4-bit
weights take half the bytes of int8 ones. The reader unpacks them once at load (a copy, not a view of the file).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np


def packed_bits(data: np.ndarray | None, params: Sequence[Any]) -> int | None:
    """The bit width to pack an int8 constant with: its quant params' common num_bits when below 8 and every
    value fits that many bits (two's complement); None to store it as it is."""
    if data is None or data.dtype != np.int8 or not params or data.size == 0:
        return None
    bits = {p.numBits for p in params}
    if len(bits) != 1:
        return None
    b = bits.pop()
    if not 1 <= b < 8 or data.min() < -(1 << (b - 1)) or data.max() >= 1 << (b - 1):
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
