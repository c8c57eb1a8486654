"""Polling until a final status: the schedule (pure) and one loop shared by both waiters."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Protocol, TypeVar

from ._constants import (
    POLL_INITIAL,
    POLL_JITTER,
    POLL_MAX,
    POLL_MULTIPLIER,
    POLL_NOT_FOUND_GRACE,
)
from ._errors import ConfigurationError, NotFoundError, PollTimeoutError
from ._retry import is_retryable
from .iso20022.codes import Outcome

__all__ = ["NotificationSource", "PollPolicy", "poll_until_final"]

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

    def __post_init__(self) -> None:
        for name in ("initial", "maximum", "multiplier", "jitter", "not_found_grace"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigurationError(
                    f"PollPolicy.{name} must be a number, got {type(value).__name__}"
                )
            if value != value or value in (float("inf"), float("-inf")):
                raise ConfigurationError(f"PollPolicy.{name} must be finite")
        if self.initial <= 0 or self.maximum < self.initial:
            raise ConfigurationError("PollPolicy needs 0 < initial <= maximum")
        if self.multiplier < 1:
            raise ConfigurationError("PollPolicy.multiplier must be >= 1")
        if not 0 <= self.jitter < 1:
            raise ConfigurationError("PollPolicy.jitter must be in [0, 1)")
        if self.not_found_grace < 0:
            raise ConfigurationError("PollPolicy.not_found_grace must be >= 0")

    def intervals(self, rng: random.Random) -> Iterator[float]:
        """The (endless) sequence of sleeps between polls."""
        base = self.initial
        while True:
            spread = base * self.jitter
            yield max(0.0, base + rng.uniform(-spread, spread))
            base = min(self.maximum, base * self.multiplier)


class NotificationSource(Protocol):
    """What the waiters know of a notification receiver: an id's event and its result."""

    def watch(self, payments_service_id: str) -> asyncio.Event:
        """An event set once a final status of this id has been confirmed."""
        ...

    def unwatch(self, payments_service_id: str, event: asyncio.Event) -> None:
        """Forget an event returned by ``watch``."""
        ...

    def confirmed(self, payments_service_id: str, kind: str) -> object | None:
        """The confirmed final message (Pacs002 or Camt029) of this id, if known."""
        ...


async def _pause(seconds: float, wake: asyncio.Event | None) -> None:
    """Sleep ``seconds``, or less when ``wake`` is set meanwhile (then clear it)."""
    if wake is None:
        await asyncio.sleep(seconds)
        return
    try:
        async with asyncio.timeout(seconds):
            await wake.wait()
    except TimeoutError:
        return
    wake.clear()


async def poll_until_final(
    fetch: Callable[[], Awaitable[T]],
    status_of: Callable[[T], tuple[Outcome, tuple[str, ...]]],
    *,
    payments_service_id: str,
    timeout: float,
    policy: PollPolicy,
    what: str,
    rng: random.Random | None = None,
    wake: asyncio.Event | None = None,
    peek: Callable[[], T | None] | None = None,
) -> T:
    """Call ``fetch`` until its outcome is settled, or raise when ``timeout`` passes.

    Settled means ACCEPTED or REJECTED, or UNKNOWN (codes that cannot be classified, or
    that contradict each other) read twice in a row with the same codes: such an answer
    is returned at once for the caller to see, not polled to the deadline. An answer
    without any code counts as pending.

    Transient errors (the same ones a request retries on) and a 404 within the grace
    period are logged and polled again; any other error propagates at once. Cancelling
    the awaiting task stops polling immediately: the only await points are the fetch and
    the sleep, both cancellable.

    Args:
        fetch: one read of the status (it applies its own retries).
        status_of: ``(outcome, raw codes)`` of a result, the group code first.
        payments_service_id: the id polled, for errors and logs.
        timeout: overall deadline in seconds.
        policy: the interval schedule.
        what: a word for logs ("cancellation outcome").
        rng: random source for the jitter.
        wake: set by a notification receiver when this id's final status is confirmed;
            with it, the first poll waits one interval (polling is then the safety net)
            and every wait ends early when it is set.
        peek: a final result known without a read (a confirmed notification), or None.

    Raises:
        PollTimeoutError: the deadline passed first; carries every raw code seen.
    """
    start = time.monotonic()
    deadline = start + timeout
    last_status: str | None = None
    seen: dict[str, None] = {}  # every raw code, in the order first seen
    unknown: tuple[str, ...] | None = None  # the codes of the previous read, if UNKNOWN
    polls = 0
    schedule = policy.intervals(rng or random.Random())
    if wake is not None:
        early = peek() if peek is not None else None
        if early is not None:
            return early
        await _pause(min(next(schedule), timeout), wake)
    for interval in schedule:
        early = peek() if peek is not None else None
        if early is not None:
            return early
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
            outcome, codes = status_of(result)
            seen.update(dict.fromkeys(codes))
            last_status = codes[0] if codes else None
            logger.debug(
                "poll %s %s: #%d codes=%s outcome=%s",
                what,
                payments_service_id,
                polls,
                codes,
                outcome.value,
            )
            if outcome.is_final:
                return result
            if outcome is Outcome.UNKNOWN and codes:
                if codes == unknown:
                    return result  # the same unclassifiable answer twice: surface it
                unknown = codes
            else:
                unknown = None
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        await _pause(min(interval, remaining), wake)
    raise PollTimeoutError(
        f"no final {what} after {timeout:g}s and {polls} polls",
        payments_service_id=payments_service_id,
        last_status=last_status,
        statuses=tuple(seen),
    )
