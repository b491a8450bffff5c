"""`python -m tests.fuzz.run <harness> (--runs N | --seconds T | both)`: fuzz one harness
(`tests.fuzz.HARNESSES`) from its seed corpus, coverage-guided with atheris (libFuzzer) when it is installed,
else with the seeded mutations of `lite.tools.fuzz` (`--plain` forces those). The runtime's memory limit is set
to `--arena-mb` and the process's address space capped at its size after the imports plus that and
`--memory-mb` (RLIMIT_AS), so an allocation beyond them is a `MemoryError` finding; each input has
`--time-limit` seconds of CPU time (`tests.fuzz.contract`) and `--wall-limit` seconds of wall time (libFuzzer's
`-timeout`). A finding prints its traceback, leaves the input in the work folder (`crash-*`, atheris) and exits
non-zero. `--replay DIR...` runs the inputs of folders once each (coverage measurements, regressions).
"""
from __future__ import annotations

import argparse
import importlib
import operator
import importlib.util
import resource
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from tests.fuzz import HARNESSES

HERE = Path(__file__).parent
INSTRUMENTED = ("lite", "converter")          # the packages whose branches guide atheris
WARM_UP_S = 60.0                              # the seeds' first run (caches, first allocations) is not bounded by 1 s


def corpus_dir(harness: str) -> Path:
    return HERE / "corpus" / harness


def load(harness: str, instrument: bool) -> Callable[[bytes], None]:
    """The harness's `TestOneInput`, its readers and every kernel module imported (instrumented for atheris when
    `instrument`)."""
    from lite import kernels
    if harness not in HARNESSES:
        raise SystemExit(f"unknown harness '{harness}': one of {', '.join(HARNESSES)}")
    if not instrument:
        test = importlib.import_module(f"tests.fuzz.{harness}").TestOneInput
        kernels.load_all()
        return test
    import atheris
    with atheris.instrument_imports(include=list(INSTRUMENTED)):
        test = importlib.import_module(f"tests.fuzz.{harness}").TestOneInput
        kernels.load_all()          # instrumented too; their first import is not a mutant's time
    return test


def without_comparison_leak(test: Callable[[bytes], None]) -> Callable[[bytes], None]:
    """`test` with `trace_comparisons_without_leak` in force: `atheris.Fuzz()` binds its own hooks as it starts,
    so the first input puts ours back (later inputs find it in place)."""
    import atheris

    def TestOneInput(data: bytes) -> None:
        trace_comparisons_without_leak(atheris)
        test(data)
    return TestOneInput


def trace_comparisons_without_leak(atheris: Any) -> None:
    """Route instrumented comparisons whose operands are not ints, strings or bytes around atheris' hook.

    atheris 3.0's `_trace_cmp`, which instrumented code calls at every comparison, keeps a reference to the
    comparison's result. That costs nothing for bools but leaks every array a numpy comparison makes: about
    116 B for a 4-element one, about 280 MB over 957,683 `.ms` inputs, which the address-space cap then reported
    as a MemoryError. libFuzzer takes hints only from integer and byte-string comparisons, so the others are
    evaluated here, without the hook."""
    native = atheris._trace_cmp
    if getattr(native, "leak_free", False):
        return
    from atheris.version_dependent import CMP_OP_SHIFT_AMOUNT
    compare = (operator.lt, operator.le, operator.eq, operator.ne, operator.gt, operator.ge)   # dis.cmp_op

    def trace_cmp(left: Any, right: Any, op: int, counter: int, left_is_const: bool) -> Any:
        if isinstance(left, (int, str, bytes)) and isinstance(right, (int, str, bytes)):
            return native(left, right, op, counter, left_is_const)
        return compare[op >> CMP_OP_SHIFT_AMOUNT](left, right)

    trace_cmp.leak_free = True
    atheris._trace_cmp = trace_cmp


