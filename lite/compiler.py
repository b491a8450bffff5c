"""Compile = shape inference with constant folding -> kernel selection -> memory plan -> prebound steps.

The same node evaluation serves the converter (folding shape subgraphs offline) and the runtime (folding what
depends only on input shapes, again after every `Resize`), so there is one shape rule per op.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from lite import dtypes
from lite import kernels as _kernels  # noqa: F401  (registers every kernel)
from lite.kernel import Kernel, TensorSpec, create_kernel
from lite.memory_plan import Buffer, plan
from lite.model import Model, NodeDef, SubGraphDef
from lite.status import InferShapeError, LiteError, MemoryFailedError, OpExecuteError

MAX_ARENA_BYTES = 16 << 30


def check_memory(nbytes: int, what: str) -> None:
    """`MemoryFailedError` when `what` would take more than the memory limit (`MAX_ARENA_BYTES`)."""
    if nbytes > MAX_ARENA_BYTES:
        raise MemoryFailedError(f"{what} would take {nbytes} bytes, over the {MAX_ARENA_BYTES}-byte limit")


def select_kernel(node: NodeDef, inputs: Sequence[TensorSpec | None]) -> Kernel:
    """The kernel for `node`, chosen by the data type of its first present input (float32 when none) and
    whether that input is quantized."""
    first = next((s for s in inputs if s is not None), None)
    if first is None:
        return create_kernel(node, dtypes.DataType.FLOAT32)
    return create_kernel(node, dtypes.from_numpy(first.dtype), bool(first.quant))


def infer_node(kernel: Kernel, node: NodeDef, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
    """Run the kernel's shape rule; anything but a LiteError is reported as a shape error of this node."""
    try:
        outs = kernel.infer(inputs)
    except LiteError:
        raise
    except Exception as e:  # a shape rule that trips over bad input must still name the node
        raise InferShapeError(f"{node.op} node '{node.name}': cannot infer output shapes: {e}") from e
    if len(outs) != len(node.outputs):
        raise InferShapeError(f"{node.op} node '{node.name}' produces {len(outs)} outputs, "
                              f"the model lists {len(node.outputs)}")
    for spec in outs:
        if any(not isinstance(d, (int, np.integer)) or d < 0 for d in spec.shape):
            raise InferShapeError(f"{node.op} node '{node.name}': invalid output shape {list(spec.shape)}")
        check_memory(math.prod(int(d) for d in spec.shape) * spec.dtype.itemsize,
                     f"an output of {node.op} node '{node.name}' ({list(spec.shape)})")
    return outs


def evaluate(kernel: Kernel, node: NodeDef, inputs: Sequence[TensorSpec | None],
             outs: list[TensorSpec]) -> list[TensorSpec]:
    """Run a node whose inputs are all known, now, and return its outputs with values."""
    size = sum(s.nbytes for s in outs)
    if size > MAX_ARENA_BYTES:
        raise MemoryFailedError(f"{node.op} node '{node.name}' would fold into {size} bytes of constants")
    arrays = [np.empty(s.shape, s.dtype) for s in outs]
    scratch = [np.zeros(s.shape, s.dtype) for s in kernel.scratch()]
    values = [s.value if s is not None else None for s in inputs]
    try:
        kernel.bind(values, arrays, scratch)
        kernel.run(values, arrays)
    except LiteError:
        raise
    except Exception as e:
        raise OpExecuteError(f"{node.op} node '{node.name}' failed while folding constants: {e}") from e
    return [TensorSpec(s.shape, s.dtype, a, s.quant) for s, a in zip(outs, arrays)]


def fold_or_infer(node: NodeDef, inputs: Sequence[TensorSpec | None],
                  out_quant: Sequence[list[Any]] | None = None) -> tuple[list[TensorSpec], Kernel | None]:
    """Output specs of `node`; values are filled in when compile time can know them. Returns the kernel when
    the node must run at run time, None when it was folded. Kernels with `foldable = False` (random or
    stateful ops, such as training Dropout and optimizers) always run. `out_quant` gives the quantization
    parameters of each output (empty lists for float outputs); kernels see them as `self.out_quant`."""
    kernel = select_kernel(node, inputs)
    if out_quant is not None:
        kernel.out_quant = [list(q) for q in out_quant]
    outs = infer_node(kernel, node, inputs)
    for spec, quant in zip(outs, kernel.out_quant):
        if spec.quant is None and quant:
            spec.quant = quant
    if not kernel.foldable:
        return outs, kernel
    if outs and all(s.value is not None for s in outs):
        return outs, None
    if all(s is None or s.value is not None for s in inputs):
        return evaluate(kernel, node, inputs, outs), None
    return outs, kernel


@dataclass
class Step:
    """One node ready to run: its kernel and the very arrays it reads and writes."""
    node: NodeDef
    kernel: Kernel
    inputs: list[np.ndarray | None]
    outputs: list[np.ndarray]
    input_ids: list[int]
    output_ids: list[int]


@dataclass
class Placement:
    """Where the memory plan put a group of tensors that share one buffer (an op computed in place)."""
    tensors: list[int]
    offset: int
    size: int
    first: int
    last: int


@dataclass
class ExecutionPlan:
    specs: list[TensorSpec | None]
    arrays: list[np.ndarray | None]
    steps: list[Step]
    arena: np.ndarray
    placements: list[Placement] = field(default_factory=list)

    @property
    def arena_bytes(self) -> int:
        return int(self.arena.nbytes)


