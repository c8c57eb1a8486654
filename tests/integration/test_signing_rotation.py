"""Key rotation while the client runs, and the thread-pool signer, against the sandbox."""

from __future__ import annotations

import asyncio

import pytest

from payments_async import (
    AuthenticationError,
    ConfigurationError,
    Credentials,
    Hooks,
    PaymentsClient,
    ThreadPoolSigner,
)
from payments_async._keys import generate_private_key, public_key_pem
from payments_async.testing import TEST_ISSUER, SandboxHandle, sandbox_server
from tests.factories import credit_transfer
from tests.support.signing import (
    FLOW_CONFIG,
    GatedSigner,
    RecordingSigner,
    client_options,
    whole_flow,
)


@pytest.fixture
async def sandbox() -> SandboxHandle:  # type: ignore[misc]
    async with sandbox_server(FLOW_CONFIG) as sb:
        yield sb


def _register(sb: SandboxHandle, signer: RecordingSigner | GatedSigner, key_pem: bytes) -> None:
    assert sb.credentials is not None
    creds = sb.credentials
    sb.server.register_client(
        creds.client_id, creds.client_secret, key_pem, kid=signer.key_id, iss=TEST_ISSUER
    )


async def test_rotation_pairs_each_access_token_with_its_own_kid(sandbox: SandboxHandle) -> None:
    """A call that fetched its access token with the old key signs its SCA token with it.

    The old key's token request is held while the rotation completes: the call then gets
    the old access token, and its SCA token must come from the old key too (spec,
    Authentication 5: kid and iss identical in both JWTs), while every later call uses
    the new key for both.
    """
    assert sandbox.credentials is not None
    assert sandbox.private_key is not None
    base = sandbox.credentials
    new_key = generate_private_key(2048)
    old_signer = GatedSigner(sandbox.private_key, base.key_id)
    new_signer = RecordingSigner(new_key, "kid-new")
    _register(sandbox, new_signer, public_key_pem(new_key))
    old = Credentials(base.client_id, base.client_secret, issuer=TEST_ISSUER, signer=old_signer)
    new = Credentials(base.client_id, base.client_secret, issuer=TEST_ISSUER, signer=new_signer)

    statuses: list[int | None] = []
    hooks = Hooks(on_request=lambda event: statuses.append(event.status))
    async with PaymentsClient(old, base_url=sandbox.url, hooks=hooks, **client_options()) as client:
        old_signer.gate.clear()
        in_flight = asyncio.create_task(client.submit_credit_transfer(credit_transfer()))
        await asyncio.wait_for(old_signer.waiting.wait(), 5)  # its token request is signing
        await client.rotate_credentials(new)
        after = await client.submit_credit_transfer(credit_transfer())
        old_signer.gate.set()
        before = await asyncio.wait_for(in_flight, 10)
        # The old key's token, granted after the rotation, served only its own caller.
        later = await client.submit_credit_transfer(credit_transfer())

    assert before.created
    assert after.created
    assert later.created
    assert old_signer.signed == ["assertion", "sca"]
    assert new_signer.signed == ["assertion", "sca", "sca"]
    # The sandbox binds the SCA kid to the access token's assertion: no request was
    # refused, none needed the 401 resend.
    assert 401 not in statuses
    assert statuses.count(201) == 3
    assert sandbox.server.stats()["payments_stored"] == 3


async def test_after_rotation_every_call_uses_the_new_key(sandbox: SandboxHandle) -> None:
    assert sandbox.credentials is not None
    assert sandbox.private_key is not None
    base = sandbox.credentials
    old_signer = RecordingSigner(sandbox.private_key, base.key_id)
    new_key = generate_private_key(2048)
    new_signer = RecordingSigner(new_key, "kid-2")
    _register(sandbox, new_signer, public_key_pem(new_key))
    old = Credentials(base.client_id, base.client_secret, issuer=TEST_ISSUER, signer=old_signer)
    new = Credentials(base.client_id, base.client_secret, issuer=TEST_ISSUER, signer=new_signer)
    async with PaymentsClient(old, base_url=sandbox.url, **client_options()) as client:
        await whole_flow(client)
        signed_before = list(old_signer.signed)
        await client.rotate_credentials(new)
        await whole_flow(client)
    assert old_signer.signed == signed_before == ["assertion", "sca", "sca"]
    assert new_signer.signed == ["assertion", "sca", "sca"]


async def test_rotation_to_an_unregistered_key_fails_and_keeps_the_old_one(
    sandbox: SandboxHandle,
) -> None:
    assert sandbox.credentials is not None
    base = sandbox.credentials
    unregistered = Credentials(
        base.client_id,
        base.client_secret,
        key_id="kid-not-registered",
        issuer=TEST_ISSUER,
        private_key=generate_private_key(2048),
    )
    async with PaymentsClient(base, base_url=sandbox.url, **client_options()) as client:
        await client.submit_credit_transfer(credit_transfer())
        with pytest.raises(AuthenticationError):
            await client.rotate_credentials(unregistered)
        sub = await client.submit_credit_transfer(credit_transfer())
        assert sub.created


async def test_rotation_keeps_the_client_id(sandbox: SandboxHandle) -> None:
    assert sandbox.credentials is not None
    assert sandbox.private_key is not None
    other = Credentials(
        "someone-else",
        "secret",
        key_id="k",
        issuer=TEST_ISSUER,
        private_key=sandbox.private_key,
    )
    async with PaymentsClient(sandbox.credentials, base_url=sandbox.url) as client:
        with pytest.raises(ConfigurationError, match="client id"):
            await client.rotate_credentials(other)
        with pytest.raises(ConfigurationError):
            await client.rotate_credentials("not credentials")  # type: ignore[arg-type]


async def test_thread_pool_signer_runs_the_whole_flow(sandbox: SandboxHandle) -> None:
    assert sandbox.credentials is not None
    assert sandbox.private_key is not None
    base = sandbox.credentials
    with ThreadPoolSigner(sandbox.private_key, key_id=base.key_id, max_workers=2) as signer:
        creds = Credentials(base.client_id, base.client_secret, issuer=TEST_ISSUER, signer=signer)
        async with PaymentsClient(creds, base_url=sandbox.url, **client_options()) as client:
            await whole_flow(client)
            subs = await asyncio.gather(
                *(client.submit_credit_transfer(credit_transfer()) for _ in range(10))
            )
    assert all(s.created for s in subs)
    assert sandbox.server.stats()["payments_stored"] == 11
