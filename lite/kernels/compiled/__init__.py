"""The compiled backend (numba): multi-threaded siblings of the numpy kernels, chosen when numba is importable.

The numpy kernels stay the reference and the fallback. The registry (`lite.kernel`) decides which runs when a
session compiles: `Context.kernels` ("auto", "compiled" or "numpy"), overridden by the environment variable
`MSLITE_KERNELS` (same values); "auto" takes a compiled sibling when numba and a thread-safe threading layer
(OpenMP or TBB) load (`usable`). The siblings live in this package's kernel modules (`conv2d`, `pooling`, ...,
listed in `lite.kernels.MODULES`), each a subclass of its numpy kernel that overrides the algorithm choice
(`select`) and binds the numba functions of `conv`, `gemm`, `winograd`, `recurrent`, `grad` and `int8`.
Nothing here imports numba until a sibling is chosen, so `import lite` stays as fast without it.

Functions are compiled lazily with `cache=True`: numba stores the machine code beside the module (`__pycache__`)
or, when the package is installed read-only, in the user's cache directory (`NUMBA_CACHE_DIR` overrides both),
so a second process only loads it. `Compiled.bind` compiles (or loads) a kernel for the exact argument types at
bind time and counts the seconds, with numba's own start-up, which sessions report as `jit_seconds`; a run then
calls the compiled entry point directly, skipping numba's per-call type dispatch.

Threads: each kernel has a serial and a threaded form. The threaded one runs only when the session allows more
than one thread and the call has at least `PARALLEL_WORK` inner iterations: waking a second thread costs more
than a small layer, and far more on a loaded machine, where a threaded region waits for its slowest thread.
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import os
import sys
import threading
import time
import types
from typing import Any, Callable, Iterator

from lite import gc_pause
from lite.kernel import ENV, CallUnavailable, add_pool, requested, threads
from lite.status import NotSupportedError

# OpenMP's workers (read when the library loads; a user's setting wins, GOMP_SPINCOUNT=0 makes them sleep at once):
# libgomp's default spins for milliseconds after a parallel region, taking the cores BLAS runs on next
# (EfficientNet-Lite0 ran 9x slower at 2 threads), while workers that sleep at once take 40-400 us to wake on a
# virtual machine, longer than most layers. So they spin for SPIN_COUNT turns (0.1-0.3 ms: across the gaps
# between a run's kernels, asleep soon after the run), and the two pools never run side by side
# (`lite.threads.compiled_first`).
SPIN_COUNT = 10_000
if os.environ.get("OMP_WAIT_POLICY", "").strip().upper() != "ACTIVE":
    os.environ.setdefault("GOMP_SPINCOUNT", str(SPIN_COUNT))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

PARALLEL_WORK = 1 << 19   # inner iterations (~50 us on one core) from which a threaded form pays

_lock = threading.RLock()
_jit_seconds = 0.0
_numba: Any = None
_layer_error: str | None = None


# Packages numba imports while it initialises that no compiled kernel here needs: scipy.linalg (only to decide
# whether its np.correlate/np.convolve may call BLAS; they fall back to a plain loop), half of numba's start-up
# (0.9 -> 0.45 s of CPU before the first cached kernel loads), and cffi with its C parser (only to type cffi
# functions passed to compiled code), 0.04 s more.
UNUSED_BY_NUMBA = ("scipy", "cffi")


@contextlib.contextmanager
def _unseen(names: tuple[str, ...]) -> Iterator[None]:
    """Hide the packages `names` that are not imported yet: `import name...` raises ImportError inside the block.
    Later imports of them are unaffected."""
    hidden = [name for name in names if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None       # type: ignore[assignment]
    try:
        yield
    finally:
        for name in hidden:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]


def _load() -> Any:
    """numba, set up once: a thread-safe threading layer (sessions may run in parallel threads; numba's
    workqueue layer aborts on concurrent launches) and its CPU target initialised, or None with the reason kept
    in `_layer_error`. The seconds it takes count in `jit_seconds`: they are the compiled kernels' start-up."""
    global _numba, _layer_error, _jit_seconds
    with _lock:
        if _numba is not None or _layer_error is not None:
            return _numba
        start = time.perf_counter()
        try:
            with _unseen(UNUSED_BY_NUMBA), gc_pause.paused():
                _numba = _initialised()
        finally:
            _jit_seconds += time.perf_counter() - start
        if _numba is not None:
            add_pool(ThreadPool(_numba))
        return _numba


