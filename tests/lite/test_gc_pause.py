"""`gc_pause.paused`: the collector is off inside, back on after the last block, and left off if it was off."""
import gc
import threading

from lite import gc_pause


def test_the_collector_is_off_inside_and_back_on_after_nested_blocks() -> None:
    assert gc.isenabled()
    with gc_pause.paused():
        with gc_pause.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_the_user_turned_off_stays_off() -> None:
    gc.disable()
    try:
        with gc_pause.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_overlapping_blocks_in_threads_turn_it_back_on_when_the_last_ends() -> None:
    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        with gc_pause.paused():
            inside.set()
            release.wait()

    thread = threading.Thread(target=other)
    with gc_pause.paused():
        thread.start()
        inside.wait()
    assert not gc.isenabled()            # the other thread's block is still open
    release.set()
    thread.join()
    assert gc.isenabled()
