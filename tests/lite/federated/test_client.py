"""lite.federated without processes: weights <-> Flower records, the update guard, shards, and the runtime core
staying free of Flower."""
from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the federated extra (flwr) is not installed")

from flwr.app import ArrayRecord, ConfigRecord, Error, Message, MessageType, MetricRecord, RecordDict  # noqa: E402
from flwr.supercore.task_identity import TaskIdentity  # noqa: E402

import models  # noqa: E402
from converter import convert_for_training  # noqa: E402
from converter.train import TrainParams  # noqa: E402
from lite.federated.arrays import load_weights, record_views, to_array, view, weights_record  # noqa: E402
from lite.federated.local import CrossEntropyMetrics, open_session  # noqa: E402
from lite.federated.privacy import local_dp_settings  # noqa: E402
from lite.federated.shards import load_shard, non_iid_split, save_shard  # noqa: E402
from lite.federated.strategies import FedAdam, FedAvg, make_strategy  # noqa: E402
from lite.dtypes import from_numpy  # noqa: E402
from lite.status import InputTensorError, ParamInvalidError  # noqa: E402
from lite.tensor import MSTensor  # noqa: E402
from lite.train.dataset import DatasetError  # noqa: E402


@pytest.fixture(scope="module")
def lenet_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("fl") / "lenet_train.ms"
    path.write_bytes(convert_for_training(models.build("lenet5", num_classes=10, input_size=28, batch=8),
                                          TrainParams(optimizer="adam", learning_rate=1e-3)))
    return path


@pytest.fixture
def task_identity():
    """Messages built outside a Flower process need a run/node identity."""
    saved = TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
    yield
    TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = saved


