"""The server's progress line, one per evaluation of the global model: the ServerApp (`server`) logs it and the
launcher (`launch`) picks it out of Flower's streamed log.

Rounds count from 1, as `num-rounds` does; Flower's round 0 is the evaluation of the initial weights before any
round, tagged `[initial model]` so a 3-round run reads: initial model, round 1/3, 2/3, 3/3, then done: 3 rounds.
"""
from __future__ import annotations

import re

INITIAL = "[initial model]"
_TAG = re.compile(r"\[(round \d+/\d+|initial model)\]")


def tag(server_round: int, num_rounds: int) -> str:
    """`[round r/n]` for a round, `[initial model]` for Flower's round 0."""
    return f"[round {server_round}/{num_rounds}]" if server_round > 0 else INITIAL


def progress_part(log_line: str) -> str | None:
    """The progress line inside a line of Flower's log (from its tag on), or None when it holds none."""
    found = _TAG.search(log_line)
    return log_line[found.start():] if found else None


def rounds_done(history_rounds: list[dict]) -> int:
    """Rounds run, from the ServerApp's history rows (the initial model's row is not a round)."""
    return sum(1 for row in history_rounds if row["round"] > 0)