def compile_graph(model: Model, input_shapes: dict[int, tuple[int, ...]], part: SubGraphDef | None = None,
                  external: dict[int, np.ndarray] | None = None) -> ExecutionPlan:
    """Infer, fold, select kernels, plan memory and bind arrays for `model` (or one of its subgraphs) with the
    given input shapes. `external` tensors live outside the arena in the arrays given: variables that ops
    update in place (weights, optimizer state) and tensors shared between the plans of one session. They are
    never folded, even when the file stores them as constants."""
    graph = part or model
    external = external or {}
    specs: list[TensorSpec | None] = [None] * len(model.tensors)
    for t in model.tensors:
        if t.is_const and t.index not in external:
            specs[t.index] = TensorSpec(t.dims, t.data.dtype, t.data, t.quant_params or None, t.quant_axis)
    for i, array in external.items():
        specs[i] = TensorSpec(array.shape, array.dtype)
    for i in graph.inputs:          # a quantized graph input (an int8 TFLite model's) keeps its params
        t = model.tensors[i]
        specs[i] = TensorSpec(tuple(input_shapes[i]), dtypes.to_numpy(t.data_type), None, t.quant_params or None,
                              t.quant_axis)
        check_memory(math.prod(specs[i].shape) * specs[i].dtype.itemsize,
                     f"graph input '{t.name}' ({list(specs[i].shape)})")
    pending: list[tuple[NodeDef, Kernel]] = []
    for node in graph.nodes:
        inputs = [specs[i] if i >= 0 else None for i in node.inputs]
        outs, kernel = fold_or_infer(node, inputs, [model.tensors[t].quant_params for t in node.outputs])
        for t, spec in zip(node.outputs, outs):
            if t in external and (spec.shape != external[t].shape or spec.dtype != external[t].dtype):
                raise InferShapeError(f"{node.op} node '{node.name}' produces {list(spec.shape)} "
                                      f"{spec.dtype}, but its output '{model.tensors[t].name}' is "
                                      f"{list(external[t].shape)} {external[t].dtype}")
            specs[t] = spec
        if kernel is not None:
            pending.append((node, kernel))
    return _bind(graph, specs, pending, external)


def _bind(graph: Model | SubGraphDef, specs: list[TensorSpec | None], pending: list[tuple[NodeDef, Kernel]],
          external: dict[int, np.ndarray]) -> ExecutionPlan:
    end = len(pending)
    group = {}                          # tensor -> representative tensor of its shared buffer
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    keep = set(graph.inputs) | set(graph.outputs)
    for i in graph.inputs:
        if i not in external:
            first[i], last[i] = 0, end
    for s, (node, _) in enumerate(pending):
        for t in node.inputs:
            if t in first:
                last[t] = max(last[t], s)
        for t in node.outputs:
            if t not in external:
                first[t], last[t] = s, end if t in keep else s
    for s, (node, kernel) in enumerate(pending):   # in place: output 0 reuses input 0 when input 0 dies here
        src = node.inputs[0] if node.inputs else -1
        dst = node.outputs[0] if node.outputs else -1
        if (kernel.inplace and src in first and src not in keep and last[src] == s and dst >= 0
                and specs[src].nbytes == specs[dst].nbytes and node.inputs.count(src) == 1):
            group[dst] = group.get(src, src)
    members: dict[int, list[int]] = {}
    for t in first:
        members.setdefault(group.get(t, t), []).append(t)
    buffers, owners = [], []
    for root, ts in members.items():
        buffers.append(Buffer(max(specs[t].nbytes for t in ts), min(first[t] for t in ts),
                              max(last[t] for t in ts)))
        owners.append(ts)
    scratch_specs = [(s, spec) for s, (_, k) in enumerate(pending) for spec in k.scratch()]
    buffers += [Buffer(spec.nbytes, s, s) for s, spec in scratch_specs]
    offsets, total = plan(buffers)
    check_memory(total, "the graph's arena")
    arena = np.zeros(total, np.uint8)

    def view(offset: int, spec: TensorSpec) -> np.ndarray:
        return arena[offset:offset + spec.nbytes].view(spec.dtype).reshape(spec.shape)

    arrays: list[np.ndarray | None] = [s.value if s is not None else None for s in specs]
    for t, array in external.items():
        arrays[t] = array
    placements = []
    for ts, offset, buf in zip(owners, offsets, buffers):
        for t in ts:
            arrays[t] = view(offset, specs[t])
        placements.append(Placement(sorted(ts), offset, buf.size, buf.first, buf.last))
    scratch_arrays: dict[int, list[np.ndarray]] = {}
    for (s, spec), offset, buf in zip(scratch_specs, offsets[len(owners):], buffers[len(owners):]):
        scratch_arrays.setdefault(s, []).append(view(offset, spec))
        placements.append(Placement([], offset, buf.size, buf.first, buf.last))
    steps = []
    for s, (node, kernel) in enumerate(pending):
        ins = [arrays[i] if i >= 0 else None for i in node.inputs]
        outs = [arrays[t] for t in node.outputs]
        kernel.bind(ins, outs, scratch_arrays.get(s, []))
        steps.append(Step(node, kernel, ins, outs, list(node.inputs), list(node.outputs)))
    return ExecutionPlan(specs, arrays, steps, arena, placements)
