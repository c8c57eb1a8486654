"""A client whose clock is 5 minutes off the service's still works, after at most one 401."""

from __future__ import annotations

import pytest

from payments_async import AuthenticationError, Credentials, PaymentsClient, ThreadPoolSigner
from payments_async.sandbox import SandboxConfig
from payments_async.testing import ManualClock, SandboxHandle, sandbox_server
from tests.factories import credit_transfer

FIVE_MINUTES = 300.0


def _refusals(sb: SandboxHandle) -> int:
    return int(sb.server.stats()["responses"].get("401", 0))


# The sandbox's clock skew is the opposite of the client's: a sandbox 5 minutes behind
# sees a client 5 minutes ahead.
@pytest.mark.parametrize(
    ("client_offset", "first_refusal"),
    [
        (+FIVE_MINUTES, 1),  # assertion iat in the service's future: the token request 401s
        (-FIVE_MINUTES, 0),  # assertion still valid; the token answer's Date corrects us
    ],
    ids=["client-ahead", "client-behind"],
)
async def test_skewed_client_succeeds_after_at_most_one_401(
    client_offset: float, first_refusal: int
) -> None:
    async with sandbox_server(SandboxConfig(clock_skew=-client_offset, processing_delay=0.2)) as sb:
        assert sb.credentials is not None
        async with PaymentsClient(sb.credentials, base_url=sb.url) as client:
            sub = await client.submit_credit_transfer(credit_transfer())
            status = await client.wait_for_payment_status(sub.payments_service_id, timeout=30)
            # The client now signs on the service's time (Date has a 1-second resolution).
            assert client.clock_offset == pytest.approx(-client_offset, abs=2)
            second = await client.submit_credit_transfer(credit_transfer())
        refused = _refusals(sb)
    assert sub.created
    assert second.created
    assert status.is_final
    assert refused == first_refusal
    assert refused <= 1


@pytest.mark.parametrize("client_offset", [+FIVE_MINUTES, -FIVE_MINUTES])
async def test_without_correction_the_same_client_is_refused(client_offset: float) -> None:
    """The regression the correction fixes: signing on our own clock fails either way."""
    async with sandbox_server(SandboxConfig(clock_skew=-client_offset)) as sb:
        assert sb.credentials is not None
        async with PaymentsClient(
            sb.credentials, base_url=sb.url, clock_skew_threshold=None
        ) as client:
            with pytest.raises(AuthenticationError):
                await client.submit_credit_transfer(credit_transfer())
            assert client.clock_offset == 0.0


async def test_a_small_skew_is_left_alone() -> None:
    async with sandbox_server(SandboxConfig(clock_skew=2.0)) as sb:
        assert sb.credentials is not None
        async with PaymentsClient(sb.credentials, base_url=sb.url) as client:
            await client.submit_credit_transfer(credit_transfer())
            assert client.clock_offset == 0.0
        assert _refusals(sb) == 0


async def test_a_401_the_clock_does_not_explain_is_not_retried() -> None:
    """A wrong secret on a correct clock: one token request, no second try."""
    async with sandbox_server() as sb:
        assert sb.credentials is not None
        wrong = type(sb.credentials)(
            sb.credentials.client_id,
            "not-the-secret",
            key_id=sb.credentials.key_id,
            issuer=sb.credentials.issuer,
            private_key=sb.private_key,
        )
        async with PaymentsClient(wrong, base_url=sb.url) as client:
            with pytest.raises(AuthenticationError):
                await client.access_token_lifetime()
        assert sb.server.stats()["token_requests"] == 1


async def test_sca_401_the_clock_explains_is_resent_once_without_a_new_token() -> None:
    """The service's clock jumps after our token was issued: the POST's SCA token is
    refused as expired, the 401's Date corrects our clock, one resend succeeds, and the
    access token (not in question) is kept."""
    clock = ManualClock()
    async with sandbox_server(SandboxConfig(clock=clock)) as sb:
        assert sb.credentials is not None
        async with PaymentsClient(sb.credentials, base_url=sb.url) as client:
            await client.access_token_lifetime()
            assert client.clock_offset == 0.0
            clock.advance(FIVE_MINUTES)  # the token (1 h) is still valid; 180-s SCA tokens
            sub = await client.submit_credit_transfer(credit_transfer())
            assert client.clock_offset == pytest.approx(FIVE_MINUTES, abs=2)
        stats = sb.server.stats()
    assert sub.created
    assert sub.attempts == 1
    assert stats["responses"].get("401", 0) == 1
    assert stats["token_requests"] == 1


async def test_the_corrected_clock_reaches_an_async_signer() -> None:
    """The time is passed to the signer, whichever it is: a thread-pool signer too."""
    async with sandbox_server(SandboxConfig(clock_skew=-FIVE_MINUTES)) as sb:
        creds = sb.credentials
        assert creds is not None
        assert sb.private_key is not None
        with ThreadPoolSigner(sb.private_key, key_id=creds.key_id, max_workers=1) as signer:
            threaded = Credentials(
                creds.client_id, creds.client_secret, issuer=creds.issuer, signer=signer
            )
            async with PaymentsClient(threaded, base_url=sb.url) as client:
                sub = await client.submit_credit_transfer(credit_transfer())
        refused = _refusals(sb)
    assert sub.created
    assert refused == 1  # the first assertion, signed on our clock
