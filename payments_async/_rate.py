"""A client-side request rate: ``RateLimit`` values, the in-process bucket, shared limiters.

A ``PaymentsClient(rate_limit=...)`` sends at most that many requests per second to the
service's operations: every attempt, the resend after a 401 and every poll of a waiter
take a slot before they are sent. Token requests do not: the token endpoint is asked
about once per token lifetime, and a token refresh never waits behind operations.

The in-process bucket is a generic cell rate algorithm (the token bucket written as the
time the next request may go): each request reserves the next free slot and sleeps until
it with ``asyncio.sleep``, so requests go in the order they asked, and a request whose slot
comes after its call's deadline takes none.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import contextvars
import math
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ._constants import (
    RATE_ADAPTIVE_BETA,
    RATE_ADAPTIVE_MIN,
    RATE_ADAPTIVE_SCALE,
    RATE_LIMIT_BURST,
    RATE_THROTTLED_STATUSES,
)
from ._errors import ConfigurationError, TransportError

__all__ = [
    "RateLimit",
    "RateLimiter",
    "TokenBucket",
    "limit_rate",
    "rate_limiter",
    "scoped_limiter",
    "take_slot",
]


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most ``per_second`` requests per second from one client.

    Pass one (or a plain number of requests per second) to
    ``PaymentsClient(rate_limit=...)``. Every request to an operation takes a slot before
    it is sent: each attempt, the resend after a 401, each poll of a waiter. A request
    whose slot would come after its call's deadline takes none and fails at the deadline
    with a ``TransportError`` (``request_sent`` False), as one waiting for a free
    connection does: keep the requests you start at once well under ``per_second`` times
    their ``total`` timeout (a bulk run does: each row waits for a short backlog first).
    Token requests take no slot: the token endpoint is asked about once per token
    lifetime, and a refresh never waits behind operations.

    Args:
        per_second: requests per second at most, a positive, finite number.
        burst: requests that may go at once after a quiet spell (an int >= 1); with 1,
            requests are evenly spaced, ``1 / per_second`` seconds apart.
        adaptive: slow down when the service says it is overloaded, as botocore's
            adaptive retry mode: a 429, or a 503 with ``Retry-After``, halves the rate
            (down to ``RATE_ADAPTIVE_MIN`` per second), which then grows back along a
            cubic curve to ``per_second`` (seconds for a small rate, longer for a large
            one) while no answer says so again.

    Raises:
        ConfigurationError: a field is out of range or of the wrong type.
    """

    per_second: float
    burst: int = RATE_LIMIT_BURST
    adaptive: bool = False

    def __post_init__(self) -> None:
        rate = self.per_second
        if isinstance(rate, bool) or not isinstance(rate, int | float):
            raise ConfigurationError(
                f"RateLimit.per_second must be a number, got {type(rate).__name__}"
            )
        if not math.isfinite(rate) or rate <= 0:
            raise ConfigurationError("RateLimit.per_second must be a positive, finite number")
        object.__setattr__(self, "per_second", float(rate))
        if isinstance(self.burst, bool) or not isinstance(self.burst, int) or self.burst < 1:
            raise ConfigurationError(f"RateLimit.burst must be an int >= 1, got {self.burst!r}")
        if not isinstance(self.adaptive, bool):
            raise ConfigurationError("RateLimit.adaptive must be True or False")


_scoped: contextvars.ContextVar[RateLimiter | None] = contextvars.ContextVar(
    "payments_async_rate_limiter", default=None
)


class RateLimiter(abc.ABC):
    """Decides when each request may be sent; subclass it to share a rate between clients.

    ``RateLimiter.of(RateLimit(...))`` gives the in-process one; ``payments_async.bulk``
    shares a run's rate between worker processes through PostgreSQL. A limiter is used
    from one event loop.
    """

    @abc.abstractmethod
    async def acquire(self, budget: float) -> bool:
        """Wait until this request may be sent and take its slot.

        Args:
            budget: seconds left before the call's deadline.

        Returns:
            True once the request may go; False (without taking a slot, and at once when
            the limiter can tell) when no slot comes within ``budget``.
        """

    def observe(self, status: int, headers: Mapping[str, str]) -> None:  # noqa: B027
        """Told the status and headers of every answer; does nothing unless overridden."""

    async def admit(self, backlog: float) -> None:  # noqa: B027
        """Wait until the slots are booked at most ``backlog`` seconds ahead.

        For work that starts many calls over time (a bulk run calls it before each row):
        starting no more than the rate can serve keeps every request's wait for its slot
        short, well within its deadline. Returns at once unless overridden.
        """

    @classmethod
    def of(cls, value: float | RateLimit | RateLimiter) -> RateLimiter:
        """The limiter of a rate: ``value`` itself if it is a limiter, else a new
        in-process one for ``RateLimit`` ``value`` (or that many requests per second).

        Raises:
            ConfigurationError: ``value`` is none of these, or not a valid rate.
        """
        limiter = rate_limiter(value)
        if limiter is None:
            raise ConfigurationError("a rate is needed, got None")
        return limiter

    @classmethod
    def current(cls) -> RateLimiter | None:
        """The limiter of the enclosing ``limit_rate`` block, or None outside any."""
        return _scoped.get()


