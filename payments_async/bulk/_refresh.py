"""Settle a run's pending rows later: read each one's outcome once, record the final ones.

A run may end its waiting while the service still holds rows for a manual check. This
reads the outcome of every row the service acknowledged whose outcome the journal does
not hold (GET only: no camt.056 is sent again) and records those the service has
decided, through the journal's row changes, as the run itself would have; with a chase
policy it then chases the rows still unanswered (`._chase`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from .. import NotFoundError, PaymentsClient
from ._chase import ChasePolicy, ChaseReport, chase_rows, read_final_outcome
from ._journal import READ_BATCH, RowState, RowWrites, SqliteJournal, UtcClock, read_in_batches
from ._rows import Stage, after_outcome
from ._steps import record
from ._stores import _postgres as pg
from ._stores import is_postgres_url

if TYPE_CHECKING:
    import psycopg

__all__ = ["REFRESH_CONCURRENCY", "RefreshReport", "refresh_pending"]

REFRESH_CONCURRENCY: Final = 16
"""Outcome reads in flight at once while refreshing."""

_PENDING_AFTER: Final = (
    "SELECT line, payments_service_id FROM payments_bulk_rows WHERE run_id = %s AND line > %s "
    "AND state = %s AND payments_service_id IS NOT NULL ORDER BY line LIMIT %s"
)
_ACKNOWLEDGED_AFTER: Final = (
    f"SELECT {pg.ROW_COLUMNS} FROM payments_bulk_rows WHERE run_id = %s "  # noqa: S608
    "AND line > %s AND state = 'acknowledged' ORDER BY line LIMIT %s"
)


@dataclass(frozen=True, slots=True)
class RefreshReport:
    """What a refresh did.

    Attributes:
        run_id: the run refreshed.
        read: pending rows whose outcome was read.
        settled: of those, rows the service had decided: recorded final.
        not_found: pending rows the service does not know (left pending; check them).
        chase: what the chase of the rows still pending did, or None without a chase
            policy.
    """

    run_id: str
    read: int
    settled: int
    not_found: int
    chase: ChaseReport | None = None


Page = list[tuple[int, str]]
"""Pending rows as ``(line, paymentsServiceId)``, in line order."""


def _pending_page(conn: psycopg.Connection[Any], run_id: str, after: int) -> Page:
    rows = conn.execute(_PENDING_AFTER, (run_id, after, Stage.ACKNOWLEDGED.value, READ_BATCH))
    return [(int(line), str(psid)) for line, psid in rows]


def _acknowledged(conn: psycopg.Connection[Any], run_id: str) -> Iterator[RowState]:
    """The run's acknowledged rows, whole, `READ_BATCH` per query."""

    def page(after: int) -> list[RowState]:
        records = conn.execute(_ACKNOWLEDGED_AFTER, (run_id, after, READ_BATCH)).fetchall()
        return [pg.row_from_record(rec) for rec in records]

    return read_in_batches(page)


async def refresh_pending(
    client: PaymentsClient,
    target: str | Path,
    run: str | None = None,
    *,
    clock: UtcClock | None = None,
    chase: ChasePolicy | None = None,
    today: dt.date | None = None,
) -> RefreshReport:
    """Read once the outcome of each pending row of a run; record the final ones.

    No camt.056 is sent again. A row whose outcome is final is recorded ``final`` (with
    its ``final_at``) as the run would have recorded it; the others stay pending. Rows in
    flight (sent, never acknowledged) have no id to read by: a rerun of the run resends
    them with their recorded ids. With ``chase``, the rows still pending are then chased
    as `chase_rows` says (a pacs.028 each when due, recorded in the row).

    Args:
        client: the client to read with (its own retry policy applies to each read).
        target: the run's journal: a ``postgresql://`` database (a queued run, or a
            local run's ``--journal``), or a local run's journal file.
        run: in a database, the run id; the latest run when None.
        clock: the clock of the ``final_at`` and ``chased_at`` times (the system's UTC
            clock when None).
        chase: when the rows still pending are chased; None: never.
        today: the TARGET2 day a chase counts banking days to; None: today in Central
            European Time.

    Returns:
        What was read and recorded.

    Raises:
        JournalError: the journal cannot be reached or opened (a journal file a run
            still holds is busy: that run waits for its own rows), has no such run, or
            a change cannot be written (the changes recorded before it stay).
        PaymentsError: a read failed other than with "not found" (the service cannot
            be reached, refuses the credentials...): the rows settled before it stay
            recorded; the others stay pending.
    """
    if not is_postgres_url(target):
        journal = SqliteJournal.open_existing(target)
        try:
            if clock is not None:
                journal.clock = clock

            def acknowledged() -> Iterator[RowState]:
                for row in journal.iter_rows(unfinished=True):
                    if row.state == Stage.ACKNOWLEDGED:
                        yield row

            async def file_pages() -> AsyncIterator[Page]:
                page: Page = []
                for row in acknowledged():
                    if row.payments_service_id:
                        page.append((row.line, row.payments_service_id))
                    if len(page) == READ_BATCH:
                        yield page
                        page = []
                if page:
                    yield page

            report = await _settle(client, journal, journal.run_id, file_pages())
            if chase is None:
                return report
            return await _chased(client, report, acknowledged(), journal, chase, today)
        finally:
            journal.close()
    dsn = str(target)
    conn = pg.connect(dsn)
    try:
        run_id, _, _ = pg.find_run(conn, run)
        writer = pg.GroupCommitter(dsn)
        rows = pg.PostgresRows(writer, run_id)
        if clock is not None:
            rows.clock = clock

        async def db_pages() -> AsyncIterator[Page]:
            after = -1
            while page := await asyncio.to_thread(_pending_page, conn, run_id, after):
                yield page
                after = page[-1][0]

        try:
            report = await _settle(client, rows, run_id, db_pages())
            if chase is None:
                return report
            return await _chased(client, report, _acknowledged(conn, run_id), rows, chase, today)
        finally:
            await writer.aclose()
    finally:
        conn.close()


async def _settle(
    client: PaymentsClient, rows: RowWrites, run_id: str, pages: AsyncIterator[Page]
) -> RefreshReport:
    """Read each page's rows' outcomes, `REFRESH_CONCURRENCY` at a time; record the final
    ones through ``rows``."""
    read = settled = not_found = 0
    gate = asyncio.Semaphore(REFRESH_CONCURRENCY)

    async def one(line: int, psid: str) -> bool | None:
        async with gate:
            try:
                outcome = await read_final_outcome(client, psid)
            except NotFoundError:
                return None
        if outcome is not None:
            await record(rows, line, after_outcome(outcome))
        return outcome is not None

    async for page in pages:
        results = await asyncio.gather(
            *(one(line, psid) for line, psid in page), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result
            read += result is not None
            settled += bool(result)
            not_found += result is None
    return RefreshReport(run_id=run_id, read=read, settled=settled, not_found=not_found)


async def _chased(
    client: PaymentsClient,
    report: RefreshReport,
    acknowledged: Iterable[RowState],
    rows: RowWrites,
    chase: ChasePolicy,
    today: dt.date | None,
) -> RefreshReport:
    """``report`` with the chase of the rows still acknowledged after the reads."""
    chased = await chase_rows(client, acknowledged, rows, chase, today=today)
    return RefreshReport(
        run_id=report.run_id,
        read=report.read,
        settled=report.settled,
        not_found=report.not_found,
        chase=chased,
    )
