"""The run's bar shows the time left to the earliest recall deadline."""

from __future__ import annotations

import io

from rich.console import Console

from payments_async.bulk import BulkCounts
from payments_async.cli._progress import RunBar


def _shown(seconds: float | None) -> str:
    out = io.StringIO()
    bar = RunBar(Console(file=out, width=160, force_terminal=False))
    bar.deadline_in(seconds)
    with bar.running():
        bar.update(BulkCounts(total=10, submitted=2, accepted=1))
    return out.getvalue()


def test_the_bar_counts_down_to_the_deadline() -> None:
    assert "deadline in 3 h 20 min" in _shown(3 * 3600 + 20 * 60 + 30)
    assert "deadline in 2 d 1 h" in _shown(49 * 3600 + 5)


def test_a_passed_deadline_is_said_and_none_known_shows_nothing() -> None:
    assert "deadline passed" in _shown(-5)
    assert "deadline" not in _shown(None)
