"""What a receiver reports: one event per processed notification, and its counters."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .._errors import PaymentsError
from ..iso20022 import Outcome, PaymentStatus
from ._core import Notification

if TYPE_CHECKING:
    from .._models import CancellationOutcome

__all__ = [
    "CancellationOutcomeHandler",
    "EventHandler",
    "NotificationEvent",
    "PaymentStatusHandler",
    "ReceiverStats",
]

PaymentStatusHandler = Callable[[str, PaymentStatus], Awaitable[None]]
CancellationOutcomeHandler = Callable[["CancellationOutcome"], Awaitable[None]]
EventHandler = Callable[["NotificationEvent"], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class NotificationEvent:
    """One processed notification and the status the confirming read found.

    Attributes:
        notification: what arrived.
        status: the confirmed raw status (``sts.conf`` / ``txSts``), or None when the
            confirming read failed.
        outcome: the confirmed outcome (``Outcome.PENDING`` while not final).
        final: True when the confirmed status is final.
        first: True when this final status reached the callbacks now (False for a
            duplicate, a late delivery, or a status that is not final).
        error: the error of a failed confirming read.
    """

    notification: Notification
    status: str | None
    outcome: Outcome
    final: bool
    first: bool
    error: PaymentsError | None = None


@dataclass(slots=True)
class ReceiverStats:
    """Counters of a receiver (tests and the benchmark read them).

    Attributes:
        received: requests handled.
        accepted: notifications committed to the inbox (answered 202).
        rejected: refusals by HTTP status (401, 413, 422, ...).
        queue_full: notifications refused with 503 because the inbox was at its bound.
        store_failures: notifications refused with 503 because the inbox could not be
            written.
        confirm_reads: confirming GETs made.
        confirm_failures: confirming GETs that failed (after the client's retries).
        known_final: notifications for an id already confirmed final (no GET made).
        callbacks: final statuses whose callbacks returned (one per final status per id).
        delivered: of those, the ones whose "delivered" mark is committed.
        callback_errors: callback attempts that raised (each is retried, then parked).
        parked: items parked as failed: after ``Retries.callback_attempts`` failed
            callback attempts, or ``Retries.not_found_reads`` reads answered 404.
        not_found: items parked because the service answered 404 to every read (an id
            it does not know).
        write_retries: writes of a delivery's outcome (the completion after its callback
            returned, or the retry after it raised) that failed and were tried again; the
            item stays held meanwhile, so its callback never runs again for it.
        tracked: submissions of the attached client tracked for the sweep.
        track_failures: submissions that could not be tracked (the inbox was not
            writable); their outcomes reach the callbacks only by a notification.
    """

    received: int = 0
    accepted: int = 0
    rejected: Counter[int] = field(default_factory=Counter)
    queue_full: int = 0
    store_failures: int = 0
    confirm_reads: int = 0
    confirm_failures: int = 0
    known_final: int = 0
    callbacks: int = 0
    delivered: int = 0
    callback_errors: int = 0
    parked: int = 0
    not_found: int = 0
    write_retries: int = 0
    tracked: int = 0
    track_failures: int = 0
