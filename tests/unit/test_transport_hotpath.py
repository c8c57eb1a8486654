"""The request path made cheaper (issue 14) keeps its behaviour: the connection limiter,
the deadline and read timeout of an attempt, URLs, and no cookies on an owned session.
Real HTTP against small aiohttp servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import pytest
from aiohttp import web

from payments_async import (
    Credentials,
    OutcomeUnknownError,
    PaymentsClient,
    RetryPolicy,
    TransportError,
)
from payments_async._transport import Transport, _Slots
from payments_async.iso20022 import build_cancellation

TOKEN_BODY = {"access_token": "tok-1", "token_type": "bearer", "expires_in": 3600}
SUBMITTED = {"data": {"paymentsServiceId": "PS-1", "status": "PENDING"}}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Serve = Callable[[dict[tuple[str, str], Handler]], Awaitable[str]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    runners: list[web.AppRunner] = []

    async def start(routes: dict[tuple[str, str], Handler]) -> str:
        app = web.Application()
        for (method, path), handler in routes.items():
            app.router.add_route(method, path, handler)
        runner = web.AppRunner(app, shutdown_timeout=0.1, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        return f"http://127.0.0.1:{runner.addresses[0][1]}"

    yield start
    for runner in runners:
        await runner.cleanup()


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
    # The attempt's deadline (0.6 s) is shorter than the read timeout (20 s): aiohttp's
    # per-read timer is left out and the deadline's timer alone must end the stall.
    url = await serve(
        {("POST", "/oauth/token"): _token, ("POST", "/payments/camt056/v08"): _stall_mid_body}
    )
    policy = RetryPolicy.for_testing(attempts=1, timeout=0.6)
    async with PaymentsClient(
        Credentials.sandbox(), base_url=url, retry=policy, read_timeout=20
    ) as client:
        await client.access_token_lifetime()
        start = time.monotonic()
        with pytest.raises(OutcomeUnknownError) as info:
            await client.request_cancellation(_cancellation())  # type: ignore[arg-type]
        took = time.monotonic() - start
    assert 0.5 <= took < 3.0
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
    policy = RetryPolicy.for_testing(attempts=1, timeout=30)
    async with PaymentsClient(
        Credentials.sandbox(), base_url=url, retry=policy, read_timeout=0.4
    ) as client:
        await client.access_token_lifetime()
        start = time.monotonic()
        with pytest.raises(OutcomeUnknownError):
            await client.request_cancellation(_cancellation())  # type: ignore[arg-type]
        took = time.monotonic() - start
    assert 0.3 <= took < 5.0


def test_the_per_read_timer_is_used_only_when_it_can_fire_first() -> None:
    transport = Transport("http://127.0.0.1:9", connect_timeout=2.0, read_timeout=10.0)
    longer = transport._timeouts(25.0)
    assert (longer.total, longer.sock_read, longer.sock_connect) == (25.0, 10.0, 2.0)
    shorter = transport._timeouts(10.0)
    assert (shorter.total, shorter.sock_read, shorter.sock_connect) == (10.0, None, 2.0)
    unbounded = transport._timeouts(None)
    assert (unbounded.total, unbounded.sock_read) == (None, 10.0)
    assert transport._timeouts(None) is unbounded  # reused, not rebuilt per request


# --- the connection limiter ----------------------------------------------------------------


async def test_slots_admit_at_most_the_limit_in_arrival_order() -> None:
    slots = _Slots(2)
    assert [slots.try_take() for _ in range(2)] == [True, True]
    assert not slots.try_take()
    order: list[str] = []

    async def wait(name: str) -> None:
        await slots.take()
        order.append(name)

    first = asyncio.create_task(wait("first"))
    await asyncio.sleep(0)
    second = asyncio.create_task(wait("second"))
    await asyncio.sleep(0)
    assert order == []
    slots.give()
    await asyncio.sleep(0)
    assert order == ["first"]
    assert not slots.try_take()  # a waiter is still queued: no jumping the queue
    slots.give()
    await asyncio.gather(first, second)
    assert order == ["first", "second"]
    slots.give()
    slots.give()
    assert [slots.try_take() for _ in range(3)] == [True, True, False]


async def test_a_waiter_that_times_out_leaves_the_queue_and_takes_no_slot() -> None:
    slots = _Slots(1)
    assert slots.try_take()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await slots.take()
    slots.give()
    assert slots.try_take()  # the slot came back to the pool, not to the gone waiter


async def test_a_slot_handed_to_a_waiter_cancelled_before_it_ran_is_passed_on() -> None:
    slots = _Slots(1)
    assert slots.try_take()
    late = asyncio.create_task(slots.take())
    nxt = asyncio.create_task(slots.take())
    await asyncio.sleep(0)
    slots.give()  # handed to `late`...
    late.cancel()  # ...which is cancelled before it resumes
    with pytest.raises(asyncio.CancelledError):
        await late
    async with asyncio.timeout(1):
        await nxt  # the slot went on to the next waiter
    assert not slots.try_take()
    slots.give()
    assert slots.try_take()


async def test_a_waiter_cancelled_and_dropped_by_give_still_ends_cancelled() -> None:
    slots = _Slots(1)
    assert slots.try_take()
    waiting = asyncio.create_task(slots.take())
    await asyncio.sleep(0)
    waiting.cancel()  # its future is cancelled now; the task has not run yet
    slots.give()  # drops the cancelled waiter and frees the slot
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert [slots.try_take() for _ in range(2)] == [True, False]


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
    transport = Transport(url, connection_limit=2)
    try:
        answers = await asyncio.gather(
            *(transport.request("GET", f"/x/{i}", headers={}, timeout=5) for i in range(7))
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
        await transport.request("POST", "/payments/camt056/v08", headers={}, body=b"{}")
        await transport.request("GET", "/payments/camt029/v09/PS-1_a", headers={})
        await transport.request("GET", "/x y", headers={})
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
            await transport.request("GET", "/c", headers={})
    finally:
        await transport.aclose()
    assert seen == [None, None]


async def test_a_borrowed_session_keeps_the_cookie_policy_its_owner_chose(serve: Serve) -> None:
    seen: list[str | None] = []
    url = await serve({("GET", "/c"): await _set_cookie_then_echo(seen)})
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:
        transport = Transport(url, session=session)
        for _ in range(2):
            await transport.request("GET", "/c", headers={})
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
    policy = RetryPolicy.for_testing(attempts=1, timeout=5)
    async with PaymentsClient(Credentials.sandbox(), base_url=url, retry=policy) as client:
        with pytest.raises(OutcomeUnknownError) as info:
            await client.request_cancellation(_cancellation())  # type: ignore[arg-type]
    assert info.value.status == 200
    assert "content type" in str(info.value)
