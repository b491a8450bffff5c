"""The kernel contract and the registry that finds a kernel by (op, data type, backend).

A kernel is MindSpore's/TFLite's Prepare + Eval split: `infer` runs at compile time (the shape rule and
parameter checks), `select` then chooses the algorithm (Winograd, GEMM, direct, ...) for those shapes, and `run`
only computes into the preallocated output arrays it is given.

Backends: numpy is the reference, and every op has a numpy kernel. A faster backend (`BACKENDS`) registers
siblings of numpy kernels for the same (op, data type), usually subclasses that override only the algorithm
choice and its binding; `create_kernel` takes a sibling when the compiling session's mode (`selection`,
`Context.kernels`, or the `MSLITE_KERNELS` environment variable) allows its backend and the backend starts.
Kernels are chosen nowhere else: numpy kernels hold no backend test.

Shapes known only at run time (MindSpore's RET_INFER_INVALID): a shape rule reads every value it needs with
`self.known(spec, what)`. At compile time a value that is not known yet (a graph input, or computed by a node
that runs) raises `InferInvalidError`; the compiler then marks the node, and everything downstream of it, as
dynamic. Dynamic nodes are inferred again at every `RunGraph`, with each input's current value in
`spec.value`, so the same `infer` + `run` serve both. An op whose output shape depends on its data (NonZero,
Unique, TopK with a tensor k, NonMaxSuppression) does the same: `infer` reads the data with `self.known(x,
"x")`, computes the result (keeping it on `self`, so `run` only copies it out) and returns its shape. Such a
node is static only when its data is a constant, and then it is folded.
"""
from __future__ import annotations

import contextlib
import contextvars
import importlib
import os
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from lite import dtypes, kernels
from lite.model import NodeDef
from lite.status import InferInvalidError, InferShapeError, LiteError, NotSupportedError, ParamInvalidError

ANY = -1   # registry wildcard: the kernel handles every data type


@dataclass
class TensorSpec:
    """What compile time knows of a tensor: its shape, dtype and, for constants and folded values, its value."""
    shape: tuple[int, ...]
    dtype: np.dtype
    value: np.ndarray | None = None
    quant: Any = None
    quant_axis: int = 0      # the channel axis of per-channel quant params

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    @property
    def rank(self) -> int:
        return len(self.shape)


