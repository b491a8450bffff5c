"""The runtime's graph (`Model` of `TensorDef`s, `NodeDef`s and `SubGraphDef`s) and `Model.Import`: a `.ms`
buffer verified and read by its format (`lite.format`, found by the file identifier) with zero-copy weights."""
from __future__ import annotations

import mmap
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lite import format as formats
from lite import gc_pause
from lite.protect import unwrap
from lite.status import GraphFileError, LiteError
from schema import FMK_ONNX


@dataclass
class TensorDef:
    """A tensor of the flat tensor table. `data` is a read-only view into the model buffer for const tensors."""
    index: int
    name: str
    node_type: int
    data_type: int
    dims: tuple[int, ...]
    format: int
    data: np.ndarray | None = None
    quant_params: list[Any] = field(default_factory=list)
    quant_axis: int = 0
    source_perm: tuple[int, ...] = ()     # restores the source model's layout (e.g. OHWI -> OIHW)
    dim_names: tuple[str, ...] = ()       # a graph input's unknown dims by their source names ("": unnamed)

    @property
    def is_const(self) -> bool:
        return self.data is not None


@dataclass
class NodeDef:
    """One op node. `attrs` holds the op's schema fields by name (`attrs.pad_top`); omitted inputs are -1."""
    name: str
    op: str
    attrs: Any
    inputs: list[int]
    outputs: list[int]
    quant_type: int = 0
    bodies: list["SubGraphDef"] = field(default_factory=list)   # a control-flow node's subgraphs, as its op
                                                                # names them (`traits(op).bodies`)
    rounding: str = "tflite"    # the int8 requantization rule of the format it came from (int8/requantize.py)


@dataclass
class SubGraphDef:
    """A named part of the graph (a training model has "eval", "gradients" and "optimizer" parts), or the body
    of a control-flow node, which compiles on its own over the tensors of `model`."""
    name: str
    inputs: list[int]
    outputs: list[int]
    nodes: list[NodeDef]     # in execution order
    model: "Model | None" = None    # bodies only: the model whose tensor table they index


class Model:
    """An imported model: its tensors, its main graph's nodes in execution (topological) order, its graph
    inputs/outputs, its named subgraphs (training parts) and the bodies of its control-flow nodes."""

    def __init__(self, name: str, version: str, tensors: list[TensorDef], nodes: list[NodeDef],
                 inputs: list[int], outputs: list[int], subgraphs: dict[str, SubGraphDef] | None = None,
                 buffer: Any = None, fmk_type: int = FMK_ONNX, bodies: list[SubGraphDef] | None = None):
        self.name, self.version, self.fmk_type = name, version, fmk_type
        self.tensors, self.nodes = tensors, nodes
        self.inputs, self.outputs = inputs, outputs
        self.subgraphs = subgraphs or {}
        self.bodies = bodies or []
        for body in self.bodies:
            body.model = self
        self._buffer = buffer    # keeps the mapped bytes alive as long as weight views exist

    @staticmethod
    def Import(model_buf: bytes | bytearray | memoryview | mmap.mmap, size: int | None = None,
               dec_key: str | bytes | None = None) -> "Model":
        """Verify and read a model from a buffer (`size` bytes of it, default all) by the format its file
        identifier names (`lite.format.FORMATS`). Weights are not copied, except once out of an encrypted model,
        which needs its key `dec_key` (bytes or hex text; see `lite.protect`)."""
        view = memoryview(model_buf).cast("B")
        if size is not None:
            if not 0 <= size <= len(view):
                raise GraphFileError(f"size {size} does not fit the {len(view)}-byte buffer")
            view = view[:size]
        view = unwrap(view, dec_key)
        fmt = formats.find(view)
        with gc_pause.paused():
            try:
                fmt.verify(view)
                return fmt.read(view)
            except LiteError:
                raise
            except (ValueError, TypeError, IndexError, UnicodeDecodeError, OverflowError) as e:
                raise GraphFileError(f"model buffer is inconsistent: {e}") from e

    @staticmethod
    def Load(path: str | os.PathLike, dec_key: str | bytes | None = None) -> "Model":
        """Map a `.ms` file read-only and import it; weights stay views into the mapping (an encrypted file, with
        its key `dec_key`, is decrypted once into memory)."""
        try:
            with open(path, "rb") as f:
                if os.fstat(f.fileno()).st_size == 0:
                    raise GraphFileError(f"model file '{path}' is empty")
                mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as e:
            raise GraphFileError(f"cannot read model file '{path}': {e.strerror}") from e
        return Model.Import(mapped, dec_key=dec_key)

    def Free(self) -> None:
        """Drop the graph definition; sessions already compiled keep what they need."""
        self.tensors, self.nodes, self.subgraphs, self.bodies, self._buffer = [], [], {}, [], None
