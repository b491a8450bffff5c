"""A real federation on one machine: Flower's SuperLink and N SuperNodes as separate processes on 127.0.0.1.

    python -m lite.federated.launch --model lenet_train.ms --shards shard-0.npz shard-1.npz shard-2.npz \
        --rounds 3 --out fl-run [--test-data test.npz] [--run-config 'lr=0.001 strategy="fedadam"'] \
        [--node-config 'threads=2 kernels="numpy"']

Every process listens on 127.0.0.1 only, on free ports; each SuperNode is given its own shard through its
node config. The run is submitted with `flwr run` (the app in `lite/federated/mslite-fl`), its progress lines
(`[round r/R] ...`) are echoed, and the launcher returns when the ServerApp has written its final
`history.json`. It is bounded: `--timeout` seconds for the whole run, after which (or on Ctrl-C, SIGTERM, SIGHUP
or any failure) every process it started — with the ClientApp/ServerApp processes they spawned — is stopped;
killed outright (SIGKILL), it takes them with it (Linux: `die_with_parent`).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Callable, Sequence

try:
    import tomllib
except ImportError:                 # Python 3.10: the same parser, as Flower's own dependency
    import tomli as tomllib

from lite.federated import APP_DIR
from lite.federated.progress import progress_part, rounds_done
from lite.status import LiteError, ParamInvalidError

HOST = "127.0.0.1"
CONNECTION = "mslite-local"
REPO_ROOT = Path(__file__).resolve().parents[2]
PR_SET_PDEATHSIG = 1                # <linux/prctl.h>
STOP_GRACE = 2.0                    # seconds between SIGTERM and SIGKILL when a federation stops
ECHO_GRACE = 10.0                   # seconds for `flwr run` to stream its last lines once the run finished


class FederationError(LiteError):
    """The federation did not finish: a process failed to start, the run failed or it ran out of time."""


def free_ports(n: int) -> list[int]:
    """`n` distinct free ports on HOST (all held open while they are picked)."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind((HOST, 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _script(name: str) -> str:
    """A Flower console script next to this interpreter (the same environment), else on PATH."""
    local = Path(sys.executable).parent / name
    return str(local) if local.exists() else name


def toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value))


def node_config_arg(config: dict[str, object]) -> str:
    """`--node-config` text: space-separated key=value with TOML values."""
    return " ".join(f"{k}={toml_value(v)}" for k, v in config.items())


