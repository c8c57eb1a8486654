"""A PostgreSQL journal whose database goes away mid-run: the run waits, reconnects and
finishes; past its window it stops with `JournalUnavailableError`, and a rerun resumes."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from payments_async import Credentials, PaymentsClient
from payments_async._constants import SANDBOX_CLIENT_ID
from payments_async.bulk import JournalUnavailableError, bulk_cancel
from payments_async.sandbox import SandboxConfig
from tests.support.cli import ThreadedSandbox, bulk_rows, threaded_sandbox, write_csv
from tests.support.postgres import cut_off, restore

ROWS = 300


class _Outage(threading.Thread):
    """Cut the database off once a third of the rows are stored (in a thread: a journal
    read may hold the event loop meanwhile); back after ``seconds`` unless None."""

    def __init__(self, sb: ThreadedSandbox, dsn: str, admin: str, seconds: float | None) -> None:
        super().__init__()
        self._args = (sb, dsn, admin, seconds)
        self.error: BaseException | None = None

    def run(self) -> None:
        sb, dsn, admin, seconds = self._args
        try:
            _when_stored(sb, ROWS // 3)
            cut_off(dsn, admin)
            if seconds is not None:
                time.sleep(seconds)
                restore(dsn, admin)
        except BaseException as exc:  # raised again by the test
            self.error = exc

    async def finished(self) -> None:
        await asyncio.to_thread(self.join, 30)
        if self.error is not None:
            raise self.error


def _stored_once(sb: ThreadedSandbox) -> None:
    stored = [c for c in sb.cancellations() if c.client_id == SANDBOX_CLIENT_ID]
    per_payment = Counter(c.original_end_to_end_id for c in stored)
    assert len(per_payment) == ROWS
    assert max(per_payment.values()) == 1
    assert sb.stats()["replays_changed_body"] == 0


def _when_stored(sb: ThreadedSandbox, n: int) -> None:
    deadline = time.monotonic() + 60
    while sb.stats()["cancellations_stored"] < n:
        assert time.monotonic() < deadline, "the run never got going"
        time.sleep(0.02)


async def test_a_database_outage_mid_run_is_waited_out(
    pg_dsn: str, postgres_server: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    admin: str = postgres_server.get_uri()  # type: ignore[attr-defined]
    config = SandboxConfig(processing_delay=3600, settlement_delay=1.5)
    with threaded_sandbox(config) as sb:
        src = write_csv(tmp_path / "out.csv", bulk_rows(ROWS, prefix="E2E-PGOUT"))

        cut = _Outage(sb, pg_dsn, admin, seconds=3)
        cut.start()
        async with PaymentsClient(Credentials.sandbox(), base_url=sb.url) as client:
            report = await bulk_cancel(client, src, journal_path=pg_dsn, concurrency=8)
        await cut.finished()
        assert report.totals["rejected"] == ROWS  # no such payments: NOOR
        assert report.complete
        _stored_once(sb)


async def test_past_its_window_the_run_stops_and_a_rerun_resumes(
    pg_dsn: str, postgres_server: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("payments_async.bulk._stores._connect.JOURNAL_OUTAGE_WINDOW", 1.5)
    admin: str = postgres_server.get_uri()  # type: ignore[attr-defined]
    config = SandboxConfig(processing_delay=3600, settlement_delay=1.5)
    with threaded_sandbox(config) as sb:
        src = write_csv(tmp_path / "gone.csv", bulk_rows(ROWS, prefix="E2E-PGGONE"))
        cut = _Outage(sb, pg_dsn, admin, seconds=None)
        cut.start()
        try:
            async with PaymentsClient(Credentials.sandbox(), base_url=sb.url) as client:
                with pytest.raises(JournalUnavailableError) as caught:
                    await bulk_cancel(client, src, journal_path=pg_dsn, concurrency=8)
                assert "cannot be reached since" in str(caught.value)
                assert "run the same command again" in str(caught.value)
                await cut.finished()
                restore(pg_dsn, admin)
                with sb.settling():  # the outage is over: no need to wait for outcomes
                    again = await bulk_cancel(client, src, journal_path=pg_dsn, concurrency=8)
        finally:
            restore(pg_dsn, admin)
        assert again.resumed
        assert again.complete
        assert again.totals["rejected"] == ROWS
        _stored_once(sb)


def test_reading_rows_in_batches_goes_on_after_a_reconnect(
    pg_dsn: str, postgres_server: object
) -> None:
    """The sessions end between two batches of `iter_rows`: the next batch is read on
    the journal's new connection, not on the one that was closed."""
    from payments_async.bulk import PlannedRow
    from payments_async.bulk._journal import READ_BATCH
    from payments_async.bulk._stores._postgres import PostgresJournal

    admin: str = postgres_server.get_uri()  # type: ignore[attr-defined]
    n = 2 * READ_BATCH + 5  # three batches: the second reconnects, the third must follow
    journal = PostgresJournal.open(pg_dsn, input_sha256="b" * 64, new_run_id="R-BATCH")
    try:
        journal.plan(
            PlannedRow(i, f"E2E-B-{i}", f"BC-{i}", f"CX-{i}", b"{}") for i in range(1, n + 1)
        )
        lines = []
        for row in journal.iter_rows():
            lines.append(row.line)
            if len(lines) == READ_BATCH:  # the first batch is read: end every session
                cut_off(pg_dsn, admin)
                restore(pg_dsn, admin)
        assert lines == list(range(1, n + 1))
    finally:
        journal.close()
