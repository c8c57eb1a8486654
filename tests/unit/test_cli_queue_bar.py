"""The progress bar of a queued run counts each finished row once."""

from __future__ import annotations

from payments_async.bulk import QueueStatus, RunTotals
from payments_async.cli.commands.bulk import _queue_counts


def test_a_refused_row_is_counted_once_and_the_bar_never_passes_its_total() -> None:
    totals = RunTotals.of({"accepted": 3, "refused": 2, "not_sent": 1, "pending": 4}, unsendable=1)
    status = QueueStatus(
        run_id="r",
        input_name="in.csv",
        rows=10,
        states={"final": 6, "acknowledged": 4},
        outcomes={"accepted": 3, "refused": 2, "not_sent": 1},
        queued=4,
        errors=0,
        totals=totals,
    )
    counts = _queue_counts(status)
    assert counts.total == 10
    assert counts.refused == 2
    assert counts.not_sent == 1
    assert counts.failed == 0
    assert counts.done == 6  # the final rows, each once
