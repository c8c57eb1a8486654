"""Retry decisions (pure), backoff maths, a shared retry budget, and the retry loop."""

from __future__ import annotations

import asyncio
import email.utils
import math
import random
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from ._constants import (
    RETRY_AFTER_CAP,
    RETRY_ATTEMPTS,
    RETRY_BUDGET_CAPACITY,
    RETRY_BUDGET_COST,
    RETRY_BUDGET_REFILL,
    RETRY_BUDGET_TIMEOUT_COST,
    RETRY_WAIT_EXP_BASE,
    RETRY_WAIT_INITIAL,
    RETRY_WAIT_MAX,
    RETRYABLE_STATUSES,
)
from ._errors import ApiError, ConfigurationError, TransportError

T = TypeVar("T")

__all__ = [
    "RetryBudget",
    "RetryPolicy",
    "is_retryable",
    "parse_retry_after",
]


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date).

    Returns None when the header is absent or unreadable; never a negative number.
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    if text.isascii() and text.isdigit():  # delta-seconds; str.isdigit also takes "²"
        seconds = float(text)  # any number of digits: beyond a float's range is inf
        # RFC 9111 1.2.2: a delta-seconds too large to hold counts as 2**31 (the retry
        # policy's cap applies to it as to any long wait).
        return seconds if math.isfinite(seconds) else float(2**31)
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def is_retryable(exc: BaseException) -> bool:
    """Whether an error is worth another attempt: transport failures, 408/429/5xx.

    400, 401, 403, 404, validation errors and TLS failures (an untrusted certificate
    stays untrusted) are never retried; 401 gets exactly one token refresh elsewhere.
    """
    if isinstance(exc, TransportError):
        return exc.retryable
    if isinstance(exc, ApiError):
        return exc.status in RETRYABLE_STATUSES
    return False


