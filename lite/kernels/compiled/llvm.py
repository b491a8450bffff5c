"""What the compiled kernel modules share to write LLVM IR (the scalar types, array addresses, broadcasting a
scalar into a vector), the host's vector width, and the names they take from numba and llvmlite.

Those names (`ir`, `types`, `cgutils`, `prange`, `intrinsic`, `njit`, the IR scalar types) are stand-ins until
the JIT starts (`start_jit`, called when numba loads), which replaces them in every kernel module by the real
objects: the kernel modules import without numba or llvmlite, so the ahead-of-time library (`aot`) runs their
functions from its own machine code while their Python parts (weight packing, schedules) run as usual.

The vector width comes from the CPU's instruction-set level (`TARGET`), read from the operating system, not from
LLVM: the library built for a level and the Python code that packs weights for it agree without llvmlite.
"""
from __future__ import annotations

import functools
import os
import platform
import sys
from typing import Any, Callable


class Deferred:
    """A stand-in for an object of numba or llvmlite, made by `make` once the JIT starts."""

    def __init__(self, make: Callable[[], Any]):
        self.make = make

    @functools.cached_property
    def real(self) -> Any:
        return self.make()

    def __getattr__(self, name: str) -> Any:      # outside the kernels' IR code (tools, tests): start it now
        if name in ("make", "real") or name.startswith("__"):
            raise AttributeError(name)
        start_jit()
        return getattr(self.real, name)


def _module(name: str, attribute: str | None = None) -> Deferred:
    def make() -> Any:
        import importlib
        module = importlib.import_module(name)
        return module if attribute is None else getattr(module, attribute)
    return Deferred(make)


ir, types, cgutils, prange = (_module("llvmlite.ir"), _module("numba", "types"), _module("numba.core.cgutils"),
                              _module("numba", "prange"))


def _ir_type(name: str, *args: int) -> Deferred:
    return Deferred(lambda: getattr(_module("llvmlite.ir").real, name)(*args))


I8, I16, I32, I64 = (_ir_type("IntType", bits) for bits in (8, 16, 32, 64))
F32, F64 = _ir_type("FloatType"), _ir_type("DoubleType")


_jit_started = False


def _when_started(deferred: Deferred) -> Any:
    return deferred.real if _jit_started else deferred


def intrinsic(fn: Callable) -> Any:
    """numba.extending.intrinsic, applied when the JIT starts (now, if it has)."""
    return _when_started(Deferred(lambda: _module("numba.extending", "intrinsic").real(fn)))


def njit(**options: Any) -> Callable[[Callable], Any]:
    """numba.njit(**options), applied when the JIT starts (now, if it has)."""
    return lambda fn: _when_started(Deferred(lambda: _module("numba", "njit").real(**options)(fn)))


def start_jit() -> None:
    """Replace every stand-in in the kernel modules imported so far (and here, for later imports) by its real
    object; numba must be importable."""
    global _jit_started
    _jit_started = True
    for name, module in list(sys.modules.items()):
        if module is not None and (name == __name__ or name.startswith("lite.kernels.compiled.")):
            space = vars(module)
            for key, value in list(space.items()):
                if isinstance(value, Deferred):
                    space[key] = value.real


def address(context, builder, array_type, array):
    """(data address as i64, strides) of a numba array value."""
    proxy = cgutils.create_struct_proxy(array_type)(context, builder, value=array)
    return builder.ptrtoint(proxy.data, I64), proxy.strides


def splat(builder, value, vector):
    """`value` in every lane of a `vector`-typed value."""
    one = builder.insert_element(ir.Constant(vector, None), value, ir.Constant(I32, 0))
    return builder.shuffle_vector(one, ir.Constant(vector, None), ir.Constant(ir.VectorType(I32, vector.count),
                                                                              [0] * vector.count))


# ---- the host's instruction-set level ------------------------------------------------------------------------
# x86-64 levels as LLVM names them (psABI micro-architecture levels); v4 is AVX-512 (F, BW, CD, DQ, VL)
_X86_V3 = {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "movbe"}
_X86_V4 = _X86_V3 | {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}
CPU_ENV = "MSLITE_CPU_TARGET"    # a lower level than the host's, to build or test its library


def _x86_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as info:
            line = next((line for line in info if line.startswith("flags")), "")
        return {flag.replace("_", "") if flag.startswith("avx512_") else flag for flag in line.split(":")[-1].split()}
    except OSError:                                   # not Linux: ask LLVM
        from llvmlite import binding
        return {name for name, on in binding.get_host_cpu_features().items() if on}


def host_target() -> str:
    """The host's level: "x86_64-v4-vnni", "x86_64-v4", "x86_64-v3", "x86_64", "aarch64" or the machine's name."""
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        flags = _x86_flags()
        if _X86_V4 <= flags:
            return "x86_64-v4-vnni" if "avx512vnni" in flags else "x86_64-v4"
        return "x86_64-v3" if _X86_V3 <= flags else "x86_64"
    return "aarch64" if machine in ("aarch64", "arm64") else machine


TARGET = os.environ.get(CPU_ENV, "").strip() or host_target()
# AVX-512: 32 vector registers of 16 float32 lanes. Elsewhere (AVX2, NEON) tiles are sized for 16 registers of 8
# lanes (two NEON registers each); LLVM lowers the same IR on every target.
WIDE = TARGET.startswith("x86_64-v4")
LANES = 16 if WIDE else 8
# AVX-512 VNNI: vpdpbusd sums four uint8 x int8 products into each int32 lane, 64 per instruction.
VNNI = TARGET == "x86_64-v4-vnni"
# LLVM's CPU name and features for each level (`host_target`)
CPUS = {"x86_64-v4-vnni": ("x86-64-v4", "+avx512vnni"), "x86_64-v4": ("x86-64-v4", "+avx512f"),
        "x86_64-v3": ("x86-64-v3", "+avx2"), "x86_64": ("x86-64", "+sse2"), "aarch64": ("generic", "+neon")}
if TARGET != host_target() and TARGET in CPUS:
    # A lower level asked for: numba compiles for its CPU too, which also keys its on-disk cache by it, so machine
    # code built for the host's vector width is never loaded for another width (numba reads these when it loads).
    os.environ.setdefault("NUMBA_CPU_NAME", CPUS[TARGET][0])
    os.environ.setdefault("NUMBA_CPU_FEATURES", CPUS[TARGET][1])
    if "numba.core.config" in sys.modules:           # loaded already (a tool or test imported numba first)
        sys.modules["numba.core.config"].reload_config()
