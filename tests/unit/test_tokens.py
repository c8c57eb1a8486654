"""The token session: exact request, caching, single flight, background refresh, errors."""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import parse_qs

import aiohttp
import pytest
from aioresponses import aioresponses
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

from payments_async._credentials import Credentials
from payments_async._errors import (
    AuthenticationError,
    ConfigurationError,
    InvalidResponseError,
    PermissionDeniedError,
    ServerError,
    TransportError,
)
from payments_async._jwt import RegisteredKey, verify_assertion
from payments_async._keys import private_key_pem
from payments_async._tokens import AccessToken, TokenSession
from payments_async._transport import Transport
from tests.support.auth import (
    BASE_URL,
    CLIENT_ID,
    CLIENT_SECRET,
    ISSUER,
    KEY_ID,
    TokenServer,
)

FAST = {"retry_initial": 0.01, "retry_max": 0.02}


@pytest.fixture
def creds(rsa_key: RSAPrivateKey) -> Credentials:
    return Credentials(CLIENT_ID, CLIENT_SECRET, key_id=KEY_ID, issuer=ISSUER, private_key=rsa_key)


@pytest.fixture
async def transport() -> AsyncIterator[Transport]:
    t = Transport(BASE_URL)
    yield t
    await t.aclose()


@pytest.fixture
async def session(transport: Transport, creds: Credentials) -> AsyncIterator[TokenSession]:
    s = TokenSession(transport, creds, **FAST)
    yield s
    await s.aclose()


def _other_tasks() -> set[asyncio.Task[Any]]:
    return {t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()}


class TickingClock:
    """A session clock that moves ``step`` seconds each time it is read, whatever the real
    time: a fetch reaches its deadline after the same number of attempts on any machine
    (on the real clock, a loaded one spent a 0.1 s deadline on its first attempt)."""

    def __init__(self, step: float) -> None:
        self.step = step
        self.now = 0.0

    def __call__(self) -> float:
        self.now += self.step
        return self.now


