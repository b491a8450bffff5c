"""IR graph -> `.ms` bytes, through the runtime's writer."""
from __future__ import annotations

from converter.ir import Graph, Value
from converter.shape_inference import make_attrs
from lite import dtypes
from lite.model import NodeDef, SubGraphDef, TensorDef
from lite.serialize import serialize
from schema import FMK_ONNX, fb


def _tensor_def(index: int, value: Value, node_type: int) -> TensorDef:
    return TensorDef(index, value.name, node_type, dtypes.from_numpy(value.dtype), tuple(value.shape),
                     value.format, value.const, list(value.quant_params), value.quant_axis,
                     tuple(value.source_perm))


def to_bytes(graph: Graph, fmk_type: int = FMK_ONNX) -> bytes:
    """Serialise `graph` (already optimised) into a `.ms` buffer; `fmk_type`: the source framework."""
    graph.sort()
    index: dict[str, int] = {}
    for name in [*graph.inputs, *(i for n in graph.nodes for i in (*n.inputs, *n.outputs)), *graph.outputs]:
        if name and name not in index:
            index[name] = len(index)
    inputs = set(graph.inputs)
    tensors = []
    for name, i in index.items():
        value = graph.values[name]
        kind = (fb.NodeType.VALUE if value.const is not None else
                fb.NodeType.PARAMETER if name in inputs else fb.NodeType.CNODE)
        tensors.append(_tensor_def(i, value, kind))
    nodes = [NodeDef(n.name, n.op, make_attrs(n.op, n.attrs), [index[i] if i else -1 for i in n.inputs],
                     [index[o] for o in n.outputs]) for n in graph.nodes]
    node_of = {id(n): nd for n, nd in zip(graph.nodes, nodes)}
    subgraphs = [SubGraphDef(sg.name, [index[i] for i in sg.inputs], [index[o] for o in sg.outputs],
                             [node_of[id(n)] for n in sg.nodes]) for sg in graph.subgraphs]
    return serialize(graph.name, tensors, nodes, [index[i] for i in graph.inputs],
                     [index[o] for o in graph.outputs], subgraphs, fmk_type)
