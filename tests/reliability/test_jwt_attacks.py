"""Item 6: attacks on the JWTs, against the sandbox's verifier (the reference our users
test against). Each forged assertion or SCA token is refused with 401 and stores nothing;
a well-formed control token is accepted, so the refusals are not an accident of setup."""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from cryptography.hazmat.primitives.asymmetric.padding import PKCS1v15
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from cryptography.hazmat.primitives.hashes import SHA256

from payments_async._constants import (
    CLIENT_ID_HEADER,
    JWT_BEARER_GRANT,
    PACS008_PATH,
    SCA_HEADER,
    TOKEN_PATH,
    TOKEN_SCOPE,
)
from payments_async._jwt import body_hash
from payments_async.iso20022 import encode
from payments_async.sandbox import SandboxConfig
from payments_async.testing import SandboxHandle, generate_test_keypair, sandbox_server
from tests.factories import credit_transfer
from tests.support.reliability import record

Signer = Callable[[bytes], bytes]


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def forge(header: dict[str, Any], claims: dict[str, Any] | bytes, sign: Signer) -> str:
    payload = claims if isinstance(claims, bytes) else json.dumps(claims).encode()
    signing_input = b64(json.dumps(header).encode()) + "." + b64(payload)
    return signing_input + "." + b64(sign(signing_input.encode("ascii")))


def not_utf8(claims: dict[str, Any]) -> bytes:
    """The claims as JSON whose ``iss`` holds a byte that is not UTF-8 (a 500 once)."""
    return json.dumps(claims).encode().replace(b'"iss": "', b'"iss": "\xff', 1)


def rs256(key: RSAPrivateKey) -> Signer:
    return lambda data: key.sign(data, PKCS1v15(), SHA256())


def hs256(secret: bytes) -> Signer:
    return lambda data: hmac.new(secret, data, hashlib.sha256).digest()


def unsigned(_: bytes) -> bytes:
    return b""


@dataclass
class Party:
    client_id: str
    secret: str
    kid: str
    iss: str
    key: RSAPrivateKey
    public_pem: bytes

    def basic(self) -> str:
        raw = f"{self.client_id}:{self.secret}".encode()
        return "Basic " + base64.b64encode(raw).decode()

    def header(self, **over: Any) -> dict[str, Any]:
        return {"typ": "JWT", "alg": "RS256", "kid": self.kid, **over}

    def assertion_claims(self, **over: Any) -> dict[str, Any]:
        now = int(time.time())
        claims = {
            "iss": self.iss,
            "sub": self.client_id,
            "iat": now,
            "nbf": now,
            "exp": now + 300,
            "jti": uuid.uuid4().hex,
        }
        claims.update(over)
        return claims

    def sca_claims(self, body: bytes, **over: Any) -> dict[str, Any]:
        now = int(time.time())
        claims = {
            "iss": self.iss,
            "iat": now,
            "nbf": now,
            "exp": now + 180,
            "jti": uuid.uuid4().hex,
            "alg": "SHA256",
            "hd": body_hash(body),
            "nonce": uuid.uuid4().hex,
        }
        claims.update(over)
        return claims


@dataclass
class World:
    sb: SandboxHandle
    http: aiohttp.ClientSession
    alice: Party
    bob: Party
    mallory_key: RSAPrivateKey  # registered nowhere

    async def token_status(self, who: Party, assertion: str) -> tuple[int, dict[str, Any]]:
        form = {"grant_type": JWT_BEARER_GRANT, "assertion": assertion, "scope": TOKEN_SCOPE}
        async with self.http.post(
            self.sb.url + TOKEN_PATH,
            data=form,
            headers={"Authorization": who.basic(), "Accept": "application/json"},
        ) as resp:
            return resp.status, await resp.json(content_type=None)

    async def access_token(self, who: Party) -> str:
        status, body = await self.token_status(
            who, forge(who.header(), who.assertion_claims(), rs256(who.key))
        )
        assert status == 200, body
        return str(body["access_token"])

    async def post_payment(
        self, who: Party, bearer: str, body: bytes, sca: str
    ) -> tuple[int, dict[str, Any]]:
        headers = {
            "Authorization": f"Bearer {bearer}",
            CLIENT_ID_HEADER: who.client_id,
            "Content-Type": "application/json",
            "Accept": "application/json",
            SCA_HEADER: sca,
        }
        async with self.http.post(self.sb.url + PACS008_PATH, data=body, headers=headers) as r:
            return r.status, await r.json(content_type=None)


@functools.cache
def _other_keys() -> tuple[RSAPrivateKey, bytes, RSAPrivateKey]:
    bob_key, bob_pem = generate_test_keypair()
    mallory_key, _ = generate_test_keypair()
    return bob_key, bob_pem, mallory_key