def cap_memory(extra_mb: int) -> None:
    """Cap the address space at its present size plus `extra_mb`."""
    with open("/proc/self/statm") as f:
        size = int(f.read().split()[0]) * resource.getpagesize()
    limit = size + (extra_mb << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def seeds(harness: str) -> list[bytes]:
    return [p.read_bytes() for p in sorted(corpus_dir(harness).iterdir()) if p.is_file()]


def plain(test: Callable[[bytes], None], corpus: list[bytes], runs: int | None, seconds: float | None,
          seed: int) -> int:
    """The seeds, then mutants of them until the budget is spent; the first finding ends the run (exit 1)."""
    from lite.tools.fuzz import mutate
    rng = np.random.default_rng(seed)
    started, done = time.monotonic(), 0
    while (runs is None or done < runs) and (seconds is None or time.monotonic() - started < seconds):
        data = corpus[done] if done < len(corpus) else mutate(corpus[int(rng.integers(len(corpus)))], rng)[0]
        try:
            test(data)
        except BaseException as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            traceback.print_exc()
            print(f"finding after {done} runs: {type(e).__name__} on input {data[:64]!r}... ({len(data)} bytes)")
            return 1
        done += 1
    print(f"Done {done} runs in {time.monotonic() - started:.0f} second(s): 0 findings")
    return 0


def replay(test: Callable[[bytes], None], folders: Sequence[Path]) -> int:
    """Each file of `folders` once; exit 1 if any escapes or runs past the time bound."""
    from tests.fuzz import contract
    failed = 0
    files = [p for folder in folders for p in sorted(folder.iterdir()) if p.is_file()]
    for path in files:
        try:
            test(path.read_bytes())
        except Exception:
            traceback.print_exc()
            print(f"finding: {path}")
            failed += 1
        except contract.InputTimeout:
            print(f"finding: {path} ran past {contract.TIME_LIMIT_S} s of CPU time")
            failed += 1
    print(f"replayed {len(files)} inputs: {failed} findings")
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.run", description=__doc__.splitlines()[0])
    parser.add_argument("harness", help=" | ".join(HARNESSES))
    parser.add_argument("--runs", type=int, help="executions, seeds included")
    parser.add_argument("--seconds", type=float, help="wall time (with --runs: whichever ends first)")
    parser.add_argument("--replay", type=Path, nargs="+", metavar="DIR", help="run these folders' inputs once")
    parser.add_argument("--time-limit", type=float, default=1.0, help="CPU seconds per input")
    parser.add_argument("--wall-limit", type=int, default=120, help="wall seconds per input: libFuzzer's own "
                        "bound, for a wait that uses no CPU")
    parser.add_argument("--arena-mb", type=int, default=64, help="the runtime's memory limit (MAX_ARENA_BYTES)")
    parser.add_argument("--memory-mb", type=int, default=256, help="address space beyond the loaded process and "
                        "its arena limit")
    parser.add_argument("--loop-iterations", type=int, default=1000, help="the runtime's bound on a loop whose "
                        "condition depends on data (lite.kernels.control_flow.loop.MAX_ITERATIONS)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work", type=Path, help="atheris' corpus and findings folder (default: a temporary one)")
    parser.add_argument("--plain", action="store_true", help="seeded mutations without coverage guidance")
    args = parser.parse_args(argv)
    if (args.replay is None) == (args.runs is None and args.seconds is None):
        parser.error("give a budget (--runs, --seconds or both) or --replay")
    guided = not args.plain and args.replay is None and importlib.util.find_spec("atheris") is not None
    test = load(args.harness, guided)
    import lite.compiler
    lite.compiler.MAX_ARENA_BYTES = args.arena_mb << 20     # the planned arena's bound; the cap allows more
    from lite.kernels.control_flow import loop
    loop.MAX_ITERATIONS = args.loop_iterations              # a mutated condition may stay true for ever
    from tests.fuzz import contract
    contract.TIME_LIMIT_S = WARM_UP_S
    for data in seeds(args.harness):
        test(data)                    # lazy allocations (BLAS buffers, caches) happen before the cap and the bound
    cap_memory(args.arena_mb + args.memory_mb)
    contract.TIME_LIMIT_S = args.time_limit
    if args.replay is not None:
        return replay(test, args.replay)
    if not guided:
        return plain(test, seeds(args.harness), args.runs, args.seconds, args.seed)
    import atheris
    work = args.work or Path(tempfile.mkdtemp(prefix=f"fuzz-{args.harness}-"))
    work.mkdir(parents=True, exist_ok=True)
    budget = ([f"-runs={args.runs}"] if args.runs is not None else []) + \
        ([f"-max_total_time={int(args.seconds)}"] if args.seconds is not None else [])
    flags = [*budget, f"-seed={args.seed}", f"-artifact_prefix={work}/", f"-timeout={args.wall_limit}",
             "-rss_limit_mb=0", "-print_final_stats=1"]
    dictionary = HERE / "dict" / f"{args.harness}.dict"
    if dictionary.exists():
        flags.append(f"-dict={dictionary}")
    atheris.Setup([sys.argv[0], *flags, str(work), str(corpus_dir(args.harness))], without_comparison_leak(test))
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main())