class Kernel(ABC):
    """Base class of every op kernel.

    Subclasses implement `infer` (inputs -> output specs; omitted optional inputs are None) and `run`
    (inputs -> writes every output array in place). Class flags tell the compiler what it may do.
    """

    inplace: bool = False    # output 0 may share input 0's memory when input 0 dies here
    foldable: bool = True    # may be evaluated at compile time when all its inputs are known
    native_dtypes: bool = False   # runs on float16/bfloat16/float8 as stored (data movement, casts)
    compiled: bool = False   # set by kernels that bound a compiled (numba) kernel: tools report it
    float16_compute: bool = False   # computes in float16 on float32 tensors under `enable_float16` (Float16Compute)
    macs: int = 0            # multiply-adds of its products per run (convolutions, GEMMs), set when it binds
    blas_macs: int = 0       # the part numpy's BLAS runs: sessions split their threads by it (lite.threads)

    def __init__(self, node: NodeDef):
        self.node = node
        self.attrs = node.attrs
        self.out_quant: list[list[Any]] = [[] for _ in node.outputs]   # each output's QuantParams (int8 models)

    def inplace_input(self) -> int | None:
        """The input whose memory output 0 may take when that input dies here (after `infer`): input 0 for
        `inplace` kernels; a kernel that reads each element of another input right before writing that element
        says which."""
        return 0 if self.inplace else None

    @classmethod
    def accepts(cls, attrs: Mapping[str, Any], n_outputs: int) -> bool:
        """Whether the kernel runs every node of its op with these attributes and output count: the quantizer
        asks an int8 kernel before choosing it, so a node it refuses (LP pooling) stays float between casts."""
        return True

    @abstractmethod
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        """The output specs; raise `self.error(...)` when the inputs break the op's rule."""

    def select(self, inputs: Sequence[TensorSpec | None]) -> None:
        """Choose the algorithm for these inputs, after `infer` (which it may rely on) and before `scratch`: a
        kernel with several paths decides here, and a sibling of another backend overrides only this choice."""

    def scratch(self) -> list[TensorSpec]:
        """Work buffers `run` needs; the memory planner places them for this node only."""
        return []

    def bind(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray],
             scratch: Sequence[np.ndarray]) -> None:
        """Called once per compile with the arrays `run` will receive; keep views or precompute here."""
        self.work = list(scratch)

    @abstractmethod
    def run(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray]) -> None:
        """Compute; write every output in place (`out=` / `np.copyto`), allocate nothing that lives on."""

    def idle(self) -> bool:
        """After `bind`: True when `run` has nothing to do on the arrays bound (an output that is its input's
        memory), so a plain run skips the call."""
        return False

    def direct(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray]
               ) -> tuple[Callable[[Any, Any], Any], Any, Any] | None:
        """After `bind`: (f, a, b) when `run` on these arrays is the one call f(a, b) (a copy of a view fixed at
        bind, a ufunc of x into out), else None. Only the class that defines `run` may say so (`plain_call`)."""
        return None

    def plain_call(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray],
                   below: type | None = None) -> tuple[Callable[[Any, Any], Any], Any, Any]:
        """What a run without callbacks calls, after `bind`, as (f, a, b) for f(a, b): the `direct` call of the
        class that defines `run` (so a subclass that runs otherwise never inherits its parent's; `below`: of the
        first such class after that one), else `run` itself. On small tensors the method around a single numpy
        call is a third of the node's time."""
        mro = type(self).__mro__
        mro = mro[mro.index(below) + 1:] if below is not None else mro
        owner = next(vars(cls) for cls in mro if "run" in vars(cls))
        call = owner["direct"](self, inputs, outputs) if "direct" in owner else None
        return call or (self.run, inputs, outputs)

    # helpers for subclasses -----------------------------------------------------------------------------------
    def error(self, message: str, kind: type[LiteError] = InferShapeError) -> LiteError:
        return kind(f"{self.node.op} node '{self.node.name}': {message}")

    def known(self, spec: TensorSpec | None, what: str) -> np.ndarray:
        """The value of a parameter input (Reshape's shape, Slice's starts, ...) or of data an output shape
        depends on; raises InferInvalidError while it is not known yet (see the module docstring)."""
        if spec is None:
            raise self.error(f"{what} is missing", NotSupportedError)
        if spec.value is None:
            raise self.error(f"{what} must be known before running (a constant or computed from shapes)",
                             InferInvalidError)
        return spec.value


# ---- backends ---------------------------------------------------------------------------------------------
REFERENCE = "numpy"
ENV = "MSLITE_KERNELS"
# backend -> its package under lite.kernels, which provides `usable()` (whether kernels chosen now take it; may
# start it; raises NotSupportedError when it was asked for by name and cannot start), `seconds()` (spent
# starting it and preparing kernels) and `describe()`, and may name in `SIBLINGS` another backend whose
# registered kernels it runs; a started backend with its own threads adds its pool (`add_pool`). Importing the
# package starts nothing. "auto" takes the first that starts: the compiled kernels from the ahead-of-time library,
# else from numba's JIT.
BACKENDS: dict[str, str] = {"aot": "compiled.aot", "compiled": "compiled"}
MODES = ("auto", *BACKENDS, REFERENCE)

_selection: contextvars.ContextVar[tuple[str, int]] = contextvars.ContextVar("lite_kernel_selection",
                                                                             default=("auto", 1))
_pools: list[Any] = []


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ParamInvalidError(f"kernels must be one of {', '.join(MODES)}, got {mode!r}")
    return mode


@contextlib.contextmanager
def selection(mode: str, threads: int = 1) -> Iterator[None]:
    """Kernels chosen inside the block follow `mode` ("auto": the first backend that starts, else numpy; a
    backend's name; "numpy": the reference), unless `MSLITE_KERNELS` says otherwise, and may use up to `threads`
    threads. Sessions compile inside their context's selection; the converter asks for the reference."""
    token = _selection.set((check_mode(mode), max(1, int(threads))))
    try:
        yield
    finally:
        _selection.reset(token)


def threads() -> int:
    """The thread count of the session whose kernels are being chosen (1 outside `selection`)."""
    return _selection.get()[1]


def requested() -> str:
    """The mode in force: the environment variable first, then the compiling session's context."""
    env = os.environ.get(ENV, "").strip().lower()
    return check_mode(env) if env else _selection.get()[0]


def backend(name: str) -> Any:
    """The package of backend `name` (importing it starts nothing)."""
    return importlib.import_module(f"lite.kernels.{BACKENDS[name]}")