@pytest_asyncio.fixture
async def world() -> AsyncIterator[World]:
    bob_key, bob_pem, mallory_key = _other_keys()
    async with sandbox_server(SandboxConfig(processing_delay=600)) as sb:
        assert sb.credentials is not None
        assert sb.private_key is not None
        assert sb.public_key_pem is not None
        c = sb.credentials
        alice = Party(
            c.client_id, c.client_secret, c.key_id, c.issuer, sb.private_key, sb.public_key_pem
        )
        bob = Party("bob-client", "bob-secret", "bob-kid", "bob-issuer", bob_key, bob_pem)
        sb.server.register_client(bob.client_id, bob.secret, bob_pem, kid=bob.kid, iss=bob.iss)
        async with aiohttp.ClientSession() as http:
            yield World(sb, http, alice, bob, mallory_key)


REFUSED: list[str] = []

# --- the assertion (POST /oauth/token) -------------------------------------------------------

ASSERTION_ATTACKS: dict[str, Callable[[World], str]] = {
    "alg none": lambda w: forge(w.alice.header(alg="none"), w.alice.assertion_claims(), unsigned),
    "alg none, signature kept": lambda w: forge(
        w.alice.header(alg="none"), w.alice.assertion_claims(), rs256(w.alice.key)
    ),
    "HS256 keyed with the public key": lambda w: forge(
        w.alice.header(alg="HS256"), w.alice.assertion_claims(), hs256(w.alice.public_pem)
    ),
    "wrong kid": lambda w: forge(
        w.alice.header(kid="no-such-kid"), w.alice.assertion_claims(), rs256(w.alice.key)
    ),
    "foreign key": lambda w: forge(
        w.alice.header(), w.alice.assertion_claims(), rs256(w.mallory_key)
    ),
    "expired": lambda w: forge(
        w.alice.header(),
        w.alice.assertion_claims(
            iat=int(time.time()) - 7200, nbf=int(time.time()) - 7200, exp=int(time.time()) - 3600
        ),
        rs256(w.alice.key),
    ),
    "not yet valid (nbf)": lambda w: forge(
        w.alice.header(),
        w.alice.assertion_claims(nbf=int(time.time()) + 3600, exp=int(time.time()) + 7200),
        rs256(w.alice.key),
    ),
    "issued in the future (iat)": lambda w: forge(
        w.alice.header(),
        w.alice.assertion_claims(iat=int(time.time()) + 3600, exp=int(time.time()) + 7200),
        rs256(w.alice.key),
    ),
    "wrong issuer": lambda w: forge(
        w.alice.header(), w.alice.assertion_claims(iss="someone-else"), rs256(w.alice.key)
    ),
    "token for another client (sub)": lambda w: forge(
        w.bob.header(), w.bob.assertion_claims(), rs256(w.bob.key)
    ),
    "bad signature bytes": lambda w: forge(
        w.alice.header(), w.alice.assertion_claims(), lambda d: b"\x00" * 256
    ),
    # JSON integers have no bound; a float cannot hold these (a 500 once).
    "exp beyond any float": lambda w: forge(
        w.alice.header(), w.alice.assertion_claims(exp=10**400), rs256(w.alice.key)
    ),
    "iat below any float": lambda w: forge(
        w.alice.header(), w.alice.assertion_claims(iat=-(10**400)), rs256(w.alice.key)
    ),
    "nbf beyond any float": lambda w: forge(
        w.alice.header(), w.alice.assertion_claims(nbf=10**400), rs256(w.alice.key)
    ),
    "payload not UTF-8": lambda w: forge(
        w.alice.header(), not_utf8(w.alice.assertion_claims()), rs256(w.alice.key)
    ),
}


async def test_a_well_formed_assertion_is_accepted(world: World) -> None:
    assert await world.access_token(world.alice)


@pytest.mark.parametrize("attack", sorted(ASSERTION_ATTACKS))
async def test_forged_assertion_is_refused_with_401(world: World, attack: str) -> None:
    before = world.sb.server.stats()["tokens_issued"]
    status, body = await world.token_status(world.alice, ASSERTION_ATTACKS[attack](world))
    assert status == 401, body
    assert world.sb.server.stats()["tokens_issued"] == before
    REFUSED.append(f"assertion: {attack}")


async def test_replayed_assertion_is_refused_with_401(world: World) -> None:
    assertion = forge(world.alice.header(), world.alice.assertion_claims(), rs256(world.alice.key))
    assert (await world.token_status(world.alice, assertion))[0] == 200
    status, body = await world.token_status(world.alice, assertion)
    assert status == 401, body
    REFUSED.append("assertion: replayed jti")


# --- the SCA token (sca-token header of a POST) -------------------------------------------

