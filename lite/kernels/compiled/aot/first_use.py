"""The library built on first use: a process that finds no library for its CPU level and kernel sources goes on
with numba's JIT (or the numpy kernels) and, when it exits, starts the build in a detached, lowest-priority process;
the processes after it load the library. pip cannot build it at install: it builds this project's wheel before it
installs numba, in an isolated environment without it.

Why at exit: a build beside the process that wants it took the CPU its threaded kernels wait for. Its own session
(so it outlives a closed terminal) is its own scheduling group where the kernel groups sessions (Linux's
autogroup), and nice 19 counts only inside a group: the build took half a core against the process and
MobileNetV2's runs went from 5.7 to 370 ms. So the build also lowers its group's priority (`lower_priority`),
for the processes that start while it runs.

The build runs only where it can (numba, llvmlite and a C compiler installed; `MSLITE_AOT_BUILD=0` turns it off),
once per folder and one at a time per cache (a checkout whose kernel sources change often would otherwise start
one per edit): it holds an exclusive lock on `build.lock` in its folder and in the cache for its whole life (the
kernel drops them when the process ends, however it ends), so a process exiting meanwhile neither starts a
second build nor waits (`wait` does, for tools and tests). A build that ended without a library (its `build.log`
says why) is not retried there; `python -m lite.kernels.compiled.aot.build` builds by hand.
"""
from __future__ import annotations

import atexit
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

BUILD_ENV = "MSLITE_AOT_BUILD"   # "0": never build on first use
NICE_ENV = "MSLITE_AOT_BUILD_NICE"   # the build's nice and its scheduling group's, 19 (the lowest priority) unless set
LOCK, LOG = "build.lock", "build.log"
KEEP = 8                          # libraries of other kernel sources kept in the cache (the newest)
RUNNING = "it is being built in the background into {}"
ENDED = "its first-use build ended without a library (see {})"
OTHER = "a build of other kernel sources runs in {}: the first process to exit after it builds this one"


def unavailable() -> str | None:
    """Why this process cannot build the library, or None."""
    if os.environ.get(BUILD_ENV, "").strip() == "0":
        return f"{BUILD_ENV}=0"
    if os.name != "posix" or not sys.executable:
        return "the first-use build needs a POSIX system and a Python executable"
    missing = [name for name in ("numba", "llvmlite") if importlib.util.find_spec(name) is None]
    if missing:
        return f"{' and '.join(missing)} not installed"
    cc = os.environ.get("CC", "cc")
    if not shlex.split(cc) or shutil.which(shlex.split(cc)[0]) is None:
        return f"no C compiler ({cc})"
    return None


def _locked(path: Path) -> int | None:
    """An open descriptor of `path` holding its exclusive lock, or None when another process holds it."""
    import fcntl
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def at_exit(folder: Path) -> str:
    """Have the library built into `folder` when this process exits (`start`, registered once) unless it cannot
    be or a build runs or ended there; returns what happens, for the reason the library is not in use."""
    reason = unavailable()
    if reason:
        return f"it is not built on first use: {reason}"
    taken = _taken(folder)
    if taken:
        return taken
    if folder not in _registered:
        _registered.add(folder)
        atexit.register(start, folder)
    return f"it is built in the background into {folder} when this process exits, for the processes after it"


_registered: set[Path] = set()


def _taken(folder: Path) -> str | None:
    """Why no build starts in `folder`: one runs there, or one ended there without a library; or None."""
    if (folder / LOCK).exists():
        fd = _locked(folder / LOCK)
        if fd is None:
            return RUNNING.format(folder)
        os.close(fd)
    return ENDED.format(folder / LOG) if (folder / LOG).exists() else None


def start(folder: Path) -> str:
    """Start the build of the library into `folder` now unless it cannot run, runs already or ended there; returns
    what happened."""
    reason = unavailable()
    if reason:
        return f"it is not built on first use: {reason}"
    folder.mkdir(parents=True, exist_ok=True)
    fd = _locked(folder / LOCK)
    if fd is None:
        return RUNNING.format(folder)
    if (folder / LOG).exists():
        os.close(fd)
        return ENDED.format(folder / LOG)
    shared = _locked(folder.parent / LOCK)         # one build per cache, whatever sources it builds
    if shared is None:
        os.close(fd)
        return OTHER.format(folder.parent)
    try:
        package_root = str(Path(__file__).resolve().parents[4])
        path = os.environ.get("PYTHONPATH")
        env = {**os.environ, BUILD_ENV: "0", "PYTHONPATH": package_root + (os.pathsep + path if path else "")}
        with open(folder / LOG, "w") as log:
            subprocess.Popen([sys.executable, "-m", "lite.kernels.compiled.aot.build", "--out", str(folder),
                              "--lock-fd", str(fd)], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                             env=env, pass_fds=(fd, shared), start_new_session=True)
    finally:
        os.close(fd)                 # the build's copies keep the locks
        os.close(shared)
    return f"it is being built in the background into {folder} (log: {LOG}), for the processes after this one"


def lower_priority() -> None:
    """Lower this process (the build) to nice `MSLITE_AOT_BUILD_NICE` (19, the lowest priority, unless set), its
    scheduling group's too where the kernel groups sessions (Linux's autogroup, `/proc/self/autogroup`): nice alone
    weighs only inside the group. (At 19 the build waits for idle CPU: a test on a busy machine sets 0.)"""
    try:
        nice = min(19, max(0, int(os.environ.get(NICE_ENV) or 19)))
    except ValueError:
        nice = 19
    os.nice(nice)
    try:
        with open("/proc/self/autogroup", "w") as group:
            group.write(str(nice))
    except OSError:                  # no autogroup on this kernel or system
        pass


def wait(folder: Path) -> None:
    """Return once no build runs in `folder` (blocks on its lock)."""
    import fcntl
    if not (folder / LOCK).exists():
        return
    fd = os.open(folder / LOCK, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    finally:
        os.close(fd)


def prune(folder: Path) -> None:
    """Remove the cache's libraries of other kernel sources but the `KEEP` newest (none being built)."""
    others = sorted((d for d in folder.parent.iterdir() if d.is_dir() and d != folder),
                    key=lambda d: d.stat().st_mtime, reverse=True)
    for old in others[KEEP:]:
        fd = _locked(old / LOCK) if (old / LOCK).exists() else None
        if (old / LOCK).exists() and fd is None:
            continue
        shutil.rmtree(old, ignore_errors=True)
        if fd is not None:
            os.close(fd)
