"""A stall is not a failure: a bulk run whose process stops for a while finishes by itself.

A paused process (SIGSTOP, a VM pause, a laptop lid) does not run its event loop while the
monotonic clock goes on, so every call that was waiting for one of the client's own
connections finds its time over when the process runs again, without having tried the
service. Here the stall is the event loop blocked in ``time.sleep`` while the sandbox runs
on in its own thread, which is what the loop of a paused process sees; the calls' total
is short so a short stall outlasts it.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from payments_async import Credentials, Limits, PaymentsClient, RetryPolicy, Timeout
from payments_async.bulk import BulkCounts, BulkEvents, BulkReport, bulk_cancel
from tests.support.cli import bulk_rows, threaded_sandbox, write_csv

ROWS = 200
TOTAL = 1.0  # each call's time in all; the stall below outlasts it
STALL = 1.5


class StallOnce(BulkEvents):
    """Blocks the event loop once, while rows are in flight and more wait for a connection."""

    def __init__(self) -> None:
        self.stalled = False

    def update(self, counts: BulkCounts) -> None:
        if not self.stalled and counts.sent >= 8:
            self.stalled = True
            time.sleep(STALL)  # the loop stops as a paused process's does


async def _stalled_run(url: str, src: Path, journal: Path) -> BulkReport:
    async with PaymentsClient(
        Credentials.sandbox(),
        base_url=url,
        retry=RetryPolicy.for_testing(),
        timeout=Timeout(total=TOTAL),
        limits=Limits(connections=2),  # fewer than the rows in flight: calls queue for one
    ) as client:
        await client.access_token_lifetime()  # the stall meets the rows, not the token fetch
        events = StallOnce()
        report = await bulk_cancel(
            client, src, journal_path=journal, concurrency=8, timeout=30, events=events
        )
        assert events.stalled
        return report


def test_a_run_stalled_past_every_call_s_time_finishes_without_a_rerun(tmp_path: Path) -> None:
    src = write_csv(tmp_path / "stall.csv", bulk_rows(ROWS, prefix="E2E-STALL"))
    with threaded_sandbox() as sb:
        report = asyncio.run(_stalled_run(sb.url, src, tmp_path / "stall.journal.sqlite"))
        stored = sb.cancellations()
    assert report.halted is None, report.halted  # the service was healthy throughout
    assert report.counts.failed == 0
    finished = sum(report.totals[k] for k in ("accepted", "rejected"))
    assert finished == ROWS, report.totals
    # Each row's cancellation reached the service once: none lost, none twice.
    assert sorted(c.original_end_to_end_id for c in stored) == sorted(
        r["original_end_to_end_id"] for r in bulk_rows(ROWS, prefix="E2E-STALL")
    )
