"""Chase a bulk run's unanswered recalls: a pacs.028 request for status update per row
once its recall has gone unanswered for a number of TARGET2 banking days.

A chase never sends a camt.056: the row's recall stays the one the service stored. Each
due row's outcome is read first (GET), so a recall the beneficiary bank has answered is
recorded, not chased. A chase is recorded (`RowWrites.mark_chased`) after the service
took its pacs.028; the message id of a row's n-th chase is fixed by the row's
``assgnmt.id`` and n, so a pass killed between the POST and its record resends the same
id on the next pass and the service, idempotent on it, stores one request (it answers
200).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

from .. import (
    ApiError,
    AuthenticationError,
    CancellationOutcome,
    InvalidResponseError,
    PaymentsClient,
    PaymentsError,
    PermissionDeniedError,
    RateLimitedError,
    ServerError,
    ValidationError,
)
from ..iso20022 import (
    Pacs028,
    build_status_request,
    decode_camt056,
    summarize_resolution,
    target2_today,
)
from ._journal import RowState, RowWrites
from ._rows import Stage, after_outcome, one_line
from ._steps import record
from ._times import banking_days_between

__all__ = [
    "CHASE_CONCURRENCY",
    "DEFAULT_CHASE_LIMIT",
    "ChasePolicy",
    "ChaseReport",
    "chase_rows",
    "read_final_outcome",
    "status_request_for",
]

logger = logging.getLogger("payments_async.bulk")

DEFAULT_CHASE_LIMIT: Final = 1
"""Chases per row at most, over every run, unless a run says otherwise."""

CHASE_CONCURRENCY: Final = 16
"""Rows read and chased at once during a chase pass."""


@dataclass(frozen=True, slots=True)
class ChasePolicy:
    """When a pending row's recall is chased.

    Attributes:
        after: TARGET2 banking days without an answer before a chase, counted from the
            day the service acknowledged the recall, then from the day of the last chase
            (a row acknowledged on a Friday is 1 banking day old on the Monday).
        limit: chases per row at most, over every run and pass.

    Raises:
        ValueError: ``after`` or ``limit`` is less than 1.
    """

    after: int
    limit: int = DEFAULT_CHASE_LIMIT

    def __post_init__(self) -> None:
        if self.after < 1:
            raise ValueError(f"a chase comes after 1 banking day or more, not {self.after}")
        if self.limit < 1:
            raise ValueError(f"a row is chased at most 1 time or more, not {self.limit}")

    def due(self, row: RowState, today: dt.date) -> bool:
        """True when ``row`` is acknowledged, not final, chased fewer than ``limit``
        times, and ``after`` banking days old on ``today`` (a TARGET2 date) since its
        acknowledgement or its last chase."""
        if row.state != Stage.ACKNOWLEDGED or row.body is None or row.chases >= self.limit:
            return False
        since = row.chased_at if row.chases else row.acknowledged_at
        if since is None:
            return False
        return banking_days_between(target2_today(since), today) >= self.after


@dataclass(slots=True)
class ChaseReport:
    """What a chase pass did.

    Attributes:
        due: rows due a chase (after a halt, those the pass did not reach included).
        chased: of those, rows whose pacs.028 the service took (recorded).
        settled: of those, rows whose outcome the service had decided: recorded final,
            not chased.
        failed: of those, rows not chased this pass (a later pass tries again).
        error: the first failure, as one line naming its row, or None.
        halted: the failure that stopped the pass early (the service or its token
            endpoint could not be reached, or limited the rate), or None.
    """

    due: int = 0
    chased: int = 0
    settled: int = 0
    failed: int = 0
    error: str | None = None
    halted: PaymentsError | None = None


def status_request_for(row: RowState) -> Pacs028:
    """The pacs.028 of the row's next chase (its chase number ``row.chases + 1``).

    Its ``grpHdr.msgId`` and ``stsReqId`` are derived from the row's ``assgnmt.id`` and
    that number: the same row and chase always give the same ids, so a resend after a
    lost answer, or after a pass killed before recording it, is the same request to the
    service. The rest is taken from the row's camt.056.

    Raises:
        ValueError: the row has no recorded camt.056 (an invalid row).
    """
    if row.body is None:
        raise ValueError(f"line {row.line} has no recorded camt.056 to chase")
    recall = decode_camt056(row.body)
    key = hashlib.sha256(f"{recall.message_id}\n{row.chases + 1}".encode()).hexdigest()
    return build_status_request(
        recall, message_id="SRQ" + key[:32], status_request_id="SRI" + key[32:64]
    )


async def read_final_outcome(
    client: PaymentsClient, payments_service_id: str
) -> CancellationOutcome | None:
    """A recall's final outcome read once (GET), or None while the service has not
    decided (or says a code nobody knows yet: a later read tells whether it stays)."""
    resolution = await client.get_cancellation_outcome(payments_service_id)
    summary = summarize_resolution(resolution)
    if not summary.is_final:
        return None
    return CancellationOutcome.from_resolution(payments_service_id, resolution, summary)


_NOT_THE_ROWS: Final = (
    AuthenticationError,
    PermissionDeniedError,
    RateLimitedError,
    ServerError,
    InvalidResponseError,
)


def _row_only(exc: PaymentsError) -> bool:
    """True when ``exc`` is about its row alone (its message refused, by the client or
    by the service), so the pass goes on with the others."""
    if isinstance(exc, ValidationError):
        return True
    return isinstance(exc, ApiError) and not isinstance(exc, _NOT_THE_ROWS)


def _chunks(rows: Iterable[RowState], size: int) -> Iterator[list[RowState]]:
    chunk: list[RowState] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


async def chase_rows(
    client: PaymentsClient,
    rows: Iterable[RowState],
    writes: RowWrites,
    policy: ChasePolicy,
    *,
    today: dt.date | None = None,
    concurrency: int = CHASE_CONCURRENCY,
) -> ChaseReport:
    """Chase every row of ``rows`` that ``policy`` says is due on ``today``.

    For each due row: its outcome is read once; a decided one is recorded final (as a
    run records it) and not chased; otherwise one pacs.028 (`status_request_for`) is
    sent, and once the service took it (201, or 200 for a resend) the chase is recorded
    with the row's new count and ``chased_at``. No camt.056 is sent. A row the service
    refuses (a 4xx) is counted ``failed`` and the pass goes on; any other failure stops
    the pass (``halted``): the rows not reached are chased by a later pass.

    Args:
        client: the client to read and send with.
        rows: the rows to look at (others than acknowledged ones are skipped); read as
            the pass goes, `CHASE_CONCURRENCY` at a time.
        writes: the journal's row changes, where the reads and chases are recorded.
        policy: when a row is due, and how many chases a row gets at most.
        today: the TARGET2 day the banking days are counted to; None: today in Central
            European Time.
        concurrency: rows read and chased at once.

    Returns:
        What the pass did.

    Raises:
        JournalError: a change could not be written (those written before it stay).
    """
    today = today if today is not None else target2_today()
    report = ChaseReport()

    async def one(row: RowState) -> None:
        if report.halted is not None:
            report.failed += 1
            return
        assert row.payments_service_id is not None  # acknowledged rows have it
        try:
            outcome = await read_final_outcome(client, row.payments_service_id)
            if outcome is None:
                await client.request_status_update(status_request_for(row))
        except PaymentsError as exc:
            report.failed += 1
            if report.error is None:
                report.error = f"line {row.line}: {one_line(exc)}"
            if not _row_only(exc) and report.halted is None:
                report.halted = exc
            logger.warning("chase of line %s failed: %s", row.line, one_line(exc))
            return
        if outcome is not None:
            await record(writes, row.line, after_outcome(outcome))
            report.settled += 1
        else:
            await writes.mark_chased(row.line, row.chases)
            report.chased += 1

    due = (row for row in rows if policy.due(row, today))
    for chunk in _chunks(due, concurrency):
        report.due += len(chunk)
        results = await asyncio.gather(*(one(row) for row in chunk), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        if report.halted is not None:
            report.due += sum(1 for _ in due)  # not reached: counted, not chased
            report.failed = report.due - report.chased - report.settled
            break
    return report
