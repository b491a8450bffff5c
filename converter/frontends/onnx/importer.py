"""Walk an ONNX graph in order and apply one importer rule per node."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from converter.frontends.onnx import rules  # noqa: F401  (registers every importer rule)
from converter.frontends.onnx.registry import DEFAULT_DOMAINS, IMPORTERS, ImportContext
from converter.ir import Graph, Value
from lite.status import GraphFileError, InputTensorError, NotSupportedError

MIN_OPSET = 7


def supported_ops() -> list[str]:
    return sorted(IMPORTERS)


def _opset(model: onnx.ModelProto) -> int:
    versions = [o.version for o in model.opset_import if o.domain in DEFAULT_DOMAINS]
    if not versions:
        raise NotSupportedError("the ONNX model imports no default-domain opset")
    opset = versions[0]
    if opset < MIN_OPSET:
        changed = sorted({op for op in _op_types(model.graph) if _defined_since(op, MIN_OPSET) > opset})
        if changed:
            raise NotSupportedError(f"ONNX opset {opset} is older than the oldest supported ({MIN_OPSET}) and "
                                    f"the definition of {', '.join(changed)} differs there")
        return MIN_OPSET          # every op reads as it does at MIN_OPSET
    return opset


def _op_types(graph: onnx.GraphProto) -> set[str]:
    """The default-domain op types of `graph` and of its subgraphs."""
    ops = set()
    for node in graph.node:
        if node.domain in DEFAULT_DOMAINS:
            ops.add(node.op_type)
        for attr in node.attribute:
            for sub in [attr.g] * attr.HasField("g") + list(attr.graphs):
                ops |= _op_types(sub)
    return ops


def _defined_since(op: str, opset: int) -> int:
    """The opset of `op`'s definition in effect at `opset` (onnx.defs): past `opset` when it is newer, 0 for an
    op ONNX does not define (named later as unsupported)."""
    if not onnx.defs.has(op):
        return 0
    try:
        return onnx.defs.get_schema(op, opset).since_version
    except onnx.defs.SchemaError:
        return opset + 1


def _input_value(vi: onnx.ValueInfoProto, override: list[int] | None) -> Value:
    tt = vi.type.tensor_type
    if not vi.type.HasField("tensor_type"):
        raise NotSupportedError(f"graph input '{vi.name}' is not a tensor")
    try:
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type))
    except (KeyError, TypeError, ValueError):
        raise NotSupportedError(f"graph input '{vi.name}' has element type {tt.elem_type}, which has no array "
                                f"type") from None
    if override is not None:
        return Value(vi.name, tuple(int(d) for d in override), dtype)
    if not tt.HasField("shape"):
        raise InputTensorError(f"graph input '{vi.name}' has no shape: give it with --inputShape")
    dims = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim)
    return Value(vi.name, dims, dtype)


def _source_types(model: onnx.ModelProto) -> dict[str, tuple[np.dtype, int]]:
    """(dtype, rank) of every value ONNX's own type inference can tell, for values whose shapes are known only
    at run time; empty when the model defeats it."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:   # noqa: BLE001  (a best-effort hint: any failure leaves the fallback rule)
        return {}
    types = {}
    for vi in _value_infos(inferred.graph):
        tt = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and tt.HasField("shape") and tt.elem_type:
            try:
                types.setdefault(vi.name, (np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)),
                                           len(tt.shape.dim)))
            except (KeyError, TypeError, ValueError):
                continue
    return types


def _value_infos(graph: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    """The typed values of `graph` and, after them, of the subgraphs of its control-flow nodes."""
    found = [*graph.value_info, *graph.output]
    for node in graph.node:
        for a in node.attribute:
            for sub in [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs):
                found += [*sub.input, *_value_infos(sub)]
    return found


def import_model(model: onnx.ModelProto, input_shapes: dict[str, list[int]] | None = None) -> Graph:
    """Build the IR of `model`. `input_shapes` overrides (or fixes unknown) graph input dims by input name."""
    input_shapes = dict(input_shapes or {})
    opset = _opset(model)
    g = model.graph
    graph = Graph(g.name or "graph")
    for init in g.initializer:
        try:
            array = numpy_helper.to_array(init)
        except Exception as e:
            raise GraphFileError(f"ONNX initializer '{init.name}' cannot be read: {e}") from e
        graph.values[init.name] = Value(init.name, tuple(array.shape), array.dtype,
                                        np.ascontiguousarray(array).reshape(array.shape))
    initialized = {i.name for i in g.initializer}
    for vi in g.input:
        if vi.name in initialized:
            continue
        override = input_shapes.pop(vi.name, None)
        graph.values[vi.name] = _input_value(vi, override)
        graph.inputs.append(vi.name)
        if override is None and any(d.dim_param for d in vi.type.tensor_type.shape.dim):
            graph.dim_names[vi.name] = tuple(d.dim_param for d in vi.type.tensor_type.shape.dim)
    if input_shapes:
        raise InputTensorError(f"--inputShape names {sorted(input_shapes)}, which are not graph inputs "
                               f"(inputs: {graph.inputs})")
    graph.source_types = _source_types(model)
    domain_opsets = {o.domain: o.version for o in model.opset_import if o.domain not in DEFAULT_DOMAINS}
    ImportContext(graph, opset, domain_opsets=domain_opsets).import_nodes(g)
    graph.outputs = [o.name for o in g.output]
    missing = [o for o in graph.outputs if o not in graph.values]
    if missing:
        raise GraphFileError(f"ONNX graph output '{missing[0]}' is produced by no node")
    graph.prune()
    return graph