def _started() -> list[Any]:
    """The backend packages imported so far (never imports one). A package another thread is still importing is
    left out: its functions are not defined yet (sessions compile concurrently, e.g. one per Java thread)."""
    modules = (sys.modules.get(f"lite.kernels.{p}") for p in BACKENDS.values())
    return [module for module in modules
            if module is not None and not getattr(getattr(module, "__spec__", None), "_initializing", False)]


def add_pool(pool: Any) -> None:
    """Called by a backend when it starts: its thread pool (`max_threads`, `get()`, `set(n)`, counts per calling
    thread), which `lite.threads` bounds during runs."""
    _pools.append(pool)


def thread_pools() -> list[Any]:
    """The thread pools of the backends started in this process (none until one starts)."""
    return _pools


def startup_seconds() -> float:
    """Seconds this process has spent starting backends and preparing their kernels so far."""
    return sum(module.seconds() for module in _started())


def describe_backend(mode: str = "auto") -> str:
    """One line for tools: which kernels a session of `mode` (its `Context.kernels`) runs, and why."""
    mode = os.environ.get(ENV, "").strip().lower() or check_mode(mode)
    if mode == REFERENCE:
        return "numpy kernels (forced)"
    if mode in BACKENDS:
        return backend(mode).describe()
    with selection(mode):
        return next((backend(name).describe() for name in BACKENDS if backend(name).usable()),
                    backend(list(BACKENDS)[-1]).describe())


class CallUnavailable(NotSupportedError):
    """A started backend cannot run one call of a kernel it was chosen for (a compiled function the ahead-of-time
    library lacks, with no JIT in the process to compile it): the node runs its numpy kernel (`reference_of`)."""


def reference_of(kernel: Kernel) -> Kernel:
    """A fresh numpy kernel for `kernel`'s node, wrapped as `kernel` is (`Float32Compute`, `Float16Compute`)."""
    if isinstance(kernel, Float32Compute):
        return Float32Compute(reference_of(kernel.inner), kernel.narrow)
    if isinstance(kernel, Float16Compute):
        return Float16Compute(reference_of(kernel.inner))
    cls = next((_REGISTRY[(*key[:3], REFERENCE)] for key, sibling in _REGISTRY.items()
                if sibling is type(kernel) and key[3] != REFERENCE), type(kernel))
    return cls(kernel.node)


def _allows(name: str) -> bool:
    mode = requested()
    return mode in ("auto", name) and backend(name).usable()


# ---- registry ---------------------------------------------------------------------------------------------
_REGISTRY: dict[tuple[str, int, bool, str], type[Kernel]] = {}


def register(op: str, *type_ids: int, quantized: bool = False,
             backend: str = REFERENCE) -> Callable[[type[Kernel]], type[Kernel]]:
    """Class decorator: `@register("Conv2D", DataType.FLOAT32)`; `ANY` matches every data type.
    `quantized=True` registers a kernel for quantized tensors (they carry scale and zero point), picked over
    a plain kernel of the same data type when the first input has quantization parameters. `backend` names the
    backend of a sibling: its numpy kernel for the same key must be registered first."""
    def wrap(cls: type[Kernel]) -> type[Kernel]:
        for t in type_ids or (ANY,):
            key = (op, t, quantized, backend)
            if key in _REGISTRY:
                raise RuntimeError(f"kernel {key} registered twice")
            if backend != REFERENCE and (op, t, quantized, REFERENCE) not in _REGISTRY:
                raise RuntimeError(f"kernel {key} has no numpy kernel to be a sibling of")
            _REGISTRY[key] = cls
        return cls
    return wrap


def registered() -> dict[tuple[str, int, bool, str], type[Kernel]]:
    """Every kernel by (op, data type or ANY, quantized, backend), every kernel module imported: for the op
    table and its tests."""
    kernels.load_all()
    return dict(_REGISTRY)


def kernels_of(op: str) -> dict[tuple[int, bool], type[Kernel]]:
    """The numpy kernels of `op` by (data type or ANY, quantized), importing only its modules."""
    kernels.load(op)
    return {(t, q): cls for (name, t, q, b), cls in _REGISTRY.items() if name == op and b == REFERENCE}


