"""The ahead-of-time backend: the compiled kernels' machine code in a shared library, loaded with ctypes, so a
process runs them without numba or llvmlite (0.4 s and ~110 MB less at start-up).

It runs the compiled siblings themselves (`SIBLINGS`): their Python parts (weight packing, schedules, the
algorithm choice) are unchanged, and each `Compiled` function they bind is looked up here by its name, its
serial or threaded form and the types of its arguments, then called through one C entry point per compiled
signature, `int32 f(void **data, int64 *meta)`: `data` holds each array's address, `meta` each array's shape
and strides (bytes) and each scalar's bits, packed once when the kernel binds.

The library is built from the signatures in `signatures.txt` for the host's instruction-set level (`llvm.TARGET`)
by `python -m lite.kernels.compiled.aot.build` (numba, llvmlite and a C compiler; see docs/deployment.md), or on
first use: a process that finds none starts that build in the background when it exits (`first_use`) and the
processes after it load it. It is looked for in `MSLITE_AOT_DIR`, then beside this module (`lib/`, shipped with an
application), then in the user's cache, one folder per kernel sources (`cache_dir`). A signature it lacks runs
on numba's JIT when numba is installed, else that node runs its numpy kernel (`lite.kernel.CallUnavailable`).

Threads: the library's own pool of POSIX threads (`runtime.c`, no OpenMP runtime needed), bounded per
launching thread as numba's pool is (`lite.threads`).
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os
import struct
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from lite.kernel import ENV, add_pool, requested
from lite.kernels.compiled.llvm import TARGET
from lite.status import MemoryFailedError, NotSupportedError

SIBLINGS = "compiled"     # the backend whose registered kernels this one runs
DIR_ENV = "MSLITE_AOT_DIR"
VERSION = 1               # of the entry-point convention and the runtime; a library of another is not loaded
BUILD_COMMAND = "python -m lite.kernels.compiled.aot.build"

_lock = threading.Lock()
_library: "Library | None" = None
_error: str | None = None
_seconds = 0.0


@functools.lru_cache(maxsize=1)
def source_digest() -> str:
    """A digest of the compiled kernels' sources (their modules, this package's, the runtime) and of the
    signatures listed: a library built from other sources than the installed ones is not loaded (its machine
    code would not match the Python code that packs its weights and binds its calls), nor one built before
    signatures were added (its processes would compile them with numba)."""
    here = Path(__file__).parent
    digest = hashlib.sha256()
    for path in sorted([*here.parent.glob("*.py"), *here.glob("*.py"), here / "runtime.c", here / "signatures.txt"]):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def library_name(target: str = TARGET) -> str:
    return f"mslite_kernels-{target}-v{VERSION}"


def cache_dir() -> Path:
    """The user's cache of the library built from these kernel sources (the build's default folder): one folder
    per sources, so checkouts or versions side by side do not rebuild over each other."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "mslite" / "kernels" / source_digest()


def search_dirs() -> list[Path]:
    """Where the library is looked for, first match wins."""
    dirs = [Path(os.environ[DIR_ENV])] if os.environ.get(DIR_ENV) else []
    return dirs + [Path(__file__).parent / "lib", cache_dir()]


def signature_of(value: Any) -> str:
    """The type of one kernel argument as the library's signatures spell it: an array "f4[2C]" (dtype, number of
    dimensions, "C" when C-contiguous else "A"), a scalar its dtype ("f4", "i8", "b1"): what numba's typeof
    gives for the same value, with layouts narrowed to C or A."""
    if isinstance(value, np.ndarray):
        return f"{value.dtype.str[1:]}[{value.ndim}{'C' if value.flags.c_contiguous else 'A'}]"
    if isinstance(value, (bool, np.bool_)):
        return "b1"
    if isinstance(value, int):
        return "i8"
    if isinstance(value, float):
        return "f8"
    return np.asarray(value).dtype.str[1:]


