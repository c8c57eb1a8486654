"""POST /oauth/token over real HTTP: success and each failure (issue 4)."""

from __future__ import annotations

from urllib.parse import urlencode

import aiohttp
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

from payments_async._constants import (
    SANDBOX_ASSERTION,
    SANDBOX_CLIENT_ID,
    SANDBOX_CLIENT_SECRET,
    TOKEN_PATH,
)
from payments_async._jwt import JwtSigner
from payments_async.sandbox import SandboxConfig
from payments_async.testing import ManualClock, SandboxHandle, sandbox_server
from tests.support.sandbox import RawClient, basic, form, predefined_client

pytest_plugins = ["tests.support.sandbox_fixtures"]

JSON = {"Accept": "application/json"}


async def test_signed_assertion_gets_a_token(client: RawClient, sandbox: SandboxHandle) -> None:
    reply = await client.fetch_token()
    assert reply.status == 200
    assert reply.json["token_type"] == "bearer"
    assert reply.json["scope"] == "makePayments"
    assert reply.json["expires_in"] == 3600
    assert reply.headers["Cache-Control"] == "no-store"
    assert sandbox.server.state.token_owner(reply.json["access_token"]) == (
        client.client_id,
        False,
    )


async def test_expires_in_as_quoted_string_option(http: aiohttp.ClientSession) -> None:
    async with sandbox_server(SandboxConfig(token_lifetime=90, expires_in_as_string=True)) as sb:
        reply = await predefined_client(http, sb).fetch_token()
    assert reply.status == 200
    assert reply.json["expires_in"] == "90"


async def test_predefined_assertion_works_for_the_predefined_client_only(
    client: RawClient, sandbox: SandboxHandle, http: aiohttp.ClientSession
) -> None:
    ok = await predefined_client(http, sandbox).fetch_token()
    assert ok.status == 200
    # The predefined assertion is reusable (valid for a year, like the service's).
    again = await predefined_client(http, sandbox).fetch_token()
    assert again.status == 200
    refused = await client.fetch_token(assertion=SANDBOX_ASSERTION)
    assert refused.status == 401
    assert refused.codes == ["INVALID_GRANT"]


async def test_predefined_tokens_can_be_switched_off(http: aiohttp.ClientSession) -> None:
    async with sandbox_server(SandboxConfig(accept_predefined_tokens=False)) as sb:
        reply = await predefined_client(http, sb).fetch_token()
    assert reply.status == 401
    assert reply.codes == ["INVALID_GRANT"]


async def test_wrong_secret_and_unknown_client_are_401(client: RawClient) -> None:
    for cid, secret in ((client.client_id, "wrong"), ("nobody", "x")):
        reply = await client.request(
            "POST",
            TOKEN_PATH,
            headers={"Authorization": basic(cid, secret), **JSON},
            data=form(client.assertion()),
        )
        assert reply.status == 401, cid
        assert reply.codes == ["INVALID_CLIENT"]
        assert "WWW-Authenticate" in reply.headers


async def test_missing_basic_auth_is_401_and_malformed_basic_is_400(client: RawClient) -> None:
    missing = await client.request("POST", TOKEN_PATH, headers=JSON, data=form("x"))
    assert (missing.status, missing.codes) == (401, ["INVALID_CLIENT"])
    garbled = await client.request(
        "POST", TOKEN_PATH, headers={"Authorization": "Basic !!!", **JSON}, data=form("x")
    )
    assert (garbled.status, garbled.codes) == (400, ["INVALID_REQUEST"])


async def test_unknown_form_keys_are_ignored(client: RawClient) -> None:
    # RFC 6749 3.2: unrecognized parameters are ignored; RFC 7521 4.1 names client_id.
    auth = {"Authorization": basic(client.client_id, client.secret), **JSON}
    data = {**form(client.assertion()), "client_id": client.client_id, "extra": "1"}
    reply = await client.request("POST", TOKEN_PATH, headers=auth, data=data)
    assert reply.status == 200, reply.json
    assert reply.json["token_type"] == "bearer"