@dataclass
class Federation:
    """The processes of one local federation; `stop()` ends them all: each started process leads its own
    process group (TERM, then KILL after a grace period), and every process they spawned outside those
    groups (the SuperLink starts its SuperExec detached) is killed too. Started processes also die with the
    launcher when it is killed outright (`die_with_parent`)."""

    workdir: Path
    env: dict[str, str]
    processes: list[subprocess.Popen] = field(default_factory=list)
    logs: list[IO[bytes]] = field(default_factory=list)

    def start(self, name: str, argv: list[str], **popen: object) -> subprocess.Popen:
        """`argv` in a new session with the federation's environment; output to `<workdir>/<name>.log` unless
        `popen` says otherwise."""
        if "stdout" not in popen:
            log = open(self.workdir / f"{name}.log", "wb")
            self.logs.append(log)
            popen.update(stdout=log, stderr=subprocess.STDOUT)
        process = subprocess.Popen(argv, env=self.env, stdin=subprocess.DEVNULL, start_new_session=True,
                                   preexec_fn=die_with_parent(), **popen)
        self.processes.append(process)
        return process

    def stop(self, grace: float = STOP_GRACE) -> None:
        spawned = [d for process in self.processes for d in descendants(process.pid)]
        for process in self.processes:
            _signal_group(process, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for process in self.processes:
            try:
                process.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(process, signal.SIGKILL)     # also the ClientApp/ServerApp children left behind
            process.wait()
        for pid, started in spawned:
            if _start_time(pid) == started:             # still that process, not a reused pid
                _kill(pid)
        for log in self.logs:
            log.close()
        self.processes, self.logs = [], []


def die_with_parent() -> Callable[[], None] | None:
    """A `preexec_fn` giving the child SIGKILL when the thread that started it dies (Linux
    `prctl(PR_SET_PDEATHSIG)`), so a launcher killed outright leaves no SuperLink or SuperNode behind to go on
    spawning ClientApps; Flower's own processes end with their parent (they watch its pid). `run_federation`
    waits in the thread that starts the processes. None where prctl does not exist."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl      # looked up here: the forked child only calls it
    parent = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:                        # the launcher died before prctl took effect
            os._exit(1)

    return preexec


def _proc_stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (field 4, the ppid, is index 1), or None."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _start_time(pid: int) -> str | None:
    stat = _proc_stat(pid)
    return stat[19] if stat else None


def descendants(pid: int) -> list[tuple[int, str]]:
    """(pid, start time) of every living descendant of `pid`, from /proc (empty where there is no /proc)."""
    children: dict[int, list[int]] = {}
    start: dict[int, str] = {}
    for entry in Path("/proc").glob("[0-9]*") if Path("/proc/self/stat").exists() else []:
        stat = _proc_stat(int(entry.name))
        if stat:
            children.setdefault(int(stat[1]), []).append(int(entry.name))
            start[int(entry.name)] = stat[19]
    found, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop()
        found.append((child, start[child]))
        todo.extend(children.get(child, []))
    return found


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _interruptible():
    """SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt while a federation runs (also where the shell started
    us with SIGINT ignored), so the processes are always stopped; returns the function that puts the old
    handlers back."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    saved = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    return lambda: [signal.signal(sig, handler) for sig, handler in saved.items()]


def _wait_for_port(port: int, process: subprocess.Popen, deadline: float) -> None:
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise FederationError(f"the SuperLink exited with status {process.returncode} before listening")
        with socket.socket() as s:
            if s.connect_ex((HOST, port)) == 0:
                return
        time.sleep(0.2)
    raise FederationError(f"the SuperLink did not listen on {HOST}:{port} in time")


def flower_env(workdir: Path) -> dict[str, str]:
    """The environment of every process: a private FLWR_HOME, no telemetry or update checks, no runtime
    dependency installs, and this checkout of `lite` importable.

    A SuperNode starts a new ClientApp process for every message, so per-process start-up is paid N times a
    round: compiled bytecode is cached under `<workdir>/pycache` (outside the source tree) even where
    PYTHONDONTWRITEBYTECODE is set, so `lite` is compiled once per federation rather than once per message
    (about 1 s of CPU each). Flower's SuperExecs keep polling for tasks every second: a shorter interval
    (FLWR_SUPEREXEC_TASK_POLL_INTERVAL) cost the SuperLink more CPU than it saved in latency."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.setdefault("PYTHONPYCACHEPREFIX", str(workdir / "pycache"))
    env.update(FLWR_HOME=str(workdir / "flwr-home"), FLWR_TELEMETRY_ENABLED="0", FLWR_DISABLE_UPDATE_CHECK="1",
               FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION="1", PYTHONUNBUFFERED="1",
               PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
               PYTHONPATH=os.pathsep.join(p for p in [str(REPO_ROOT), env.get("PYTHONPATH", "")] if p))
    return env


def _write_connection(home: Path, port: int) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(f'[superlink]\ndefault = "{CONNECTION}"\n\n[superlink.{CONNECTION}]\n'
                                      f'address = "{HOST}:{port}"\ninsecure = true\n')


def run_federation(nodes: Sequence[dict[str, object]], run_config: dict[str, object], workdir: str | os.PathLike,
                   timeout: float = 600.0, echo: IO[str] | None = sys.stdout) -> dict:
    """Start a SuperLink and one SuperNode per entry of `nodes` (its node config), submit the app with
    `run_config` (needs `model` and `out-dir`), and return the ServerApp's final history. Progress lines go to
    `echo`; each process's log to `<workdir>/<name>.log`. Raises FederationError on failure or after
    `timeout` seconds; every process started is stopped before returning."""
    if not nodes:
        raise ParamInvalidError("a federation needs at least one node")
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    out = Path(str(run_config["out-dir"]))
    (out / "history.json").unlink(missing_ok=True)
    env = flower_env(workdir)
    link_port, *node_ports = free_ports(1 + len(nodes))
    _write_connection(Path(env["FLWR_HOME"]), link_port)
    config_file = workdir / "run-config.toml"
    config_file.write_text("".join(f"{k} = {toml_value(v)}\n" for k, v in run_config.items()))
    federation = Federation(workdir, env)
    deadline = time.monotonic() + timeout
    restore = _interruptible()
    try:
        link = federation.start("superlink", [_script("flower-superlink"), "--insecure", "--host", HOST, "--port",
                                              str(link_port), "--disable-runtime-dependency-installation"])
        for k, (config, port) in enumerate(zip(nodes, node_ports)):   # SuperNodes retry until the link listens
            federation.start(f"supernode-{k}", [_script("flower-supernode"), "--insecure", "--superlink",
                                                f"{HOST}:{link_port}", "--host", HOST, "--port", str(port),
                                                "--node-config", node_config_arg(config)])
        _wait_for_port(link_port, link, min(deadline, time.monotonic() + 60))
        submit = federation.start("run", [_script("flwr"), "run", str(APP_DIR), CONNECTION, "--run-config",
                                          str(config_file), "--stream"], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        return _follow(submit, out / "history.json", workdir / "run.log", deadline, echo)
    finally:
        federation.stop()
        restore()


def _follow(submit: subprocess.Popen, history: Path, log_path: Path, deadline: float, echo: IO[str] | None) -> dict:
    """Echo the run's progress lines (from a reader thread) until the history says it finished; bounded by
    `deadline`."""
    def pump() -> None:
        with open(log_path, "w") as log:
            for line in submit.stdout:
                log.write(line)
                log.flush()
                shown = progress_part(line)
                if echo is not None and shown is not None:
                    echo.write(shown)
                    echo.flush()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    while time.monotonic() < deadline:
        finished = _finished(history)
        if finished is not None:        # the last round's line may still be in the pipe: let `flwr run` end
            reader.join(max(0.0, min(ECHO_GRACE, deadline - time.monotonic())))
            return finished
        if submit.poll() not in (None, 0):
            raise FederationError(f"`flwr run` failed with status {submit.returncode}; see {log_path}")
        time.sleep(0.5)
    raise FederationError(f"the federation did not finish in time; logs in {log_path.parent}")


def _finished(history: Path) -> dict | None:
    try:
        data = json.loads(history.read_text())
    except (OSError, ValueError):
        return None
    return data if data.get("finished") else None


def parse_config(text: str) -> dict[str, object]:
    """'key=value key2=value2' with TOML values (as `flwr run --run-config` and `--node-config` take them)."""
    return tomllib.loads("\n".join(shlex.split(text, posix=False))) if text.strip() else {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="the training .ms (server and every client)")
    parser.add_argument("--shards", type=Path, nargs="+", required=True, help="one .npz shard per client node")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True, help="folder for history.json, global.ms and logs")
    parser.add_argument("--test-data", type=Path, help="a .npz test set for the server's evaluation")
    parser.add_argument("--run-config", default="", help="more run config, e.g. 'lr=0.001 strategy=\"fedadam\"'")
    parser.add_argument("--node-config", default="", help="more node config for every node, e.g. 'threads=2'")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds for the whole run")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    run_config = {"model": str(args.model.resolve()), "out-dir": str(out), "num-rounds": args.rounds,
                  "min-nodes": len(args.shards), **parse_config(args.run_config)}
    if args.test_data:
        run_config["test-data"] = str(args.test_data.resolve())
    extra = parse_config(args.node_config)
    nodes = [{"model": str(args.model.resolve()), "shard": str(s.resolve()), **extra} for s in args.shards]
    try:
        history = run_federation(nodes, run_config, out / "processes", args.timeout)
    except (FederationError, KeyboardInterrupt) as e:
        print(f"federation stopped: {e or 'interrupted'}", file=sys.stderr)
        return 1
    last = history["rounds"][-1]
    print(f"done: {rounds_done(history['rounds'])} rounds, global model {out / 'global.ms'}"
          + (f", test accuracy {last['test_accuracy']:.2%}" if "test_accuracy" in last else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
