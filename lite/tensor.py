"""`MSTensor`: a named view of one session tensor."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from lite import dtypes
from lite.status import InputTensorError


class MSTensor:
    """A graph tensor as the user sees it, in the model's own layout (graph inputs/outputs keep the source
    model's layout). The data lives in the session; `MutableData()` is a writable view of it."""

    def __init__(self, name: str, data_type: int, array: np.ndarray | None = None,
                 quant_params: list[tuple[float, int]] | None = None):
        self._name = name
        self._type = data_type
        self._array = array if array is not None else np.zeros((0,), dtypes.to_numpy(data_type))
        self._quant = quant_params or []
        # an input of a model with unknown dims: fixes them to a new shape (Resize), False when it does not fit
        self._fit: Callable[[tuple[int, ...]], bool] | None = None

    def _rebind(self, array: np.ndarray | None, data_type: int | None = None) -> None:
        """Point at the session's new memory (after a compile, or a run that computed this tensor's shape);
        None: not computed yet, an empty array."""
        if data_type is not None:
            self._type = data_type
        self._array = array if array is not None else np.zeros((0,), dtypes.to_numpy(self._type))

    def tensor_name(self) -> str:
        return self._name

    def quant_params(self) -> list[tuple[float, int]]:
        """(scale, zero_point) of a quantized tensor — one pair, or one per channel — as in MindSpore's
        `MSTensor::quant_params()`: real = scale * (q - zero_point). Empty for float tensors."""
        return list(self._quant)

    def data_type(self) -> int:
        """The MindSpore TypeId (`lite.DataType.FLOAT32` == 43, ...)."""
        return self._type

    def shape(self) -> list[int]:
        return list(self._array.shape)

    def DimensionSize(self, index: int) -> int:
        shape = self._array.shape
        if not -len(shape) <= index < len(shape):
            raise InputTensorError(f"tensor '{self._name}' has {len(shape)} dimensions, asked for {index}")
        return int(shape[index])

    def ElementsNum(self) -> int:
        return int(self._array.size)

    def Size(self) -> int:
        """Bytes of data."""
        return int(self._array.nbytes)

    def MutableData(self) -> np.ndarray:
        """A writable view of the tensor's memory; writes go straight into the session."""
        return self._array

    def set_data(self, data: Any) -> None:
        """Copy `data` in; its shape and dtype must be the tensor's (no silent casts or reshapes), except that
        data of a new size fixes the unknown dims of an input (the session resizes to it)."""
        arr = np.asarray(data)
        if arr.dtype != self._array.dtype:
            raise InputTensorError(f"tensor '{self._name}' expects {self._array.dtype} data, got {arr.dtype}")
        if arr.shape != self._array.shape and not (self._fit and self._fit(arr.shape)):
            raise InputTensorError(f"tensor '{self._name}' expects shape {list(self._array.shape)}, got "
                                   f"{list(arr.shape)} (call Resize first to change it)")
        np.copyto(self._array, arr)

    def numpy(self) -> np.ndarray:
        """A copy of the data."""
        return self._array.copy()

    def __getitem__(self, key: Any) -> np.ndarray:
        return self._array[key]

    def __repr__(self) -> str:
        return f"MSTensor('{self._name}', {dtypes.type_name(self._type)}, {list(self._array.shape)})"
