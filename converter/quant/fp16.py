"""`converter_lite --fp16=on`: float32 constants stored as float16, each read through a `Cast` to float32.

The runtime folds the casts when it compiles the model, so the model computes in float32 with weights rounded
to float16 (half the weight bytes in the file). Constants that float16 cannot hold (beyond +-65504, or not
finite) and those of at most `min_size` elements stay float32 (the default 64: a Cast node and a tensor entry
cost more bytes than halving a few dozen values saves).
"""
from __future__ import annotations

import numpy as np

from converter.ir import Graph, Node, Value
from lite.dtypes import DataType

FLOAT16_MAX = float(np.finfo(np.float16).max)


def storable(array: np.ndarray, min_size: int) -> bool:
    return (array.dtype == np.float32 and array.size > min_size and bool(np.isfinite(array).all())
            and float(np.abs(array).max(initial=0.0)) <= FLOAT16_MAX)


def store_float16(graph: Graph, min_size: int = 64) -> Graph:
    """Replace each storable float32 constant read by a node with a float16 constant and a Cast to float32
    (mutates and returns `graph`). Constants that are graph outputs are left alone."""
    read = {name for node in graph.nodes for name in node.inputs if name}
    for name in sorted(read - set(graph.outputs)):
        value = graph.values[name]
        if value.const is None or not storable(value.const, min_size):
            continue
        half = graph.add_const(value.const.astype(np.float16), f"{name}_fp16")
        graph.values[half].format, graph.values[half].source_perm = value.format, value.source_perm
        cast = graph.fresh(f"{name}_fp32")
        graph.values[cast] = Value(cast, value.shape, np.dtype(np.float32), format=value.format)
        graph.replace_uses(name, cast)
        graph.nodes.append(Node("Cast", graph.fresh(f"{name}/fp16_to_fp32"), [half], [cast],
                                {"to": int(DataType.FLOAT32)}))
    graph.prune()
    graph.sort()
    return graph
