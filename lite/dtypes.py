"""MindSpore TypeId codes and their numpy dtypes."""
from __future__ import annotations

import numpy as np

from lite.status import NotSupportedError


class DataType:
    """MindSpore Lite's TypeId values, as stored in `.ms` files and returned by `MSTensor.data_type()`."""
    UNKNOWN = 0
    BOOL = 30
    INT8 = 32
    INT16 = 33
    INT32 = 34
    INT64 = 35
    UINT8 = 37
    UINT16 = 38
    UINT32 = 39
    UINT64 = 40
    FLOAT16 = 42
    FLOAT32 = 43
    FLOAT64 = 44


_TO_NUMPY = {
    DataType.BOOL: np.dtype(np.bool_), DataType.INT8: np.dtype(np.int8), DataType.INT16: np.dtype(np.int16),
    DataType.INT32: np.dtype(np.int32), DataType.INT64: np.dtype(np.int64), DataType.UINT8: np.dtype(np.uint8),
    DataType.UINT16: np.dtype(np.uint16), DataType.UINT32: np.dtype(np.uint32),
    DataType.UINT64: np.dtype(np.uint64), DataType.FLOAT16: np.dtype(np.float16),
    DataType.FLOAT32: np.dtype(np.float32), DataType.FLOAT64: np.dtype(np.float64),
}
_FROM_NUMPY = {v: k for k, v in _TO_NUMPY.items()}
_NAMES = {v: k.lower() for k, v in vars(DataType).items() if not k.startswith("_")}


def to_numpy(type_id: int) -> np.dtype:
    try:
        return _TO_NUMPY[type_id]
    except KeyError:
        raise NotSupportedError(f"unsupported data type id {type_id}") from None


def from_numpy(dtype: np.dtype | type) -> int:
    try:
        return _FROM_NUMPY[np.dtype(dtype)]
    except KeyError:
        raise NotSupportedError(f"unsupported numpy dtype {np.dtype(dtype)}") from None


def type_name(type_id: int) -> str:
    return _NAMES.get(type_id, f"type{type_id}")
