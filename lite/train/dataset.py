"""Training data: `Dataset` (shuffled batches of aligned numpy arrays) and the MNIST IDX file reader."""
from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Iterator

import numpy as np

from lite.status import InputTensorError, ParamInvalidError

# IDX type code -> big-endian numpy dtype (http://yann.lecun.com/exdb/mnist/, "THE IDX FILE FORMAT")
IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
MNIST_SPLITS = {"train": "train", "test": "t10k", "t10k": "t10k"}
MNIST_CLASSES = 10


class DatasetError(InputTensorError):
    """A data file that is missing, truncated or not what it claims to be."""


class Dataset:
    """Batches of aligned arrays (inputs..., labels), in the order of a session's train-mode inputs.

    Iterating yields one epoch of tuples of `batch_size` rows; with `shuffle` every epoch has its own
    permutation drawn from (`seed`, epoch number), so runs are reproducible. `drop_last` drops a short last batch.
    """

    def __init__(self, *arrays: np.ndarray, batch_size: int, shuffle: bool = False, seed: int = 0,
                 drop_last: bool = False):
        if not arrays:
            raise ParamInvalidError("Dataset needs at least one array")
        lengths = {len(a) for a in arrays}
        if len(lengths) != 1:
            raise ParamInvalidError(f"Dataset arrays must have the same length, got {[len(a) for a in arrays]}")
        if batch_size < 1:
            raise ParamInvalidError(f"Dataset batch_size must be >= 1, got {batch_size}")
        self.arrays = [np.asarray(a) for a in arrays]
        self.batch_size, self.shuffle, self.seed, self.drop_last = int(batch_size), shuffle, seed, drop_last
        self.epoch = 0

    @property
    def size(self) -> int:
        return len(self.arrays[0])

    def __len__(self) -> int:
        """Batches per epoch."""
        full, rest = divmod(self.size, self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)

    def __iter__(self) -> Iterator[tuple[np.ndarray, ...]]:
        order = (np.random.default_rng([self.seed, self.epoch]).permutation(self.size) if self.shuffle
                 else np.arange(self.size))
        self.epoch += 1
        for k in range(len(self)):
            rows = order[k * self.batch_size:(k + 1) * self.batch_size]
            yield tuple(a[rows] for a in self.arrays)


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """An IDX file (gzip-compressed or plain) as a native-endian array."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except (OSError, EOFError) as e:
        raise DatasetError(f"cannot read IDX file '{path}': {e}") from e
    if len(raw) < 4 or raw[:2] != b"\0\0" or raw[2] not in IDX_TYPES:
        raise DatasetError(f"'{path}' is not an IDX file (magic number {raw[:4].hex() or 'missing'})")
    dtype, rank = np.dtype(IDX_TYPES[raw[2]]), raw[3]
    header = 4 + 4 * rank
    if len(raw) < header:
        raise DatasetError(f"IDX file '{path}' is truncated inside its header")
    dims = tuple(int(d) for d in np.frombuffer(raw, ">u4", rank, 4))
    expected = header + int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    if len(raw) != expected:
        raise DatasetError(f"IDX file '{path}' holds {len(raw)} bytes; its header {list(dims)} of {dtype.name} "
                           f"needs {expected}")
    return np.frombuffer(raw, dtype, offset=header).reshape(dims).astype(dtype.newbyteorder("="))


def _find(directory: Path, stem: str) -> Path:
    candidates = [directory / f"{stem}{suffix}" for suffix in (".gz", "")]
    candidates += [directory / f"{stem.replace('-idx', '.idx')}{suffix}" for suffix in (".gz", "")]
    found = next((p for p in candidates if p.is_file()), None)
    if found is None:
        raise DatasetError(f"MNIST file not found: looked for {', '.join(str(p) for p in candidates[:2])}")
    return found


def load_mnist(directory: str | os.PathLike, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """MNIST `split` ("train" or "test") from `directory`: images uint8 [N, 28, 28], labels uint8 [N]."""
    if split not in MNIST_SPLITS:
        raise ParamInvalidError(f"MNIST split must be one of {', '.join(MNIST_SPLITS)}, got '{split}'")
    prefix, directory = MNIST_SPLITS[split], Path(directory)
    images_path, labels_path = _find(directory, f"{prefix}-images-idx3-ubyte"), _find(directory,
                                                                                   f"{prefix}-labels-idx1-ubyte")
    images, labels = read_idx(images_path), read_idx(labels_path)
    if images.dtype != np.uint8 or images.ndim != 3:
        raise DatasetError(f"'{images_path}' must hold uint8 images [N, rows, cols], got {images.dtype.name} "
                           f"{list(images.shape)}")
    if labels.dtype != np.uint8 or labels.ndim != 1:
        raise DatasetError(f"'{labels_path}' must hold uint8 labels [N], got {labels.dtype.name} "
                           f"{list(labels.shape)}")
    if len(images) != len(labels):
        raise DatasetError(f"{len(images)} images in '{images_path}' but {len(labels)} labels in '{labels_path}'")
    if labels.size and labels.max() >= MNIST_CLASSES:
        raise DatasetError(f"'{labels_path}' has label {labels.max()}, outside 0..{MNIST_CLASSES - 1}")
    return images, labels