SCA_ATTACKS: dict[str, Callable[[World, bytes], str]] = {
    "alg none": lambda w, b: forge(w.alice.header(alg="none"), w.alice.sca_claims(b), unsigned),
    "HS256 keyed with the public key": lambda w, b: forge(
        w.alice.header(alg="HS256"), w.alice.sca_claims(b), hs256(w.alice.public_pem)
    ),
    "wrong kid": lambda w, b: forge(
        w.alice.header(kid="no-such-kid"), w.alice.sca_claims(b), rs256(w.alice.key)
    ),
    "foreign key": lambda w, b: forge(
        w.alice.header(), w.alice.sca_claims(b), rs256(w.mallory_key)
    ),
    "expired": lambda w, b: forge(
        w.alice.header(),
        w.alice.sca_claims(
            b, iat=int(time.time()) - 7200, nbf=int(time.time()) - 7200, exp=int(time.time()) - 3600
        ),
        rs256(w.alice.key),
    ),
    "not yet valid (nbf)": lambda w, b: forge(
        w.alice.header(),
        w.alice.sca_claims(b, nbf=int(time.time()) + 3600, exp=int(time.time()) + 7200),
        rs256(w.alice.key),
    ),
    "hd of another body": lambda w, b: forge(
        w.alice.header(), w.alice.sca_claims(encode(credit_transfer())), rs256(w.alice.key)
    ),
    "hd in base64url": lambda w, b: forge(
        w.alice.header(),
        w.alice.sca_claims(b, hd=b64(hashlib.sha256(b).digest())),
        rs256(w.alice.key),
    ),
    "signed by another client": lambda w, b: forge(
        w.bob.header(), w.bob.sca_claims(b), rs256(w.bob.key)
    ),
    "unsigned claim alg": lambda w, b: forge(
        w.alice.header(), w.alice.sca_claims(b, alg="none"), rs256(w.alice.key)
    ),
    "exp beyond any float": lambda w, b: forge(
        w.alice.header(), w.alice.sca_claims(b, exp=10**400), rs256(w.alice.key)
    ),
    "iat beyond any float": lambda w, b: forge(
        w.alice.header(), w.alice.sca_claims(b, iat=10**400), rs256(w.alice.key)
    ),
    "payload not UTF-8": lambda w, b: forge(
        w.alice.header(), not_utf8(w.alice.sca_claims(b)), rs256(w.alice.key)
    ),
}


async def test_a_well_formed_sca_token_is_accepted(world: World) -> None:
    bearer = await world.access_token(world.alice)
    body = encode(credit_transfer())
    sca = forge(world.alice.header(), world.alice.sca_claims(body), rs256(world.alice.key))
    status, reply = await world.post_payment(world.alice, bearer, body, sca)
    assert status == 201, reply


@pytest.mark.parametrize("attack", sorted(SCA_ATTACKS))
async def test_forged_sca_token_is_refused_with_401(world: World, attack: str) -> None:
    bearer = await world.access_token(world.alice)
    body = encode(credit_transfer())
    status, reply = await world.post_payment(
        world.alice, bearer, body, SCA_ATTACKS[attack](world, body)
    )
    assert status == 401, reply
    assert world.sb.server.stats()["payments_stored"] == 0
    REFUSED.append(f"sca-token: {attack}")


@pytest.mark.parametrize("claim", ["nonce", "jti"])
async def test_replayed_sca_claim_with_another_body_is_refused(world: World, claim: str) -> None:
    bearer = await world.access_token(world.alice)
    first = encode(credit_transfer())
    claims = world.alice.sca_claims(first)
    sca = forge(world.alice.header(), claims, rs256(world.alice.key))
    assert (await world.post_payment(world.alice, bearer, first, sca))[0] == 201
    second = encode(credit_transfer())
    replay = world.alice.sca_claims(second, **{claim: claims[claim]})  # same nonce or jti
    status, reply = await world.post_payment(
        world.alice, bearer, second, forge(world.alice.header(), replay, rs256(world.alice.key))
    )
    assert status == 401, reply
    assert world.sb.server.stats()["payments_stored"] == 1
    REFUSED.append(f"sca-token: replayed {claim}, other body")


async def test_access_token_of_another_client_is_refused(world: World) -> None:
    bobs = await world.access_token(world.bob)
    body = encode(credit_transfer())
    sca = forge(world.alice.header(), world.alice.sca_claims(body), rs256(world.alice.key))
    status, reply = await world.post_payment(world.alice, bobs, body, sca)
    assert status == 401, reply
    assert world.sb.server.stats()["payments_stored"] == 0
    REFUSED.append("access token: issued to another client")


@pytest.fixture(scope="module", autouse=True)
def _report_refusals() -> Iterator[None]:
    yield
    if REFUSED:
        record("JWT attacks refused with 401", count=len(REFUSED), attacks=sorted(REFUSED))
