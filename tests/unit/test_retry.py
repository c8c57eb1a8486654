"""Retry decisions, Retry-After parsing, backoff bounds and the retry budget."""

from __future__ import annotations

import email.utils
import random
import time

import pytest

from payments_async import RetryPolicy
from payments_async._errors import (
    ApiError,
    AuthenticationError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitedError,
    ServerError,
    TransportError,
    ValidationError,
)
from payments_async._retry import RetryBudget, is_retryable, parse_retry_after


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", 0.0),
        ("7", 7.0),
        (" 12 ", 12.0),
        ("1.5", 1.5),
        ("-3", 0.0),
        ("", None),
        (None, None),
        ("soon", None),
        ("nan", None),
        # Headers come from the network: none of these may raise (each did once).
        ("9" * 400, 2.0**31),  # beyond a float's range: RFC 9111's 2**31
        ("9" * 5000, 2.0**31),  # beyond int()'s digit limit
        ("\u00b2", None),  # str.isdigit() is true for a superscript two
        ("0042", 42.0),
    ],
)
def test_parse_retry_after_seconds(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value) == expected


def test_parse_retry_after_http_date() -> None:
    now = 1_700_000_000.0
    header = email.utils.formatdate(now + 42, usegmt=True)
    assert parse_retry_after(header, now=now) == pytest.approx(42.0)
    past = email.utils.formatdate(now - 100, usegmt=True)
    assert parse_retry_after(past, now=now) == 0.0


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
def test_retryable_statuses(status: int) -> None:
    assert is_retryable(ApiError("x", status=status))


@pytest.mark.parametrize(
    "exc",
    [
        ApiError("bad request", status=400),
        AuthenticationError("no", status=401),
        PermissionDeniedError("no", status=403),
        NotFoundError("no", status=404),
        ApiError("conflict", status=409),
        ServerError("not implemented", status=501),
        ValidationError.single("$.x", "bad"),
        ValueError("not ours"),
    ],
)
def test_not_retryable(exc: BaseException) -> None:
    assert not is_retryable(exc)


def test_transport_errors_are_retryable() -> None:
    assert is_retryable(TransportError("reset", request_sent=True))
    assert is_retryable(TransportError("refused", request_sent=False))


def test_backoff_full_jitter_stays_under_the_ceiling() -> None:
    policy = RetryPolicy(wait_initial=0.1, wait_max=1.0, wait_exp_base=2.0)
    rng = random.Random(1)
    for attempt, ceiling in [(1, 0.1), (2, 0.2), (3, 0.4), (4, 0.8), (5, 1.0), (9, 1.0)]:
        waits = [policy.backoff(attempt, None, rng) for _ in range(200)]
        assert all(0.0 <= w <= ceiling for w in waits)
        assert max(waits) > ceiling * 0.8  # jitter spreads over the whole range


def test_backoff_after_thousands_of_attempts_is_still_the_ceiling() -> None:
    # A 202 without an id is resubmitted until the call's deadline: with zero waits that
    # is thousands of attempts, past where the growth overflows a float.
    rng = random.Random(2)
    assert RetryPolicy.for_testing().backoff(5000, None, rng) == 0.0
    policy = RetryPolicy(wait_initial=0.001, wait_max=0.01, wait_exp_base=2.0)
    assert 0.0 <= policy.backoff(5000, None, rng) <= 0.01


def test_backoff_honours_retry_after_up_to_the_cap() -> None:
    policy = RetryPolicy(retry_after_cap=5.0)
    rng = random.Random(0)
    assert policy.backoff(1, RateLimitedError("x", status=429, retry_after=2.0), rng) == 2.0
    assert policy.backoff(1, RateLimitedError("x", status=429, retry_after=600.0), rng) == 5.0
    assert policy.backoff(1, ServerError("x", status=503, retry_after=3.0), rng) == 3.0