def _initialised() -> Any:
    """`_load` without the lock and the clock."""
    global _layer_error
    try:
        import numba
    except ImportError:
        _layer_error = "numba is not installed"
        return None
    from lite.kernels.compiled import llvm
    llvm.start_jit()
    for layer, module in (("omp", "numba.np.ufunc.omppool"), ("tbb", "numba.np.ufunc.tbbpool")):
        try:
            importlib.import_module(module)
        except (ImportError, OSError):
            continue
        numba.config.THREADING_LAYER = layer
        from numba.core.registry import cpu_target
        cpu_target.target_context.refresh()      # what the first compile or cache load would do
        return numba
    _layer_error = "numba has no thread-safe threading layer (install OpenMP or the tbb package)"
    return None


class ThreadPool:
    """numba's pool as `lite.threads` bounds it: a thread count per launching thread."""

    def __init__(self, numba: Any):
        self.max_threads = numba.config.NUMBA_NUM_THREADS
        self.set = numba.set_num_threads
        self.numba = numba
        self.count: Callable[[], int] | None = None

    def get(self) -> int:
        """The calling thread's count: numba's C getter once the pool runs (`get_num_threads` takes a
        process-wide lock first, 2-10 us, a tenth of a small model's run)."""
        if self.count is None:
            self.numba.get_num_threads()                  # starts the pool
            self.count = getattr(sys.modules.get("numba.np.ufunc.parallel"), "_get_num_threads",
                                 None) or self.numba.get_num_threads
        return self.count()


def usable() -> bool:
    """Whether kernels chosen now take their compiled sibling (the registry asks). "compiled" without numba is
    an error."""
    mode = requested()
    if mode == "numpy":
        return False
    if _load() is not None:
        return True
    if mode == "compiled":
        raise NotSupportedError(f"compiled kernels were requested ({ENV} or Context.kernels) but {_layer_error}")
    return False


def loaded() -> Any:
    """numba when compiled kernels have loaded it in this process, else None (never imports it)."""
    return _numba


def numba_module() -> Any:
    """numba itself, for the compiled kernel modules (loaded by `usable`)."""
    if _load() is None:
        raise NotSupportedError(f"compiled kernels are unavailable: {_layer_error}")
    return _numba


def _jit(fn: Callable, parallel: bool) -> Any:
    """numba.njit as every compiled kernel uses it: cached on disk, releasing the GIL, exact IEEE arithmetic
    (no fast-math, so float32 results match the numpy reference's order of operations).

    Each form is compiled from a copy of `fn` named for it: numba's on-disk cache keys a function by its name,
    signature and bytecode, not by `parallel`, so the two forms of one function would share an entry, and
    whichever compiled first would serve both (the threaded form then ran serially, or the serial one threaded)."""
    form = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    form.__qualname__ = f"{fn.__qualname__}_{'threaded' if parallel else 'serial'}"
    return numba_module().njit(cache=True, nogil=True, parallel=parallel, error_model="numpy")(form)


class Bound(functools.partial):
    """A compiled kernel call prebound on its arrays (so a kernel can tell it runs compiled code)."""


