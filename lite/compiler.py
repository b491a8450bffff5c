"""Compile = shape inference with constant folding -> kernel and algorithm selection -> memory plan -> prebound steps.

The same node evaluation serves the converter (folding shape subgraphs offline) and the runtime (folding what
depends only on input shapes, again after every `Resize`), so there is one shape rule per op.

Nodes whose shape rule needs a value known only at run time (`InferInvalidError`, MindSpore's
RET_INFER_INVALID), and every node downstream of them, form the dynamic part: static nodes never read its
tensors, so the static steps run first, exactly as planned for a fully static graph, and the dynamic part
(`DynamicPart`) then infers, allocates from its own pool and runs node by node.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from lite import dtypes
from lite.kernel import CallUnavailable, Kernel, TensorSpec, create_kernel, reference_of
from lite.memory_plan import Buffer, RunPool, aligned_zeros, plan
from lite.model import Model, NodeDef, SubGraphDef
from lite.status import (InferInvalidError, InferShapeError, LiteError, MemoryFailedError, NotSupportedError,
                         OpExecuteError)
from schema import fb

MAX_ARENA_BYTES = 16 << 30
ASK_SYSTEM_BYTES = 1 << 30      # requests from this size on are also checked against the memory available now


def available_memory() -> int | None:
    """Bytes the system can give without swapping (Linux's MemAvailable), None where that is not knowable."""
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def check_memory(nbytes: int, what: str) -> None:
    """`MemoryFailedError` when `what` would take more than the memory limit (`MAX_ARENA_BYTES`) or, for a large
    request, more than the memory available: refused here rather than failing in numpy or under the OOM killer."""
    if nbytes > MAX_ARENA_BYTES:
        raise MemoryFailedError(f"{what} would take {nbytes} bytes, over the {MAX_ARENA_BYTES}-byte limit")
    if nbytes >= ASK_SYSTEM_BYTES:
        available = available_memory()
        if available is not None and nbytes > available:
            raise MemoryFailedError(f"{what} would take {nbytes} bytes, more than the {available} bytes of "
                                    f"memory available")


def select_kernel(node: NodeDef, inputs: Sequence[TensorSpec | None]) -> Kernel:
    """The kernel for `node`, chosen by the data type of its first present input (float32 when none) and
    whether that input is quantized (a DYNAMIC node's float input is: it quantizes it at every run)."""
    first = next((s for s in inputs if s is not None), None)
    if first is None:
        return create_kernel(node, dtypes.DataType.FLOAT32)
    return create_kernel(node, dtypes.from_numpy(first.dtype),
                         bool(first.quant) or node.quant_type == fb.QuantType.DYNAMIC)


def infer_node(kernel: Kernel, node: NodeDef, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
    """Run the kernel's shape rule, then its choice of algorithm for those shapes; anything but a LiteError is
    reported as a shape error of this node."""
    try:
        outs = kernel.infer(inputs)
        kernel.select(inputs)
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
    scratch_specs = kernel.scratch()
    check_memory(sum(s.nbytes for s in (*outs, *scratch_specs)), f"{node.op} node '{node.name}' folded into "
                 f"constants")
    arrays = [np.empty(s.shape, s.dtype) for s in outs]
    scratch = [np.zeros(s.shape, s.dtype) for s in scratch_specs]
    execute(kernel, node, [s.value if s is not None else None for s in inputs], arrays, scratch,
            " while folding constants", inputs)
    return [TensorSpec(s.shape, s.dtype, a, s.quant) for s, a in zip(outs, arrays)]


def bind_kernel(kernel: Kernel, node: NodeDef, specs: Sequence[TensorSpec | None],
                inputs: Sequence[np.ndarray | None], outputs: list[np.ndarray], scratch: list[np.ndarray]) -> Kernel:
    """`kernel.bind`; when its backend cannot run this call (`CallUnavailable`), the node's numpy kernel, chosen
    for the same input `specs` and bound on work buffers of its own. Returns the kernel bound."""
    try:
        kernel.bind(inputs, outputs, scratch)
        return kernel
    except CallUnavailable:
        reference = reference_of(kernel)
        reference.out_quant = kernel.out_quant
        infer_node(reference, node, specs)
        reference.bind(inputs, outputs, [np.zeros(s.shape, s.dtype) for s in reference.scratch()])
        return reference


def execute(kernel: Kernel, node: NodeDef, inputs: Sequence[np.ndarray | None], outputs: list[np.ndarray],
            scratch: list[np.ndarray], when: str = "", specs: Sequence[TensorSpec | None] = ()) -> Kernel:
    """Bind (`bind_kernel`, given the input `specs`) and run a kernel outside the prebound steps; failures other
    than LiteErrors name the node. Returns the kernel that ran."""
    try:
        kernel = bind_kernel(kernel, node, specs, inputs, outputs, scratch)
        kernel.run(inputs, outputs)
        return kernel
    except LiteError:
        raise
    except Exception as e:
        raise OpExecuteError(f"{node.op} node '{node.name}' failed{when}: {e}") from e


def infer_quantized(kernel: Kernel, node: NodeDef, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
    """`infer_node`, with the outputs carrying the kernel's output quantization parameters."""
    outs = infer_node(kernel, node, inputs)
    for spec, quant in zip(outs, kernel.out_quant):
        if spec.quant is None and quant:
            spec.quant = quant
    return outs


def fold_or_infer(node: NodeDef, inputs: Sequence[TensorSpec | None],
                  out_quant: Sequence[list[Any]] | None = None) -> tuple[list[TensorSpec], Kernel | None]:
    """Output specs of `node`; values are filled in when compile time can know them. Returns the kernel when
    the node must run at run time, None when it was folded. Kernels with `foldable = False` (random or
    stateful ops, such as training Dropout and optimizers) always run. `out_quant` gives the quantization
    parameters of each output (empty lists for float outputs); kernels see them as `self.out_quant`."""
    kernel = select_kernel(node, inputs)
    if out_quant is not None:
        kernel.out_quant = [list(q) for q in out_quant]
    outs = infer_quantized(kernel, node, inputs)
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
    """`specs` and `arrays` by tensor index (None for the dynamic part's tensors, whose arrays change from run
    to run: `dynamic.arrays` has the latest); `steps` are the static nodes, prebound."""
    specs: list[TensorSpec | None]
    arrays: list[np.ndarray | None]
    steps: list[Step]
    arena: np.ndarray
    placements: list[Placement] = field(default_factory=list)
    dynamic: "DynamicPart | None" = None

    @property
    def arena_bytes(self) -> int:
        return int(self.arena.nbytes)

    @functools.cached_property
    def calls(self) -> list[tuple[int, Callable[..., None], list[np.ndarray | None], list[np.ndarray]]]:
        """What a run without callbacks calls: (step index, f, a, b) for f(a, b), the kernel's `plain_call` (its
        bound `run` on its inputs and outputs, or the one numpy call that run makes), for every step but the idle
        ones (a reshape into its input's memory): no attribute lookups per node."""
        return [(k, *s.kernel.plain_call(s.inputs, s.outputs)) for k, s in enumerate(self.steps)
                if not s.kernel.idle()]


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
    dynamic: list[NodeDef] = []
    later: set[int] = set()                 # tensors of the dynamic part
    for node in graph.nodes:
        inputs = [specs[i] if i >= 0 else None for i in node.inputs]
        try:
            if later.intersection(node.inputs):
                raise InferInvalidError("")
            outs, kernel = fold_or_infer(node, inputs, [model.tensors[t].quant_params for t in node.outputs])
        except InferInvalidError:
            if external.keys() & set(node.outputs):
                raise NotSupportedError(f"{node.op} node '{node.name}' writes a variable, but its shapes are "
                                        f"known only while running") from None
            dynamic.append(node)
            later.update(node.outputs)
            continue
        for t, spec in zip(node.outputs, outs):
            if t in external and (spec.shape != external[t].shape or spec.dtype != external[t].dtype):
                raise InferShapeError(f"{node.op} node '{node.name}' produces {list(spec.shape)} "
                                      f"{spec.dtype}, but its output '{model.tensors[t].name}' is "
                                      f"{list(external[t].shape)} {external[t].dtype}")
            specs[t] = spec
        if kernel is not None:
            pending.append((node, kernel))
    read_later = {i for node in dynamic for i in node.inputs if i >= 0 and i not in later}
    result = _bind(graph, specs, pending, external, read_later)
    if dynamic:
        result.dynamic = DynamicPart(model, dynamic, result, set(graph.outputs))
    return result


def _bind(graph: Model | SubGraphDef, specs: list[TensorSpec | None], pending: list[tuple[NodeDef, Kernel]],
          external: dict[int, np.ndarray], read_later: set[int]) -> ExecutionPlan:
    """The static part's plan; `read_later` tensors are read by the dynamic part, so they live to the end."""
    end = len(pending)
    group = {}                          # tensor -> representative tensor of its shared buffer
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    keep = set(graph.inputs) | set(graph.outputs) | read_later
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
    for s, (node, kernel) in enumerate(pending):   # in place: output 0 reuses an input that dies here
        k = kernel.inplace_input()
        src = node.inputs[k] if k is not None and k < len(node.inputs) else -1
        dst = node.outputs[0] if node.outputs else -1
        if (src in first and src not in keep and last[src] == s and dst >= 0
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
    arena = aligned_zeros(total, "the graph's arena")

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
        kernel = bind_kernel(kernel, node, [specs[i] if i >= 0 else None for i in node.inputs], ins, outs,
                             scratch_arrays.get(s, []))
        steps.append(Step(node, kernel, ins, outs, list(node.inputs), list(node.outputs)))
    return ExecutionPlan(specs, arrays, steps, arena, placements)


class DynamicPart:
    """The nodes whose shapes are known only while running, in graph order. Each `run` infers every node
    with the current values of its inputs, takes its outputs from a `RunPool` (memory reused while shapes
    repeat) and runs it; `arrays` then holds every tensor of the part. Kernels are chosen once per input
    data type and kept."""

    def __init__(self, model: Model, nodes: list[NodeDef], static: ExecutionPlan, outputs: set[int]):
        self.model = model
        self.nodes = nodes
        self.static = static
        self.arrays: dict[int, np.ndarray] = {}
        self.specs: dict[int, TensorSpec] = {}
        self.last: dict[int, int] = {}      # tensor -> the last node (index into `nodes`) reading it
        for s, node in enumerate(nodes):
            for i in node.inputs:
                if i in self.last:
                    self.last[i] = max(self.last[i], s)
            for t in node.outputs:
                self.last[t] = len(nodes) if t in outputs else s
        self.kernels: dict[tuple[int, np.dtype, bool], Kernel] = {}
        self.pool = RunPool(MAX_ARENA_BYTES)

    def spec(self, i: int) -> TensorSpec | None:
        """Tensor `i` as the shape rules see it now: its spec with its current value."""
        if i < 0:
            return None
        if i in self.specs:
            s, value = self.specs[i], self.arrays[i]
        else:
            s, value = self.static.specs[i], self.static.arrays[i]
        return TensorSpec(s.shape, s.dtype, value, s.quant, s.quant_axis)

    def kernel(self, s: int, inputs: Sequence[TensorSpec | None]) -> Kernel:
        first = next((x for x in inputs if x is not None), None)
        key = (s, None if first is None else first.dtype, bool(first is not None and first.quant))
        if key not in self.kernels:
            node = self.nodes[s]
            kernel = select_kernel(node, inputs)
            kernel.out_quant = [list(self.model.tensors[t].quant_params) for t in node.outputs]
            self.kernels[key] = kernel
        return self.kernels[key]

    def take(self, node: NodeDef, spec: TensorSpec, first: int, last: int) -> np.ndarray:
        block = self.pool.take(spec.nbytes, first, last)
        if block is None:
            raise MemoryFailedError(f"{node.op} node '{node.name}' needs {spec.nbytes} bytes for shape "
                                    f"{list(spec.shape)} at run time, over the {self.pool.limit}-byte limit")
        return block.view(spec.dtype).reshape(spec.shape)

    def run(self, before: Callable | None = None, after: Callable | None = None,
            wrap: Callable | None = None) -> bool:
        """Infer, allocate and run every node; False when a callback stopped the run. `before`/`after` get
        `wrap(node, input_ids, inputs, output_ids, outputs)`'s arguments, as for the static steps."""
        self.pool.begin()
        for s, node in enumerate(self.nodes):
            inputs = [self.spec(i) for i in node.inputs]
            kernel = self.kernel(s, inputs)
            outs = infer_quantized(kernel, node, inputs)
            arrays = [self.take(node, spec, s, self.last[t]) for t, spec in zip(node.outputs, outs)]
            scratch = [self.take(node, spec, s, s) for spec in kernel.scratch()]
            for work in scratch:
                work.fill(0)
            values = [x.value if x is not None else None for x in inputs]
            for t, spec, array in zip(node.outputs, outs, arrays):
                self.specs[t], self.arrays[t] = TensorSpec(spec.shape, spec.dtype, None, spec.quant), array
            args = wrap(node, node.inputs, values, node.outputs, arrays) if wrap else None
            if before is not None and before(*args) is False:
                return False
            ran = execute(kernel, node, values, arrays, scratch, specs=inputs)
            if ran is not kernel:                       # the numpy kernel stands in from now on
                self.kernels = {key: ran if k is kernel else k for key, k in self.kernels.items()}
            if after is not None and after(*args) is False:
                return False
        self.pool.finish()
        return True