def test_runtime_core_imports_without_flower():
    code = ("import sys, lite, lite.train, lite.tools.benchmark; "
            "assert not [m for m in sys.modules if m.split('.')[0] == 'flwr'], 'flwr imported'; "
            "assert 'lite.federated' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_weights_round_trip_through_a_record(lenet_model):
    trained, fresh = open_session(lenet_model), open_session(lenet_model)
    for t in trained.GetFeatureMaps():
        t.MutableData()[...] = np.random.default_rng(len(t.tensor_name())).normal(size=t.shape())
    record = weights_record(trained)
    assert list(record.keys()) == [t.tensor_name() for t in trained.GetFeatureMaps()]
    load_weights(fresh, record)
    for a, b in zip(trained.GetFeatureMaps(), fresh.GetFeatureMaps()):
        np.testing.assert_array_equal(a.MutableData(), b.MutableData())
        assert a.shape() == b.shape()


def test_incoming_arrays_are_views_over_the_message_bytes():
    array = to_array(np.arange(12, dtype=np.float32).reshape(3, 4).T)     # a transposed (non-contiguous) source
    seen = view(array)
    np.testing.assert_array_equal(seen, np.arange(12, dtype=np.float32).reshape(3, 4).T)
    np.testing.assert_array_equal(seen, array.numpy())                    # Flower's own reader agrees
    assert not seen.flags.writeable and not seen.flags.owndata


def test_records_that_do_not_fit_the_session_are_refused(lenet_model):
    session = open_session(lenet_model)
    record = weights_record(session)
    first = next(iter(record.keys()))
    wrong_shape = ArrayRecord({**record, first: to_array(np.zeros(3, np.float32))})
    with pytest.raises(InputTensorError, match=f"weight '{first}' has shape"):
        load_weights(session, wrong_shape)
    missing = ArrayRecord({k: v for k, v in record.items() if k != first})
    with pytest.raises(InputTensorError, match="missing"):
        load_weights(session, missing)
    with pytest.raises(InputTensorError, match="not a .npy"):
        view(type(record[first])(dtype="float32", shape=(1,), stype="numpy.ndarray", data=b"junk"))


def _reply(node: int, arrays: dict[str, np.ndarray], examples: object) -> Message:
    request = Message(RecordDict({"config": ConfigRecord({})}), dst_node_id=node, message_type=MessageType.TRAIN)
    metrics = MetricRecord({"train-loss": 0.5} if examples is None else {"num-examples": examples,
                                                                          "train-loss": 0.5})
    return Message(RecordDict({"arrays": ArrayRecord({k: to_array(v) for k, v in arrays.items()}),
                               "metrics": metrics}), reply_to=request)


class _Grid:
    def get_node_ids(self):
        return [1, 2, 3, 4, 5, 6, 7]


def _weights(scale: float) -> dict[str, np.ndarray]:
    return {"w": np.full((2, 3), scale, np.float32), "b": np.arange(3, dtype=np.float32) * scale}


@pytest.mark.parametrize("strategy", ["fedavg", "fedadam"])
def test_guard_averages_only_sound_updates(task_identity, strategy):
    guarded = make_strategy(strategy, min_available_nodes=1, min_train_nodes=1)
    list(guarded.configure_train(1, ArrayRecord({k: to_array(v) for k, v in _weights(0).items()}), ConfigRecord(),
                                 _Grid()))
    nan = _weights(1)
    nan["w"][0, 0] = np.nan
    inf = _weights(1)
    inf["b"][1] = -np.inf
    error = Message(Error(code=1, reason="client crashed"),
                    reply_to=Message(RecordDict(), dst_node_id=7, message_type=MessageType.TRAIN))
    replies = [_reply(1, _weights(1), 10), _reply(2, nan, 10), _reply(3, _weights(4), 30), _reply(4, inf, 5),
               _reply(5, {"w": _weights(1)["w"]}, 10), _reply(6, _weights(9), None), error,
               _reply(8, {"w": np.ones((3, 2), np.float32), "b": np.ones(3, np.float32)}, 10)]
    arrays, _ = guarded.aggregate_train(1, replies)
    assert sorted(n for n, _ in guarded.rejected[1]) == [2, 4, 5, 6, 8]
    mean = {k: (10 * _weights(1)[k] + 30 * _weights(4)[k]) / 40 for k in ("w", "b")}
    got = record_views(arrays)
    assert all(a.dtype == np.float32 for a in got.values())
    if strategy == "fedavg":
        for k in mean:
            np.testing.assert_allclose(got[k], mean[k], rtol=1e-6)
    else:                       # FedAdam's first step moves along the mean update, finitely
        assert all(np.isfinite(a).all() for a in got.values())
        assert all((np.sign(got[k]) == np.sign(mean[k])).all() for k in mean)


def test_a_round_with_nothing_sound_keeps_the_global_model(task_identity):
    guarded = FedAvg(min_available_nodes=1, min_train_nodes=1)
    list(guarded.configure_train(1, ArrayRecord({k: to_array(v) for k, v in _weights(0).items()}), ConfigRecord(),
                                 _Grid()))
    nan = _weights(1)
    nan["b"][:] = np.nan
    assert guarded.aggregate_train(1, [_reply(1, nan, 10)])[0] is None
    assert FedAdam.__mro__[1].__name__ == "GuardedUpdates"


def test_unknown_strategy_is_named():
    with pytest.raises(ParamInvalidError, match="unknown strategy 'fedsgd'"):
        make_strategy("fedsgd")


def test_non_iid_split_is_mostly_two_classes_and_disjoint():
    labels = np.random.default_rng(0).integers(0, 10, 20_000)
    shards = non_iid_split(labels, clients=10, per_client=500, dominant_share=0.8)
    assert len(np.unique(np.concatenate(shards))) == 5000
    for k, rows in enumerate(shards):
        counts = np.bincount(labels[rows], minlength=10)
        assert counts[k] + counts[(k + 1) % 10] == 400
    with pytest.raises(ParamInvalidError, match="too few"):
        non_iid_split(labels[:100], clients=10, per_client=50)


def test_shard_files_round_trip_and_bad_ones_are_named(tmp_path):
    x, y = np.ones((4, 1, 2, 2), np.float32), np.arange(4)
    got_x, got_y = load_shard(save_shard(tmp_path / "s.npz", x, y))
    np.testing.assert_array_equal(got_x, x)
    assert got_y.dtype == np.int32 and list(got_y) == [0, 1, 2, 3]
    (tmp_path / "bad.npz").write_bytes(b"not a shard")
    with pytest.raises(DatasetError, match="bad.npz"):
        load_shard(tmp_path / "bad.npz")


def test_cross_entropy_metric_matches_torch():
    torch = pytest.importorskip("torch", reason="PyTorch is the metric's oracle (the dev extra)")
    logits = np.random.default_rng(1).normal(size=(6, 10)).astype(np.float32)
    labels = np.array([0, 3, 9, 2, 2, 7], np.int32)
    metric = CrossEntropyMetrics()
    metric.Clear()
    metric.Update((logits, labels), [MSTensor("logits", from_numpy(logits.dtype), logits)])
    expected = torch.nn.functional.cross_entropy(torch.from_numpy(logits), torch.from_numpy(labels).long())
    assert metric.Eval() == pytest.approx(float(expected), rel=1e-6)


def test_local_dp_settings():
    assert local_dp_settings({}) is None
    assert local_dp_settings({"dp-clip": 0.5, "dp-epsilon": 2.0}) == (0.5, 1.0, 2.0, 1e-5)
    with pytest.raises(ParamInvalidError, match="dp-epsilon"):
        local_dp_settings({"dp-clip": 0.5, "dp-epsilon": 0.0})


def test_example_curve_is_written_as_csv_and_png(tmp_path):
    matplotlib_image = pytest.importorskip("matplotlib.image", reason="matplotlib reads the curve PNG (dev extra)")
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
    from federated_mnist import save_curve
    rows = [{"round": 1, "federated_accuracy": 0.8, "centralised_accuracy": 0.95, "seconds": 70.0},
            {"round": 2, "federated_accuracy": 0.93, "centralised_accuracy": 0.97, "seconds": 150.0}]
    written = save_curve(rows, tmp_path)
    assert written == [tmp_path / "federated_mnist.csv", tmp_path / "federated_mnist.png"]
    with open(written[0], newline="") as f:
        assert [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)] == rows
    image = matplotlib_image.imread(written[1])
    assert image.ndim == 3 and image.shape[0] > 100 and image[..., :3].std() > 0.05
    assert sorted(p.name for p in tmp_path.iterdir()) == ["federated_mnist.csv", "federated_mnist.png"]


