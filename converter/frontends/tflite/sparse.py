"""Densify a TFLite sparse constant (TACO-style `SparsityParameters`), as the `DENSIFY` op would at run time.

The stored values are the leaves of a tree walked in `traversal_order` over the tensor's dims followed by its
block dims (`block_map` names the original dims that are split into blocks; a block dim's size is its level's
`dense_size`). A DENSE level enumerates all its `dense_size` coordinates; a SPARSE_CSR level lists, for each
parent position p, the coordinates `array_indices[array_segments[p]:array_segments[p + 1]]`. The walk is one
vectorised step per level.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lite.compiler import check_memory
from lite.status import GraphFileError

Level = tuple[int, "np.ndarray | None", "np.ndarray | None"]     # dense_size, array_segments, array_indices


@dataclass
class Sparsity:
    traversal_order: tuple[int, ...]
    block_map: tuple[int, ...]
    levels: list[Level]


def _walk(levels: list[Level], name: str, positions: int) -> list[np.ndarray]:
    """Per level, the coordinate of every leaf along that level's dim; no level has more than `positions`."""
    parents = np.zeros(1, np.int64)
    coords: list[np.ndarray] = []
    for dense_size, segments, indices in levels:
        if segments is None:
            if not 0 <= dense_size <= positions or parents.size * int(dense_size) > positions:
                raise GraphFileError(f"sparse tensor '{name}': a dense level of size {dense_size} under "
                                     f"{parents.size} positions does not fit the tensor's {positions} positions")
            counts = np.full(parents.size, dense_size, np.int64)
            children = (parents[:, None] * dense_size + np.arange(dense_size)).ravel()
            coord = np.tile(np.arange(dense_size), parents.size)
        else:
            if parents.size and (parents.max() + 1 >= segments.size):
                raise GraphFileError(f"sparse tensor '{name}': array_segments has {segments.size} entries")
            starts, ends = segments[parents], segments[parents + 1]
            counts = ends - starts
            if np.any(counts < 0) or (counts.size and ends.max() > indices.size) or counts.sum() > positions:
                raise GraphFileError(f"sparse tensor '{name}': array_segments do not fit array_indices")
            children = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
            coord = indices[children]
        coords = [np.repeat(c, counts) for c in coords] + [coord]
        parents = children
    return coords


def densify(values: np.ndarray, shape: tuple[int, ...], sparsity: Sparsity, name: str) -> np.ndarray:
    """The dense array of `shape` that the sparse `values` encode."""
    rank, order, blocks = len(shape), sparsity.traversal_order, sparsity.block_map
    if len(order) != rank + len(blocks) or len(sparsity.levels) != len(order) or sorted(order) != list(
            range(len(order))) or min(shape, default=1) < 0:
        raise GraphFileError(f"sparse tensor '{name}': traversal_order {list(order)} does not fit shape "
                             f"{list(shape)} with block_map {list(blocks)}")
    elements = math.prod(shape)
    positions = max((elements, *shape))        # a level is a dim or a block of one: no more positions than these
    check_memory(8 * positions * (len(order) + 2) + values.itemsize * elements, f"densifying sparse tensor '{name}'")
    coords = _walk(sparsity.levels, name, positions)
    if coords and coords[0].size != values.size:
        raise GraphFileError(f"sparse tensor '{name}' has {values.size} values for {coords[0].size} positions")
    by_dim = dict(zip(order, coords))
    block_size = {dim: sparsity.levels[order.index(rank + k)][0] for k, dim in enumerate(blocks)}
    index = []
    for dim in range(rank):
        coordinate = by_dim[dim]
        if dim in block_size:
            coordinate = coordinate * block_size[dim] + by_dim[rank + blocks.index(dim)]
        if coordinate.size and coordinate.max() >= shape[dim]:
            raise GraphFileError(f"sparse tensor '{name}': an index {int(coordinate.max())} is out of range for "
                                 f"dim {dim} of shape {list(shape)}")
        index.append(coordinate)
    dense = np.zeros(shape, values.dtype)
    dense[tuple(index)] = values
    return dense