class TokenBucket(RateLimiter):
    """The in-process limiter of a ``RateLimit``, on a monotonic clock.

    Args:
        limit: the rate, burst and whether it adapts.
        clock: seconds of a monotonic clock (``time.monotonic``; a fake one in tests).
        sleep: waits that many seconds (``asyncio.sleep``).
    """

    def __init__(
        self,
        limit: RateLimit,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        self.limit = limit
        self._clock = clock
        self._sleep = sleep
        self._rate = limit.per_second
        # The theoretical arrival time: when the request after those reserved may go.
        self._next = -math.inf
        # Adaptive state: the rate when last throttled, and when that was.
        self._peak = limit.per_second
        self._throttled_at: float | None = None
        self._admitting = asyncio.Lock()

    @property
    def rate(self) -> float:
        """Requests per second allowed now (below ``per_second`` after a throttling)."""
        if self._throttled_at is not None:
            self._recover(self._clock())
        return self._rate

    async def acquire(self, budget: float) -> bool:
        """Reserve the next free slot and sleep until it; see ``RateLimiter.acquire``."""
        now = self._clock()
        if self._throttled_at is not None:
            self._recover(now)
        interval = 1.0 / self._rate
        send_at = max(now, self._next - (self.limit.burst - 1) * interval)
        if send_at - now > budget:
            return False
        self._next = reserved = max(self._next, send_at) + interval
        if send_at > now:
            try:
                await self._sleep(send_at - now)
            except asyncio.CancelledError:
                if self._next == reserved:  # nobody reserved after us: free the slot
                    self._next -= interval
                raise
        return True

    async def admit(self, backlog: float) -> None:
        """Wait until the slots are booked at most ``backlog`` seconds ahead; callers
        are let through one at a time, in the order they came."""
        async with self._admitting:
            while (ahead := self._next - self._clock()) > backlog:
                await self._sleep(ahead - backlog)

    def observe(self, status: int, headers: Mapping[str, str]) -> None:
        """Halve an adaptive rate on a 429, or on a 503 with ``Retry-After``."""
        if not self.limit.adaptive or status not in RATE_THROTTLED_STATUSES:
            return
        if status != 429 and "Retry-After" not in headers:
            return
        now = self._clock()
        if self._throttled_at is not None:
            self._recover(now)
        self._peak = self._rate
        self._rate = max(RATE_ADAPTIVE_MIN, self._rate * RATE_ADAPTIVE_BETA)
        self._throttled_at = now

    def _recover(self, now: float) -> None:
        """botocore's cubic growth back from a throttling, up to ``per_second``."""
        assert self._throttled_at is not None
        peak = self._peak
        k = (peak * (1 - RATE_ADAPTIVE_BETA) / RATE_ADAPTIVE_SCALE) ** (1 / 3)
        grown = RATE_ADAPTIVE_SCALE * (now - self._throttled_at - k) ** 3 + peak
        if grown >= self.limit.per_second:
            self._rate = self.limit.per_second
            self._throttled_at = None
        else:
            self._rate = max(self._rate, grown, RATE_ADAPTIVE_MIN)


def rate_limiter(value: object) -> RateLimiter | None:
    """The limiter of ``PaymentsClient(rate_limit=value)``: None, a number, a value, a limiter.

    Raises:
        ConfigurationError: anything else, or a number that is not a valid rate.
    """
    if value is None or isinstance(value, RateLimiter):
        return value
    if isinstance(value, RateLimit):
        return TokenBucket(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return TokenBucket(RateLimit(per_second=value))
    raise ConfigurationError(
        "rate_limit must be requests per second, a payments_async.RateLimit, "
        f"a RateLimiter or None, got {type(value).__name__}"
    )


scoped_limiter = _scoped.get


@contextlib.contextmanager
def limit_rate(limiter: RateLimiter | None) -> Iterator[None]:
    """Within this block (and the tasks it starts), requests take a slot from ``limiter``.

    Applies to every ``PaymentsClient``, in place of its own ``rate_limit`` for these
    requests. ``None`` changes nothing. Bulk workers use it to hold each row's requests
    to the rate of the row's run.
    """
    if limiter is None:
        yield
        return
    token = _scoped.set(limiter)
    try:
        yield
    finally:
        _scoped.reset(token)


async def take_slot(
    limiter: RateLimiter, deadline: float, context: dict[str, Any], floor: float
) -> float:
    """Wait for ``limiter``'s slot until ``deadline`` (``time.monotonic()``); return the
    seconds then left to it, at least ``floor``.

    Raises:
        TransportError: no slot before the deadline, raised once it has passed, as for a
            free connection: nothing was sent, and no retry is left to the call.
    """
    budget = deadline - time.monotonic()
    if not await limiter.acquire(budget):
        await asyncio.sleep(max(budget, 0.0))
        raise TransportError(
            "timed out waiting for a slot of the rate limit",
            request_sent=False,
            queued=True,
            **context,
        )
    return max(deadline - time.monotonic(), floor)
