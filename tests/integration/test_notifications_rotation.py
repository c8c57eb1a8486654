"""Notification credentials that rotate: several Basic pairs, and JWTs checked with a JWKS.

The JWKS is served over real HTTP on 127.0.0.1 and counts its fetches, so a test sees how
often the verifier asks for it.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from typing import Any

import pytest
from aiohttp import web
from joserfc import jwt
from joserfc.jwk import ECKey, OctKey, RSAKey

from payments_async import ConfigurationError
from payments_async.notifications import (
    BasicAuth,
    BearerAuth,
    JwtBearerVerifier,
    NotificationRejected,
    authenticate,
)
from tests.support.http_servers import Serve


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


async def test_basic_auth_accepts_every_pair_given_and_only_those() -> None:
    auth = BasicAuth("svc", "old-password", also=[("svc", "new-password"), ("svc2", "third")])
    for user, password in (("svc", "old-password"), ("svc", "new-password"), ("svc2", "third")):
        assert await auth.check(_basic(user, password))
    for user, password in (("svc", "third"), ("svc2", "old-password"), ("svc", "new-passwor")):
        assert not await auth.check(_basic(user, password))
    text = repr(auth)
    assert "password" in text
    assert "old-password" not in text
    assert "new-password" not in text
    assert "third" not in text


async def test_basic_auth_replace_rotates_without_a_restart() -> None:
    auth = BasicAuth("svc", "old-password")
    auth.replace([("svc", "old-password"), ("svc", "new-password")])  # overlap
    assert await auth.check(_basic("svc", "old-password"))
    assert await auth.check(_basic("svc", "new-password"))
    auth.replace([("svc", "new-password")])  # the old one withdrawn
    with pytest.raises(NotificationRejected):
        await authenticate({"Authorization": _basic("svc", "old-password")}, auth)
    await authenticate({"Authorization": _basic("svc", "new-password")}, auth)
    with pytest.raises(ConfigurationError):
        auth.replace([])
    with pytest.raises(ConfigurationError):
        auth.replace([("svc", "")])
    assert await auth.check(_basic("svc", "new-password"))  # a refused replace changes nothing
    with pytest.raises(ConfigurationError):
        BasicAuth("svc", "x", also=[("a:b", "y")])


# --- JWKS -----------------------------------------------------------------------------------


class Issuer:
    """A JWKS endpoint whose published keys a test changes, counting the fetches."""

    def __init__(self) -> None:
        self.published: list[RSAKey | ECKey] = []
        self.fetches = 0
        self.status = 200
        self.delay = 0.0

    def publish(self, *keys: RSAKey | ECKey) -> None:
        self.published = list(keys)

    async def handle(self, request: web.Request) -> web.Response:
        self.fetches += 1
        if self.delay:
            await asyncio.sleep(self.delay)
        keys = [k.as_dict(private=False) for k in self.published]
        return web.json_response({"keys": keys}, status=self.status)


@pytest.fixture(scope="module")
def keys() -> dict[str, RSAKey | ECKey]:
    return {
        "k1": RSAKey.generate_key(2048, parameters={"kid": "k1", "use": "sig"}),
        "k2": RSAKey.generate_key(2048, parameters={"kid": "k2", "use": "sig"}),
        "e1": ECKey.generate_key("P-256", parameters={"kid": "e1"}),
    }


@pytest.fixture
async def issuer(serve: Serve) -> tuple[Issuer, str]:
    issuer = Issuer()
    base = await serve({("GET", "/.well-known/jwks.json"): issuer.handle})
    return issuer, base + "/.well-known/jwks.json"


def _token(key: RSAKey | ECKey, *, kid: str | None = None, **claims: Any) -> str:
    now = int(time.time())
    body: dict[str, Any] = {"iss": "bank", "aud": "us", "exp": now + 300, "iat": now}
    body.update(claims)
    alg = "ES256" if isinstance(key, ECKey) else "RS256"
    header: dict[str, Any] = {"alg": alg}
    if kid is not None:
        header["kid"] = kid
    return jwt.encode(header, body, key)


async def test_jwks_rotation_old_and_new_keys_both_pass_during_the_overlap(
    issuer: tuple[Issuer, str], keys: dict[str, RSAKey | ECKey]
) -> None:
    server, url = issuer
    server.publish(keys["k1"])
    verifier = JwtBearerVerifier(
        issuer="bank", audience="us", jwks_url=url, jwks_min_refresh_interval=0.2
    )
    auth = BearerAuth(verifier)
    assert await auth.check("Bearer " + _token(keys["k1"], kid="k1"))
    assert server.fetches == 1
    for _ in range(20):  # cached: no further fetch
        assert await verifier(_token(keys["k1"], kid="k1"))
    assert server.fetches == 1

    await asyncio.sleep(0.25)  # past the minimum interval between two fetches
    server.publish(keys["k1"], keys["k2"])  # the issuer starts the rotation
    assert await verifier(_token(keys["k2"], kid="k2"))  # unknown kid: one refresh
    assert server.fetches == 2
    assert await verifier(_token(keys["k1"], kid="k1"))  # the old key still passes
    assert await verifier(_token(keys["k2"], kid="k2"))
    assert server.fetches == 2

    # Claims are still checked with a JWKS key; a token signed by k1 but naming k2 fails.
    assert not await verifier(_token(keys["k2"], kid="k2", iss="someone"))
    assert not await verifier(_token(keys["k1"], kid="k2"))
    assert server.fetches == 2
    assert "jwks" in repr(verifier)
    assert "n=" not in repr(verifier)


async def test_an_unknown_kid_refreshes_once_whatever_the_flood(
    issuer: tuple[Issuer, str], keys: dict[str, RSAKey | ECKey]
) -> None:
    server, url = issuer
    server.publish(keys["k1"])
    server.delay = 0.05  # concurrent verifications overlap the fetch
    verifier = JwtBearerVerifier(
        issuer="bank", audience="us", jwks_url=url, jwks_min_refresh_interval=0.5
    )
    assert await verifier(_token(keys["k1"], kid="k1"))
    assert server.fetches == 1
    await asyncio.sleep(0.55)
    forged = [_token(keys["k2"], kid=f"made-up-{i}") for i in range(200)]
    results = await asyncio.gather(*(verifier(t) for t in forged))
    assert not any(results)
    assert server.fetches == 2  # one refresh for 200 unknown kids
    results = await asyncio.gather(*(verifier(t) for t in forged[:50]))
    assert not any(results)
    assert server.fetches == 2  # and none again within the interval
    assert await verifier(_token(keys["k1"], kid="k1"))


async def test_a_new_kid_after_the_interval_is_fetched(
    issuer: tuple[Issuer, str], keys: dict[str, RSAKey | ECKey]
) -> None:
    server, url = issuer
    server.publish(keys["k1"])
    verifier = JwtBearerVerifier(
        issuer="bank", audience="us", jwks_url=url, jwks_min_refresh_interval=0.2
    )
    assert not await verifier(_token(keys["k2"], kid="k2"))  # not published yet
    assert server.fetches == 1
    server.publish(keys["k2"], keys["e1"])  # k1 withdrawn
    assert not await verifier(_token(keys["k2"], kid="k2"))  # within the interval: no fetch
    assert server.fetches == 1
    await asyncio.sleep(0.25)
    assert await verifier(_token(keys["k2"], kid="k2"))
    assert server.fetches == 2
    assert await verifier(_token(keys["e1"], kid="e1"))  # EC keys from a JWKS too
    await asyncio.sleep(0.25)
    assert not await verifier(_token(keys["k1"], kid="k1"))  # withdrawn: refused after refresh
    assert server.fetches == 3


async def test_pems_and_a_jwks_together_and_a_token_without_kid(
    issuer: tuple[Issuer, str], keys: dict[str, RSAKey | ECKey]
) -> None:
    server, url = issuer
    server.publish(keys["k2"])
    pem = keys["k1"].as_pem(private=False)
    verifier = JwtBearerVerifier(pem, issuer="bank", audience="us", jwks_url=url)
    assert verifier.verify(_token(keys["k1"]))  # sync: the PEM alone
    assert not verifier.verify(_token(keys["k2"], kid="k2"))  # sync: nothing fetched yet
    assert server.fetches == 0
    assert await verifier(_token(keys["k1"], kid="k1"))  # first use fetches; the PEM passes
    assert server.fetches == 1
    assert await verifier(_token(keys["k2"]))  # no kid: every key is tried
    assert verifier.verify(_token(keys["k2"], kid="k2"))  # now cached
    assert server.fetches == 1


async def test_a_failing_jwks_keeps_the_known_keys_and_logs_once(
    issuer: tuple[Issuer, str],
    keys: dict[str, RSAKey | ECKey],
    caplog: pytest.LogCaptureFixture,
) -> None:
    server, url = issuer
    server.publish(keys["k1"])
    verifier = JwtBearerVerifier(
        issuer="bank",
        audience="us",
        jwks_url=url,
        jwks_min_refresh_interval=0.01,
        jwks_cache_seconds=0.01,
    )
    assert await verifier.refresh_keys()
    server.status = 503
    caplog.set_level(logging.WARNING, logger="payments_async.notifications")
    for _ in range(5):
        await asyncio.sleep(0.02)
        assert await verifier(_token(keys["k1"], kid="k1"))  # stale, refetch fails: kept
    assert server.fetches >= 4
    warnings = [r for r in caplog.records if "could not be fetched" in r.getMessage()]
    assert len(warnings) == 1
    server.status = 200
    server.publish()  # an empty set is refused too: the known keys stay
    await asyncio.sleep(0.02)
    assert await verifier(_token(keys["k1"], kid="k1"))


_HMAC_K = "YS1zaGFyZWQtaG1hYy1zZWNyZXQtMzItYnl0ZXMtbG9uZw"


async def test_a_jwks_with_unusable_keys_keeps_only_the_usable_ones(serve: Serve) -> None:
    good = RSAKey.generate_key(2048, parameters={"kid": "good"})
    document = {
        "keys": [
            {"kty": "oct", "kid": "hmac", "k": _HMAC_K},
            {"kid": "enc", "use": "enc", **good.as_dict(private=False)},
            {**RSAKey.generate_key(2048).as_dict(private=True), "kid": "private"},
            {"kty": "RSA", "kid": "broken", "n": "AQAB"},
            "not a key",
            good.as_dict(private=False),
        ]
    }

    async def handle(_: web.Request) -> web.Response:
        return web.json_response(document)

    base = await serve({("GET", "/jwks"): handle})
    verifier = JwtBearerVerifier(issuer="bank", audience="us", jwks_url=base + "/jwks")
    assert await verifier(_token(good, kid="good"))
    hmac_key = OctKey.import_key({"kty": "oct", "k": _HMAC_K})  # the published secret
    claims = {"iss": "bank", "aud": "us", "exp": int(time.time()) + 300}
    hs = jwt.encode({"alg": "HS256", "kid": "hmac"}, claims, hmac_key, algorithms=["HS256"])
    assert not await verifier(hs)


def test_jwks_settings_are_checked(keys: dict[str, RSAKey | ECKey]) -> None:
    for url in ("http://bank.example/jwks", "ftp://127.0.0.1/jwks", "https:///jwks", "x"):
        with pytest.raises(ConfigurationError):
            JwtBearerVerifier(issuer="bank", audience="us", jwks_url=url)
    with pytest.raises(ConfigurationError):
        JwtBearerVerifier(issuer="bank", audience="us")  # no key at all
    with pytest.raises(ConfigurationError):
        JwtBearerVerifier(
            issuer="bank", audience="us", jwks_url="https://a/j", jwks_min_refresh_interval=0
        )
    JwtBearerVerifier(issuer="bank", audience="us", jwks_url="https://bank.example/jwks")
    JwtBearerVerifier(issuer="bank", audience="us", jwks_url="http://[::1]:9/jwks")