class DrivenClock:
    """``time.monotonic()`` plus the seconds a test has moved it forward: a session on it
    reaches a refresh without the test waiting for one."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.ahead

    def advance_once(self, seconds: float) -> Callable[[AccessToken], None]:
        """An ``on_refresh`` that moves the clock ``seconds`` forward at the first token."""

        def on_first(token: AccessToken) -> None:
            if not self.ahead:
                self.ahead = seconds

        return on_first


async def _until(predicate: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)


# --- the request ---------------------------------------------------------------------------


async def test_exact_token_request(
    session: TokenSession, token_server: TokenServer, rsa_key: RSAPrivateKey
) -> None:
    token = await session.get()
    assert token.value == "access-token-1-Zx9"
    (call,) = token_server.calls
    headers = call["headers"]
    expected_basic = base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
    assert headers["Authorization"] == f"Basic {expected_basic}"
    assert headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert headers["Accept"] == "application/json"
    form = parse_qs(call["data"].decode(), strict_parsing=True)
    assert set(form) == {"grant_type", "assertion", "scope"}
    assert form["grant_type"] == ["urn:ietf:params:oauth:grant-type:jwt-bearer"]
    assert form["scope"] == ["makePayments"]
    keys = {KEY_ID: RegisteredKey(KEY_ID, ISSUER, rsa_key.public_key())}
    claims = verify_assertion(form["assertion"][0], keys=keys, client_id=CLIENT_ID)
    assert claims["sub"] == CLIENT_ID


async def test_sandbox_mode_sends_the_predefined_assertion(
    transport: Transport, token_server: TokenServer
) -> None:
    async with TokenSession(transport, Credentials.sandbox()) as s:
        await s.get()
    form = parse_qs(token_server.calls[0]["data"].decode())
    assert form["assertion"] == ["sandbox-predefined-assertion-v1"]


@pytest.mark.parametrize("expires_in", [3600, "3600", " 3600 "])
async def test_string_and_numeric_expires_in(
    expires_in: int | str, session: TokenSession, token_server: TokenServer
) -> None:
    token_server.expires_in = expires_in
    before = time.monotonic()
    token = await session.get()
    assert token.lifetime == 3600
    assert before + 3600 - 1 < token.expires_at <= time.monotonic() + 3600
    assert token.scope == "makePayments"


async def test_token_is_cached(session: TokenSession, token_server: TokenServer) -> None:
    first = await session.get()
    assert await session.get() is first
    assert session.current is first
    assert len(token_server.calls) == 1


async def test_access_token_repr_hides_the_value(
    session: TokenSession, token_server: TokenServer
) -> None:
    token = await session.get()
    assert token.value not in repr(token)
    assert token.authorization == f"Bearer {token.value}"


# --- single flight and refresh --------------------------------------------------------------


async def test_200_concurrent_callers_cause_exactly_one_request(
    session: TokenSession, token_server: TokenServer
) -> None:
    gate = asyncio.Event()
    token_server.gate = gate
    waiters = [asyncio.create_task(session.get()) for _ in range(200)]
    await _until(lambda: len(token_server.calls) == 1)
    await asyncio.sleep(0.05)  # every waiter has reached the shared fetch by now
    gate.set()
    tokens = await asyncio.gather(*waiters)
    assert len(token_server.calls) == 1
    assert {id(t) for t in tokens} == {id(tokens[0])}


async def test_a_cancelled_waiter_does_not_cancel_the_shared_fetch(
    session: TokenSession, token_server: TokenServer
) -> None:
    token_server.gate = asyncio.Event()
    first = asyncio.create_task(session.get())
    second = asyncio.create_task(session.get())
    await _until(lambda: len(token_server.calls) == 1)
    first.cancel()
    token_server.gate.set()
    assert (await second).value == "access-token-1-Zx9"
    assert first.cancelled()


async def test_refresh_happens_before_expiry_without_a_caller_waiting(
    transport: Transport, creds: Credentials, token_server: TokenServer
) -> None:
    token_server.expires_in = 60  # refresh lead: min(60 s, 20% of 60 s) = 12 s
    refreshed: list[tuple[AccessToken, float]] = []
    clock = DrivenClock()
    to_refresh = clock.advance_once(47.99)  # the first token 47.99 s old: refresh in 0.01 s

    def on_refresh(token: AccessToken) -> None:
        refreshed.append((token, clock()))
        to_refresh(token)

    async with TokenSession(transport, creds, on_refresh=on_refresh, monotonic=clock) as s:
        first = await s.get()
        await _until(lambda: len(refreshed) == 2, timeout=3)
        second, at = refreshed[1]
        assert at < first.expires_at  # refreshed while the first was still valid
        assert at >= first.expires_at - 12 - 0.05
        assert second.value != first.value
        assert s.current is second
        assert await s.get() is second  # served from the cache
    assert len(token_server.calls) == 2


async def test_failed_background_refresh_keeps_serving_the_valid_token(
    transport: Transport,
    creds: Credentials,
    token_server: TokenServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Refreshing 90 % of a minute before expiry: at 6 s, 0.01 s after the clock is moved on;
    # the failed refreshes then have 54 s of the token's life to be served in.
    token_server.expires_in = 60
    refreshed: list[AccessToken] = []
    clock = DrivenClock()
    to_refresh = clock.advance_once(5.99)

    def on_refresh(token: AccessToken) -> None:
        refreshed.append(token)
        if len(refreshed) == 1:  # before the refresh is planned: it cannot get a token
            token_server.default = (503, {"errors": [{"code": "UNAVAILABLE"}]})
        to_refresh(token)

    async with TokenSession(
        transport,
        creds,
        fetch_deadline=0.05,
        on_refresh=on_refresh,
        refresh_fraction=0.9,
        monotonic=clock,
        **FAST,
    ) as s:
        first = await s.get()
        with caplog.at_level(logging.WARNING, logger="payments_async"):
            # Two failed refreshes: the first, then its retry after a backoff.
            await _until(
                lambda: sum("refresh failed" in r.getMessage() for r in caplog.records) >= 2,
                timeout=4,
            )
        assert first.is_valid(clock())
        assert await s.get() is first  # still served, no error raised to the caller
        assert s.current is first
        token_server.default = "token"  # the service recovers: the backoff loop gets a token
        await _until(lambda: len(refreshed) == 2, timeout=2)
        assert (await s.get()).value != first.value


# --- 401 from the API: compare-and-clear --------------------------------------------------


async def test_invalidate_is_compare_and_clear(
    session: TokenSession, token_server: TokenServer
) -> None:
    first = await session.get()
    assert session.invalidate(first) is True
    assert session.invalidate(first) is False  # already gone
    second = await session.get()
    assert second.value != first.value
    assert session.invalidate(first) is False  # a stale token does not clear the new one
    assert session.current is second
    assert len(token_server.calls) == 2


async def test_a_burst_of_401s_yields_one_new_token(
    session: TokenSession, token_server: TokenServer
) -> None:
    refused = await session.get()

    async def request_that_got_401() -> AccessToken:
        session.invalidate(refused)
        return await session.get()  # the one retry with a new token

    tokens = await asyncio.gather(*(request_that_got_401() for _ in range(50)))
    assert len(token_server.calls) == 2
    assert {t.value for t in tokens} == {"access-token-2-Zx9"}


# --- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 401])
async def test_refused_credentials_raise_authentication_error_with_codes(
    status: int, session: TokenSession, token_server: TokenServer
) -> None:
    token_server.default = (
        status,
        {"errors": [{"code": "INVALID_CLIENT", "message": "bad assertion", "level": "ERROR"}]},
    )
    with pytest.raises(AuthenticationError) as info:
        await session.get()
    err = info.value
    assert err.status == status
    assert err.codes == ("INVALID_CLIENT",)
    assert (err.method, err.path) == ("POST", "/oauth/token")
    assert err.request_id
    assert len(token_server.calls) == 1  # not retried


async def test_403_maps_to_permission_denied(
    session: TokenSession, token_server: TokenServer
) -> None:
    token_server.default = (403, "<html>forbidden</html>")
    with pytest.raises(PermissionDeniedError):
        await session.get()


async def test_server_errors_are_retried_then_raised(
    transport: Transport, creds: Credentials, token_server: TokenServer
) -> None:
    token_server.default = (500, {"errors": [{"code": "BOOM"}]})
    clock = TickingClock(5.0)  # a few attempts on any machine
    async with TokenSession(transport, creds, fetch_deadline=30, monotonic=clock, **FAST) as s:
        with pytest.raises(ServerError) as info:
            await s.get()
    assert info.value.codes == ("BOOM",)
    assert 2 <= len(token_server.calls) <= 6


async def test_transport_errors_are_retried(
    session: TokenSession, token_server: TokenServer
) -> None:
    token_server.script = [aiohttp.ServerDisconnectedError(), aiohttp.ClientOSError()]
    token = await session.get()
    assert token.value == "access-token-1-Zx9"
    assert len(token_server.calls) == 3


async def test_persistent_transport_failure_raises_transport_error(
    transport: Transport, creds: Credentials, token_server: TokenServer
) -> None:
    token_server.script = [aiohttp.ServerDisconnectedError() for _ in range(1000)]
    # Each attempt reads the clock twice or three times (its start, the deadline check):
    # a 30 s deadline on 5 s ticks is reached after a few attempts, each given seconds of
    # real time to fail in.
    clock = TickingClock(5.0)
    async with TokenSession(transport, creds, fetch_deadline=30, monotonic=clock, **FAST) as s:
        with pytest.raises(TransportError):
            await s.get()
    assert 2 <= len(token_server.calls) <= 6


async def test_a_later_call_retries_after_a_failed_fetch(
    session: TokenSession, token_server: TokenServer
) -> None:
    token_server.script = [(401, {"errors": [{"code": "X"}]})]
    with pytest.raises(AuthenticationError):
        await session.get()
    assert (await session.get()).value == "access-token-1-Zx9"


@pytest.mark.parametrize(
    "body",
    [
        {"token_type": "bearer", "expires_in": 60},
        {"access_token": "a", "expires_in": "soon"},
        {"access_token": "a", "expires_in": 0},
        {"access_token": "a", "expires_in": 60, "token_type": "mac"},
        {"access_token": "a", "expires_in": 10**400},  # beyond a float (an OverflowError once)
        {"access_token": "a", "expires_in": "1e999"},
    ],
)
async def test_malformed_token_response(
    body: dict[str, Any], session: TokenSession, token_server: TokenServer
) -> None:
    token_server.default = (200, body)
    with pytest.raises(InvalidResponseError):
        await session.get()


# --- lifecycle -----------------------------------------------------------------------------


async def test_close_leaves_no_task_running(
    transport: Transport, creds: Credentials, token_server: TokenServer
) -> None:
    before = _other_tasks()
    s = TokenSession(transport, creds)
    await s.get()
    assert len(_other_tasks() - before) == 1  # the background refresher, started lazily
    await s.aclose()
    assert _other_tasks() - before == set()
    with pytest.raises(ConfigurationError, match="closed"):
        await s.get()
    await s.aclose()  # idempotent


async def test_close_during_a_fetch_fails_the_waiters_cleanly(
    transport: Transport, creds: Credentials, token_server: TokenServer
) -> None:
    before = _other_tasks()
    token_server.gate = asyncio.Event()
    s = TokenSession(transport, creds)
    waiter = asyncio.create_task(s.get())
    await _until(lambda: len(token_server.calls) == 1)
    await s.aclose()
    with pytest.raises(ConfigurationError, match="closed"):
        await waiter
    assert _other_tasks() - before == set()


def test_no_task_is_created_outside_a_running_loop(
    transport: Transport, creds: Credentials
) -> None:
    s = TokenSession(transport, creds)  # constructing does no async work
    assert s.current is None
    assert "empty" in repr(s)


# --- secrets -------------------------------------------------------------------------------


async def test_no_secret_in_logs_reprs_or_errors(
    transport: Transport,
    creds: Credentials,
    token_server: TokenServer,
    mock_http: aioresponses,
    rsa_key: RSAPrivateKey,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="payments_async")
    token_server.expires_in = 60  # a background refresh at 48 s, 0.01 s after the clock moves
    seen: list[str] = []
    errors: list[BaseException] = []
    clock = DrivenClock()
    async with TokenSession(
        transport, creds, on_refresh=clock.advance_once(47.99), monotonic=clock, **FAST
    ) as s:
        first = await s.get()
        await _until(lambda: len(token_server.issued) == 2, timeout=3)  # background refresh
        second = await s.get()
        s.invalidate(second)
        token_server.script = [
            aiohttp.ServerDisconnectedError(),
            (500, {"errors": [{"code": "E"}]}),
            (401, {"errors": [{"code": "INVALID_CLIENT", "message": "refused"}]}),
        ]
        try:
            await s.get()
        except AuthenticationError as exc:
            errors.append(exc)
        third = await s.get()
        seen += [repr(first), repr(second), repr(third), repr(s), repr(creds), repr(creds.signer())]
    assert errors, "the 401 path was exercised"

    assertions = [parse_qs(c["data"].decode())["assertion"][0] for c in token_server.calls]
    basic = token_server.calls[0]["headers"]["Authorization"].split()[1]
    secrets = [
        CLIENT_SECRET,
        basic,
        *token_server.issued,
        *assertions,
        *(a.split(".")[2] for a in assertions),  # signatures
        *private_key_pem(rsa_key).decode().splitlines()[1:-1],
    ]
    texts = list(seen)
    for record in caplog.records:
        texts.append(record.getMessage())
        texts.append(repr(record.__dict__))
    for exc in errors:
        texts += [str(exc), repr(exc), repr(exc.__cause__), repr(exc.__context__)]
    blob = "\n".join(texts)
    assert any(r.levelno == logging.DEBUG for r in caplog.records)
    assert any(getattr(r, "event", None) == "token.obtained" for r in caplog.records)
    for secret in secrets:
        assert secret not in blob


async def test_key_file_credentials_work_end_to_end(
    tmp_path: Any, transport: Transport, rsa_key: RSAPrivateKey, token_server: TokenServer
) -> None:
    path = tmp_path / "k.pem"
    path.write_bytes(private_key_pem(rsa_key))
    creds = Credentials(CLIENT_ID, CLIENT_SECRET, key_id=KEY_ID, issuer=ISSUER, private_key=path)
    async with TokenSession(transport, creds) as s:
        assert (await s.get()).value == "access-token-1-Zx9"