def _key(op: str, type_id: int, quantized: bool) -> tuple[str, int, bool] | None:
    kernels.load(op)
    keys = [(op, type_id, quantized), (op, ANY, quantized)]
    if quantized:
        keys += [(op, type_id, False), (op, ANY, False)]    # ops indifferent to quantization (Shape, ...)
    return next((k for k in keys if (*k, REFERENCE) in _REGISTRY), None)


def kernel_for(op: str, type_id: int, quantized: bool = False) -> type[Kernel] | None:
    """The numpy kernel class for `op` on inputs of `type_id` (quantized or not), wildcard kernels included:
    what exists, whatever backend runs it. The first lookup of an op imports its kernel modules
    (`lite.kernels.load`)."""
    key = _key(op, type_id, quantized)
    return None if key is None else _REGISTRY[(*key, REFERENCE)]


def kernel_to_run(op: str, type_id: int, quantized: bool = False) -> type[Kernel] | None:
    """`kernel_for`'s class, or its sibling of the first backend the selection in force allows (which starts
    that backend)."""
    key = _key(op, type_id, quantized)
    if key is None:
        return None
    return next((_REGISTRY[(*key, _kernels_of(name))] for name in BACKENDS
                 if (*key, _kernels_of(name)) in _REGISTRY and _allows(name)), _REGISTRY[(*key, REFERENCE)])


def _kernels_of(name: str) -> str:
    """The backend whose registered kernels backend `name` runs (its `SIBLINGS`, else itself)."""
    return getattr(backend(name), "SIBLINGS", name)


class Float32Compute(Kernel):
    """A float32 kernel run on float16 / bfloat16 / float8 tensors (`narrow`): inputs of that type are widened
    into float32 buffers (constants once, at compile time), the float32 kernel computes, and its float32
    outputs are rounded back to `narrow`. One rounding per op, as computing in float32 and storing the
    narrow type does (MindSpore Lite's fp32 fallback of fp16 models)."""

    def __init__(self, inner: Kernel, narrow: np.dtype):
        super().__init__(inner.node)
        self.inner, self.narrow = inner, np.dtype(narrow)
        self.foldable = inner.foldable

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        wide = [TensorSpec(s.shape, np.dtype(np.float32), None if s.value is None else s.value.astype(np.float32))
                if s is not None and s.dtype == self.narrow else s for s in inputs]
        self.widened = [k for k, (s, w) in enumerate(zip(inputs, wide)) if s is not w]
        self.wide_inputs = wide
        outs = self.inner.infer(wide)
        self.narrowed = [k for k, o in enumerate(outs) if o.dtype == np.float32]
        self.wide_outputs = outs
        return [TensorSpec(o.shape, self.narrow, None if o.value is None else o.value.astype(self.narrow), o.quant)
                if k in self.narrowed else o for k, o in enumerate(outs)]

    def select(self, inputs: Sequence[TensorSpec | None]) -> None:
        self.inner.select(self.wide_inputs)

    def scratch(self) -> list[TensorSpec]:
        buffers = [self.wide_inputs[k] for k in self.widened if self.wide_inputs[k].value is None]
        return self.inner.scratch() + [TensorSpec(s.shape, s.dtype) for s in buffers] + \
            [TensorSpec(self.wide_outputs[k].shape, np.dtype(np.float32)) for k in self.narrowed]

    def bind(self, inputs, outputs, scratch) -> None:
        own = len(self.inner.scratch())
        buffers = iter(scratch[own:])
        self.ins = list(inputs)
        self.copy_in = []
        for k in self.widened:
            value = self.wide_inputs[k].value
            self.ins[k] = value if value is not None else next(buffers)
            if value is None:
                self.copy_in.append(k)
        self.outs = list(outputs)
        for k in self.narrowed:
            self.outs[k] = next(buffers)
        self.inner.bind(self.ins, self.outs, scratch[:own])

    def run(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray]) -> None:
        for k in self.copy_in:
            np.copyto(self.ins[k], inputs[k], casting="unsafe")
        self.inner.run(self.ins, self.outs)
        for k in self.narrowed:
            np.copyto(outputs[k], self.outs[k], casting="unsafe")


F16 = np.dtype(np.float16)


