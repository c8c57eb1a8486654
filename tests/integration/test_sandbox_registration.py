"""Client registration: the 2048-bit rule, the control route, the predefined client."""

from __future__ import annotations

import aiohttp
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from payments_async import ConfigurationError
from payments_async._jwt import JwtSigner
from payments_async._keys import public_key_pem
from payments_async.testing import SandboxHandle
from tests.factories import credit_transfer
from tests.support.sandbox import RawClient

pytest_plugins = ["tests.support.sandbox_fixtures"]


@pytest.fixture(scope="module")
def small_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=1024)


def test_keys_under_2048_bits_are_refused(
    sandbox: SandboxHandle, small_key: rsa.RSAPrivateKey
) -> None:
    with pytest.raises(ConfigurationError, match="2048"):
        sandbox.server.register_client(
            "small", "secret", public_key_pem(small_key), kid="k", iss="i"
        )
    assert sandbox.server.state.registry.get("small") is None


async def test_register_over_http(
    client: RawClient,
    http: aiohttp.ClientSession,
    sandbox: SandboxHandle,
    small_key: rsa.RSAPrivateKey,
) -> None:
    too_small = {
        "client_id": "small",
        "client_secret": "s",
        "public_key_pem": public_key_pem(small_key).decode(),
        "kid": "k",
        "iss": "i",
    }
    reply = await client.request("POST", "/_sandbox/clients", data=_json(too_small))
    assert (reply.status, reply.codes) == (400, ["INVALID_REQUEST"])
    assert "2048" in reply.json["errors"][0]["message"]

    assert sandbox.private_key is not None
    ok = {**too_small, "public_key_pem": sandbox.public_key_pem.decode()}  # type: ignore[union-attr]
    created = await client.request("POST", "/_sandbox/clients", data=_json(ok))
    assert created.status == 201
    signer = JwtSigner(sandbox.private_key, key_id="k", issuer="i")
    newcomer = RawClient(http, sandbox.url, "small", "s", signer)
    assert (await newcomer.submit_payment(credit_transfer())).status == 201

    wrong_secret = {**ok, "client_secret": "other"}
    refused = await client.request("POST", "/_sandbox/clients", data=_json(wrong_secret))
    assert refused.status == 400
    missing = await client.request("POST", "/_sandbox/clients", data=b'{"client_id": "x"}')
    assert missing.status == 400


def _json(data: object) -> bytes:
    import json

    return json.dumps(data).encode()


async def test_a_second_key_of_the_same_client(
    client: RawClient, sandbox: SandboxHandle, rsa_private_key: rsa.RSAPrivateKey
) -> None:
    assert sandbox.credentials is not None
    sandbox.server.register_client(
        client.client_id,
        client.secret,
        public_key_pem(rsa_private_key),
        kid="second-kid",
        iss="second-iss",
    )
    client.signer = JwtSigner(rsa_private_key, key_id="second-kid", issuer="second-iss")
    assert (await client.fetch_token()).status == 200
    assert (await client.submit_payment(credit_transfer())).status == 201
