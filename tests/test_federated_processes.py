"""Real federations on 127.0.0.1: Flower's SuperLink and SuperNodes as separate processes (lite.federated.launch).

The oracle is each client's own record of what it sent (`record-dir`: its weights and `num-examples`); the test
averages those itself and compares the mean with the global model the server exported as an inference `.ms`.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the federated extra (flwr) is not installed")

import lite  # noqa: E402
import models  # noqa: E402
from converter import convert_for_training  # noqa: E402
from converter.train import TrainParams  # noqa: E402
from lite.federated.launch import run_federation  # noqa: E402
from lite.federated.local import open_session  # noqa: E402
from lite.federated.shards import save_shard  # noqa: E402

BATCH = 16
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("fl-model") / "lenet_train.ms"
    path.write_bytes(convert_for_training(models.build("lenet5", num_classes=10, input_size=28, batch=BATCH),
                                          TrainParams(optimizer="adam", learning_rate=1e-3)))
    return path


def _shard(folder, k: int, n: int):
    rng = np.random.default_rng(k)
    return save_shard(folder / f"shard-{k}.npz", rng.normal(size=(n, 1, 28, 28)).astype(np.float32),
                      rng.integers(0, 10, n))


def _node(model, shard, record_dir, **extra) -> dict[str, str]:
    """A node config; numpy kernels, as numba's load would cost each per-message ClientApp process ~3 s of CPU."""
    return {"model": str(model), "shard": str(shard), "record-dir": str(record_dir), "kernels": "numpy", **extra}


def _federate(model, folder, nodes, **run_config):
    out = folder / "server"
    config = {"model": str(model), "out-dir": str(out), "batch-size": BATCH, "min-nodes": len(nodes),
              "export-every-round": True, "kernels": "numpy", **run_config}
    history = run_federation(nodes, config, folder / "processes", timeout=300, echo=None)
    return history, out


def _sent(record_dir, server_round: int) -> tuple[dict[str, np.ndarray], int]:
    with np.load(record_dir / f"round-{server_round}.npz") as f:
        return {k: f[k] for k in f.files if k != "__examples__"}, int(f["__examples__"])


def _exported(path) -> dict[str, np.ndarray]:
    """The weights of an exported inference .ms, by name in the source layout (read with lite.Model)."""
    return {t.name: t.data.transpose(t.source_perm) if t.source_perm else t.data
            for t in lite.Model.Load(path).tensors if t.data is not None}


def _mean(sent: list[tuple[dict[str, np.ndarray], int]]) -> dict[str, np.ndarray]:
    total = sum(n for _, n in sent)
    return {k: sum(w[k].astype(np.float64) * n for w, n in sent) / total for k in sent[0][0]}


@pytest.fixture(scope="module")
def three_clients(model, tmp_path_factory):
    folder = tmp_path_factory.mktemp("fl-three")
    nodes = [_node(model, _shard(folder, k, n), folder / f"node-{k}")
             for k, n in enumerate([32, 48, 80])]                     # unequal shards: the weights matter
    history, out = _federate(model, folder, nodes, **{"num-rounds": 2})
    return folder, out, history


@pytest.mark.slow
@pytest.mark.parametrize("server_round", [1, 2])
def test_global_model_is_the_example_weighted_mean(three_clients, server_round):
    folder, out, history = three_clients
    sent = [_sent(folder / f"node-{k}", server_round) for k in range(3)]
    assert sorted(n for _, n in sent) == [32, 48, 80]
    expected = _mean(sent)
    exported = _exported(out / f"global-round-{server_round}.ms")
    for name, value in expected.items():
        np.testing.assert_allclose(exported[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
    assert not np.allclose(expected[name], sum(w[name] for w, _ in sent) / 3)   # not the unweighted mean


@pytest.mark.slow
def test_rounds_start_from_the_previous_global_model(three_clients, model):
    folder, out, history = three_clients
    assert history["finished"] and [r["round"] for r in history["rounds"]] == [0, 1, 2]
    initial = {t.tensor_name(): t.numpy() for t in open_session(model).GetFeatureMaps()}
    first, _ = _sent(folder / "node-0", 1)
    assert any(not np.allclose(first[k], initial[k]) for k in initial)        # the client trained
    assert json.loads((out / "history.json").read_text())["rounds"][-1]["clients_train_loss"] > 0


@pytest.fixture(scope="module")
def faulty_clients(model, tmp_path_factory):
    """Two sound clients, one sending NaN weights, one dying mid-round, one slower than the round timeout."""
    folder = tmp_path_factory.mktemp("fl-faults")
    faults = ["", "", "nan", "exit", "slow=90"]
    nodes = [_node(model, _shard(folder, k, 32 + 16 * k), folder / f"node-{k}", **({"fault": f} if f else {}))
             for k, f in enumerate(faults)]
    history, out = _federate(model, folder, nodes, **{"num-rounds": 1, "round-timeout": 30.0})
    return folder, out, history


@pytest.mark.slow
def test_nan_update_is_rejected_by_name(faulty_clients):
    folder, out, history = faulty_clients
    nan_sent, _ = _sent(folder / "node-2", 1)
    assert any(np.isnan(a).any() for a in nan_sent.values())
    rejected = history["rounds"][1]["rejected"]
    assert len(rejected) == 1 and "holds NaN or Inf" in rejected[0]


@pytest.mark.slow
def test_dead_and_slow_clients_are_left_out(faulty_clients):
    folder, out, history = faulty_clients
    assert not (folder / "node-3" / "round-1.npz").exists()          # died before sending anything
    assert (folder / "node-4" / "round-1.npz").exists()              # trained, but answered too late
    expected = _mean([_sent(folder / f"node-{k}", 1) for k in (0, 1)])
    exported = _exported(out / "global.ms")
    for name, value in expected.items():
        assert np.isfinite(exported[name]).all()
        np.testing.assert_allclose(exported[name], value, rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.slow
def test_secure_aggregation_yields_the_weighted_mean(model, tmp_path):
    """Under SecAgg+ the server sees only the masked sum; the result is still the example-weighted mean (up to
    SecAgg+'s quantization of the updates)."""
    nodes = [_node(model, _shard(tmp_path, k, n), tmp_path / f"node-{k}") for k, n in enumerate([32, 48, 80])]
    history, out = _federate(model, tmp_path, nodes, **{"num-rounds": 1, "secagg": True,
                                                                   "secagg-max-weight": 80.0})
    assert history["finished"]
    expected = _mean([_sent(tmp_path / f"node-{k}", 1) for k in range(3)])
    exported = _exported(out / "global.ms")
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
    shards = [str(_shard(tmp_path, k, 32)) for k in range(2)]
    launcher = subprocess.Popen(
        [sys.executable, "-m", "lite.federated.launch", "--model", str(model), "--shards", *shards, "--rounds",
         "3", "--out", str(tmp_path / "out"), "--run-config", 'kernels="numpy"', "--node-config",
         'kernels="numpy" fault="slow=120"'], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
