"""Frontends, one per `--fmk`: each reads a model file into a `SourceModel`, whose `to_ir` builds the shared IR.
Everything after the IR (optimisation passes, quantization, the training graph, export) is the same for every
frontend, so a model of any framework converts, quantizes and trains alike.

A new frontend is a package `converter/frontends/<name>/` whose `load(data: bytes, source: str) -> SourceModel`
reads the file's bytes (`source`: its path, for messages and side files), plus one `Frontend(...)` line in
`FRONTENDS`. The package is imported on first use only, so an optional dependency is needed only by its models.
"""
from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Collection, Protocol

import numpy as np

from converter.ir import Graph
from lite.status import GraphFileError, NotSupportedError


class SourceModel(Protocol):
    """A model read by a frontend, before any pass."""
    fmk_type: int       # `schema.FMK_TYPES`: the source framework recorded in the converted file

    def to_ir(self, input_shapes: dict[str, list[int]] | None = None,
              weights_as_inputs: Collection[str] = ()) -> Graph:
        """The imported IR; `input_shapes` overrides graph input dims by input name. `weights_as_inputs`
        (names from `float_weights`) become graph inputs instead of constants, so that no pass folds them into
        other constants (training makes them constants again: see `converter.train.forward_graph`)."""

    def float_weights(self) -> dict[str, np.ndarray]:
        """The floating-point weights by name, in the source layout and in file order: what training trains."""

    def weight_readers(self) -> list[tuple[str, list[str]]]:
        """(node name as the IR names the node, the float weights it reads) for every node, in topological
        order: where a weight comes from (`converter.train.weights`) and what `freeze_until` freezes."""


@dataclass(frozen=True)
class Frontend:
    fmk: str            # the `--fmk` value
    package: str        # converter/frontends/<package>: its `load(data, source)` reads a model
    requires: str       # the optional dependency the package imports ("" when always installed)

    def load(self, data: bytes, source: str = "<buffer>") -> SourceModel:
        """The model in `data` (the contents of `source`)."""
        try:
            module = importlib.import_module(f"{__name__}.{self.package}")
        except ImportError as e:
            if not self.requires or (e.name or "").partition(".")[0] != self.requires:
                raise
            raise NotSupportedError(f"--fmk={self.fmk} needs the '{self.requires}' package (pip install "
                                    f"'mslite-py[{self.requires}]'): {e}") from None
        return module.load(data, source)


FRONTENDS = {f.fmk: f for f in (
    Frontend("ONNX", "onnx", ""),
    Frontend("TFLITE", "tflite", "tflite"),
    Frontend("MINDIR", "mindir", ""),
)}


def frontend(fmk: str) -> Frontend:
    """The frontend of `--fmk=<fmk>`; NotSupportedError naming the known ones otherwise."""
    if fmk not in FRONTENDS:
        raise NotSupportedError(f"--fmk={fmk} is not supported: fmk must be {'|'.join(FRONTENDS)}")
    return FRONTENDS[fmk]


def read_bytes(path: str | os.PathLike) -> bytes:
    """A model file's contents; GraphFileError naming the file when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise GraphFileError(f"model file '{path}' does not exist") from None
    except OSError as e:
        raise GraphFileError(f"model file '{path}' cannot be read: {e.strerror or e}") from None


def read_model(fmk: str, path: str | os.PathLike) -> SourceModel:
    """The model file `path` read by the frontend of `fmk` (the file is read once)."""
    return frontend(fmk).load(read_bytes(path), os.fspath(path))
