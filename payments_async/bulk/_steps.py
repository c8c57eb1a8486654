"""The steps of one row that the single-process runner and the queue's workers share.

Each records, through the journal's methods, the change the pure functions of
`._rows` decide: so a row goes through the same states whoever runs it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from .. import CancellationOutcome, PaymentsClient, RateLimiter, Submission, ValidationError
from ..iso20022 import decode_camt056, recall_window_problems, target2_today
from ._control import RunGate
from ._defaults import RATE_BACKLOG
from ._journal import RowState, RowWrites
from ._rows import RowChange, RowOutcome, Stage

__all__ = ["admit_row", "connection_limit_for", "record", "send_row", "wait_for_outcome"]

_SPARE_CONNECTIONS: Final = 4  # for token refreshes beside the bulk requests


def connection_limit_for(concurrency: int) -> int:
    """The client ``connection_limit`` a run with this concurrency needs (a few spare)."""
    return concurrency + _SPARE_CONNECTIONS


async def admit_row(gate: RunGate | None, stopping: Callable[[], bool] = lambda: False) -> bool:
    """Wait until a row's POST may go: the run's control lets it (not paused), and under
    a rate (``limit_rate``) the rate is booked at most ``RATE_BACKLOG`` seconds ahead (the
    rows under way then ask no more than the rate serves, and their requests find slots
    well within their deadlines). The control is asked again after the rate's wait, so a
    pause meanwhile holds the row.

    Returns:
        False once the run is aborted (see `RunGate.may_send`), else True.
    """
    if gate is not None and not await gate.may_send(stopping):
        return False
    limiter = RateLimiter.current()
    if limiter is None:
        return True
    await limiter.admit(RATE_BACKLOG)
    return gate is None or await gate.may_send(stopping)


async def send_row(client: PaymentsClient, row: RowState, *, admitted: bool = False) -> Submission:
    """Send a row's recorded camt.056, byte for byte (mark it ``sent`` first).

    A row never sent before whose recall window has closed since it was planned (its
    message gives the original settlement date, and today in TARGET2's time zone is past
    the deadline: a run resumed, or still going, on a later day) is not sent: a
    `ValidationError` names the deadline. A row sent before is resent as it was: the
    service may already hold it from within its window.

    Args:
        client: the client.
        row: the row.
        admitted: True when `admit_row` let it go; else the rate's wait is made here.

    Raises:
        PaymentsError: what the client met; give it to `._rows.after_failure`.
    """
    assert row.body is not None  # only invalid rows lack a body, and they are done
    message = decode_camt056(row.body)
    if row.state == Stage.PLANNED:
        late = recall_window_problems(message, target2_today())
        if late:
            raise ValidationError(late)
    if not admitted:
        await admit_row(None)
    return await client.request_cancellation(message)


async def wait_for_outcome(
    client: PaymentsClient, payments_service_id: str, timeout: float
) -> CancellationOutcome:
    """The client's own waiter: its transport keeps at most ``connection_limit`` requests
    in flight, so thousands of rows waiting at once only stretch the intervals between
    polls."""
    return await client.wait_for_cancellation_outcome(payments_service_id, timeout=timeout)


async def record(
    rows: RowWrites, line: int, change: RowChange, *, attempts: int | None = None
) -> None:
    """Commit a row's change through the journal.

    Args:
        rows: the journal (or the writing half of one).
        line: the row.
        change: what `._rows` decided.
        attempts: the row's attempts once the attempt that led to ``change`` was marked
            sent; a ``conditional`` change is made only if the row is still ``sent``
            with exactly this count (required for one).
    """
    if change.conditional and attempts is None:
        raise ValueError("a conditional change needs the attempt's count")
    guard = attempts if change.conditional else None
    error = change.error or ""
    if change.stage is Stage.PLANNED:
        await rows.mark_not_sent(line, error, final=False, if_attempts=guard)
    elif change.stage is not Stage.FINAL:
        await rows.mark_error(line, error, final=False, if_attempts=guard)
    elif change.outcome is RowOutcome.REFUSED:
        await rows.mark_error(line, error, final=True, if_attempts=guard)
    elif change.outcome is RowOutcome.NOT_SENT:
        await rows.mark_not_sent(line, error, final=True, if_attempts=guard)
    elif change.outcome is RowOutcome.ABORTED:
        await rows.mark_aborted(line, error)
    else:
        assert change.outcome is not None
        await rows.mark_final(
            line,
            outcome=change.outcome,
            status=change.status,
            reason_codes=change.reason_codes,
            reason_text=change.reason_text,
            return_request_needed=change.return_request_needed,
            if_attempts=guard,
        )
