"""Client data shards: a non-IID split of a labelled set and the `.npz` file each client node reads.

A shard file holds `x` (the model's input batch layout, e.g. float32 [N, 1, 28, 28]) and `y` (int32 class
indices [N]); a node is pointed at its own file, so no node sees another's data.
"""
from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np

from lite.atomic_file import write_atomic
from lite.status import ParamInvalidError
from lite.train.dataset import DatasetError


def non_iid_split(labels: np.ndarray, clients: int, per_client: int, dominant_share: float = 0.8,
                  classes_per_client: int = 2, seed: int = 0) -> list[np.ndarray]:
    """Row indices of `per_client` examples for each client: `dominant_share` of them from the client's own
    `classes_per_client` consecutive classes (client k: k, k+1, ... mod the number of classes), the rest drawn
    uniformly from the other classes. No row goes to two clients."""
    classes = int(labels.max()) + 1
    if not 0 <= dominant_share <= 1 or clients < 1 or per_client < 1 or not 1 <= classes_per_client <= classes:
        raise ParamInvalidError(f"non_iid_split: need clients >= 1, per_client >= 1, 0 <= dominant_share <= 1 "
                                f"and 1 <= classes_per_client <= {classes}")
    rng = np.random.default_rng(seed)
    pools = [list(rng.permutation(np.flatnonzero(labels == c))) for c in range(classes)]
    shards = []
    for k in range(clients):
        own = [(k + j) % classes for j in range(classes_per_client)]
        others = [c for c in range(classes) if c not in own] or own
        n_own = round(per_client * dominant_share)
        wanted = [own[j % len(own)] for j in range(n_own)]
        wanted += list(rng.choice(others, per_client - n_own))
        picked = []
        for c, count in zip(*np.unique(wanted, return_counts=True)):
            if len(pools[c]) < count:
                raise ParamInvalidError(f"non_iid_split: class {c} has too few examples left for client {k}")
            picked += pools[c][:count]
            del pools[c][:count]
        shards.append(rng.permutation(np.asarray(picked, dtype=np.int64)))
    return shards


def save_shard(path: str | os.PathLike, x: np.ndarray, y: np.ndarray) -> Path:
    """Write a shard file (atomically)."""
    if len(x) != len(y):
        raise ParamInvalidError(f"a shard needs as many labels as inputs, got {len(x)} and {len(y)}")
    path = Path(path)
    buffer = io.BytesIO()
    np.savez(buffer, x=np.ascontiguousarray(x, np.float32), y=np.asarray(y, np.int32))
    write_atomic(path, buffer.getvalue())
    return path


def load_shard(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """(`x`, `y`) of a shard file; DatasetError when it is missing or malformed."""
    try:
        with np.load(path, allow_pickle=False) as f:
            x, y = f["x"], f["y"]
    except (OSError, KeyError, ValueError) as e:
        raise DatasetError(f"cannot read data shard '{path}': {e}") from e
    if len(x) != len(y) or y.ndim != 1 or len(y) == 0:
        raise DatasetError(f"data shard '{path}' must hold x [N, ...] and y [N] with N > 0, got "
                           f"{list(x.shape)} and {list(y.shape)}")
    return x, y.astype(np.int32, copy=False)
