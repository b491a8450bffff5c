"""A `.tflite` model as the converter's source (`converter.frontends.SourceModel`): read once into records,
imported into IR, its float weights the weights a training graph trains. A file with several signature defs
(entry points, each running its own subgraph) converts into one `.ms` holding all of them (`entry_points`,
`lite.signatures`), or those that `keep_signatures` keeps, or one of them: `for_signature(key)`. Quantization and
training convert one graph: subgraph 0, or the signature chosen."""
from __future__ import annotations

import copy
from typing import Collection

import numpy as np

from converter.frontends.tflite.importer import import_file, unique_names
from converter.frontends.tflite.reader import read_model
from converter.ir import Graph
from schema import FMK_TFLITE


def load(data: bytes, source: str = "<buffer>") -> TFLiteSource:
    """The frontend's entry point (`converter.frontends.Frontend.load`)."""
    return TFLiteSource(data, source)


class TFLiteSource:
    fmk_type = FMK_TFLITE

    def __init__(self, data: bytes, source: str = "<buffer>"):
        self.file = read_model(data, source)
        self.signature: str | None = None       # the entry point converted; None: subgraph 0
        self.graph = self.file.graphs[0]
        self.names = unique_names(self.graph, self.file.names)
        self.kept = self.signatures     # the entry points a conversion keeps
        self._weights: dict[str, np.ndarray] | None = None

    @property
    def signatures(self) -> list[str]:
        """The keys of the file's signature defs, in file order."""
        return [s.key for s in self.file.signatures]

    def for_signature(self, key: str) -> TFLiteSource:
        """This model's entry point `key`: its subgraph is the graph, its inputs and outputs named as the
        signature def names them (as LiteRT's `get_signature_runner(key)` takes and gives them)."""
        entry = self.file.signature(key)
        chosen = copy.copy(self)
        chosen.signature, chosen.graph, chosen._weights = key, self.file.graphs[entry.subgraph], None
        chosen.names = unique_names(chosen.graph, entry.names)
        chosen.kept = [key]
        return chosen

    def keep_signatures(self, keys: Collection[str]) -> TFLiteSource:
        """This model with only the entry points `keys` (`--signatures`); one key is `for_signature(key)`."""
        for key in keys:
            self.file.signature(key)            # an unknown key is refused, naming the known ones
        if len(keys) == 1:
            return self.for_signature(next(iter(keys)))
        kept = copy.copy(self)
        kept.kept = [key for key in self.signatures if key in set(keys)]
        return kept

    def entry_points(self) -> dict[str, TFLiteSource]:
        """Every kept entry point by key when there are several, the default first (the signature running
        subgraph 0, else the first kept); empty otherwise."""
        if self.signature is not None or len(self.kept) < 2:
            return {}
        subgraph = {s.key: s.subgraph for s in self.file.signatures}
        default = next((key for key in self.kept if subgraph[key] == 0), self.kept[0])
        return {key: self.for_signature(key) for key in [default, *(k for k in self.kept if k != default)]}

    @property
    def input_names(self) -> list[str]:
        """The graph inputs' names, as `to_ir` names them."""
        return [self.names[i] for i in self.graph.inputs]

    def to_ir(self, input_shapes: dict[str, list[int]] | None = None,
              weights_as_inputs: Collection[str] = ()) -> Graph:
        return import_file(self.file, input_shapes, weights_as_inputs, self.signature)

    def float_weights(self) -> dict[str, np.ndarray]:
        """The graph's float32 constants, and its float16 constants as the float32 values that their
        DEQUANTIZE computes (named by its output: the tensor the model's operators read); found once."""
        if self._weights is not None:
            return self._weights
        dequantized = {op.inputs[0]: op.outputs[0] for op in self.graph.operators
                       if op.op == "DEQUANTIZE" and op.inputs and op.outputs}
        weights = {}
        for t in self.graph.tensors:
            if t.data is None or t.quant is not None:
                continue
            if t.dtype == np.float32:
                weights[self.names[t.index]] = t.data
            elif t.dtype == np.float16 and t.index in dequantized:
                weights[self.names[dequantized[t.index]]] = t.data.astype(np.float32)
        self._weights = weights
        return weights

    def weight_readers(self) -> list[tuple[str, list[str]]]:
        """Operators in file order, named as the importer names their nodes (by their first output)."""
        weights = self.float_weights()
        return [(self.names[op.outputs[0]] if op.outputs else f"{op.op}_{op.index}",
                 [self.names[i] for i in op.inputs if i >= 0 and self.names[i] in weights])
                for op in self.graph.operators]
