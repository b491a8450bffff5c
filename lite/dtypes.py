"""MindSpore TypeId codes and their numpy dtypes.

bfloat16, float8, 4-bit and 2-bit types come from `ml_dtypes` (numpy dtypes for them), imported only when a
model or a call needs one: `lite` runs on numpy alone for every other type. MindSpore has TypeIds for
bfloat16 (45) and int4 (50); the others have ids of our own, from 200 on, clear of MindSpore's range. Sub-byte
types are stored one element per byte (as ml_dtypes holds them), so a tensor's bytes are still a numpy view.
"""
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
    BFLOAT16 = 45
    INT4 = 50
    # our own ids (MindSpore has none for these)
    FLOAT8E4M3FN = 200
    FLOAT8E4M3FNUZ = 201
    FLOAT8E5M2 = 202
    FLOAT8E5M2FNUZ = 203
    FLOAT8E8M0 = 204
    UINT4 = 205
    FLOAT4E2M1 = 206
    INT2 = 207
    UINT2 = 208


NARROW_FLOATS = frozenset({DataType.FLOAT16, DataType.BFLOAT16, DataType.FLOAT8E4M3FN, DataType.FLOAT8E4M3FNUZ,
                           DataType.FLOAT8E5M2, DataType.FLOAT8E5M2FNUZ, DataType.FLOAT8E8M0, DataType.FLOAT4E2M1})

_TO_NUMPY = {
    DataType.BOOL: np.dtype(np.bool_), DataType.INT8: np.dtype(np.int8), DataType.INT16: np.dtype(np.int16),
    DataType.INT32: np.dtype(np.int32), DataType.INT64: np.dtype(np.int64), DataType.UINT8: np.dtype(np.uint8),
    DataType.UINT16: np.dtype(np.uint16), DataType.UINT32: np.dtype(np.uint32),
    DataType.UINT64: np.dtype(np.uint64), DataType.FLOAT16: np.dtype(np.float16),
    DataType.FLOAT32: np.dtype(np.float32), DataType.FLOAT64: np.dtype(np.float64),
}
_ML_DTYPES = {   # TypeId -> ml_dtypes attribute
    DataType.BFLOAT16: "bfloat16", DataType.INT4: "int4", DataType.FLOAT8E4M3FN: "float8_e4m3fn",
    DataType.FLOAT8E4M3FNUZ: "float8_e4m3fnuz", DataType.FLOAT8E5M2: "float8_e5m2",
    DataType.FLOAT8E5M2FNUZ: "float8_e5m2fnuz", DataType.FLOAT8E8M0: "float8_e8m0fnu", DataType.UINT4: "uint4",
    DataType.FLOAT4E2M1: "float4_e2m1fn", DataType.INT2: "int2", DataType.UINT2: "uint2",
}
_FROM_NUMPY = {v: k for k, v in _TO_NUMPY.items()}
_NAMES = {v: k.lower() for k, v in vars(DataType).items() if not k.startswith("_")}
_loaded = False


def _load_ml_dtypes() -> None:
    """Register the ml_dtypes types once; their absence makes only these types unsupported."""
    global _loaded
    if _loaded:
        return
    try:
        import ml_dtypes
    except ImportError:
        raise NotSupportedError("bfloat16, float8, 4-bit and 2-bit tensors need the ml_dtypes package "
                                "(pip install ml_dtypes)") from None
    for type_id, name in _ML_DTYPES.items():
        dtype = np.dtype(getattr(ml_dtypes, name))
        _TO_NUMPY[type_id], _FROM_NUMPY[dtype] = dtype, type_id
    _loaded = True


def to_numpy(type_id: int) -> np.dtype:
    if type_id in _ML_DTYPES:
        _load_ml_dtypes()
    try:
        return _TO_NUMPY[type_id]
    except KeyError:
        raise NotSupportedError(f"unsupported data type id {type_id}") from None


def is_known(type_id: int) -> bool:
    """Whether `type_id` is one of ours, whether or not its numpy dtype is available."""
    return type_id in _TO_NUMPY or type_id in _ML_DTYPES


def from_numpy(dtype: np.dtype | type) -> int:
    dtype = np.dtype(dtype)
    if dtype not in _FROM_NUMPY and dtype.kind == "V" and dtype.itemsize <= 2:   # ml_dtypes types are kind V
        _load_ml_dtypes()
    try:
        return _FROM_NUMPY[dtype]
    except KeyError:
        raise NotSupportedError(f"unsupported numpy dtype {dtype}") from None


def type_name(type_id: int) -> str:
    return _NAMES.get(type_id, f"type{type_id}")


def finfo(dtype: np.dtype):
    """The range of a float dtype, the ml_dtypes floats included."""
    if np.dtype(dtype).kind == "f":
        return np.finfo(dtype)
    _load_ml_dtypes()
    import ml_dtypes
    return ml_dtypes.finfo(dtype)


def iinfo(dtype: np.dtype):
    """The range of an integer dtype, the ml_dtypes 4-bit and 2-bit integers included."""
    if np.dtype(dtype).kind in "iu":
        return np.iinfo(dtype)
    _load_ml_dtypes()
    import ml_dtypes
    return ml_dtypes.iinfo(dtype)
