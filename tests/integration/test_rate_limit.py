"""A client's rate against the sandbox: what the sandbox logged, not how long the test took."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from payments_async import (
    PaymentsClient,
    PollPolicy,
    PollTimeoutError,
    RateLimit,
    RateLimitedError,
    RetryPolicy,
    Timeout,
    TransportError,
)
from payments_async._rate import TokenBucket
from payments_async.sandbox import FaultConfig, SandboxConfig
from payments_async.testing import SandboxHandle, sandbox_server
from tests.factories import credit_transfer
from tests.support.requests_log import max_in_window, recording_requests


@pytest.fixture
async def sandbox() -> AsyncIterator[SandboxHandle]:
    async with sandbox_server(SandboxConfig(processing_delay=3600)) as sb:
        yield sb


def client_for(sb: SandboxHandle, **kwargs: object) -> PaymentsClient:
    assert sb.credentials is not None
    kwargs.setdefault("retry", RetryPolicy.for_testing(attempts=6))
    kwargs.setdefault("timeout", Timeout(total=20))
    kwargs.setdefault("poll", PollPolicy(initial=0.02, maximum=0.05))
    return PaymentsClient(sb.credentials, base_url=sb.url, **kwargs)  # type: ignore[arg-type]


async def _reads(client: PaymentsClient, n: int) -> tuple[float, list[float]]:
    """``n`` status reads asked for at once: when they were asked for and the start times
    the sandbox logged (both on the wall clock, as the sandbox's log records are)."""
    sub = await client.submit_credit_transfer(credit_transfer())
    with recording_requests() as log:
        asked = time.time()
        await asyncio.gather(
            *(client.get_credit_transfer_status(sub.payments_service_id) for _ in range(n))
        )
    times = log.times()
    assert len(times) == n  # every read reached the sandbox once
    return asked, times


async def test_a_client_sends_no_more_than_its_rate(sandbox: SandboxHandle) -> None:
    async with client_for(sandbox, rate_limit=20) as client:
        asked, times = await _reads(client, 60)
    # At most 20 a second: the k-th read starts no earlier than k/20 s after they were
    # asked for (one slot at once, RateLimit's burst). A late wake-up on a loaded machine
    # sends a read later, never earlier: counting reads in a window, which two late
    # wake-ups can crowd, is not what the limiter promises.
    assert all(t >= asked + k / 20 - 1e-3 for k, t in enumerate(times)), [
        round(t - asked, 3) for t in times
    ]
    # And not far slower: 59 slots after the first take 2.95 s; a limiter pacing at half
    # its rate would take 5.9 s (a rate from the first and last reads alone swings with
    # either one's wake-up).
    assert times[-1] - asked < 5.9


async def test_without_a_rate_the_same_reads_go_at_once(sandbox: SandboxHandle) -> None:
    # The control of the test above: its window count would catch an unpaced client.
    async with client_for(sandbox) as client:
        _, times = await _reads(client, 60)
    assert max_in_window(times, 1.0) > 40


async def test_polls_of_a_waiter_take_slots_too(sandbox: SandboxHandle) -> None:
    async with client_for(sandbox, rate_limit=RateLimit(10)) as client:
        sub = await client.submit_credit_transfer(credit_transfer())
        with recording_requests() as log, pytest.raises(PollTimeoutError):
            await client.wait_for_payment_status(sub.payments_service_id, timeout=1.5)
    times = log.times()
    # Polls every 0.02-0.05 s would make 30 or more; the rate lets about 15 through.
    assert 5 <= len(times) <= 17
    assert max_in_window(times, 1.0) <= 11


async def test_a_slot_past_the_deadline_is_never_taken_and_nothing_is_sent(
    sandbox: SandboxHandle,
) -> None:
    async with client_for(sandbox, rate_limit=RateLimit(0.5)) as client:
        sub = await client.submit_credit_transfer(credit_transfer())  # next slot: 2 s away
        with recording_requests() as log:
            with pytest.raises(TransportError, match="slot of the rate limit") as err:
                await client.get_credit_transfer_status(sub.payments_service_id, timeout=1.0)
            assert log.times() == []  # nothing reached the sandbox
            # The refused read took no slot: the next read gets the one 2 s after the POST.
            await client.get_credit_transfer_status(sub.payments_service_id, timeout=1.5)
    assert err.value.request_sent is False
    assert err.value.attempt == 1  # the deadline left no time for another attempt
    assert err.value.path is not None
    assert err.value.path.startswith("/payments/pacs002/")
    assert len(log.times()) == 1


async def test_an_adaptive_rate_halves_when_the_sandbox_answers_429(
    sandbox: SandboxHandle,
) -> None:
    limiter = TokenBucket(RateLimit(40, adaptive=True))
    async with client_for(sandbox, rate_limit=limiter) as client:
        sub = await client.submit_credit_transfer(credit_transfer())
        assert limiter.rate == 40
        sandbox.server.set_faults(FaultConfig(rate_limit_429=1.0, retry_after=0))
        with pytest.raises(RateLimitedError):
            await client.get_credit_transfer_status(sub.payments_service_id, timeout=3)
        sandbox.server.set_faults(FaultConfig())
    assert limiter.rate < 20  # halved at least twice: every attempt was answered 429
