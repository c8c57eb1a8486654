"""The sandbox as strict as the spec (issue 11): single-use SCA tokens, kid/iss binding."""

from __future__ import annotations

import base64
import json

import aiohttp
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

from payments_async import PaymentsClient
from payments_async._constants import PACS008_PATH, SANDBOX_SCA_TOKEN
from payments_async._jwt import JwtSigner
from payments_async._keys import public_key_pem
from payments_async.iso20022 import encode
from payments_async.sandbox import ClientKey, SandboxConfig
from payments_async.testing import SandboxHandle, sandbox_server
from tests.factories import credit_transfer
from tests.support.sandbox import RawClient, client_for, predefined_client

pytest_plugins = ["tests.support.sandbox_fixtures"]


def _claims(token: str) -> dict[str, object]:
    segment = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))  # type: ignore[no-any-return]


def _resign(signer: JwtSigner, claims: dict[str, object]) -> str:
    """Sign arbitrary claims with the signer's key and kid (to reuse a jti or nonce)."""

    def b64(data: bytes) -> bytes:
        return base64.urlsafe_b64encode(data).rstrip(b"=")

    header = b64(json.dumps({"typ": "JWT", "alg": "RS256", "kid": signer.key_id}).encode())
    signing_input = header + b"." + b64(json.dumps(claims).encode())
    signature = signer.signer.sign(signing_input)
    assert isinstance(signature, bytes)
    return (signing_input + b"." + b64(signature)).decode()


# --- 1. single use ----------------------------------------------------------------------


async def test_a_seen_jti_alone_is_a_replay(client: RawClient, sandbox: SandboxHandle) -> None:
    assert client.signer is not None
    first = encode(credit_transfer())
    token = client.sca(first)
    assert (await client.post(PACS008_PATH, first, headers={"sca-token": token})).status == 201
    second = encode(credit_transfer())
    fresh = _claims(client.signer.sca_token(second))
    reused_jti = _resign(client.signer, {**fresh, "jti": _claims(token)["jti"]})
    reply = await client.post(PACS008_PATH, second, headers={"sca-token": reused_jti})
    assert (reply.status, reply.codes) == (401, ["SCA_TOKEN_REPLAYED"])
    assert "jti" in reply.json["errors"][0]["message"]
    assert sandbox.server.stats()["payments_stored"] == 1


async def test_a_seen_nonce_alone_is_a_replay(client: RawClient) -> None:
    assert client.signer is not None
    first = encode(credit_transfer())
    token = client.sca(first)
    assert (await client.post(PACS008_PATH, first, headers={"sca-token": token})).status == 201
    second = encode(credit_transfer())
    fresh = _claims(client.signer.sca_token(second))
    reused_nonce = _resign(client.signer, {**fresh, "nonce": _claims(token)["nonce"]})
    reply = await client.post(PACS008_PATH, second, headers={"sca-token": reused_nonce})
    assert (reply.status, reply.codes) == (401, ["SCA_TOKEN_REPLAYED"])
    assert "nonce" in reply.json["errors"][0]["message"]


async def test_a_token_refused_for_its_body_is_still_spent(client: RawClient) -> None:
    # Replay protection does not depend on what happens to the request afterwards.
    body = b'{"fitoFICstmrCdtTrf": {}}'
    token = client.sca(body)
    bad = await client.post(PACS008_PATH, body, headers={"sca-token": token})
    assert (bad.status, bad.codes[0]) == (400, "BODY_INVALID")
    again = await client.post(PACS008_PATH, body, headers={"sca-token": token})
    assert (again.status, again.codes) == (401, ["SCA_TOKEN_REPLAYED"])


async def test_the_predefined_sca_token_is_the_documented_exception(
    http: aiohttp.ClientSession, sandbox: SandboxHandle
) -> None:
    predefined = predefined_client(http, sandbox)
    replies = [await predefined.submit_payment(credit_transfer()) for _ in range(3)]
    assert [r.status for r in replies] == [201, 201, 201]
    assert all(r.json is not None for r in replies)
    assert predefined.sca(b"x") == SANDBOX_SCA_TOKEN


