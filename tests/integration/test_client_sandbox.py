"""PaymentsClient against the sandbox over real HTTP on 127.0.0.1: the mission end to end."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from urllib.parse import urlencode

import aiohttp
import pytest

from payments_async import (
    ApiError,
    Limits,
    NotFoundError,
    Outcome,
    OutcomeUnknownError,
    PaymentsClient,
    PollPolicy,
    PollTimeoutError,
    RetryPolicy,
    ServerError,
    Timeout,
    TransportError,
)
from payments_async._jwt import JwtSigner
from payments_async.iso20022 import encode
from payments_async.sandbox import FaultConfig, SandboxConfig
from payments_async.testing import SandboxHandle, sandbox_server
from tests.factories import cancellation_for, credit_transfer
from tests.support.requests_log import recording_requests

FAST_POLL = PollPolicy(initial=0.02, maximum=0.05, not_found_grace=0.5)


@pytest.fixture
async def sandbox() -> AsyncIterator[SandboxHandle]:
    config = SandboxConfig(processing_delay=0.4, settlement_delay=0.1)
    async with sandbox_server(config) as sb:
        yield sb


def client_for(sb: SandboxHandle, **kwargs: object) -> PaymentsClient:
    assert sb.credentials is not None
    kwargs.setdefault("retry", RetryPolicy.for_testing(attempts=6))
    kwargs.setdefault("timeout", Timeout(total=10))
    kwargs.setdefault("poll", FAST_POLL)
    return PaymentsClient(sb.credentials, base_url=sb.url, **kwargs)  # type: ignore[arg-type]


async def test_full_flow_accepted_cancellation(sandbox: SandboxHandle) -> None:
    async with client_for(sandbox) as client:
        assert await client.access_token_lifetime() > 0
        payment = credit_transfer()
        sub = await client.submit_credit_transfer(payment)
        assert sub.created
        assert sub.echoed_id == payment.message_id
        report = await client.get_credit_transfer_status(sub.payments_service_id)
        assert report is not None

        # cancelled while the payment is still unprocessed: accepted
        cxl = await client.request_cancellation(cancellation_for(payment))
        assert cxl.created
        assert cxl.status == "PENDING"
        outcome = await client.wait_for_cancellation_outcome(cxl.payments_service_id, timeout=10)
        assert outcome.outcome is Outcome.ACCEPTED
        assert not outcome.return_request_needed
        # an accepted cancellation stops the payment: it never becomes ACCC
        status = await client.wait_for_payment_status(sub.payments_service_id, timeout=10)
        assert status.outcome is Outcome.REJECTED


async def test_full_flow_rejected_cancellation(sandbox: SandboxHandle) -> None:
    async with client_for(sandbox) as client:
        payment = credit_transfer()
        sub = await client.submit_credit_transfer(payment)
        status = await client.wait_for_payment_status(sub.payments_service_id, timeout=10)
        assert status.outcome is Outcome.ACCEPTED
        assert status.status == "ACCC"

        cxl = await client.request_cancellation(cancellation_for(payment))
        outcome = await client.wait_for_cancellation_outcome(cxl.payments_service_id, timeout=10)
        assert outcome.outcome is Outcome.REJECTED
        assert outcome.return_request_needed  # processed: the funds are with the beneficiary
        assert outcome.reason_codes == ("CUST",)
        assert "pacs.004" in outcome.message


async def test_unknown_original_payment_is_rejected(sandbox: SandboxHandle) -> None:
    async with client_for(sandbox) as client:
        cxl = await client.request_cancellation(cancellation_for(credit_transfer()))
        outcome = await client.wait_for_cancellation_outcome(cxl.payments_service_id, timeout=10)
        assert outcome.rejected
        assert "NOOR" in outcome.reason_codes


async def test_resubmission_is_replayed_with_the_same_id(sandbox: SandboxHandle) -> None:
    async with client_for(sandbox) as client:
        payment = credit_transfer()
        first = await client.submit_credit_transfer(payment)
        again = await client.submit_credit_transfer(payment)
        assert first.created
        assert again.replayed
        assert again.payments_service_id == first.payments_service_id
        cxl = cancellation_for(payment)
        c1 = await client.request_cancellation(cxl)
        c2 = await client.request_cancellation(cxl)
        assert c2.replayed
        assert c2.payments_service_id == c1.payments_service_id
    stats = sandbox.server.stats()
    assert stats["payments_stored"] == 1
    assert stats["cancellations_stored"] == 1
    assert stats["replays_answered"] == 2


async def test_predefined_sandbox_tokens_work(sandbox: SandboxHandle) -> None:
    async with PaymentsClient(
        sandbox.sandbox_credentials, base_url=sandbox.url, poll=FAST_POLL
    ) as client:
        sub = await client.request_cancellation(cancellation_for(credit_transfer()))
        assert sub.created


async def test_the_signed_bytes_are_the_sent_bytes(sandbox: SandboxHandle) -> None:
    """The sandbox recomputes hd from the raw bytes it received; re-serialising breaks it."""
    assert sandbox.credentials is not None
    signer = sandbox.credentials.signer()
    async with client_for(sandbox) as client:
        ok = await client.request_cancellation(cancellation_for(credit_transfer()))
        assert ok.created  # the sandbox's hd over the received bytes matched ours

        message = cancellation_for(credit_transfer())
        body = encode(message)
        reserialised = json.dumps(json.loads(body), indent=1).encode()
        token = await client._pipeline.tokens.get()
        headers = {
            "Authorization": f"Bearer {token.value}",
            "X-Service-Client-Id": sandbox.credentials.client_id,
            "Content-Type": "application/json",
            "Accept": "application/json",
            "sca-token": (await signer.sign_sca_token(body)).value,
        }
        async with (
            aiohttp.ClientSession() as http,
            http.post(
                f"{sandbox.url}/payments/camt056/v08", data=reserialised, headers=headers
            ) as resp,
        ):
            assert resp.status == 401
            payload = await resp.json()
        assert payload["errors"][0]["code"]


async def test_404_is_not_retried(sandbox: SandboxHandle) -> None:
    async with client_for(sandbox) as client:
        with pytest.raises(NotFoundError) as info:
            await client.get_cancellation_outcome("does-not-exist")
        assert info.value.attempt == 1
    assert sandbox.server.stats()["requests"].get("camt029") == 1


async def test_4xx_is_not_retried() -> None:
    # A body over the sandbox's limit: 413, a permanent refusal, sent once. The limit
    # lies between the token request's body and the pacs.008's, so only the POST fails.
    payment = credit_transfer()
    body = encode(payment)
    async with sandbox_server() as probe:
        creds, key = probe.credentials, probe.private_key
        assert creds is not None
        assert key is not None
        signer = JwtSigner(key, key_id=creds.key_id, issuer=creds.issuer)
        assertion = signer.assertion(creds.client_id)
    token_body = len(
        urlencode({"grant_type": "x" * 60, "assertion": assertion, "scope": "makePayments"})
    )
    assert token_body < len(body)
    limit = (token_body + len(body)) // 2
    async with sandbox_server(SandboxConfig(max_body_size=limit)) as sb:
        async with client_for(sb) as client:
            with pytest.raises(ApiError) as info:
                await client.submit_credit_transfer(payment)
        assert info.value.status == 413
        assert info.value.codes == ("BODY_TOO_LARGE",)
        stats = sb.server.stats()
    assert stats["requests"]["pacs008"] == 1
    assert stats["payments_stored"] == 0


async def test_a_reused_id_with_another_body_gets_the_stored_payment(
    sandbox: SandboxHandle,
) -> None:
    # Service notes 2: 200 with the stored id; the client cannot tell the body changed.
    async with client_for(sandbox) as client:
        payment = credit_transfer()
        first = await client.submit_credit_transfer(payment)
        changed = credit_transfer(amount="20.00")
        changed.fito_fi_cstmr_cdt_trf.grp_hdr.msg_id = payment.message_id  # same id, new body
        again = await client.submit_credit_transfer(changed)
    assert (first.created, again.replayed) == (True, True)
    assert again.payments_service_id == first.payments_service_id
    stats = sandbox.server.stats()
    assert (stats["payments_stored"], stats["replays_changed_body"]) == (1, 1)


async def test_waiter_deadline_reports_last_status() -> None:
    config = SandboxConfig(settlement_delay=60)
    async with sandbox_server(config) as sb, client_for(sb) as client:
        cxl = await client.request_cancellation(cancellation_for(credit_transfer()))
        with pytest.raises(PollTimeoutError) as info:
            await client.wait_for_cancellation_outcome(cxl.payments_service_id, timeout=0.3)
        assert info.value.last_status == "PDCR"
        assert info.value.statuses == ("PDCR",)


async def test_a_failing_token_endpoint_is_its_own_error_not_outcome_unknown() -> None:
    """Every token request is answered 503: the POST is never sent, so the caller gets the
    token endpoint's error (its path and status), not "outcome unknown"."""
    config = SandboxConfig(faults=FaultConfig(error_503=1.0, apply_to_token=True, seed=3))
    async with sandbox_server(config) as sb:
        retry = RetryPolicy.for_testing(attempts=3)
        async with client_for(sb, retry=retry, timeout=Timeout(total=1.5)) as client:
            with pytest.raises(ServerError) as info:
                await client.submit_credit_transfer(credit_transfer())
        stats = sb.server.stats()
    assert not isinstance(info.value, OutcomeUnknownError)
    assert (info.value.path, info.value.status) == ("/oauth/token", 503)
    assert info.value.request_id
    assert stats["requests"].get("pacs008", 0) == 0
    assert stats["payments_stored"] == 0


