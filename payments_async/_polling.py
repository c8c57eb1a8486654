"""Polling until a final status: the schedule (pure) and one loop shared by both waiters."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from ._constants import (
    POLL_INITIAL,
    POLL_JITTER,
    POLL_MAX,
    POLL_MULTIPLIER,
    POLL_NOT_FOUND_GRACE,
)
from ._errors import NotFoundError, PollTimeoutError
from ._retry import is_retryable

__all__ = ["PollPolicy", "poll_until_final"]

T = TypeVar("T")
logger = logging.getLogger("payments_async")


@dataclass(frozen=True, slots=True)
class PollPolicy:
    """How a waiter polls (named defaults in ``_constants``).

    Args:
        initial: the first interval in seconds.
        maximum: the largest interval in seconds.
        multiplier: growth of the interval after each poll.
        jitter: relative jitter applied to each interval (0.1 = +-10%), so thousands of
            waiters started together spread out instead of polling in lockstep.
        not_found_grace: seconds after the wait starts during which a 404 means "not
            visible yet" rather than "unknown id".
    """

    initial: float = POLL_INITIAL
    maximum: float = POLL_MAX
    multiplier: float = POLL_MULTIPLIER
    jitter: float = POLL_JITTER
    not_found_grace: float = POLL_NOT_FOUND_GRACE

    def intervals(self, rng: random.Random) -> Iterator[float]:
        """The (endless) sequence of sleeps between polls."""
        base = self.initial
        while True:
            spread = base * self.jitter
            yield max(0.0, base + rng.uniform(-spread, spread))
            base = min(self.maximum, base * self.multiplier)


async def poll_until_final(
    fetch: Callable[[], Awaitable[T]],
    status_of: Callable[[T], tuple[bool, str | None]],
    *,
    payments_service_id: str,
    timeout: float,
    policy: PollPolicy,
    what: str,
    rng: random.Random | None = None,
) -> T:
    """Call ``fetch`` until ``status_of`` says final, or raise when ``timeout`` passes.

    Transient errors (the same ones a request retries on) and a 404 within the grace
    period are logged and polled again; any other error propagates at once. Cancelling
    the awaiting task stops polling immediately: the only await points are the fetch and
    the sleep, both cancellable.

    Args:
        fetch: one read of the status (it applies its own retries).
        status_of: ``(is_final, raw_code)`` of a result.
        payments_service_id: the id polled, for errors and logs.
        timeout: overall deadline in seconds.
        policy: the interval schedule.
        what: a word for logs ("cancellation outcome").
        rng: random source for the jitter.

    Raises:
        PollTimeoutError: the deadline passed first; carries the last raw status seen.
    """
    start = time.monotonic()
    deadline = start + timeout
    last_status: str | None = None
    polls = 0
    for interval in policy.intervals(rng or random.Random()):
        polls += 1
        try:
            result = await fetch()
        except NotFoundError:
            if time.monotonic() - start > policy.not_found_grace:
                raise
            logger.debug("poll %s %s: not visible yet", what, payments_service_id)
        except Exception as exc:
            if not is_retryable(exc):
                raise
            logger.debug("poll %s %s: transient %s", what, payments_service_id, exc)
        else:
            final, last_status = status_of(result)
            logger.debug(
                "poll %s %s: #%d status=%s final=%s",
                what,
                payments_service_id,
                polls,
                last_status,
                final,
            )
            if final:
                return result
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        await asyncio.sleep(min(interval, remaining))
    raise PollTimeoutError(
        f"no final {what} after {timeout:g}s and {polls} polls",
        payments_service_id=payments_service_id,
        last_status=last_status,
    )