def pack(args: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """The (data, meta) arrays of one call (module docstring)."""
    data = np.zeros(max(1, len(args)), np.uintp)
    meta: list[int] = []
    for k, value in enumerate(args):
        if isinstance(value, np.ndarray):
            data[k] = value.__array_interface__["data"][0]
            meta += [*value.shape, *value.strides]
        elif isinstance(value, (float, np.floating)):
            single = isinstance(value, np.float32)
            meta.append(struct.unpack("<i" if single else "<q", struct.pack("<f" if single else "<d", value))[0])
        else:
            meta.append(int(value))
    return data, np.array(meta or [0], np.int64)


def _checked(function: Any, name: str, data: int, meta: int, keep: tuple) -> None:
    """One call of an entry point; `keep` holds the arrays its addresses point into. A compiled kernel fails only
    when its scratch allocation does."""
    if function(data, meta):
        raise MemoryFailedError(f"compiled kernel {name} failed to allocate its scratch memory")


class Library:
    """The loaded library: its entry points by (function name, threaded, signature)."""

    def __init__(self, path: Path):
        self.path = path
        self.cdll = ctypes.CDLL(str(path))
        info = json.loads(path.with_suffix(".json").read_text())
        if info.get("version") != VERSION or info.get("target") != TARGET:
            raise OSError(f"{path} is for {info.get('target')} v{info.get('version')}, not {TARGET} v{VERSION}")
        if info.get("sources") != source_digest():
            raise OSError(f"{path} was built from other kernel sources than these: rebuild it with "
                          f"`{BUILD_COMMAND}`")
        self.symbols: dict[str, str] = info["entries"]
        self.numba_version = info.get("numba", "?")
        self.max_threads = self.cdll.mslite_max_threads()
        self.cdll.mslite_set_num_threads.argtypes = [ctypes.c_ssize_t]
        self.cdll.mslite_get_num_threads.restype = ctypes.c_ssize_t
        self.set = self.cdll.mslite_set_num_threads
        self.get = self.cdll.mslite_get_num_threads

    def function(self, name: str, parallel: bool, args: Sequence[Any]) -> Any | None:
        """The C entry point for `args`, or None when the library lacks it."""
        key = entry_key(name, parallel, args)
        symbol = self.symbols.get(key)
        if symbol is None:
            return None
        function = self.cdll[symbol]
        function.argtypes, function.restype = (ctypes.c_void_p, ctypes.c_void_p), ctypes.c_int32
        return function

    def bind(self, name: str, function: Any, args: Sequence[Any]) -> Callable[[], None]:
        data, meta = pack(args)
        return functools.partial(_checked, function, name, data.ctypes.data, meta.ctypes.data, (data, meta, args))

    def entry(self, name: str, function: Any) -> Callable[..., None]:
        """A callable taking the arguments on every call (for calls whose scalars change)."""
        return lambda *args: self.bind(name, function, args)()


def entry_key(name: str, parallel: bool, args: Sequence[Any]) -> str:
    """The library's key of one entry point: "module.function:serial|threaded:signature,..."."""
    return f"{name}:{'threaded' if parallel else 'serial'}:{','.join(signature_of(a) for a in args)}"


def _load() -> Library | None:
    global _library, _error, _seconds
    with _lock:
        if _library is not None or _error is not None:
            return _library
        start = time.perf_counter()
        name = library_name()
        refused = []                  # a library found first but stale (other sources) gives way to the next
        for path in (d / f"lib{name}.so" for d in search_dirs()):
            try:
                _library = Library(path) if path.is_file() else None
            except (OSError, ValueError, KeyError) as e:
                refused.append(f"the ahead-of-time kernel library does not load: {e}")
            if _library is not None:
                break
        if _library is None:
            from lite.kernels.compiled.aot import first_use
            built = (cache_dir() / f"lib{name}.so").is_file()
            _error = "; ".join(refused + ([] if built else [f"no lib{name}.so for these kernel sources yet: "
                                                            f"{first_use.at_exit(cache_dir())} (or build it with "
                                                            f"`{BUILD_COMMAND}`)"]))
        _seconds += time.perf_counter() - start
        if _library is not None:
            add_pool(_library)
        return _library


def usable() -> bool:
    """Whether kernels chosen now take the library (the registry asks); "aot" without it is an error."""
    mode = requested()
    if mode == "numpy":
        return False
    if _load() is not None:
        return True
    if mode == "aot":
        raise NotSupportedError(f"ahead-of-time kernels were requested ({ENV} or Context.kernels) but {_error}")
    return False


def serving() -> Library | None:
    """The library when the compiled kernels bound now run from it (it has loaded and the mode allows it)."""
    return _library if _library is not None and requested() in ("auto", "aot") else None


def seconds() -> float:
    return _seconds


def describe() -> str:
    if _load() is None:
        return f"numpy kernels ({_error})"
    return f"compiled kernels (ahead of time, {_library.path.name}, numba {_library.numba_version})"
