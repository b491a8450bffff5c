"""converter/quant/progress.py: a bar rewritten in place on a terminal, a few plain lines anywhere else, both
with the time left (on a clock the test drives)."""
from __future__ import annotations

import io

from converter.quant.progress import BAR, Progress, duration


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_terminal_sees_one_bar_rewritten_in_place_with_the_time_left():
    stream, clock = Terminal(), Clock()
    bar = Progress("calibrating", 4, stream=stream, clock=clock)
    for _ in range(4):
        clock.now += 2.0
        bar.step()
    updates = stream.getvalue().split("\r")[1:]
    assert len(updates) == 4 and stream.getvalue().endswith("\n")
    assert updates[0] == f"calibrating [{'#' * (BAR // 4)}{'.' * (BAR - BAR // 4)}] 1/4, about 6 s left\x1b[K"
    assert updates[-1] == f"calibrating [{'#' * BAR}] 4/4, 8 s\x1b[K\n"


def test_a_pipe_sees_plain_lines_at_each_tenth_and_the_last():
    stream, clock = io.StringIO(), Clock()
    bar = Progress("debug report", 53, stream=stream, clock=clock)
    for _ in range(53):
        clock.now += 1.0
        bar.step()
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue()
    assert len(lines) == 10
    assert lines[0] == "debug report: 6/53, about 47 s left"            # the first tenth done
    assert lines[-1] == "debug report: 53/53, 53 s"


def test_the_time_left_follows_the_weights_of_the_steps():
    """AdaRound's layers differ in cost: after the cheap first step of weights 1 + 9 the rest takes 9x as long."""
    stream, clock = io.StringIO(), Clock()
    bar = Progress("adaround", weights=[1.0, 9.0], stream=stream, clock=clock)
    clock.now += 3.0
    bar.step()
    assert stream.getvalue().splitlines()[0] == "adaround: 1/2, about 27 s left"


def test_durations_read_in_seconds_then_minutes():
    assert [duration(s) for s in (0.4, 42, 185)] == ["0 s", "42 s", "3 min 05 s"]