async def test_the_library_client_works_against_the_strict_sandbox(
    sandbox: SandboxHandle,
) -> None:
    # The client signs a fresh SCA token per attempt: a resubmission is a 200, not a 401.
    assert sandbox.credentials is not None
    async with PaymentsClient(sandbox.credentials, base_url=sandbox.url) as pc:
        msg = credit_transfer()
        first = await pc.submit_credit_transfer(msg)
        again = await pc.submit_credit_transfer(msg)
    assert (first.created, again.replayed) == (True, True)
    assert first.payments_service_id == again.payments_service_id


# --- 2. kid and iss bound to the access token --------------------------------------------


async def test_sca_signed_with_the_clients_other_key_is_401(
    client: RawClient, sandbox: SandboxHandle, rsa_private_key: RSAPrivateKey
) -> None:
    second = sandbox.register_key(rsa_private_key, key_id="kid-2", issuer="iss-2")
    assert client.signer is not None
    await client.ensure_token()  # issued for an assertion signed with the first key
    other = JwtSigner(rsa_private_key, key_id=second.key_id, issuer=second.issuer)
    body = encode(credit_transfer())
    reply = await client.post(PACS008_PATH, body, headers={"sca-token": other.sca_token(body)})
    assert (reply.status, reply.codes) == (401, ["SCA_TOKEN_INVALID"])
    assert "kid and iss" in reply.json["errors"][0]["message"]
    # The same key as the assertion passes.
    assert (await client.submit_payment(credit_transfer())).status == 201


async def test_both_keys_work_during_a_rotation(
    http: aiohttp.ClientSession, sandbox: SandboxHandle, rsa_private_key: RSAPrivateKey
) -> None:
    old = client_for(http, sandbox)
    second = sandbox.register_key(rsa_private_key, key_id="kid-new", issuer="iss-new")
    new = RawClient(
        http,
        sandbox.url,
        second.client_id,
        second.client_secret,
        JwtSigner(rsa_private_key, key_id="kid-new", issuer="iss-new"),
    )
    assert (await old.submit_payment(credit_transfer())).status == 201
    assert (await new.submit_payment(credit_transfer())).status == 201
    async with PaymentsClient(second, base_url=sandbox.url) as pc:
        assert (await pc.submit_credit_transfer(credit_transfer())).created


async def test_a_second_key_from_config_and_from_the_control_route(
    http: aiohttp.ClientSession, rsa_private_key: RSAPrivateKey
) -> None:
    from payments_async.testing import generate_test_keypair

    key_a, pem_a = generate_test_keypair()
    pem_b = public_key_pem(rsa_private_key)
    config = SandboxConfig(
        clients=(
            ClientKey("rotating", "s3cret", pem_a, kid="a", iss="ia"),
            ClientKey("rotating", "s3cret", pem_b, kid="b", iss="ib"),
        )
    )
    async with sandbox_server(config, register_key=False) as sb:
        record = sb.server.state.registry.get("rotating")
        assert record is not None
        assert sorted(record.keys) == ["a", "b"]
        for key, kid, iss in ((key_a, "a", "ia"), (rsa_private_key, "b", "ib")):
            raw = RawClient(
                http, sb.url, "rotating", "s3cret", JwtSigner(key, key_id=kid, issuer=iss)
            )
            assert (await raw.submit_payment(credit_transfer())).status == 201, kid
        key_c, pem_c = generate_test_keypair()
        body = {
            "client_id": "rotating",
            "client_secret": "s3cret",
            "public_key_pem": pem_c.decode(),
            "kid": "c",
            "iss": "ic",
        }
        created = await raw.request("POST", "/_sandbox/clients", data=json.dumps(body))
        assert created.status == 201
        assert sorted(record.keys) == ["a", "b", "c"]
        third = RawClient(
            http, sb.url, "rotating", "s3cret", JwtSigner(key_c, key_id="c", issuer="ic")
        )
        assert (await third.submit_payment(credit_transfer())).status == 201