# ---- progress lines --------------------------------------------------------------------------------------------
def test_rounds_count_from_one_after_the_initial_model():
    from lite.federated.progress import progress_part, rounds_done, tag
    assert [tag(r, 3) for r in range(4)] == ["[initial model]", "[round 1/3]", "[round 2/3]", "[round 3/3]"]
    assert progress_part("INFO :      [round 2/3], 4.1 s, 0 update(s) rejected\n") == (
        "[round 2/3], 4.1 s, 0 update(s) rejected\n")
    assert progress_part("INFO :      [initial model], 0.2 s\n") == "[initial model], 0.2 s\n"
    assert progress_part("INFO :      Starting logstream\n") is None
    assert rounds_done([{"round": r} for r in range(4)]) == 3


def test_the_launcher_echoes_the_last_round_logged_after_the_run_finished(tmp_path, monkeypatch):
    """The server writes `finished` before its last line reaches `flwr run`'s stream: that line is still shown."""
    import io
    import json
    import threading
    import time

    from lite.federated import launch
    history = tmp_path / "history.json"
    history.write_text(json.dumps({"rounds": [], "finished": True}))
    seen_finished = threading.Event()
    finished = launch._finished

    def observed(path):
        result = finished(path)
        if result is not None:
            seen_finished.set()
        return result

    monkeypatch.setattr(launch, "_finished", observed)

    def stream():
        yield "INFO :      [round 1/2], 1.0 s, 0 update(s) rejected\n"
        seen_finished.wait(30)
        yield "INFO :      [round 2/2], 2.0 s, 0 update(s) rejected\n"

    class Submit:
        stdout, returncode = stream(), 0

        def poll(self):
            return None

    echo = io.StringIO()
    launch._follow(Submit(), history, tmp_path / "run.log", time.monotonic() + 60, echo)
    assert echo.getvalue().splitlines() == ["[round 1/2], 1.0 s, 0 update(s) rejected",
                                            "[round 2/2], 2.0 s, 0 update(s) rejected"]
