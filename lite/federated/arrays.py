"""A `TrainSession`'s trainable weights <-> Flower's `ArrayRecord`, with one copy each way per round.

The record's keys are the source model's weight names and its arrays are in the source layout (what
`GetFeatureMaps` shows), so any Flower server — ours or a PyTorch one — can aggregate them. Out: each live
`GetFeatureMaps` view is written once into the message bytes (`.npy` format, Flower's `SType.NUMPY`; a
transposed conv weight is made contiguous by that same write). In: each array is a read-only view over the
message bytes and `UpdateFeatureMaps` copies it into the session's variables.
"""
from __future__ import annotations

import io
import tokenize

import numpy as np
from flwr.app import Array, ArrayRecord
from flwr.common.constant import SType

from lite.status import InputTensorError
from lite.train.session import TrainSession


_HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


def _npy_bytes(array: np.ndarray) -> bytes:
    """`array` in `.npy` format, written in one pass (a C-contiguous array is copied exactly once)."""
    data = np.ascontiguousarray(array)
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, np.lib.format.header_data_from_array_1_0(data))
    return b"".join((header.getvalue(), memoryview(data).cast("B")))


def to_array(array: np.ndarray) -> Array:
    return Array(dtype=str(array.dtype), shape=tuple(int(d) for d in array.shape), stype=SType.NUMPY,
                 data=_npy_bytes(array))


def view(array: Array) -> np.ndarray:
    """A read-only ndarray over `array`'s `.npy` bytes (no copy); InputTensorError when they are not `.npy`."""
    if array.stype != SType.NUMPY:
        raise InputTensorError(f"array of serialization '{array.stype}' is not numpy's .npy")
    stream = io.BytesIO(array.data)
    try:
        read_header = _HEADER_READERS.get(np.lib.format.read_magic(stream))
        if read_header is None:
            raise ValueError("unknown .npy version")
        shape, fortran, dtype = read_header(stream)
    except (ValueError, SyntaxError, tokenize.TokenError, TypeError) as e:
        # numpy parses the header as Python tokens, and sorts a wrong dict's keys (bytes beside str: TypeError)
        raise InputTensorError(f"array bytes are not a .npy array: {e}") from e
    if dtype.kind not in "biufc" or fortran:       # objects, records, strings, datetimes: no weights
        raise InputTensorError(f"array of dtype {dtype} (fortran order {fortran}) is not a plain numeric array")
    count = int(np.prod(shape, dtype=np.int64))
    if len(array.data) - stream.tell() != count * dtype.itemsize:
        raise InputTensorError(f"array {list(shape)} of {dtype} holds {len(array.data) - stream.tell()} bytes, "
                               f"needs {count * dtype.itemsize}")
    return np.frombuffer(array.data, dtype, count, stream.tell()).reshape(shape)


def weights_record(session: TrainSession) -> ArrayRecord:
    """The session's trainable weights as an ArrayRecord keyed by weight name."""
    return ArrayRecord({t.tensor_name(): to_array(t.MutableData()) for t in session.GetFeatureMaps()})


def record_views(record: ArrayRecord) -> dict[str, np.ndarray]:
    """{weight name: read-only view} of a record."""
    return {name: view(array) for name, array in record.items()}


def load_weights(session: TrainSession, record: ArrayRecord) -> None:
    """Set every trainable weight of `session` from `record` (the one copy: bytes -> variables); the record must
    hold exactly the session's weights with their shapes."""
    current = {t.tensor_name(): t.shape() for t in session.GetFeatureMaps()}
    given = record_views(record)
    if set(given) != set(current):
        missing, extra = sorted(set(current) - set(given)), sorted(set(given) - set(current))
        raise InputTensorError(f"the global model's weights do not match the session's: missing "
                               f"{missing or 'none'}, unknown {extra or 'none'}")
    wrong = next((n for n, a in given.items() if list(a.shape) != current[n]), None)
    if wrong is not None:
        raise InputTensorError(f"weight '{wrong}' has shape {list(given[wrong].shape)}, the session's is "
                               f"{current[wrong]}")
    session.UpdateFeatureMaps(list(given.items()))


def non_finite(record: ArrayRecord) -> str | None:
    """The name of the first array holding NaN or Inf, or None when all are finite (non-float arrays are)."""
    for name, array in record_views(record).items():
        if np.issubdtype(array.dtype, np.inexact) and not np.isfinite(array).all():
            return name
    return None
