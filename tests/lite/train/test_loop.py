"""`lite.TrainLoop` with its callbacks and metrics, the `Dataset` helper and the MNIST IDX reader."""
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

import lite
from lite.train.dataset import DatasetError, load_mnist, read_idx
from lite.train.loop import RET_CONTINUE, RET_EXIT, RET_STOP_TRAINING, classification_hits
from tests.lite.train.test_session import C, N, open_session, tiny_model
from tests.util import MNIST


def separable(size: int = 32, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Points whose class is the arg-max of x * w + b for fixed w, b: learnable by the tiny model."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((size, C)).astype(np.float32)
    return x, (x * np.array([2.0, -1.0, 0.5]) + np.array([0.0, 0.5, -0.5])).argmax(axis=1).astype(np.int32)


def quiet_loop(session: lite.TrainSession) -> lite.TrainLoop:
    return lite.TrainLoop(session, verbose=False)


class Recorder(lite.TrainLoopCallBack):
    """Logs every hook call as (hook, epoch, step); EpochEnd returns `status`."""

    def __init__(self, status: int = RET_CONTINUE):
        self.calls: list[tuple[str, int, int]] = []
        self.status = status

    def Begin(self, d): self.calls.append(("Begin", d.epoch, d.step))
    def End(self, d): self.calls.append(("End", d.epoch, d.step))
    def EpochBegin(self, d): self.calls.append(("EpochBegin", d.epoch, d.step))
    def StepBegin(self, d): self.calls.append(("StepBegin", d.epoch, d.step))
    def StepEnd(self, d): self.calls.append(("StepEnd", d.epoch, d.step))

    def EpochEnd(self, d):
        self.calls.append(("EpochEnd", d.epoch, d.step))
        return self.status


# ---- Dataset ----------------------------------------------------------------------------------------------------
def test_dataset_batches_every_row_once_per_epoch() -> None:
    x, y = np.arange(10), np.arange(10) * 2
    data = lite.Dataset(x, y, batch_size=4, shuffle=True, seed=3)
    batches = list(data)
    assert [len(b[0]) for b in batches] == [4, 4, 2] and len(data) == 3
    rows = np.concatenate([b[0] for b in batches])
    assert sorted(rows) == list(range(10)) and not np.array_equal(rows, np.arange(10))
    assert all(np.array_equal(b[1], b[0] * 2) for b in batches)


def test_dataset_shuffles_each_epoch_reproducibly() -> None:
    def orders(seed: int) -> list[list[int]]:
        data = lite.Dataset(np.arange(8), batch_size=8, shuffle=True, seed=seed)
        return [list(next(iter(data))[0]) for _ in range(2)]

    first = orders(0)
    assert first == orders(0) and first[0] != first[1] and first != orders(1)


def test_dataset_drop_last() -> None:
    data = lite.Dataset(np.arange(10), batch_size=4, drop_last=True)
    assert [list(b[0]) for b in data] == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_dataset_arrays_must_align() -> None:
    with pytest.raises(lite.ParamInvalidError, match="same length"):
        lite.Dataset(np.arange(3), np.arange(4), batch_size=2)


# ---- IDX files --------------------------------------------------------------------------------------------------
def idx_bytes(array: np.ndarray, code: int = 0x08) -> bytes:
    header = bytes([0, 0, code, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    return header + array.tobytes()


@pytest.mark.parametrize("compress", [False, True])
def test_idx_reader_reads_plain_and_gzip(tmp_path: Path, compress: bool) -> None:
    images = np.random.default_rng(0).integers(0, 256, (5, 4, 3)).astype(np.uint8)
    raw = idx_bytes(images)
    (tmp_path / "a.idx").write_bytes(gzip.compress(raw) if compress else raw)
    np.testing.assert_array_equal(read_idx(tmp_path / "a.idx"), images)


def test_idx_reader_reads_big_endian_floats(tmp_path: Path) -> None:
    values = np.array([[1.5, -2.0]], np.float32)
    (tmp_path / "f.idx").write_bytes(idx_bytes(values.astype(">f4"), 0x0D))
    np.testing.assert_array_equal(read_idx(tmp_path / "f.idx"), values)


def test_idx_reader_rejects_a_bad_magic_number(tmp_path: Path) -> None:
    (tmp_path / "bad.idx").write_bytes(b"\x01\x02\x08\x01" + bytes(8))
    with pytest.raises(DatasetError, match="not an IDX file"):
        read_idx(tmp_path / "bad.idx")


def test_idx_reader_rejects_a_truncated_file(tmp_path: Path) -> None:
    (tmp_path / "short.idx").write_bytes(idx_bytes(np.zeros((3, 2), np.uint8))[:-1])
    with pytest.raises(DatasetError, match="holds 17 bytes.*needs 18"):
        read_idx(tmp_path / "short.idx")


def test_mnist_reader_checks_images_against_labels(tmp_path: Path) -> None:
    (tmp_path / "train-images-idx3-ubyte").write_bytes(idx_bytes(np.zeros((3, 28, 28), np.uint8)))
    (tmp_path / "train-labels-idx1-ubyte.gz").write_bytes(gzip.compress(idx_bytes(np.zeros(2, np.uint8))))
    with pytest.raises(DatasetError, match="3 images .* but 2 labels"):
        load_mnist(tmp_path)


def test_mnist_reader_names_the_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="t10k-images-idx3-ubyte"):
        load_mnist(tmp_path, "test")


@pytest.mark.shared_data
def test_mnist_reader_reads_the_real_test_set() -> None:
    if not MNIST.exists():
        pytest.skip(f"MNIST is not at {MNIST}")
    images, labels = load_mnist(MNIST, "test")
    assert images.shape == (10000, 28, 28) and labels.shape == (10000,)
    assert np.bincount(labels).tolist()[:2] == [980, 1135]      # the published class counts of t10k


# ---- TrainLoop --------------------------------------------------------------------------------------------------
def test_train_lowers_the_loss_and_records_each_epoch() -> None:
    loop = quiet_loop(open_session(tiny_model(lr=0.5)))
    x, y = separable()
    loop.Train(6, lite.Dataset(x, y, batch_size=N, shuffle=True))
    losses = [r.loss for r in loop.history]
    assert [r.epoch for r in loop.history] == list(range(1, 7))
    assert losses[-1] < 0.5 * losses[0]
    assert loop.history[-1].accuracy > loop.history[0].accuracy


def test_eval_accuracy_equals_numpy_on_the_exported_weights() -> None:
    session = open_session(tiny_model(lr=0.5))
    loop = quiet_loop(session)
    x, y = separable()
    loop.Train(3, lite.Dataset(x, y, batch_size=N))
    (accuracy,) = loop.Eval(lite.Dataset(x, y, batch_size=N), [lite.AccuracyMetrics()])
    w = {t.tensor_name(): t.numpy() for t in session.GetFeatureMaps()}
    assert session.IsEval()
    assert accuracy == np.mean((x * w["w"] + w["b"]).argmax(axis=1) == y)


def test_a_short_last_batch_resizes_the_session() -> None:
    session = open_session(tiny_model())
    x, y = separable(size=N + 1)
    quiet_loop(session).Train(1, lite.Dataset(x, y, batch_size=N))
    assert [t.shape() for t in session.GetInputs()] == [[1, C], [1]]


def test_callbacks_are_called_in_order() -> None:
    recorder = Recorder()
    x, y = separable(size=2 * N)
    quiet_loop(open_session(tiny_model())).Train(2, lite.Dataset(x, y, batch_size=N), [recorder])
    epoch = [("EpochBegin", 0, 0), ("StepBegin", 0, 0), ("StepEnd", 0, 0), ("StepBegin", 0, 1), ("StepEnd", 0, 1),
             ("EpochEnd", 0, 1)]
    second = [(hook, 1, step) for hook, _, step in epoch]
    assert recorder.calls == [("Begin", 0, 0), *epoch, *second, ("End", 1, 1)]


def test_stop_training_ends_after_the_epoch() -> None:
    loop = quiet_loop(open_session(tiny_model()))
    x, y = separable(size=N)
    assert loop.Train(5, lite.Dataset(x, y, batch_size=N), [Recorder(RET_STOP_TRAINING)]) == lite.RET_OK
    assert len(loop.history) == 1


def test_exit_aborts_without_end() -> None:
    recorder = Recorder(RET_EXIT)
    x, y = separable(size=N)
    assert quiet_loop(open_session(tiny_model())).Train(5, lite.Dataset(x, y, batch_size=N), [recorder]) \
        == lite.RET_ERROR
    assert recorder.calls[-1][0] == "EpochEnd"


def test_step_lr_scheduler_decays_every_step_size_epochs() -> None:
    session = open_session(tiny_model(lr=1.0))
    lrs = []

    class Probe(lite.TrainLoopCallBack):
        def EpochBegin(self, d):
            lrs.append(d.session.GetLearningRate())

    x, y = separable(size=N)
    quiet_loop(session).Train(5, lite.Dataset(x, y, batch_size=N),
                              [lite.LRScheduler(lite.StepLRLambda(2, 0.5)), Probe()])
    assert lrs == [1.0, 1.0, 0.5, 0.5, 0.25]


def test_multiplicative_lr_scheduler_every_other_epoch() -> None:
    session = open_session(tiny_model(lr=1.0))
    x, y = separable(size=N)
    quiet_loop(session).Train(4, lite.Dataset(x, y, batch_size=N),
                              [lite.LRScheduler(lite.MultiplicativeLRLambda(0.5), step=2)])
    assert session.GetLearningRate() == 0.25


def test_checkpoint_saver_writes_every_n_epochs(tmp_path: Path) -> None:
    x, y = separable(size=N)
    quiet_loop(open_session(tiny_model())).Train(4, lite.Dataset(x, y, batch_size=N),
                                                 [lite.CkptSaver(2, tmp_path / "tiny")])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny_trained_2.ms", "tiny_trained_4.ms"]
    resumed = lite.TrainSession.CreateSession(str(tmp_path / "tiny_trained_4.ms"), lite.Context(thread_num=1))
    assert resumed.GetFeatureMaps()[0].shape() == [C]


def test_monitors_record_the_epoch_loss_and_accuracy(capsys: pytest.CaptureFixture) -> None:
    loop = quiet_loop(open_session(tiny_model()))
    loss, accuracy = lite.LossMonitor(print_every_n=1), lite.ClassificationTrainAccuracyMonitor()
    x, y = separable(size=2 * N)
    loop.Train(1, lite.Dataset(x, y, batch_size=N), [loss, accuracy])
    assert loss.losses == [(1, pytest.approx(loop.history[0].loss))]
    assert accuracy.accuracies == [(1, pytest.approx(loop.history[0].accuracy))]
    assert "1.2: Loss is" in capsys.readouterr().out


def test_progress_line_per_epoch(capsys: pytest.CaptureFixture) -> None:
    x, y = separable(size=N)
    lite.TrainLoop(open_session(tiny_model())).Train(2, lite.Dataset(x, y, batch_size=N))
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[1].startswith("epoch 2: loss ") and "train accuracy" in lines[1]


def test_a_verbose_loop_with_monitors_prints_one_line_per_epoch(capsys: pytest.CaptureFixture) -> None:
    """The loop's line holds the mean loss and accuracy: the monitors do not repeat them in their own style."""
    x, y = separable(size=N)
    monitors = [lite.LossMonitor(), lite.ClassificationTrainAccuracyMonitor()]
    lite.TrainLoop(open_session(tiny_model())).Train(3, lite.Dataset(x, y, batch_size=N), monitors)
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["epoch 1", "epoch 2", "epoch 3"]
    assert len(monitors[0].losses) == len(monitors[1].accuracies) == 3


def test_a_quiet_loop_leaves_the_epoch_line_to_the_monitor(capsys: pytest.CaptureFixture) -> None:
    x, y = separable(size=N)
    quiet_loop(open_session(tiny_model())).Train(2, lite.Dataset(x, y, batch_size=N), [lite.LossMonitor()])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["Epoch (1)", "Epoch (2)"]


def test_classification_hits_reads_indices_and_one_hot() -> None:
    predictions = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]], np.float32)
    assert classification_hits(predictions, np.array([1, 1, 1])) == 2
    assert classification_hits(predictions, np.eye(2, dtype=np.float32)[[1, 0, 0]]) == 2
    assert classification_hits(predictions[:, :1], np.zeros((3, 1), np.float32)) is None
