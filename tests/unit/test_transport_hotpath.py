"""The request path made cheaper keeps its behaviour: the connection limiter,
the deadline and read timeout of an attempt, URLs, and no cookies on an owned session.
Real HTTP against small aiohttp servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import aiohttp
import pytest
from aiohttp import web

from payments_async import (
    Credentials,
    Limits,
    OutcomeUnknownError,
    PaymentsClient,
    RetryPolicy,
    Timeout,
    TransportError,
)
from payments_async._instrument import Exchange
from payments_async._transport import Transport
from payments_async.iso20022 import build_cancellation
from tests.support.http_servers import Handler, Serve

TOKEN_BODY = {"access_token": "tok-1", "token_type": "bearer", "expires_in": 3600}
SUBMITTED = {"data": {"paymentsServiceId": "PS-1", "status": "PENDING"}}


def _cancellation() -> object:
    return build_cancellation(
        original_end_to_end_id="E2E-HOTPATH-1",
        amount="10.00",
        creditor_agent_bic="DEUTDEFF",
        creditor_iban="DE89370400440532013000",
        assigner_bic="COBADEFF",
        assignee_bic="DEUTDEFF",
    )


async def _stall_mid_body(request: web.Request) -> web.StreamResponse:
    """Headers and half the announced body, then nothing for a minute."""
    await request.read()
    resp = web.StreamResponse(status=201, headers={"Content-Type": "application/json"})
    resp.content_length = 200
    await resp.prepare(request)
    await resp.write(b'{"data": {"paymentsServiceId": ')
    await asyncio.sleep(60)
    return resp


async def _token(request: web.Request) -> web.Response:
    await request.read()
    return web.json_response(TOKEN_BODY)


# --- the deadline and the read timeout of one attempt --------------------------------------


async def test_a_body_stalled_past_the_deadline_ends_at_the_deadline_when_it_is_shorter_than_the_read_timeout(  # noqa: E501
    serve: Serve,
) -> None:
    # The attempt's deadline (0.2 s) ends the stall; aiohttp's per-read timer is left out
    # (the read timeout is cut to the total).
    url = await serve(
        {("POST", "/oauth/token"): _token, ("POST", "/payments/camt056/v08"): _stall_mid_body}
    )
    policy = RetryPolicy.for_testing(attempts=1)
    async with PaymentsClient(
        Credentials.sandbox(), base_url=url, retry=policy, timeout=Timeout(total=0.2)
    ) as client:
        await client.access_token_lifetime()
        start = time.monotonic()
        with pytest.raises(OutcomeUnknownError) as info:
            await client.request_cancellation(_cancellation())  # type: ignore[arg-type]
        took = time.monotonic() - start
    assert 0.15 <= took < 3.0
    assert isinstance(info.value.__cause__, TransportError)
    assert info.value.status == 201  # the headers had arrived


async def test_a_body_stalled_past_the_read_timeout_ends_at_the_read_timeout_when_the_deadline_is_longer(  # noqa: E501
    serve: Serve,
) -> None:
    # The deadline (30 s) is longer than the read timeout (0.4 s): the per-read timer
    # stays and ends the stalled read long before the deadline.
    url = await serve(
        {("POST", "/oauth/token"): _token, ("POST", "/payments/camt056/v08"): _stall_mid_body}
    )
    policy = RetryPolicy.for_testing(attempts=1)
    async with PaymentsClient(
        Credentials.sandbox(), base_url=url, retry=policy, timeout=Timeout(total=30, read=0.4)
    ) as client:
        await client.access_token_lifetime()
        start = time.monotonic()
        with pytest.raises(OutcomeUnknownError):
            await client.request_cancellation(_cancellation())  # type: ignore[arg-type]
        took = time.monotonic() - start
    assert 0.3 <= took < 5.0


def _trickle(chunks: int, pause: float, *, before_headers: float = 0.0) -> Handler:
    """A 201 whose JSON body arrives in ``chunks`` pieces, ``pause`` seconds apart."""

    async def handler(request: web.Request) -> web.StreamResponse:
        await request.read()
        await asyncio.sleep(before_headers)
        body = b'{"data": {"paymentsServiceId": "PS-1", "status": "PENDING"}}'
        body += b" " * (chunks - len(body) % chunks)
        step = len(body) // chunks
        resp = web.StreamResponse(status=201, headers={"Content-Type": "application/json"})
        resp.content_length = len(body)
        await resp.prepare(request)
        for i in range(chunks):
            await resp.write(body[i * step : (i + 1) * step])
            if i < chunks - 1:
                await asyncio.sleep(pause)
        return resp

    return handler


async def test_a_body_whose_every_read_is_shorter_than_the_read_timeout_is_read_in_full(
    serve: Serve,
) -> None:
    # Eight pieces 0.1 s apart: the whole body takes 0.7 s, more than twice the read
    # timeout (0.3 s), yet no single read waits that long: the read timeout is per read.
    url = await serve(
        {("POST", "/oauth/token"): _token, ("POST", "/payments/camt056/v08"): _trickle(8, 0.1)}
    )
    policy = RetryPolicy.for_testing(attempts=1)
    async with PaymentsClient(
        Credentials.sandbox(), base_url=url, retry=policy, timeout=Timeout(total=10, read=0.3)
    ) as client:
        sub = await client.request_cancellation(_cancellation())  # type: ignore[arg-type]
    assert (sub.payments_service_id, sub.created, sub.attempts) == ("PS-1", True, 1)


async def test_a_trickling_body_still_ends_at_the_deadline(serve: Serve) -> None:
    # Every read comes within the read timeout (pieces 0.1 s apart; the read timeout is cut
    # to the total, 0.3 s), but the body would take 2 s: the deadline ends it.
    url = await serve(
        {("POST", "/oauth/token"): _token, ("POST", "/payments/camt056/v08"): _trickle(20, 0.1)}
    )
    policy = RetryPolicy.for_testing(attempts=1)
    async with PaymentsClient(
        Credentials.sandbox(), base_url=url, retry=policy, timeout=Timeout(total=0.3)
    ) as client:
        await client.access_token_lifetime()
        start = time.monotonic()
        with pytest.raises(OutcomeUnknownError) as info:
            await client.request_cancellation(_cancellation())  # type: ignore[arg-type]
        took = time.monotonic() - start
    assert 0.25 <= took < 3.0
    assert info.value.status == 201


async def test_an_answer_that_does_not_begin_within_the_read_timeout_fails_the_attempt(
    serve: Serve,
) -> None:
    # Headers 2 s late, read timeout 0.3 s, deadline 30 s: the attempt ends at the read
    # timeout, long before the deadline, and says the request may have been received.
    url = await serve(
        {
            ("POST", "/oauth/token"): _token,
            ("POST", "/payments/camt056/v08"): _trickle(1, 0, before_headers=2.0),
        }
    )
    policy = RetryPolicy.for_testing(attempts=1)
    async with PaymentsClient(
        Credentials.sandbox(), base_url=url, retry=policy, timeout=Timeout(total=30, read=0.3)
    ) as client:
        await client.access_token_lifetime()
        start = time.monotonic()
        with pytest.raises(OutcomeUnknownError) as info:
            await client.request_cancellation(_cancellation())  # type: ignore[arg-type]
        took = time.monotonic() - start
    assert 0.25 <= took < 1.5
    cause = info.value.__cause__
    assert isinstance(cause, TransportError)
    assert cause.request_sent


def test_aiohttp_keeps_the_connect_timeout_only() -> None:
    # The attempt's deadline and the read timeout are one asyncio.timeout (the tests
    # above); aiohttp keeps connecting.
    transport = Transport("http://127.0.0.1:9", timeout=Timeout(connect=2.0, read=10.0))
    t = transport._aiohttp_timeout
    assert (t.total, t.sock_read, t.sock_connect) == (None, None, 2.0)


async def test_a_calls_deadline_holds_while_it_queues_for_the_only_connection(
    serve: Serve,
) -> None:
    release = asyncio.Event()
    arrived: list[str] = []

    async def slow(request: web.Request) -> web.Response:
        arrived.append(request.match_info["id"])
        await asyncio.wait_for(release.wait(), 10)
        return web.json_response({})

    url = await serve(
        {("POST", "/oauth/token"): _token, ("GET", "/payments/camt029/v09/{id}"): slow}
    )
    async with PaymentsClient(
        Credentials.sandbox(),
        base_url=url,
        limits=Limits(connections=1),
        retry=RetryPolicy.for_testing(attempts=1),
    ) as client:
        await client.access_token_lifetime()  # the token first: only the reads compete
        blocker = asyncio.create_task(client.get_cancellation_outcome("PS-A", timeout=20))
        await _until_true(lambda: arrived == ["PS-A"])  # it holds the only connection
        start = time.monotonic()
        with pytest.raises(TransportError) as info:
            await client.get_cancellation_outcome("PS-B", timeout=0.3)
        waited = time.monotonic() - start
        release.set()
        await asyncio.gather(blocker, return_exceptions=True)  # its answer is not the point
    assert waited < 1.5  # the blocker would have held the connection for 10 s
    assert "free connection" in info.value.message
    assert info.value.request_sent is False
    assert arrived == ["PS-A"]  # the second call was never sent


async def test_the_wait_for_a_free_connection_does_not_count_against_the_read_timeout(
    serve: Serve,
) -> None:
    # One connection, four reads of 0.25 s each: the last one queues ~0.75 s, longer
    # than the read timeout (0.5 s), inside its deadline (5 s). The read timeout starts
    # once a request has its connection, so every read succeeds.
    async def quarter_second(request: web.Request) -> web.Response:
        await asyncio.sleep(0.25)
        return web.json_response({})

    url = await serve({("GET", "/x/{n}"): quarter_second})
    transport = Transport(url, timeout=Timeout(read=0.5), limits=Limits(connections=1))
    try:
        start = time.monotonic()
        responses = await asyncio.gather(
            *(
                transport.request(Exchange("GET", f"/x/{i}", "r", 1), {}, timeout=5)
                for i in range(4)
            )
        )
        took = time.monotonic() - start
    finally:
        await transport.aclose()
    assert [r.status for r in responses] == [200] * 4
    assert took >= 0.9  # they did queue: one at a time


async def _until_true(predicate: Callable[[], bool]) -> None:
    for _ in range(500):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("never happened")


async def test_requests_queued_for_the_limit_are_sent_in_arrival_order(serve: Serve) -> None:
    order: list[str] = []

    async def record(request: web.Request) -> web.Response:
        order.append(request.match_info["n"])
        await asyncio.sleep(0.01)
        return web.json_response({})

    url = await serve({("GET", "/x/{n}"): record})
    transport = Transport(url, limits=Limits(connections=1))
    try:
        await asyncio.gather(
            *(
                transport.request(Exchange("GET", f"/x/{i}", "r", 1), {}, timeout=5)
                for i in range(8)
            )
        )
    finally:
        await transport.aclose()
    assert order == [str(i) for i in range(8)]


async def test_connection_limit_bounds_the_requests_in_flight(serve: Serve) -> None:
    in_flight = peak = 0

    async def slow(request: web.Request) -> web.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.05)
        in_flight -= 1
        return web.json_response({})

    url = await serve({("GET", "/x/{n}"): slow})
    transport = Transport(url, limits=Limits(connections=2))
    try:
        answers = await asyncio.gather(
            *(
                transport.request(Exchange("GET", f"/x/{i}", "r", 1), {}, timeout=5)
                for i in range(7)
            )
        )
    finally:
        await transport.aclose()
    assert [a.status for a in answers] == [200] * 7
    assert peak == 2


# --- URLs ------------------------------------------------------------------------------------


async def test_paths_below_a_base_path_and_paths_that_need_encoding(serve: Serve) -> None:
    seen: list[str] = []

    async def echo(request: web.Request) -> web.Response:
        seen.append(request.raw_path)
        return web.json_response({})

    url = await serve({("GET", "/api/{tail:.*}"): echo, ("POST", "/api/{tail:.*}"): echo})
    transport = Transport(url + "/api/")
    try:
        await transport.request(Exchange("POST", "/payments/camt056/v08", "r", 1), {}, body=b"{}")
        await transport.request(Exchange("GET", "/payments/camt029/v09/PS-1_a", "r", 1), {})
        await transport.request(Exchange("GET", "/x y", "r", 1), {})
    finally:
        await transport.aclose()
    assert seen == ["/api/payments/camt056/v08", "/api/payments/camt029/v09/PS-1_a", "/api/x%20y"]


# --- cookies -----------------------------------------------------------------------------------


async def _set_cookie_then_echo(cookies_seen: list[str | None]) -> Handler:
    async def handler(request: web.Request) -> web.Response:
        cookies_seen.append(request.headers.get("Cookie"))
        resp = web.json_response({})
        resp.set_cookie("session", "abc123")
        return resp

    return handler


async def test_an_owned_session_neither_stores_nor_sends_cookies(serve: Serve) -> None:
    seen: list[str | None] = []
    url = await serve({("GET", "/c"): await _set_cookie_then_echo(seen)})
    # A host name, not an IP address: aiohttp's default jar refuses cookies from IPs.
    transport = Transport(url.replace("127.0.0.1", "localhost"))
    try:
        for _ in range(2):
            await transport.request(Exchange("GET", "/c", "r", 1), {})
    finally:
        await transport.aclose()
    assert seen == [None, None]


async def test_a_borrowed_session_keeps_the_cookie_policy_its_owner_chose(serve: Serve) -> None:
    seen: list[str | None] = []
    url = await serve({("GET", "/c"): await _set_cookie_then_echo(seen)})
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:
        transport = Transport(url, session=session)
        for _ in range(2):
            await transport.request(Exchange("GET", "/c", "r", 1), {})
        await transport.aclose()
    assert seen == [None, "session=abc123"]


# --- the answer to a POST must be JSON -------------------------------------------------------


@pytest.mark.parametrize("ctype", ["text/html", "text/plain", None])
async def test_a_2xx_post_answer_that_is_not_json_is_an_unknown_outcome(
    serve: Serve, ctype: str | None
) -> None:
    # Found by tests/reliability/test_bad_input_network.py (hypothesis): a 200 served as
    # text/html whose body happened to decode as a submission result was accepted.
    async def html(request: web.Request) -> web.Response:
        await request.read()
        resp = web.Response(status=200, body=b'{"paymentsServiceId":"0"}')
        if ctype is None:
            resp.headers.popall("Content-Type", None)
        else:
            resp.headers["Content-Type"] = ctype
        return resp

    url = await serve({("POST", "/oauth/token"): _token, ("POST", "/payments/camt056/v08"): html})
    policy = RetryPolicy.for_testing(attempts=1)
    async with PaymentsClient(
        Credentials.sandbox(), base_url=url, retry=policy, timeout=Timeout(total=5)
    ) as client:
        with pytest.raises(OutcomeUnknownError) as info:
            await client.request_cancellation(_cancellation())  # type: ignore[arg-type]
    assert info.value.status == 200
    assert "content type" in str(info.value)


# --- request ids and the SCA token's hd -------------------------------------------------------


def test_request_ids_are_unique_32_hex_digits() -> None:
    import re

    ids = [_next_request_id() for _ in range(1000)]
    assert len(set(ids)) == 1000
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)


def _next_request_id() -> str:
    from payments_async._operation import Operation

    return Operation("GET", "/payments/pacs002/v10/x", Timeout()).request_id


def test_an_sca_token_signed_with_the_known_digest_carries_the_same_hd() -> None:
    import hashlib

    import msgspec

    from payments_async._jwt import JwtSigner, body_hash
    from payments_async.testing import generate_test_keypair

    key, _ = generate_test_keypair()
    signer = JwtSigner(key, key_id="kid", issuer="iss")
    body = b'{"a": 1}'
    token = signer.sign_sca_token(body, digest=hashlib.sha256(body).digest())
    payload = token.value.split(".")[1]  # type: ignore[union-attr]
    claims = msgspec.json.decode(_b64(payload))
    assert claims["hd"] == body_hash(body)


def _b64(segment: str) -> bytes:
    import base64

    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


# --- the request timer (asyncio.timeout's semantics, one timer handle) -------------------
