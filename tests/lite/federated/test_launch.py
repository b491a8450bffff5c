"""Real federations on 127.0.0.1: Flower's SuperLink and SuperNodes as separate processes (lite.federated.launch).

The oracle is each client's own record of what it sent (`record-dir`: its weights and `num-examples`); the test
averages those itself and compares the mean with the global model the server exported as an inference `.ms`.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the federated extra (flwr) is not installed")

import tests.federated_util as fed  # noqa: E402
from lite.federated.launch import run_federation  # noqa: E402
from lite.federated.local import open_session  # noqa: E402
from tests.util import REPO  # noqa: E402


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return fed.lenet_train_model(tmp_path_factory.mktemp("fl-model") / "lenet_train.ms")


def _federate(model, folder, nodes, **extra):
    out = folder / "server"
    history = run_federation(nodes, fed.run_config(model, out, nodes, **extra), folder / "processes", timeout=300,
                             echo=None)
    return history, out


@pytest.fixture(scope="module")
def three_clients(model, tmp_path_factory):
    folder = tmp_path_factory.mktemp("fl-three")
    nodes = [fed.node(model, fed.shard(folder, k, n), folder / f"node-{k}")
             for k, n in enumerate([32, 48, 80])]                     # unequal shards: the weights matter
    history, out = _federate(model, folder, nodes, **{"num-rounds": 2})
    return folder, out, history


@pytest.mark.slow
@pytest.mark.parametrize("server_round", [1, 2])
def test_global_model_is_the_example_weighted_mean(three_clients, server_round):
    folder, out, history = three_clients
    sent = [fed.sent(folder / f"node-{k}", server_round) for k in range(3)]
    assert sorted(n for _, n in sent) == [32, 48, 80]
    expected = fed.weighted_mean(sent)
    exported = fed.exported(out / f"global-round-{server_round}.ms")
    for name, value in expected.items():
        np.testing.assert_allclose(exported[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
    assert not np.allclose(expected[name], sum(w[name] for w, _ in sent) / 3)   # not the unweighted mean


@pytest.mark.slow
def test_rounds_start_from_the_previous_global_model(three_clients, model):
    folder, out, history = three_clients
    assert history["finished"] and [r["round"] for r in history["rounds"]] == [0, 1, 2]
    initial = {t.tensor_name(): t.numpy() for t in open_session(model).GetFeatureMaps()}
    first, _ = fed.sent(folder / "node-0", 1)
    assert any(not np.allclose(first[k], initial[k]) for k in initial)        # the client trained
    assert json.loads((out / "history.json").read_text())["rounds"][-1]["clients_train_loss"] > 0


@pytest.fixture(scope="module")
def faulty_clients(model, tmp_path_factory):
    """Two sound clients, one sending NaN weights, one dying mid-round, one slower than the round timeout."""
    folder = tmp_path_factory.mktemp("fl-faults")
    faults = ["", "", "nan", "exit", "slow=90"]
    nodes = [fed.node(model, fed.shard(folder, k, 32 + 16 * k), folder / f"node-{k}",
                      **({"fault": f} if f else {})) for k, f in enumerate(faults)]
    history, out = _federate(model, folder, nodes, **{"num-rounds": 1, "round-timeout": 30.0})
    return folder, out, history


@pytest.mark.slow
def test_nan_update_is_rejected_by_name(faulty_clients):
    folder, out, history = faulty_clients
    nan_sent, _ = fed.sent(folder / "node-2", 1)
    assert any(np.isnan(a).any() for a in nan_sent.values())
    rejected = history["rounds"][1]["rejected"]
    assert len(rejected) == 1 and "holds NaN or Inf" in rejected[0]


@pytest.mark.slow
def test_dead_and_slow_clients_are_left_out(faulty_clients):
    folder, out, history = faulty_clients
    assert not (folder / "node-3" / "round-1.npz").exists()          # died before sending anything
    assert (folder / "node-4" / "round-1.npz").exists()              # trained, but answered too late
    expected = fed.weighted_mean([fed.sent(folder / f"node-{k}", 1) for k in (0, 1)])
    exported = fed.exported(out / "global.ms")
    for name, value in expected.items():
        assert np.isfinite(exported[name]).all()
        np.testing.assert_allclose(exported[name], value, rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.slow
def test_secure_aggregation_yields_the_weighted_mean(model, tmp_path):
    """Under SecAgg+ the server sees only the masked sum; the result is still the example-weighted mean (up to
    SecAgg+'s quantization of the updates)."""
    nodes = [fed.node(model, fed.shard(tmp_path, k, n), tmp_path / f"node-{k}")
             for k, n in enumerate([32, 48, 80])]
    history, out = _federate(model, tmp_path, nodes, **{"num-rounds": 1, "secagg": True,
                                                                   "secagg-max-weight": 80.0})
    assert history["finished"]
    expected = fed.weighted_mean([fed.sent(tmp_path / f"node-{k}", 1) for k in range(3)])
    exported = fed.exported(out / "global.ms")
    for name, value in expected.items():
        np.testing.assert_allclose(exported[name], value, rtol=0, atol=1e-4, err_msg=name)


def _processes() -> dict[int, tuple[int, int, str]]:
    """pid -> (parent pid, session id, command line) of every process, read from /proc."""
    table = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):
            continue
        table[int(entry.name)] = (int(stat[1]), int(stat[3]), command)
    return table


