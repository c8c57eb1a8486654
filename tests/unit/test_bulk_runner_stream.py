"""The run phase reads the journal as it goes: a bounded queue, never every row at once."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from payments_async import Outcome, Submission, TransportError
from payments_async.bulk import JournalError, MemoryJournal, PlannedRow, SqliteJournal
from payments_async.bulk._journal import READ_BATCH, RowState
from payments_async.bulk._runner import QUEUED_PER_SUBMITTER, BulkRunner
from payments_async.iso20022 import build_cancellation, encode

CONCURRENCY = 2


def _body(line: int) -> bytes:
    msg = build_cancellation(
        assignment_id=f"BC-X-{line}",
        cancellation_id=f"CX-X-{line}",
        original_end_to_end_id=f"E2E-{line}",
        amount="1.00",
        creditor_agent_bic="COBADEFFXXX",
        creditor_iban="DE89370400440532013000",
        reason="DUPL",
        assigner_bic="BNPAFRPPXXX",
        assignee_bic="COBADEFFXXX",
    )
    return encode(msg)


def _planned(n: int) -> list[PlannedRow]:
    body = _body(2)  # the runner decodes it; its ids do not matter here
    return [PlannedRow(i, f"E2E-{i}", f"BC-X-{i}", f"CX-X-{i}", body) for i in range(2, n + 2)]


class CountingJournal(MemoryJournal):
    """A MemoryJournal that counts the rows the runner has taken from it."""

    def __init__(self) -> None:
        super().__init__("R")
        self.taken = 0

    def rows(self) -> list[RowState]:
        raise AssertionError("the runner must not load every row")

    def iter_rows(self, *, unfinished: bool = False) -> Iterator[RowState]:
        for row in super().iter_rows(unfinished=unfinished):
            self.taken += 1
            yield row


REJECTED = SimpleNamespace(
    outcome=Outcome.REJECTED,
    status="RJCR",
    tx_statuses=(),
    reason_codes=("NOOR",),
    reason_texts=(),
    return_request_needed=False,
)


class GatedClient:
    """Submissions wait until ``gate`` is set; outcomes come at once (rejected)."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.in_flight = asyncio.Event()
        self.sent = 0

    async def request_cancellation(self, msg: Any) -> Submission:
        self.sent += 1
        self.in_flight.set()
        await self.gate.wait()
        return Submission(
            f"CXL-{self.sent}", msg.message_id, None, "PENDING", None, True, 1, "r", 201
        )

    async def wait_for_cancellation_outcome(self, psid: str, *, timeout: float) -> Any:
        return REJECTED


async def test_the_runner_reads_ahead_at_most_the_queue_and_one_row_per_submitter() -> None:
    journal = CountingJournal()
    journal.plan(_planned(1000))
    client = GatedClient()
    runner = BulkRunner(client, journal, concurrency=CONCURRENCY)  # type: ignore[arg-type]
    run = asyncio.ensure_future(runner.run())
    await client.in_flight.wait()
    for _ in range(20):  # let the feeder fill the queue as far as it can
        await asyncio.sleep(0)
    # A full queue, a row in each submitter's hands, one in the feeder's waiting for room.
    bound = QUEUED_PER_SUBMITTER * CONCURRENCY + CONCURRENCY + 1
    assert runner.counts.total == 1000
    assert 0 < journal.taken <= bound
    client.gate.set()
    counts = await asyncio.wait_for(run, 30)
    assert (counts.rejected, journal.taken) == (1000, 1000)
    assert journal.state_counts() == {"final": 1000}


class UnreachableClient:
    """Every submission fails before its request leaves: the run halts."""

    def __init__(self) -> None:
        self.sent = 0

    async def request_cancellation(self, msg: Any) -> Submission:
        self.sent += 1
        await asyncio.sleep(0)
        raise TransportError("connection refused", request_sent=False, path="/payments")

    async def wait_for_cancellation_outcome(self, psid: str, *, timeout: float) -> Any:
        raise AssertionError("nothing was submitted")


async def test_halting_stops_the_feeder_and_leaves_the_rest_planned() -> None:
    journal = CountingJournal()
    journal.plan(_planned(1000))
    client = UnreachableClient()
    runner = BulkRunner(client, journal, concurrency=CONCURRENCY)  # type: ignore[arg-type]
    counts = await asyncio.wait_for(runner.run(), 30)  # no hang on a full queue
    assert runner.halted is not None
    assert client.sent <= CONCURRENCY
    assert journal.taken <= QUEUED_PER_SUBMITTER * CONCURRENCY + CONCURRENCY + 1
    assert counts.sent == 0  # none reached the service
    assert journal.state_counts() == {"planned": 1000}


async def test_cancelling_a_run_stops_it_with_what_was_committed(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    journal = SqliteJournal.open(path, input_sha256="a" * 64, new_run_id="R")
    journal.plan(_planned(500))
    client = GatedClient()
    runner = BulkRunner(client, journal, concurrency=CONCURRENCY)  # type: ignore[arg-type]
    run = asyncio.ensure_future(runner.run())
    await client.in_flight.wait()
    for _ in range(20):
        await asyncio.sleep(0)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(run, 5)
    journal.close()
    db = sqlite3.connect(path)
    states = dict(db.execute("SELECT state, COUNT(*) FROM rows GROUP BY state").fetchall())
    db.close()
    # the rows whose requests were out are committed as sent; no other row was touched
    assert states == {"sent": client.sent, "planned": 500 - client.sent}
    assert client.sent == runner.counts.sent == CONCURRENCY


def _selects(db: sqlite3.Connection) -> list[str]:
    """The SELECT statements run on ``db`` from now on."""
    seen: list[str] = []
    db.set_trace_callback(lambda sql: seen.append(sql) if sql.startswith("SELECT") else None)
    return seen


async def test_sqlite_reads_a_batch_per_query_and_never_a_row_twice(tmp_path: Path) -> None:
    journal = SqliteJournal.open(tmp_path / "j.sqlite", input_sha256="a" * 64, new_run_id="R")
    n = 2 * READ_BATCH + 10
    journal.plan(_planned(n))
    selects = _selects(journal._db)
    lines = []
    for row in journal.iter_rows(unfinished=True):
        lines.append(row.line)
        # the run finishes rows as it reads them: they must not come again
        await journal.mark_error(row.line, "refused", final=True)
    assert lines == list(range(2, n + 2))
    assert len(selects) == 3  # two full batches and the rest
    assert journal.state_counts() == {"final": n}
    assert list(journal.iter_rows(unfinished=True)) == []
    journal.close()


def test_rows_stay_readable_after_close(tmp_path: Path) -> None:
    journal = SqliteJournal.open(tmp_path / "j.sqlite", input_sha256="a" * 64, new_run_id="R")
    journal.plan(_planned(3))
    journal.close()
    assert [r.line for r in journal.rows()] == [2, 3, 4]  # a read-only connection


class BrokenJournal(MemoryJournal):
    """Its rows cannot be read past the first few."""

    def iter_rows(self, *, unfinished: bool = False) -> Iterator[RowState]:
        yield from list(super().iter_rows(unfinished=unfinished))[:3]
        raise JournalError("cannot read journal: disk I/O error")


async def test_a_read_error_while_running_is_raised_as_itself() -> None:
    journal = BrokenJournal("R")
    journal.plan(_planned(100))
    client = GatedClient()
    client.gate.set()
    runner = BulkRunner(client, journal, concurrency=CONCURRENCY)  # type: ignore[arg-type]
    with pytest.raises(JournalError, match="disk I/O error"):
        await asyncio.wait_for(runner.run(), 5)