def test_for_testing_never_waits() -> None:
    policy = RetryPolicy.for_testing()
    rng = random.Random(0)
    assert policy.backoff(4, None, rng) == 0.0
    assert policy.backoff(1, RateLimitedError("x", status=429, retry_after=30.0), rng) == 0.0


def test_budget_pays_for_retries_and_refills_on_success() -> None:
    budget = RetryBudget(capacity=20, cost=5, timeout_cost=10, refill=1)
    assert budget.try_acquire(ServerError("x", status=500))
    assert budget.try_acquire(TransportError("timeout"))
    assert budget.level == 5
    assert budget.try_acquire(ServerError("x", status=500))
    assert budget.level == 0
    assert not budget.try_acquire(ServerError("x", status=500))
    for _ in range(30):
        budget.record_success()
    assert budget.level == 20  # never above capacity


async def test_retrying_stops_on_attempts() -> None:
    calls = 0

    async def failing() -> None:
        nonlocal calls
        calls += 1
        raise ServerError("boom", status=503)

    with pytest.raises(ServerError):
        await RetryPolicy.for_testing(attempts=3).run(failing)
    assert calls == 3


async def test_retrying_does_not_retry_client_errors() -> None:
    calls = 0

    async def failing() -> None:
        nonlocal calls
        calls += 1
        raise ApiError("bad", status=400)

    with pytest.raises(ApiError):
        await RetryPolicy.for_testing(attempts=5).run(failing)
    assert calls == 1


async def test_exhausted_budget_stops_retrying() -> None:
    calls = 0
    budget = RetryBudget(capacity=5, cost=5)
    policy = RetryPolicy(attempts=10, wait_initial=0, wait_max=0, budget=budget)

    async def failing() -> None:
        nonlocal calls
        calls += 1
        raise ServerError("boom", status=500)

    with pytest.raises(ServerError):
        await policy.run(failing)
    assert calls == 2  # one paid retry, then the bucket is empty


async def test_deadline_stops_before_a_sleep_that_would_pass_it() -> None:
    calls = 0
    policy = RetryPolicy(attempts=100, retry_after_cap=10.0, budget=None)

    async def failing() -> None:
        nonlocal calls
        calls += 1
        raise RateLimitedError("slow down", status=429, retry_after=2.0)

    with pytest.raises(RateLimitedError):
        await policy.run(failing, deadline=time.monotonic() + 0.5)
    assert calls == 1  # the 2 s Retry-After would pass the 0.5 s deadline


async def test_run_succeeds_at_once_without_retrying() -> None:
    budget = RetryBudget(capacity=10, cost=5, refill=1)
    budget.try_acquire(ServerError("x", status=500))

    async def ok() -> str:
        return "done"

    assert await RetryPolicy(budget=budget).run(ok) == "done"
    assert budget.level == 6  # a success refills the budget


async def test_run_tells_each_retry_its_attempt_error_and_sleep() -> None:
    calls = 0
    sleeps: list[tuple[int, str, float]] = []

    async def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise ServerError("boom", status=503)
        return "done"

    def on_retry(attempt: int, exc: BaseException, sleep: float) -> None:
        sleeps.append((attempt, type(exc).__name__, sleep))

    policy = RetryPolicy.for_testing(attempts=3)
    assert await policy.run(flaky, on_retry=on_retry) == "done"
    assert calls == 3
    assert sleeps == [(1, "ServerError", 0.0), (2, "ServerError", 0.0)]


async def test_run_gives_up_after_attempts_counting_the_first() -> None:
    calls = 0

    async def failing() -> None:
        nonlocal calls
        calls += 1
        raise TransportError("reset")

    with pytest.raises(TransportError):
        await RetryPolicy.for_testing(attempts=4).run(failing)
    assert calls == 4


async def test_run_does_not_retry_what_is_not_retryable() -> None:
    calls = 0

    async def refused() -> None:
        nonlocal calls
        calls += 1
        raise NotFoundError("no", status=404)

    with pytest.raises(NotFoundError):
        await RetryPolicy.for_testing().run(refused)
    assert calls == 1