def _family(root: int, table: dict[int, tuple[int, int, str]]) -> set[int]:
    family, todo = set(), [root]
    while todo:
        parent = todo.pop()
        children = [pid for pid, (ppid, _, _) in table.items() if ppid == parent]
        family.update(children)
        todo.extend(children)
    return family


def _left(started: dict[int, str], sessions: set[int], within: float, which: str = "") -> dict[int, str]:
    """The processes of `started` (same pid and command) or of `sessions` whose command contains `which` that
    are still running after `within` seconds (polled; returns as soon as none is)."""
    deadline = time.monotonic() + within
    while True:
        now = _processes()
        left = {pid: cmd for pid, (_, sid, cmd) in now.items() if which in cmd
                and ((pid in started and cmd == started[pid]) or sid in sessions)}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="dying with the parent is Linux prctl; /proc")
def test_killed_launcher_takes_its_processes_with_it(model, tmp_path):
    """SIGKILL to `python -m lite.federated.launch` in the middle of a round (its handlers cannot run): the
    SuperLink and SuperNodes it started die with it at once (so no SuperNode goes on spawning ClientApps), and
    the processes Flower started under them follow (each watches its parent's pid and then exits, forced after
    5 s): nothing of theirs is left, in their sessions either."""
    launcher = subprocess.Popen(
        [sys.executable, "-m", "lite.federated.launch", "--model", str(model), "--shards",
         str(fed.shard(tmp_path, 0, 32)), "--rounds", "3", "--out", str(tmp_path / "out"), "--run-config",
         'kernels="numpy"', "--node-config", 'kernels="numpy" fault="slow=120"'],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:                          # until a ClientApp is training
            table = _processes()
            family = {pid: table[pid] for pid in _family(launcher.pid, table) if pid in table}
            if any("flwr-clientapp" in command for _, _, command in family.values()):
                break
            assert launcher.poll() is None, "the launcher exited before any ClientApp started"
            time.sleep(0.2)
        else:
            pytest.fail("no ClientApp started within 120 s")
    finally:
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
    started = {pid: command for pid, (_, _, command) in family.items()}
    sessions = {sid for _, sid, _ in family.values()}
    for node in ("flower-superlink", "flower-supernode"):
        assert not _left(started, sessions, 5, node), f"a {node} outlived the launcher"
    left = _left(started, sessions, 30)
    assert not left, f"left running after the launcher died: {sorted(left.values())}"
