"""The receiver's configuration as values: how it tries again, and when it gives up."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._errors import ConfigurationError
from ._defaults import (
    NOTIFY_CALLBACK_ATTEMPTS,
    NOTIFY_CALLBACK_WAIT,
    NOTIFY_CALLBACK_WAIT_MAX,
    NOTIFY_NOT_FOUND_READS,
    NOTIFY_NOT_FOUND_WAIT,
)

__all__ = ["Retries"]


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
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"Retries.{name} must be an integer >= 1")
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