async def test_form_keys_missing_repeated_or_wrong(client: RawClient) -> None:
    auth = {"Authorization": basic(client.client_id, client.secret), **JSON}
    repeated = urlencode([*form(client.assertion()).items(), ("scope", "makePayments")])
    cases: list[tuple[object, str]] = [
        ({"grant_type": "x", "scope": "makePayments"}, "INVALID_REQUEST"),
        (repeated, "INVALID_REQUEST"),
        ({**form(client.assertion()), "extra": "1", "scope": "x"}, "INVALID_SCOPE"),
        (form(client.assertion(), grant_type="client_credentials"), "UNSUPPORTED_GRANT_TYPE"),
        (form(client.assertion(), scope="readPayments"), "INVALID_SCOPE"),
    ]
    for data, code in cases:
        headers = dict(auth)
        if isinstance(data, str):
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        reply = await client.request("POST", TOKEN_PATH, headers=headers, data=data)
        assert (reply.status, reply.codes) == (400, [code]), data


async def test_json_body_instead_of_form_is_400(client: RawClient) -> None:
    reply = await client.request(
        "POST",
        TOKEN_PATH,
        headers={
            "Authorization": basic(client.client_id, client.secret),
            "Content-Type": "application/json",
            **JSON,
        },
        data=b'{"grant_type": "x"}',
    )
    assert (reply.status, reply.codes) == (400, ["INVALID_REQUEST"])


async def test_assertion_jti_is_single_use(client: RawClient) -> None:
    assertion = client.assertion()
    first = await client.fetch_token(assertion)
    assert first.status == 200
    second = await client.fetch_token(assertion)
    assert (second.status, second.codes) == (401, ["ASSERTION_REPLAYED"])


async def test_bad_assertions_are_401_invalid_grant(
    client: RawClient, sandbox: SandboxHandle, rsa_private_key: RSAPrivateKey, clock: ManualClock
) -> None:
    assert sandbox.private_key is not None
    creds = sandbox.credentials
    assert creds is not None
    own = JwtSigner(sandbox.private_key, key_id=creds.key_id, issuer=creds.issuer)
    other_key = JwtSigner(rsa_private_key, key_id=creds.key_id, issuer=creds.issuer)
    wrong_kid = JwtSigner(sandbox.private_key, key_id="other-kid", issuer=creds.issuer)
    wrong_iss = JwtSigner(sandbox.private_key, key_id=creds.key_id, issuer="other-iss")
    cases = {
        "bad signature": other_key.assertion(client.client_id),
        "unknown kid": wrong_kid.assertion(client.client_id),
        "iss": wrong_iss.assertion(client.client_id),
        "sub": own.assertion("someone-else"),
        "expired": own.assertion(client.client_id, now=clock() - 3600, lifetime=60),
        "not a jwt": "abc.def",
    }
    for what, assertion in cases.items():
        reply = await client.fetch_token(assertion)
        assert (reply.status, reply.codes) == (401, ["INVALID_GRANT"]), what


async def test_token_outage_switch(
    client: RawClient, sandbox: SandboxHandle, clock: ManualClock
) -> None:
    outage = await client.request(
        "POST", "/_sandbox/token-outage", data=b'{"seconds": 30, "status": 503}'
    )
    assert outage.status == 200
    down = await client.fetch_token()
    assert (down.status, down.codes) == (503, ["TOKEN_ENDPOINT_UNAVAILABLE"])
    clock.advance(31)
    assert (await client.fetch_token()).status == 200
    assert sandbox.server.stats()["token_requests"] == 2


async def test_predefined_client_credentials_are_the_documented_constants(
    http: aiohttp.ClientSession, sandbox: SandboxHandle
) -> None:
    raw = predefined_client(http, sandbox)
    assert (raw.client_id, raw.secret) == (SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET)
    assert sandbox.sandbox_credentials.client_id == SANDBOX_CLIENT_ID
    assert sandbox.sandbox_credentials.sandbox_tokens