async def test_a_borrowed_raise_for_status_session_keeps_a_404_a_404(
    sandbox: SandboxHandle,
) -> None:
    async with (
        aiohttp.ClientSession(raise_for_status=True) as session,
        client_for(sandbox, session=session) as client,
    ):
        with pytest.raises(NotFoundError) as info:
            await client.get_cancellation_outcome("no-such-id")
    assert info.value.attempt == 1  # a 404 is final, not a retried transport error


async def test_many_concurrent_waiters_share_the_session() -> None:
    config = SandboxConfig(processing_delay=5, settlement_delay=0.3)
    async with sandbox_server(config) as sb, client_for(sb, limits=Limits(connections=8)) as client:
        payments = [credit_transfer() for _ in range(40)]
        subs = await asyncio.gather(
            *(client.request_cancellation(cancellation_for(p)) for p in payments)
        )
        outcomes = await asyncio.gather(
            *(client.wait_for_cancellation_outcome(s.payments_service_id, timeout=15) for s in subs)
        )
    assert all(o.rejected for o in outcomes)  # the originals were never submitted: NOOR


async def test_a_call_whose_deadline_passes_before_sending_sends_nothing(
    sandbox: SandboxHandle,
) -> None:
    async with client_for(sandbox) as client:
        await client.access_token_lifetime()  # the token is cached: only the call is left
        sub = await client.submit_credit_transfer(credit_transfer())
        with recording_requests() as log:
            # A POST signs an RS256 token before it sends, which alone takes longer.
            with pytest.raises(TransportError, match="deadline passed") as post:
                await client.submit_credit_transfer(credit_transfer(), timeout=0.0001)
            with pytest.raises(TransportError, match="deadline passed") as read:
                await client.get_credit_transfer_status(sub.payments_service_id, timeout=1e-6)
        assert log.times() == []  # nothing reached the sandbox
        for err in (post.value, read.value):
            assert err.request_sent is False
            assert err.attempt == 1  # and nothing was retried