class RetryBudget:
    """A token bucket shared by all operations of one client (botocore "standard" mode).

    Each retry takes ``cost`` tokens (``timeout_cost`` after a timeout or dropped
    connection); each success gives ``refill`` back. When the bucket cannot pay for a
    retry, the error is raised at once: a failing service is not hammered by every
    caller's retries at the same time.
    """

    def __init__(
        self,
        capacity: int = RETRY_BUDGET_CAPACITY,
        *,
        cost: int = RETRY_BUDGET_COST,
        timeout_cost: int = RETRY_BUDGET_TIMEOUT_COST,
        refill: int = RETRY_BUDGET_REFILL,
    ) -> None:
        self.capacity = capacity
        self.cost = cost
        self.timeout_cost = timeout_cost
        self.refill = refill
        self._level = capacity
        self._lock = threading.Lock()

    @property
    def level(self) -> int:
        """Tokens left in the bucket."""
        return self._level

    def try_acquire(self, exc: BaseException) -> bool:
        """Take the price of one retry after ``exc``; False when the budget is spent."""
        price = self.timeout_cost if isinstance(exc, TransportError) else self.cost
        with self._lock:
            if self._level < price:
                return False
            self._level -= price
            return True

    def record_success(self) -> None:
        """Give tokens back after a successful exchange."""
        if self._level >= self.capacity:
            return  # full, as it is while the service answers: no lock to take
        with self._lock:
            self._level = min(self.capacity, self._level + self.refill)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """When and how long to retry one operation (stamina-style named defaults).

    Backoff is exponential with full jitter: before attempt ``n+1`` we sleep a uniform
    random time in ``[0, min(wait_max, wait_initial * wait_exp_base ** (n - 1))]``, or the
    service's ``Retry-After`` (capped at ``retry_after_cap``) when it sent one. We stop
    after ``attempts`` attempts or when the next sleep would pass the call's deadline
    (``Timeout.total``), whichever comes first.

    Args:
        attempts: maximum number of attempts, the first included.
        wait_initial: the first backoff ceiling in seconds.
        wait_max: the largest backoff ceiling in seconds.
        wait_exp_base: growth factor of the ceiling.
        retry_after_cap: the longest ``Retry-After`` we honour.
        budget: the shared retry budget, or None for none.
    """

    attempts: int = RETRY_ATTEMPTS
    wait_initial: float = RETRY_WAIT_INITIAL
    wait_max: float = RETRY_WAIT_MAX
    wait_exp_base: float = RETRY_WAIT_EXP_BASE
    retry_after_cap: float = RETRY_AFTER_CAP
    budget: RetryBudget | None = field(default_factory=RetryBudget, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int):
            raise ConfigurationError(
                f"RetryPolicy.attempts must be an int, got {type(self.attempts).__name__}"
            )
        if self.attempts < 1:
            raise ConfigurationError("RetryPolicy.attempts must be >= 1 (the first attempt)")
        for name in ("wait_initial", "wait_max", "wait_exp_base", "retry_after_cap"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigurationError(
                    f"RetryPolicy.{name} must be a number, got {type(value).__name__}"
                )
            if not math.isfinite(value) or value < 0:
                raise ConfigurationError(f"RetryPolicy.{name} must be a finite number >= 0")
        if self.wait_max < self.wait_initial or self.wait_exp_base < 1:
            raise ConfigurationError(
                "RetryPolicy needs wait_initial <= wait_max, wait_exp_base >= 1"
            )
        if self.budget is not None and not isinstance(self.budget, RetryBudget):
            raise ConfigurationError("RetryPolicy.budget must be a RetryBudget or None")

    @classmethod
    def for_testing(cls, attempts: int = RETRY_ATTEMPTS) -> RetryPolicy:
        """A policy that retries like the real one but never sleeps (for tests)."""
        return cls(
            attempts=attempts,
            wait_initial=0.0,
            wait_max=0.0,
            retry_after_cap=0.0,
            budget=None,
        )

    def backoff(self, attempt: int, exc: BaseException | None, rng: random.Random) -> float:
        """Seconds to sleep after failed attempt number ``attempt`` (1-based)."""
        if isinstance(exc, ApiError) and exc.retry_after is not None:
            return min(exc.retry_after, self.retry_after_cap)
        try:
            growth = self.wait_exp_base ** (attempt - 1)
        except OverflowError:  # far past wait_max: a long run of zero waits gets here
            growth = math.inf
        ceiling = min(self.wait_max, self.wait_initial * growth) if self.wait_initial > 0 else 0.0
        return rng.uniform(0.0, ceiling) if ceiling > 0 else 0.0

    async def run(
        self,
        fn: Callable[[], Awaitable[T]],
        *,
        retry_on: Callable[[BaseException], bool] = is_retryable,
        rng: random.Random | None = None,
        on_retry: Callable[[int, BaseException, float], None] | None = None,
        deadline: float | None = None,
    ) -> T:
        """Await ``fn()``, retrying it under this policy: one plain loop.

        After a failure ``retry_on`` accepts, the next attempt comes after `backoff`,
        unless that was the last attempt, the sleep would pass ``deadline``, or the
        budget cannot pay for it (charged last, so only for a retry that happens); then
        the failure is raised. Each success refills the budget.

        Args:
            fn: one attempt.
            retry_on: which exceptions earn another attempt; each operation states it.
            rng: random source for the jitter.
            on_retry: told ``(attempt number, its error, seconds to sleep)`` before each
                sleep (logging, metrics hooks).
            deadline: absolute ``time.monotonic()`` deadline; None: attempts alone stop.
        """
        source = rng or random.Random()
        budget = self.budget
        attempt = 0
        while True:
            attempt += 1
            try:
                result = await fn()
            except Exception as exc:
                if not retry_on(exc) or attempt >= self.attempts:
                    raise
                sleep = self.backoff(attempt, exc, source)
                if deadline is not None and time.monotonic() + sleep >= deadline:
                    raise
                if budget is not None and not budget.try_acquire(exc):
                    raise
                if on_retry is not None:
                    on_retry(attempt, exc, sleep)
                await asyncio.sleep(sleep)
            else:
                if budget is not None:
                    budget.record_success()
                return result
