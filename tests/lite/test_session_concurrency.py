"""The concurrency contract: many sessions over one model run in parallel threads and agree with a lone run;
one session is used by one call at a time, and a second call gets RET_REENTRANT_ERROR instead of sharing it."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import lite
import models
from converter import convert
from converter.train import TrainParams
from converter import convert_for_training


@pytest.fixture(scope="module")
def buf() -> bytes:
    return convert(models.build("mobilenet_v2", input_size=32, num_classes=10))


def inputs(n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    return [rng.standard_normal((1, 3, 32, 32)).astype(np.float32) for _ in range(n)]


def run(session: lite.LiteSession, x: np.ndarray) -> np.ndarray:
    session.GetInputs()[0].set_data(x)
    session.RunGraph()
    return session.GetOutputs()["logits"].numpy().copy()


def test_many_sessions_on_one_model_agree_with_single_thread_runs(buf: bytes) -> None:
    model = lite.Model.Import(buf)
    xs = inputs(6)
    alone = lite.LiteSession.CreateSession(lite.Context(thread_num=1))
    alone.CompileGraph(model)
    expected = [run(alone, x) for x in xs]
    results: dict[int, list[np.ndarray]] = {}
    start = threading.Barrier(4)

    def worker(k: int) -> None:
        session = lite.LiteSession(lite.Context(thread_num=1))
        session.CompileGraph(model)                      # weights shared: views of one buffer
        start.wait()
        results[k] = [run(session, x) for x in xs * 3]

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for outs in results.values():
        for got, want in zip(outs, expected * 3):
            assert np.array_equal(got, want)


def test_a_second_thread_gets_reentrant_error_while_a_run_is_under_way(buf: bytes) -> None:
    session = lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=1))
    x = inputs(1)[0]
    expected = run(session, x)
    inside, release = threading.Event(), threading.Event()
    outcome: dict[str, object] = {}

    def hold(ins, outs, param) -> bool:
        if not inside.is_set():
            inside.set()
            release.wait(30)
        return True

    def first() -> None:
        outcome["status"] = session.RunGraph(before=hold)

    thread = threading.Thread(target=first)
    thread.start()
    assert inside.wait(30)                                # the first run is really inside its kernels now
    for call in (lambda: session.RunGraph(), lambda: session.Resize(session.GetInputs(), [[2, 3, 32, 32]])):
        with pytest.raises(lite.ReentrantError) as e:
            call()
        assert e.value.status == lite.RET_REENTRANT_ERROR == -102
    release.set()
    thread.join()
    assert outcome["status"] == lite.RET_OK
    assert np.array_equal(session.GetOutputs()["logits"].numpy(), expected)   # the refused calls changed nothing
    assert np.array_equal(run(session, x), expected)                           # and the session is free again


def test_a_callback_may_not_run_its_own_session(buf: bytes) -> None:
    session = lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=1))
    errors = []

    def nested(ins, outs, param) -> bool:
        try:
            session.RunGraph()
        except lite.ReentrantError as e:
            errors.append(e)
        return False

    assert session.RunGraph(before=nested) == lite.RET_SUCCESS_EXIT
    assert len(errors) == 1
    assert session.RunGraph() == lite.RET_OK


def test_model_free_while_sessions_run_is_safe(buf: bytes) -> None:
    model = lite.Model.Import(buf)
    sessions = []
    for _ in range(2):
        s = lite.LiteSession(lite.Context(thread_num=1))
        s.CompileGraph(model)
        sessions.append(s)
    x = inputs(1)[0]
    expected = run(sessions[0], x)
    started, results = threading.Barrier(3), []

    def worker(s: lite.LiteSession) -> None:
        started.wait()
        results.extend(np.array_equal(run(s, x), expected) for _ in range(20))

    threads = [threading.Thread(target=worker, args=(s,)) for s in sessions]
    for t in threads:
        t.start()
    started.wait()
    model.Free()
    for t in threads:
        t.join()
    assert len(results) == 40 and all(results)


def test_train_session_steps_are_exclusive_too() -> None:
    buf = convert_for_training(models.build("lenet5"), TrainParams())
    session = lite.TrainSession.CreateSession(buf, len(buf), lite.Context(thread_num=1), True)
    inside, release = threading.Event(), threading.Event()

    def hold(ins, outs, param) -> bool:
        inside.set()
        release.wait(30)
        return True

    thread = threading.Thread(target=lambda: session.RunGraph(before=hold))
    thread.start()
    assert inside.wait(30)
    with pytest.raises(lite.ReentrantError):
        session.RunGraph()
    release.set()
    thread.join()
    assert session.RunGraph() == lite.RET_OK
