"""The client-side rate: RateLimit's checks and the bucket's schedule on a fake clock."""

from __future__ import annotations

import asyncio
import math

import pytest

from payments_async import ConfigurationError, RateLimit, RateLimiter, limit_rate
from payments_async._rate import TokenBucket, rate_limiter, scoped_limiter


class FakeClock:
    """A monotonic clock that moves only when told; ``sleep`` records when a send may go."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sends: list[float] = []  # the time each acquire let its request go

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.sends.append(self.now + seconds)


def bucket(clock: FakeClock, per_second: float, **kw: object) -> TokenBucket:
    return TokenBucket(RateLimit(per_second, **kw), clock=clock, sleep=clock.sleep)  # type: ignore[arg-type]


async def sends(clock: FakeClock, b: TokenBucket, n: int) -> list[float]:
    """Offsets from now at which ``n`` requests asking at once are let go."""
    start = clock.now
    out = []
    for _ in range(n):
        before = len(clock.sends)
        assert await b.acquire(math.inf)
        out.append(round((clock.sends[-1] if len(clock.sends) > before else clock.now) - start, 9))
    return out


async def test_requests_asking_at_once_go_one_interval_apart() -> None:
    clock = FakeClock()
    assert await sends(clock, bucket(clock, 5), 6) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]


async def test_a_burst_goes_at_once_then_the_rate_holds() -> None:
    clock = FakeClock()
    b = bucket(clock, 10, burst=3)
    assert await sends(clock, b, 6) == [0.0, 0.0, 0.0, 0.1, 0.2, 0.3]


async def test_a_quiet_spell_refills_the_burst_and_no_more() -> None:
    clock = FakeClock()
    b = bucket(clock, 10, burst=3)
    await sends(clock, b, 6)
    clock.now += 60.0  # idle for a minute: still only 3 at once
    assert await sends(clock, b, 5) == [0.0, 0.0, 0.0, 0.1, 0.2]


async def test_requests_spread_over_time_are_not_delayed() -> None:
    clock = FakeClock()
    b = bucket(clock, 4)
    for _ in range(5):
        assert await sends(clock, b, 1) == [0.0]
        clock.now += 0.25
    assert clock.sends == []


async def test_a_slot_past_the_budget_fails_at_once_and_takes_nothing() -> None:
    clock = FakeClock()
    b = bucket(clock, 2)  # one every 0.5 s
    assert await b.acquire(0.0)
    assert not await b.acquire(0.4)  # its slot is 0.5 s away
    assert clock.sends == []  # no sleep at all
    assert await b.acquire(0.5)  # the same slot is still free
    assert clock.sends == [clock.now + 0.5]


async def test_a_cancelled_wait_gives_its_slot_back() -> None:
    clock = FakeClock()
    gate = asyncio.Event()

    async def blocking_sleep(seconds: float) -> None:
        await gate.wait()

    b = TokenBucket(RateLimit(1), clock=clock, sleep=blocking_sleep)
    assert await b.acquire(math.inf)
    waiter = asyncio.ensure_future(b.acquire(math.inf))
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    # The cancelled request's slot, 1 s away, is free again (else the next would be 2 s).
    gate.set()
    assert not await b.acquire(0.9)
    assert await b.acquire(1.0)


async def test_adaptive_halves_on_429_and_on_503_with_retry_after_only() -> None:
    clock = FakeClock()
    b = bucket(clock, 20, adaptive=True)
    b.observe(503, {})
    b.observe(500, {"Retry-After": "1"})
    b.observe(200, {})
    assert b.rate == 20
    b.observe(429, {})
    assert b.rate == 10
    b.observe(503, {"Retry-After": "2"})
    assert b.rate == pytest.approx(5)
    assert await sends(clock, b, 3) == [0.0, 0.2, 0.4]  # the halved rate paces sends


async def test_adaptive_rate_recovers_slowly_and_never_passes_the_limit() -> None:
    clock = FakeClock()
    b = bucket(clock, 20, adaptive=True)
    b.observe(429, {})
    seen = [b.rate]
    for _ in range(20):
        clock.now += 0.25
        seen.append(b.rate)
    assert seen[0] == pytest.approx(10)
    assert seen == sorted(seen)  # grows back, never drops without a throttling answer
    assert 10 < seen[4] < 20  # a second later: part of the way back
    assert seen[-1] == 20  # five seconds later: all the way, and no further
    clock.now += 3600
    assert b.rate == 20


async def test_adaptive_rate_has_a_floor() -> None:
    clock = FakeClock()
    b = bucket(clock, 1, adaptive=True)
    for _ in range(10):
        b.observe(429, {})
    assert b.rate == 0.5


async def test_a_fixed_rate_ignores_throttling_answers() -> None:
    clock = FakeClock()
    b = bucket(clock, 20)
    b.observe(429, {"Retry-After": "5"})
    assert b.rate == 20


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"per_second": 0}, "positive"),
        ({"per_second": -1}, "positive"),
        ({"per_second": math.nan}, "positive"),
        ({"per_second": math.inf}, "positive"),
        ({"per_second": "5"}, "must be a number"),
        ({"per_second": True}, "must be a number"),
        ({"per_second": 5, "burst": 0}, "burst"),
        ({"per_second": 5, "burst": 1.5}, "burst"),
        ({"per_second": 5, "burst": True}, "burst"),
        ({"per_second": 5, "adaptive": "yes"}, "adaptive"),
    ],
)
def test_rate_limit_refuses_bad_values(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        RateLimit(**kwargs)  # type: ignore[arg-type]


def test_rate_limit_takes_an_int_and_keeps_a_float() -> None:
    limit = RateLimit(20)
    assert limit.per_second == 20.0
    assert isinstance(limit.per_second, float)
    assert limit.burst == 1
    assert limit.adaptive is False


def test_what_a_client_accepts_as_its_rate_limit() -> None:
    assert rate_limiter(None) is None
    by_number = rate_limiter(12.5)
    assert isinstance(by_number, TokenBucket)
    assert by_number.limit == RateLimit(12.5)
    by_value = rate_limiter(RateLimit(3, burst=2))
    assert isinstance(by_value, TokenBucket)
    assert by_value.limit.burst == 2
    own = TokenBucket(RateLimit(1))
    assert rate_limiter(own) is own
    for bad in ("10", True, [10], RateLimit):
        with pytest.raises(ConfigurationError, match="rate_limit must be"):
            rate_limiter(bad)
    with pytest.raises(ConfigurationError, match="positive"):
        rate_limiter(0)


def test_limit_rate_scopes_a_limiter_to_a_block() -> None:
    own: RateLimiter = TokenBucket(RateLimit(1))
    assert scoped_limiter() is None
    with limit_rate(None):
        assert scoped_limiter() is None
    with limit_rate(own):
        assert scoped_limiter() is own
    assert scoped_limiter() is None


async def test_admit_waits_until_the_bucket_is_booked_at_most_the_backlog_ahead() -> None:
    clock = FakeClock()
    b = bucket(clock, 10)
    await sends(clock, b, 25)  # booked 2.5 s ahead
    waits: list[float] = []

    async def sleep(seconds: float) -> None:  # time passes while admit sleeps
        waits.append(seconds)
        clock.now += seconds

    b._sleep = sleep
    await b.admit(1.0)
    assert waits == [pytest.approx(1.5)]
    await b.admit(1.0)  # nothing booked since: no wait
    assert len(waits) == 1


def test_rate_limiter_of_and_current() -> None:
    limiter = RateLimiter.of(RateLimit(5))
    assert isinstance(limiter, TokenBucket)
    assert RateLimiter.of(limiter) is limiter
    with pytest.raises(ConfigurationError):
        RateLimiter.of(None)  # type: ignore[arg-type]
    assert RateLimiter.current() is None
    with limit_rate(limiter):
        assert RateLimiter.current() is limiter
