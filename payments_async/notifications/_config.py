"""The receiver's configuration as values: its bounds, how it tries again, its sweep."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._errors import ConfigurationError
from ._defaults import (
    NOTIFY_CALLBACK_ATTEMPTS,
    NOTIFY_CALLBACK_WAIT,
    NOTIFY_CALLBACK_WAIT_MAX,
    NOTIFY_MAX_BODY_BYTES,
    NOTIFY_NOT_FOUND_READS,
    NOTIFY_NOT_FOUND_WAIT,
    NOTIFY_QUEUE_SIZE,
    NOTIFY_SEEN_CAPACITY,
    NOTIFY_SWEEP_GRACE,
    NOTIFY_SWEEP_RATE,
    NOTIFY_WORKERS,
)

__all__ = ["ReceiverLimits", "Retries", "Sweep"]


def _at_least_one(owner: str, value: object, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{owner}.{name} must be an integer >= 1")


@dataclass(frozen=True, slots=True)
class ReceiverLimits:
    """How much a receiver takes on at once.

    Attributes:
        workers: notifications processed at once (confirming reads in flight).
        max_body_bytes: a larger notification body is refused with 413.
        queue_size: notifications the default in-memory inbox holds unprocessed; when it
            is full, 503 (the service redelivers). A durable inbox has no such bound.
        seen_capacity: confirmed final statuses remembered for the waiters and against
            duplicates, and delivered marks the in-memory inbox keeps.

    Raises:
        ConfigurationError: a value that is not an integer >= 1.
    """

    workers: int = NOTIFY_WORKERS
    max_body_bytes: int = NOTIFY_MAX_BODY_BYTES
    queue_size: int = NOTIFY_QUEUE_SIZE
    seen_capacity: int = NOTIFY_SEEN_CAPACITY

    def __post_init__(self) -> None:
        for name in ("workers", "max_body_bytes", "queue_size", "seen_capacity"):
            _at_least_one("ReceiverLimits", getattr(self, name), name)


@dataclass(frozen=True, slots=True)
class Sweep:
    """The reconciling sweep: how a tracked id whose notification never came is read.

    Attributes:
        grace: seconds an id given to ``track`` may go without its final status before
            the sweep reads it (and again every ``grace`` until it is final).
        rate: reads per second the sweep makes at most, over all tracked ids.
        track_submissions: track every pacs.008 and camt.056 the attached client submits
            while the receiver is started; False leaves tracking to ``receiver.track``.

    Raises:
        ConfigurationError: ``grace`` or ``rate`` not positive and finite.
    """

    grace: float = NOTIFY_SWEEP_GRACE
    rate: float = NOTIFY_SWEEP_RATE
    track_submissions: bool = True

    def __post_init__(self) -> None:
        for name in ("grace", "rate"):
            value = getattr(self, name)
            if isinstance(value, bool) or not (value > 0 and math.isfinite(value)):
                raise ConfigurationError(f"Sweep.{name} must be positive and finite")


@dataclass(frozen=True, slots=True)
class Retries:
    """How a receiver tries again what failed while processing a notification.

    ```python
    NotificationReceiver(client, auth=auth, retries=Retries(callback_attempts=3))
    ```

    A confirming read that failed (no answer, a 5xx, a 401 after a token refresh) is tried
    again with backoff for as long as it fails, and never parks the notification: the
    status it would confirm is real. A read the service answers 404 is different: the id
    is unknown to it (a forged or mistyped notice). It is read again ``not_found_reads - 1``
    times, in case the service's read side has not caught up with its notifier, and then
    parked as failed with that reason and never read again (a new notification for the id
    starts over).

    Attributes:
        callback_attempts: attempts of a delivery callback that raises (each logged)
            before its notification is parked as failed.
        wait: seconds before the first retry of a failed callback or confirming read;
            each retry waits twice as long as the one before, up to
            ``NOTIFY_CALLBACK_WAIT_MAX`` (60 s).
        not_found_reads: confirming reads answered 404 before the notification is
            parked; at least 1.
        not_found_wait: seconds before the second of those reads; each further one waits
            twice as long (by default 3 reads over 6 s, longer than the 5 s during which a
            waiter takes a 404 for "not visible yet").

    Raises:
        ConfigurationError: a count below 1, or a wait that is negative, not finite or
            (``wait``) above 60 s.
    """

    callback_attempts: int = NOTIFY_CALLBACK_ATTEMPTS
    wait: float = NOTIFY_CALLBACK_WAIT
    not_found_reads: int = NOTIFY_NOT_FOUND_READS
    not_found_wait: float = NOTIFY_NOT_FOUND_WAIT

    def __post_init__(self) -> None:
        for name in ("callback_attempts", "not_found_reads"):
            _at_least_one("Retries", getattr(self, name), name)
        if not 0 <= self.wait <= NOTIFY_CALLBACK_WAIT_MAX:
            raise ConfigurationError(
                f"Retries.wait must be between 0 and {NOTIFY_CALLBACK_WAIT_MAX} seconds"
            )
        if not (self.not_found_wait >= 0 and math.isfinite(self.not_found_wait)):
            raise ConfigurationError("Retries.not_found_wait must be a finite number >= 0")

    def backoff(self, failures: int) -> float:
        """Seconds to wait after ``failures`` failed callbacks or transient reads in a row."""
        wait: float = self.wait * 2.0 ** max(failures - 1, 0)
        return min(wait, NOTIFY_CALLBACK_WAIT_MAX)

    def not_found_backoff(self, reads: int) -> float:
        """Seconds to wait after ``reads`` reads answered 404 (fewer than the bound)."""
        return float(self.not_found_wait * 2.0 ** max(reads - 1, 0))