class CompiledCall:
    """Mixin of a sibling that runs one compiled call where `compiled` (set by its `select`, or in `bind` before
    this one runs) and the numpy kernel's path elsewhere: `call_scratch` are the call's work buffers and
    `bind_call` binds it."""
    compiled: bool
    call: Callable[[], None]

    def call_scratch(self) -> list[Any]:
        return []

    def bind_call(self, inputs: Any, outputs: Any, scratch: Any) -> Callable[[], None]:
        raise NotImplementedError

    def scratch(self) -> list[Any]:
        return self.call_scratch() if self.compiled else super().scratch()         # type: ignore[misc]

    def bind(self, inputs: Any, outputs: Any, scratch: Any) -> None:
        if self.compiled:
            self.call = self.bind_call(inputs, outputs, scratch)
        else:
            super().bind(inputs, outputs, scratch)                                   # type: ignore[misc]

    def run(self, inputs: Any, outputs: Any) -> None:
        if self.compiled:
            self.call()
        else:
            super().run(inputs, outputs)                                             # type: ignore[misc]

    def direct(self, inputs: Any, outputs: Any) -> Any:
        """Not compiled: the numpy kernel's own one call, if its run is one."""
        return None if self.compiled else self.plain_call(inputs, outputs, CompiledCall)  # type: ignore[attr-defined]


class Compiled:
    """A kernel function (written with `prange` over its independent work) in a serial and a threaded form,
    each compiled on first use."""

    def __init__(self, fn: Callable):
        self.fn = fn
        self.forms: dict[bool, Any] = {}
        functools.update_wrapper(self, fn)

    def form(self, parallel: bool) -> Any:
        with _lock:
            if parallel not in self.forms:
                self.forms[parallel] = _jit(self.fn, parallel)
            return self.forms[parallel]

    def bind(self, work: int, *args: Any) -> Callable[[], None]:
        """A call of the compiled function on `args`, ready to run; `work` (inner iterations) and the
        session's threads pick the form. Compiling or loading it now is counted in `jit_seconds`."""
        parallel = threads() > 1 and work >= PARALLEL_WORK
        library, function = self._ahead_of_time(parallel, args)
        if function is not None:
            return Bound(library.bind(self.name, function, args))
        return Bound(self.entry(work, *args), *args)

    @property
    def name(self) -> str:
        return f"{self.fn.__module__}.{self.fn.__qualname__}"

    def _ahead_of_time(self, parallel: bool, args: tuple) -> tuple[Any, Any]:
        """(the ahead-of-time library, its entry point for `args`) when the library serves the kernels bound
        now; the entry point is None when it lacks this signature: numba's JIT then compiles it, or, without
        numba, `CallUnavailable` makes the node run its numpy kernel."""
        aot = sys.modules.get("lite.kernels.compiled.aot")
        library = aot.serving() if aot is not None else None
        function = library and library.function(self.name, parallel, args)
        if library is not None and function is None and _load() is None:
            raise CallUnavailable(f"{aot.entry_key(self.name, parallel, args)} is not in {library.path.name} "
                                  f"and {_layer_error} (add it to the library's signatures.txt)")
        return library, function

    def entry(self, work: int, *args: Any) -> Callable[..., None]:
        """The compiled entry point for arguments typed like `args` (for calls whose scalars change)."""
        global _jit_seconds
        parallel = threads() > 1 and work >= PARALLEL_WORK
        library, function = self._ahead_of_time(parallel, args)
        if function is not None:
            return library.entry(self.name, function)
        dispatcher = self.form(parallel)
        signature = tuple(numba_module().typeof(a) for a in args)
        result = dispatcher.overloads.get(signature)
        if result is None:
            start = time.perf_counter()
            dispatcher.compile(signature)
            with _lock:
                _jit_seconds += time.perf_counter() - start
            result = dispatcher.overloads[signature]
        return result.entry_point


def seconds() -> float:
    """Seconds this process has spent starting numba and compiling or loading compiled kernels so far."""
    return _jit_seconds


def describe() -> str:
    """One line for tools: the compiled kernels and their threading layer, or why numpy kernels run instead."""
    if _load() is None:
        return f"numpy kernels ({_layer_error})"
    return f"compiled kernels (numba {_numba.__version__}, {_numba.config.THREADING_LAYER} threading layer)"
