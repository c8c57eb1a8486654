"""The status chase and 202/204 through the client, against the sandbox."""

from __future__ import annotations

import time

import pytest

from payments_async import (
    ConfigurationError,
    Outcome,
    PaymentsClient,
    PollPolicy,
    PollTimeoutError,
    RetryPolicy,
    SyncPaymentsClient,
    Timeout,
    ValidationError,
    build_status_request,
)
from payments_async.sandbox import FaultConfig, SandboxConfig
from payments_async.testing import SandboxHandle, sandbox_server
from tests.factories import cancellation_for, credit_transfer
from tests.support.cli import threaded_sandbox

FAST_POLL = PollPolicy(initial=0.01, maximum=0.02, jitter=0.0)
# The beneficiary bank never answers by itself: only a chase makes the outcome readable.
SILENT = SandboxConfig(processing_delay=3600, settlement_delay=3600)


def client_for(sb: SandboxHandle, **kwargs: object) -> PaymentsClient:
    assert sb.credentials is not None
    kwargs.setdefault("retry", RetryPolicy.for_testing(attempts=6))
    kwargs.setdefault("timeout", Timeout(total=10))
    kwargs.setdefault("poll", FAST_POLL)
    return PaymentsClient(sb.credentials, base_url=sb.url, **kwargs)  # type: ignore[arg-type]


async def test_pacs028_end_to_end_is_idempotent_201_then_200() -> None:
    async with sandbox_server(SILENT) as sb, client_for(sb) as client:
        payment = credit_transfer()
        await client.submit_credit_transfer(payment)
        recall = cancellation_for(payment)
        cxl = await client.request_cancellation(recall)
        request = build_status_request(recall)
        first = await client.request_status_update(request)
        again = await client.request_status_update(request)
        outcome = await client.get_cancellation_outcome(cxl.payments_service_id)
        stats = sb.server.stats()
    assert (first.created, again.replayed) == (True, True)
    assert first.payments_service_id == again.payments_service_id
    assert first.message_id == request.message_id
    assert outcome.rsltn_of_invstgtn.sts.conf == "ACCC"  # answered because it was chased
    assert (stats["status_requests_stored"], stats["recalls_chased"]) == (1, 1)


async def test_a_waiter_chases_once_after_its_quiet_period_and_gets_the_answer() -> None:
    async with sandbox_server(SILENT) as sb, client_for(sb) as client:
        payment = credit_transfer()
        await client.submit_credit_transfer(payment)
        recall = cancellation_for(payment)
        cxl = await client.request_cancellation(recall)
        started = time.monotonic()
        outcome = await client.wait_for_cancellation_outcome(
            cxl.payments_service_id, timeout=10, chase_after=0.2, recall=recall
        )
        took = time.monotonic() - started
        stats = sb.server.stats()
    assert outcome.outcome is Outcome.ACCEPTED
    assert took >= 0.2  # not chased before the quiet period
    assert stats["requests"]["pacs028"] == 1
    assert (stats["status_requests_stored"], stats["recalls_chased"]) == (1, 1)


async def test_a_waiter_given_the_recall_s_id_chases_too() -> None:
    async with sandbox_server(SILENT) as sb, client_for(sb) as client:
        payment = credit_transfer()
        await client.submit_credit_transfer(payment)
        cxl = await client.request_cancellation(cancellation_for(payment))
        outcome = await client.wait_for_cancellation_outcome(
            cxl.payments_service_id, timeout=10, chase_after=0.05, recall=cxl.message_id
        )
    assert outcome.outcome is Outcome.ACCEPTED


async def test_without_chase_after_nothing_is_chased() -> None:
    async with sandbox_server(SILENT) as sb, client_for(sb) as client:
        payment = credit_transfer()
        await client.submit_credit_transfer(payment)
        cxl = await client.request_cancellation(cancellation_for(payment))
        with pytest.raises(PollTimeoutError):
            await client.wait_for_cancellation_outcome(cxl.payments_service_id, timeout=0.3)
        assert sb.server.stats()["requests"].get("pacs028", 0) == 0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"chase_after": 1.0}, "needs recall"),
        ({"chase_after": 0, "recall": "A-1"}, "chase_after"),
        ({"chase_after": float("nan"), "recall": "A-1"}, "chase_after"),
        ({"chase_after": 1.0, "recall": "x" * 36}, "orgnlMsgId"),
    ],
)
async def test_a_chase_without_a_recall_or_a_period_is_refused_before_sending(
    kwargs: dict[str, object], match: str
) -> None:
    async with sandbox_server(SILENT) as sb, client_for(sb) as client:
        with pytest.raises((ConfigurationError, ValidationError), match=match):
            await client.wait_for_cancellation_outcome("cxl-1", **kwargs)  # type: ignore[arg-type]
        assert sb.server.stats()["requests"].get("camt029", 0) == 0


@pytest.mark.parametrize("kind", ["accepted_202", "accepted_202_empty", "no_content_204"])
async def test_202_and_204_are_successes_with_the_service_s_id(kind: str) -> None:
    config = SandboxConfig(processing_delay=3600, settlement_delay=0.05)
    async with sandbox_server(config) as sb, client_for(sb) as client:
        payment = credit_transfer()
        await client.submit_credit_transfer(payment)
        sb.server.set_faults(FaultConfig(**{kind: 1.0}))  # type: ignore[arg-type]
        recall = cancellation_for(payment)
        cxl = await client.request_cancellation(recall)
        sb.server.set_faults(FaultConfig())
        outcome = await client.wait_for_cancellation_outcome(cxl.payments_service_id, timeout=10)
        stats = sb.server.stats()
    assert outcome.outcome is Outcome.ACCEPTED
    assert cxl.payments_service_id.startswith("cxl-")
    assert cxl.message_id == recall.message_id
    assert stats["cancellations_stored"] == 1  # never a second message
    assert stats["faults"][kind] == 1


def test_the_sync_client_sends_the_status_request_too() -> None:
    with threaded_sandbox(SILENT) as sb:
        creds = sb.handle.credentials
        assert creds is not None
        with SyncPaymentsClient(
            creds, base_url=sb.url, retry=RetryPolicy.for_testing(), poll=FAST_POLL
        ) as client:
            payment = credit_transfer()
            client.submit_credit_transfer(payment)
            recall = cancellation_for(payment)
            cxl = client.request_cancellation(recall)
            sub = client.request_status_update(build_status_request(recall))
            outcome = client.wait_for_cancellation_outcome(cxl.payments_service_id, timeout=5)
    assert sub.created
    assert outcome.outcome is Outcome.ACCEPTED