class Float16Compute(Kernel):
    """A float32 kernel computing in float16 (a session whose CPU device has `enable_float16`, MindSpore Lite's
    `CPUDeviceInfo.SetEnableFP16`): its float32 inputs are rounded to float16 (constants once, at compile time,
    so weights are packed from their float16 values), it computes, and its float32 outputs are rounded to
    float16. numpy has no float16 BLAS (its float16 matmul is a plain loop), so products are summed in float32,
    as fp16 kernels that accumulate in fp32 do; tensors stay float32 in memory (float16 values): the numerics
    of float16 compute, not its speed or memory."""

    def __init__(self, inner: Kernel):
        super().__init__(inner.node)
        self.inner = inner
        self.foldable, self.inplace, self.compiled = inner.foldable, inner.inplace, inner.compiled

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        self.rounded = [k for k, s in enumerate(inputs) if s is not None and s.dtype == np.float32 and s.value is None]
        rounded = [TensorSpec(s.shape, s.dtype, s.value.astype(F16).astype(np.float32), s.quant, s.quant_axis)
                   if s is not None and s.dtype == np.float32 and s.value is not None else s for s in inputs]
        self.in_specs = rounded
        outs = self.inner.infer(rounded)
        self.narrowed = [k for k, o in enumerate(outs) if o.dtype == np.float32]
        self.out_specs = outs
        return [TensorSpec(o.shape, o.dtype, o.value.astype(F16).astype(np.float32), o.quant, o.quant_axis)
                if k in self.narrowed and o.value is not None else o for k, o in enumerate(outs)]

    def select(self, inputs: Sequence[TensorSpec | None]) -> None:
        self.inner.select(self.in_specs)

    def scratch(self) -> list[TensorSpec]:
        return self.inner.scratch() + [TensorSpec(self.in_specs[k].shape, np.dtype(np.float32))
                                       for k in self.rounded] + \
            [TensorSpec(s.shape, F16) for s in [*(self.in_specs[k] for k in self.rounded),
                                               *(self.out_specs[k] for k in self.narrowed)]]

    def bind(self, inputs, outputs, scratch) -> None:
        own, n = len(self.inner.scratch()), len(self.rounded)
        self.ins = [s.value if s is not None and s.value is not None and s.dtype == np.float32 else a
                    for s, a in zip(self.in_specs, inputs)]           # constants: their float16 values
        for k, buffer in zip(self.rounded, scratch[own:own + n]):
            self.ins[k] = buffer
        self.halves = list(scratch[own + n:])
        self.inner.bind(self.ins, outputs, scratch[:own])

    def run(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray]) -> None:
        halves = iter(self.halves)
        for k in self.rounded:
            half = next(halves)
            np.copyto(half, inputs[k], casting="same_kind")
            np.copyto(self.ins[k], half)
        self.inner.run(self.ins, outputs)
        for k in self.narrowed:
            half = next(halves)
            np.copyto(half, outputs[k], casting="same_kind")
            np.copyto(outputs[k], half)


_float16: contextvars.ContextVar[bool] = contextvars.ContextVar("lite_float16_compute", default=False)


@contextlib.contextmanager
def float16_compute(enabled: bool) -> Iterator[None]:
    """Kernels created inside the block compute in float16 where they can (`Kernel.float16_compute`)."""
    token = _float16.set(bool(enabled))
    try:
        yield
    finally:
        _float16.reset(token)


def create_kernel(node: NodeDef, input_type: int, quantized: bool = False) -> Kernel:
    """The kernel for `node` given the data type of its first input and whether that input is quantized: the
    numpy kernel or the sibling the selection in force allows (`kernel_to_run`). Narrow floats (float16, bfloat16, float8) run the float32 kernel through `Float32Compute`, except in
    kernels that only move data (`native_dtypes`); float32 nodes of `float16_compute` kernels run through
    `Float16Compute` inside a `float16_compute(True)` block."""
    cls = kernel_to_run(node.op, input_type, quantized)
    if (_float16.get() and input_type == dtypes.DataType.FLOAT32 and not quantized and cls is not None
            and cls.float16_compute):
        return Float16Compute(cls(node))
    if input_type in dtypes.NARROW_FLOATS and not quantized and not (cls is not None and cls.native_dtypes):
        wide = kernel_to_run(node.op, dtypes.DataType.FLOAT32)
        if wide is not None:
            return Float32Compute(wide(node), dtypes.to_numpy(input_type))
    if cls is None:
        have = sorted({dtypes.type_name(t) + (" (quantized)" if q else "") for (t, q) in kernels_of(node.op)})
        detail = f"kernels exist for {', '.join(have)}" if have else "no kernel exists for this op"
        raise NotSupportedError(f"no {dtypes.type_name(input_type)} kernel for {node.op} node '{node.name}' "
                                f"({detail})")
    return cls(node)
