"""Build the ahead-of-time kernel library for this machine's CPU level (needs numba, llvmlite and a C compiler):

    python -m lite.kernels.compiled.aot.build [--out DIR] [--cc CC] [--object-only]

(a process that finds no library starts this build itself when it exits, in the background: `first_use`).

numba compiles every entry of `signatures.txt` (serial or threaded form, argument types) for the host's CPU level
(`llvm.TARGET`; `MSLITE_CPU_TARGET=x86_64-v3` builds a lower one's);
each gets a C entry point (`aot` module docstring) written here in LLVM IR; llvmlite emits one position-independent
object of them all, and the C compiler links it with `runtime.c` into `libmslite_kernels-<level>-v<N>.so`, with
`.json` beside it naming the entry points. `--object-only` stops at the object and its stubs (link them where a
compiler for the device is: `cc -shared -O2 -fPIC -o libNAME.so NAME.o NAME.stubs.c runtime.c -lpthread -lm`).

The signatures are recorded from real runs with numba's JIT:

    python -m lite.kernels.compiled.aot.build --record model.ms [model.ms ...]

adds what every listed model binds at 1 and 2 threads to `signatures.txt` (`--check` instead fails listing
them); `--models model.ms ...` instead of `--record` builds a library of just those models' signatures.
`bench/aot_signatures.py` checks (or `--write`s) the zoo's and the wild bench's.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

HERE = Path(__file__).parent
SIGNATURES = HERE / "signatures.txt"
SIGNATURES_ENV = "MSLITE_AOT_SIGNATURES"
RUNTIME = HERE / "runtime.c"
RENAMED = "mslite_rt_"           # prefix of the Python C-API and numba helper names the runtime stands in for
PYTHON_API = ("Py", "_Py", "numba_")
IMPLEMENTED = ("numba_parallel_for", "numba_attempt_nocopy_reshape")   # runtime.c's, under numba's names


def _numba_for(target: str) -> Any:
    """numba set to compile for `target`'s CPU (before it loads), with the kernels' vector width matching."""
    os.environ["MSLITE_CPU_TARGET"] = target
    from lite.kernels.compiled import llvm
    if llvm.TARGET != target:
        raise SystemExit(f"lite.kernels.compiled.llvm was imported for {llvm.TARGET}; run the build in a fresh process")
    os.environ["NUMBA_CPU_NAME"], os.environ["NUMBA_CPU_FEATURES"] = llvm.CPUS[target]
    from lite.kernels import compiled
    return compiled.numba_module()


def parse_type(token: str) -> Any:
    """A numba type from one token of a signature (`aot.signature_of`)."""
    import numpy as np
    from numba import types
    from numba.np.numpy_support import from_dtype
    if token.endswith("]"):
        dtype, shape = token[:-1].split("[")
        return types.Array(from_dtype(np.dtype(dtype)), int(shape[:-1]), shape[-1])
    return from_dtype(np.dtype(token))


def _entry_ir(context: Any, fndesc: Any, name: str) -> Any:
    """An llvmlite IR module holding `int32 name(i8 **data, i64 *meta)`, which rebuilds the arguments from
    `data` and `meta` and calls the compiled function; it returns 0, or 1 when the function failed."""
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    module = context.create_module(name)
    callee = ir.Function(module, context.call_conv.get_function_type(fndesc.restype, fndesc.argtypes),
                         fndesc.llvm_func_name)
    i64 = ir.IntType(64)
    entry = ir.Function(module, ir.FunctionType(ir.IntType(32), [ir.IntType(8).as_pointer().as_pointer(),
                                                                  i64.as_pointer()]), name)
    builder = ir.IRBuilder(entry.append_basic_block())
    data, meta = entry.args
    slot = iter(range(1 << 30))
    word = lambda: builder.load(builder.gep(meta, [ir.Constant(i64, next(slot))]))        # noqa: E731
    values = []
    for k, kind in enumerate(fndesc.argtypes):
        if isinstance(kind, types.Array):
            array = context.make_array(kind)(context, builder)
            address = builder.load(builder.gep(data, [ir.Constant(i64, k)]))
            shape = [word() for _ in range(kind.ndim)]
            strides = [word() for _ in range(kind.ndim)]
            context.populate_array(array, data=builder.bitcast(address, array.data.type),
                                   shape=cgutils.pack_array(builder, shape, i64),
                                   strides=cgutils.pack_array(builder, strides, i64),
                                   itemsize=context.get_constant(types.intp, context.get_abi_sizeof(
                                       context.get_data_type(kind.dtype))), meminfo=None)
            values.append(array._getvalue())
        else:
            bits, value_type = word(), context.get_value_type(kind)
            if isinstance(value_type, ir.FloatType):
                values.append(builder.bitcast(builder.trunc(bits, ir.IntType(32)), value_type))
            elif isinstance(value_type, ir.DoubleType):
                values.append(builder.bitcast(bits, value_type))
            elif value_type.width == 1:
                values.append(builder.icmp_unsigned("!=", bits, ir.Constant(i64, 0)))
            else:
                values.append(builder.trunc(bits, value_type) if value_type.width < 64 else bits)
    status, _ = context.call_conv.call_function(builder, callee, fndesc.restype, fndesc.argtypes, values)
    builder.ret(builder.select(status.is_ok, ir.Constant(ir.IntType(32), 0), ir.Constant(ir.IntType(32), 1)))
    return module


def read_signatures(path: Path | None = None) -> list[str]:
    """The entries of `path`, by default `MSLITE_AOT_SIGNATURES` (an application's own list) or `signatures.txt`."""
    path = path or Path(os.environ.get(SIGNATURES_ENV) or SIGNATURES)
    lines = path.read_text().splitlines() if path.exists() else []
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def compile_object(target: str, keys: list[str], object_path: Path) -> dict[str, str]:
    """Compile the entries `keys` into one object file; returns the entry point name of each key."""
    import importlib
    from llvmlite import binding
    from numba.core.compiler_lock import global_compiler_lock
    numba = _numba_for(target)
    symbols: dict[str, str] = {}
    with global_compiler_lock:
        library = None
        for index, key in enumerate(keys):
            name, form, signature = key.split(":")
            module, _, function = name.rpartition(".")
            try:                     # an entry its kernel no longer takes (renamed, other arguments) is left out
                compiled = getattr(importlib.import_module(module), function)
                dispatcher = compiled.form(form == "threaded")
                argument_types = tuple(parse_type(t) for t in signature.split(",")) if signature else ()
                dispatcher.compile(argument_types)
            except (AttributeError, TypeError, ValueError, numba.core.errors.TypingError) as e:
                print(f"  left out {key}: {str(e).splitlines()[0]}", flush=True)
                continue
            result = dispatcher.overloads[argument_types]
            context = result.target_context
            if library is None:
                library = context.codegen().create_library("mslite_kernels")
            symbols[key] = f"mslite_kernel_{index}"
            library.add_ir_module(_entry_ir(context, result.fndesc, symbols[key]))
            library.add_linking_library(result.library)
            print(f"  {key}", flush=True)
        if library is None:
            raise SystemExit("no signatures to build")
        library.finalize()
        module = binding.parse_assembly(str(library._final_module))
    stubs = []
    for value in [*module.functions, *module.global_variables]:
        if value.is_declaration and value.name.startswith(PYTHON_API) and value.name not in IMPLEMENTED:
            value.name = RENAMED + value.name
            stubs.append(f"void *{value.name}(void) {{ return 0; }}" if value.is_function else f"void *{value.name};")
    object_path.with_suffix(".stubs.c").write_text("\n".join(["/* inert stand-ins (runtime.c) */", *stubs, ""]))
    from lite.kernels.compiled.llvm import CPUS
    cpu, features = CPUS[target]
    triple = binding.get_process_triple()
    machine = binding.Target.from_triple(triple).create_target_machine(cpu=cpu, features=features, opt=3,
                                                                      reloc="pic", codemodel="default")
    module.triple = triple
    object_path.write_bytes(machine.emit_object(module))
    return symbols


def link(object_path: Path, library_path: Path, cc: str, runtime: Path = RUNTIME) -> None:
    """`cc -shared` of the kernels' object, its stubs (`compile_object`) and the runtime; no symbol left
    undefined but the C library's."""
    command = [*shlex.split(cc), "-shared", "-O2", "-fPIC", "-o", str(library_path), str(object_path),
               str(object_path.with_suffix(".stubs.c")), str(runtime), "-lpthread", "-lm", "-Wl,-z,defs"]
    subprocess.run(command, check=True)


def build(out: Path, target: str, cc: str, object_only: bool = False, keys: list[str] | None = None) -> Path:
    """Build (or, with `object_only`, compile) the library of `keys` (default: `signatures.txt`) into `out`;
    returns the file written."""
    from lite.kernels.compiled import aot
    name = aot.library_name(target)
    out.mkdir(parents=True, exist_ok=True)
    object_path = out / f"{name}.o"
    symbols = compile_object(target, read_signatures() if keys is None else keys, object_path)
    import numba
    info = {"version": aot.VERSION, "target": target, "sources": aot.source_digest(), "numba": numba.__version__,
            "entries": symbols}
    library_path = out / f"lib{name}.so"
    partial = out / f"lib{name}.{os.getpid()}.part"      # a process loading meanwhile sees the old or the new
    partial.write_text(json.dumps(info, indent=1) + "\n")
    os.replace(partial, library_path.with_suffix(".json"))
    if object_only:
        return object_path
    link(object_path, partial, cc)
    os.replace(partial, library_path)
    object_path.unlink()
    object_path.with_suffix(".stubs.c").unlink()
    return library_path


FREE_DIM = 64


def recorded(models: list[str], feeds: dict[str, dict[str, Any]] | None = None) -> list[str]:
    """The entries each model binds when it runs with numba's JIT at 1 and 2 threads (free input dims FREE_DIM),
    in order of first use (`recording`: both forms, so larger inputs than these find theirs). `feeds` gives a
    model's input values by input name or position (default: standard normal floats, zero integers)."""
    import numpy as np

    import lite
    with recording() as keys:
        for path in models:
            model, given = lite.Model.Load(path), (feeds or {}).get(path, {})
            for threads in (1, 2):
                session = lite.LiteSession.CreateSession(lite.Context(thread_num=threads, kernels="compiled"))
                session.CompileGraph(model)
                unknown = [t for t in session.GetInputs() if any(d < 0 for d in t.shape())]
                if unknown:
                    session.Resize(unknown, [[d if d > 0 else FREE_DIM for d in t.shape()] for t in unknown])
                for k, tensor in enumerate(session.GetInputs()):
                    value = given.get(tensor.tensor_name(), given.get(str(k)))
                    if value is None:
                        data = tensor.MutableData()
                        value = np.random.default_rng(0).standard_normal(data.shape) if data.dtype.kind == "f" else 0
                    tensor.MutableData()[...] = value
                session.RunGraph()
    return list(keys)


@contextlib.contextmanager
def recording() -> Iterator[dict[str, None]]:
    """The entries of the compiled calls bound inside the block (with numba's JIT), in order of first use: each
    call's serial form, and its threaded form too unless the call is never threaded (no work given)."""
    from lite.kernels import compiled
    from lite.kernels.compiled import aot
    keys: dict[str, None] = {}
    original = compiled.Compiled.entry

    def entry(self: Any, work: int, *args: Any) -> Any:
        for parallel in (False, True)[:2 if work > 0 else 1]:
            keys[aot.entry_key(self.name, parallel, args)] = None
        return original(self, work, *args)

    compiled.Compiled.entry = entry                                   # type: ignore[method-assign]
    try:
        yield keys
    finally:
        compiled.Compiled.entry = original                            # type: ignore[method-assign]


def missing(keys: list[str]) -> list[str]:
    """The entries of `keys` that `signatures.txt` lacks."""
    known = set(read_signatures(SIGNATURES))
    return [key for key in keys if key not in known]


def record(models: list[str]) -> int:
    """Add the entries the models bind (`recorded`) to `signatures.txt`, after its last line."""
    new = missing(recorded(models))
    append(new)
    print(f"{len(new)} new signatures in {SIGNATURES}")
    return 0


def append(keys: list[str]) -> None:
    """Add `keys` to the end of `signatures.txt` (one entry a line: module.function:form:types)."""
    with SIGNATURES.open("a") as f:
        f.writelines(f"{key}\n" for key in keys)


def check(models: list[str]) -> int:
    """1, listing them, when the models bind entries that `signatures.txt` lacks, else 0."""
    lacking = missing(recorded(models))
    print("\n".join([f"{len(lacking)} entries missing from {SIGNATURES}:", *lacking]) if lacking else
          f"every entry the models bind is in {SIGNATURES}")
    return 1 if lacking else 0


def main(argv: list[str] | None = None) -> int:
    from lite.kernels.compiled import aot
    from lite.kernels.compiled.llvm import TARGET
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="directory (default: the user's cache of "
                                                               "ahead-of-time kernels, where lite looks)")
    parser.add_argument("--cc", default=os.environ.get("CC", "cc"), help="C compiler that links the library")
    parser.add_argument("--object-only", action="store_true", help="stop at the object file")
    parser.add_argument("--record", nargs="+", metavar="MODEL", help="record the signatures these models bind")
    parser.add_argument("--models", nargs="+", metavar="MODEL", help="build only the signatures these models bind "
                                                                     "(run with the JIT first)")
    parser.add_argument("--lock-fd", type=int, help=argparse.SUPPRESS)    # the first-use build's (`first_use`)
    parser.add_argument("--check", nargs="+", metavar="MODEL", help="fail, listing them, when these models bind "
                                                                    "entries that signatures.txt lacks")
    args = parser.parse_args(argv)
    if args.record:
        return record(args.record)
    if args.check:
        return check(args.check)
    out = args.out or aot.cache_dir()
    if args.lock_fd is not None:
        return background(out, args.cc)
    written = build(out, TARGET, args.cc, args.object_only, recorded(args.models) if args.models else None)
    print(f"wrote {written}")
    return 0


def background(out: Path, cc: str) -> int:
    """The first-use build (`first_use.start` launched it, holding the lock for it), at the lowest priority
    (`first_use.lower_priority`); the cache then keeps `first_use.KEEP` other libraries."""
    from lite.kernels.compiled.aot import first_use
    from lite.kernels.compiled.llvm import TARGET
    first_use.lower_priority()
    print(f"wrote {build(out, TARGET, cc)}", flush=True)
    first_use.prune(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
