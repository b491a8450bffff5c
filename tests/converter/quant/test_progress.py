"""converter/quant/progress.py: a line rewritten in place on a terminal, a few plain lines anywhere else."""
from __future__ import annotations

import io

from converter.quant.progress import progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_sees_one_line_rewritten_in_place():
    stream = Terminal()
    for i in range(1, 17):
        progress(i, 16, "calibrating", stream)
    assert stream.getvalue() == "".join(f"\rcalibrating: {i}/16" for i in range(1, 17)) + "\n"


def test_a_pipe_sees_plain_lines_at_each_tenth_and_the_last():
    stream = io.StringIO()
    for i in range(1, 54):
        progress(i, 53, "debug report", stream)
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue()
    assert len(lines) == 10 and lines[-1] == "debug report: 53/53"
    assert lines[0] == "debug report: 6/53"            # the first tenth done


def test_a_short_loop_off_a_terminal_reports_every_step():
    stream = io.StringIO()
    for i in range(1, 4):
        progress(i, 3, "adaround", stream)
    assert stream.getvalue() == "adaround: 1/3\nadaround: 2/3\nadaround: 3/3\n"
