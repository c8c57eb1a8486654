"""The service's clock as learned from HTTP ``Date`` headers (pure; no I/O)."""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Callable

from ._constants import CLOCK_SKEW_THRESHOLD

__all__ = ["ClockSkew", "parse_http_date"]


def parse_http_date(value: str | None) -> float | None:
    """Epoch seconds of an HTTP ``Date`` header (RFC 9110 IMF-fixdate and the obsolete forms).

    Returns None when the header is absent, unreadable or not in GMT: a date we cannot
    place on the time line teaches us nothing.
    """
    if not value:
        return None
    try:
        when = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000" (no zone information) or a missing zone
        return None
    stamp = when.timestamp()
    return stamp if math.isfinite(stamp) else None


class ClockSkew:
    """How far the service's clock is from ours, and the time to sign JWTs with.

    JWT ``iat``/``nbf``/``exp`` are judged on the service's clock. A client whose clock is
    minutes off has its assertions and SCA tokens refused. Like botocore, we learn the
    service's time from the ``Date`` header of its answers and, once the difference passes
    ``threshold``, sign on the service's time: `now` is ``time.time()`` plus the
    applied offset.

    ``Date`` has a resolution of one second and the answer was written somewhere between
    sending the request and reading the response, so each observation is
    ``date + 0.5 - midpoint(sent, received)``, good to about half a second plus half the
    round trip. The applied offset only moves when the estimate differs from it by at
    least ``threshold`` (hysteresis): it does not flap with the one-second resolution, and
    an offset that changed means "our tokens were signed on a clock that was wrong by more
    than the threshold", which is what `explains` tells a caller holding a 401.

    Args:
        threshold: seconds of difference below which our own clock is trusted; None
            trusts it always (observations are still recorded in ``estimate``).
        clock: our wall clock in epoch seconds (``time.time``; tests inject one).
    """

    __slots__ = ("_clock", "estimate", "offset", "threshold")

    def __init__(
        self,
        threshold: float | None = CLOCK_SKEW_THRESHOLD,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if threshold is not None and (
            isinstance(threshold, bool)
            or not isinstance(threshold, int | float)
            or not threshold > 0
            or not math.isfinite(threshold)
        ):
            raise ValueError("the clock skew threshold must be a positive number of seconds")
        self.threshold = threshold
        self._clock = clock
        self.offset = 0.0  # seconds added to our clock when signing (0: our clock is trusted)
        self.estimate: float | None = None  # the latest observation, applied or not

    def __repr__(self) -> str:
        return f"<ClockSkew offset={self.offset:+.1f}s threshold={self.threshold}>"

    def now(self) -> float:
        """The time to sign with: our clock, corrected by the applied offset."""
        return self._clock() + self.offset

    def observe(self, date_header: str | None, *, elapsed: float = 0.0) -> bool:
        """Learn from one response's ``Date`` header.

        Args:
            date_header: the header's value (None when absent: nothing is learned).
            elapsed: seconds between sending the request and reading this response.

        Returns:
            True when the applied offset changed (by at least ``threshold``).
        """
        server = parse_http_date(date_header)
        if server is None:
            return False
        received = self._clock()
        midpoint = received - max(elapsed, 0.0) / 2
        estimate = server + 0.5 - midpoint
        self.estimate = estimate
        if self.threshold is None:
            return False
        target = estimate if abs(estimate) >= self.threshold else 0.0
        if abs(target - self.offset) < self.threshold:
            return False
        self.offset = target
        return True

    def explains(self, signed_with: float) -> bool:
        """Whether a refusal of tokens signed with offset ``signed_with`` is the clock's fault.

        Call it after `observe` on the refusal: True when the offset now applied
        differs from the one the tokens were signed with, so signing again can succeed.
        """
        return self.offset != signed_with
