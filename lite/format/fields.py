"""Reading the FlatBuffers fields every format's tensors share, with the same checks and error messages."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from lite import dtypes
from schema import bitpack
from lite.status import GraphFileError, LiteError, NotSupportedError


MAX_ELEMENTS = 1 << 34     # refuse shapes no device could hold instead of attempting the allocation


def text(value: bytes | None, default: str) -> str:
    """A string field; undecodable bytes are replaced, since names only label tensors and nodes."""
    return value.decode(errors="replace") if value else default


def int_vector(table: Any, field: str) -> list[int]:
    """An integer vector field as a list ([] when absent)."""
    return getattr(table, field + "AsNumpy")().tolist() if getattr(table, field + "Length")() else []


def tensor_header(index: int, t: Any) -> tuple[str, tuple[int, ...], np.dtype]:
    """A tensor table's name, dims (-1 = unknown) and numpy dtype; bad dims or an unknown type are GraphFileErrors,
    a known type whose numpy dtype needs `ml_dtypes` is NotSupportedError."""
    name = text(t.Name(), f"tensor_{index}")
    dims = tuple(int_vector(t, "Dims"))
    try:
        dtype = dtypes.to_numpy(t.DataType())
    except LiteError as e:
        if dtypes.is_known(t.DataType()):
            raise NotSupportedError(f"tensor '{name}': {e.args[0]}") from None
        raise GraphFileError(f"tensor '{name}' has unknown data type {t.DataType()}") from None
    if any(d < -1 for d in dims) or math.prod(d for d in dims if d > 0) * dtype.itemsize > np.iinfo(np.int64).max:
        raise GraphFileError(f"tensor '{name}' has invalid dims {list(dims)}")   # (bytes past int64: no array)
    return name, dims, dtype


def packed_values(name: str, t: Any, dims: tuple[int, ...], dtype: np.dtype, quant: list[Any]) -> np.ndarray:
    """A bit-packed int8 tensor's `num_bits` fields (least significant bit first), one per element in `dims`,
    sign-extended (our format's values; MindSpore Lite's files store each value offset instead)."""
    bits = bitpack.low_bits(quant)
    if dtype != np.int8 or bits is None or any(d < 0 for d in dims):
        raise GraphFileError(f"tensor '{name}' is bit-packed, but is not int8 of known dims with one num_bits below "
                             f"8 in its quant params")
    count = int(np.prod(dims, dtype=np.int64)) if dims else 1
    need = bitpack.packed_size(count, bits)
    if count > MAX_ELEMENTS or need != t.DataLength():
        raise GraphFileError(f"tensor '{name}' holds {t.DataLength()} bytes but dims {list(dims)} of {bits}-bit "
                             f"packed values need {need}")
    return bitpack.unpack(t.DataAsNumpy(), bits, count).reshape(dims)
