"""The request path made cheaper (issue 14) keeps its behaviour: the connection limiter,
the deadline and read timeout of an attempt, URLs, and no cookies on an owned session.
Real HTTP against small aiohttp servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import time

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
    # Five pieces 0.25 s apart: the whole body takes 1 s, four times the read timeout
    # (0.4 s), yet no single read waits that long: the read timeout is per read.
    url = await serve(
        {("POST", "/oauth/token"): _token, ("POST", "/payments/camt056/v08"): _trickle(5, 0.25)}
    )
    policy = RetryPolicy.for_testing(attempts=1, timeout=10)
    async with PaymentsClient(
        Credentials.sandbox(), base_url=url, retry=policy, read_timeout=0.4
    ) as client:
        sub = await client.request_cancellation(_cancellation())  # type: ignore[arg-type]
    assert (sub.payments_service_id, sub.created, sub.attempts) == ("PS-1", True, 1)


async def test_a_trickling_body_still_ends_at_the_deadline(serve: Serve) -> None:
    # Every read comes within the read timeout (pieces 0.2 s apart, read timeout 1 s), but
    # the body would take 4 s: the deadline (0.8 s) ends it.
    url = await serve(
        {("POST", "/oauth/token"): _token, ("POST", "/payments/camt056/v08"): _trickle(20, 0.2)}
    )
    policy = RetryPolicy.for_testing(attempts=1, timeout=0.8)
    async with PaymentsClient(
        Credentials.sandbox(), base_url=url, retry=policy, read_timeout=1.0
    ) as client:
        await client.access_token_lifetime()
        start = time.monotonic()
        with pytest.raises(OutcomeUnknownError) as info:
            await client.request_cancellation(_cancellation())  # type: ignore[arg-type]
        took = time.monotonic() - start
    assert 0.7 <= took < 3.0
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
    policy = RetryPolicy.for_testing(attempts=1, timeout=30)
    async with PaymentsClient(
        Credentials.sandbox(), base_url=url, retry=policy, read_timeout=0.3
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


def test_aiohttp_keeps_no_timer_of_its_own_but_the_connect_timeout() -> None:
    # The deadline and the read timeout are ours (one timer per request, see the tests
    # above); aiohttp's total and per-read timers would be two or three more per request.
    transport = Transport("http://127.0.0.1:9", connect_timeout=2.0, read_timeout=10.0)
    t = transport._aiohttp_timeouts
    assert (t.total, t.sock_read, t.sock_connect) == (None, None, 2.0)


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


def test_urls_are_kept_per_path_in_a_bounded_table(monkeypatch: pytest.MonkeyPatch) -> None:
    import payments_async._transport as transport_module

    monkeypatch.setattr(transport_module, "URL_CACHE_SIZE", 8)
    transport = Transport("http://127.0.0.1:9/api")
    first = transport._url("/payments/camt029/v09/PS-1")
    assert transport._url("/payments/camt029/v09/PS-1") is first  # aiohttp's caches on it
    for i in range(20):
        assert str(transport._url(f"/payments/pacs002/v12/PS-{i}")).endswith(f"/PS-{i}")
    assert len(transport._urls) <= 8
    # The fixed paths survive a full table being cleared.
    assert "/payments/camt056/v08" in transport._urls
    assert str(transport._url("/payments/camt056/v08")) == (
        "http://127.0.0.1:9/api/payments/camt056/v08"
    )


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


# --- request ids and the SCA token's hd -------------------------------------------------------


def test_request_ids_are_unique_32_hex_digits_and_a_forked_child_draws_a_new_random_half() -> None:
    import multiprocessing
    import re

    ids = [_next_request_id() for _ in range(1000)]
    assert len(set(ids)) == 1000
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        child = pool.apply(_next_request_id)
    # Same counter position possible, never the same random half: ids stay unique.
    assert child[:16] != ids[0][:16]
    assert child not in ids


def _next_request_id() -> str:
    from payments_async._client import _Operation

    # The id every call gets; in a child, from the child's own generator (not a copy).
    return _Operation("GET", "/payments/pacs002/v10/x").request_id


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


async def test_the_request_timer_turns_its_own_expiry_into_timeout_error() -> None:
    from payments_async._transport import _Deadline, _Timers

    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    start = loop.time()
    with pytest.raises(TimeoutError), _Deadline(_Timers(loop), task, 0.05, None):
        await asyncio.sleep(5)
    assert 0.04 <= loop.time() - start < 1.0
    assert task.cancelling() == 0  # its cancel() was taken back


async def test_the_request_timer_lets_an_outside_cancellation_through() -> None:
    from payments_async._transport import _Deadline, _Timers

    loop = asyncio.get_running_loop()
    timers = _Timers(loop)

    async def request(timeout: float) -> None:
        with _Deadline(
            timers, asyncio.current_task(), 60.0, timeout
        ):  # fires at the deadline: it comes first
            await asyncio.sleep(5)

    far = asyncio.create_task(request(60))
    await asyncio.sleep(0.01)
    far.cancel()
    with pytest.raises(asyncio.CancelledError):
        await far

    # Expiry and an outside cancel in the same turn: the outside one wins, as with
    # asyncio.timeout (a caller's cancellation is never turned into a timeout).
    both = asyncio.create_task(request(0.05))
    await asyncio.sleep(0)  # the request has set its timer
    ((when, _, _),) = timers._heap
    loop.call_at(when, both.cancel)  # due with the expiry: run in the same loop turn
    await asyncio.sleep(0.1)
    assert both.cancelled()


async def test_the_request_timers_share_one_loop_timer_and_leave_none_behind() -> None:
    from payments_async._transport import _Deadline, _Timers

    loop = asyncio.get_running_loop()
    timers = _Timers(loop)
    ours = lambda: [h for h in loop._scheduled if h._callback == timers._fire]  # type: ignore[attr-defined]  # noqa: E731
    fired: list[float] = []

    async def request(read: float, hold: float) -> None:
        start = loop.time()
        try:
            with _Deadline(timers, asyncio.current_task(), read, None):
                await asyncio.sleep(hold)
        except TimeoutError:
            fired.append(loop.time() - start)

    # 200 requests at once: one loop timer, armed for the earliest expiry (0.1 s).
    tasks = [
        asyncio.create_task(request(0.1 + i / 1000, 5.0 if i % 2 else 0.0)) for i in range(200)
    ]
    await asyncio.sleep(0.01)  # the quick half has finished, the slow half waits
    assert len(ours()) == 1
    assert ours()[0].when() == pytest.approx(min(e[0] for e in timers._heap), abs=1e-9)
    await asyncio.gather(*tasks)
    # Every slow request timed out at its own time, in order, none early.
    assert len(fired) == 100
    assert all(f >= 0.1 for f in fired)
    assert max(fired) < 1.5
    assert ours() == []  # no timer of ours left on the loop
    assert timers._heap == []


async def test_the_request_timer_is_gone_after_an_exchange_and_each_read_gets_its_time() -> None:
    from payments_async._transport import _Deadline, _Timers

    loop = asyncio.get_running_loop()
    timers = _Timers(loop)
    with _Deadline(timers, asyncio.current_task(), 60.0, None):
        await asyncio.sleep(0)
    assert timers._handle is None  # nothing left by a finished request
    assert not timers._heap

    async def two_reads(timeout: float | None) -> None:
        with _Deadline(timers, asyncio.current_task(), 0.2, timeout) as timer:
            await asyncio.sleep(0.15)  # the first read, within its 0.2 s
            timer.next_read()  # the next read gets 0.2 s from now...
            await asyncio.sleep(5)

    start = loop.time()
    with pytest.raises(TimeoutError):
        await two_reads(None)
    assert loop.time() - start >= 0.33  # ...so it fired at ~0.35 s, not at 0.2 s
    start = loop.time()
    with pytest.raises(TimeoutError):
        await two_reads(0.25)  # ...but never past the deadline
    assert 0.24 <= loop.time() - start < 0.33


async def test_stopping_a_request_timer_twice_leaves_the_other_requests_timed() -> None:
    from payments_async._transport import _Deadline, _Timers

    loop = asyncio.get_running_loop()
    timers = _Timers(loop)
    with _Deadline(timers, asyncio.current_task(), 60.0, None) as done:
        pass
    done.stop()  # again: must not count a live request off a second time
    assert timers.live == 0
    start = loop.time()
    with pytest.raises(TimeoutError), _Deadline(timers, asyncio.current_task(), 0.05, None):
        await asyncio.sleep(5)  # this request's timer still fires
    assert loop.time() - start < 1.0


async def _ok(request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


async def test_the_request_timers_are_made_again_in_another_thread_or_a_forked_child(
    serve: Serve,
) -> None:
    import contextlib
    import threading

    from payments_async import _transport

    url = await serve({("GET", "/x"): _ok})
    transport = Transport(url)
    try:
        assert (await transport.request("GET", "/x", headers={}, timeout=5)).status == 200
        first = transport._timers
        assert first is not None
        assert first.loop is asyncio.get_running_loop()

        # Another thread's loop: current_task(our loop) there would be *this* test's task
        # (our loop is running one), so the thread must be checked, not only the task.
        seen: list[object] = []

        def other_thread() -> None:
            async def use() -> None:
                # The session belongs to the first loop: the request fails; the timers
                # it made on the way are the point.
                with contextlib.suppress(Exception):
                    await transport.request("GET", "/x", headers={}, timeout=1)
                seen.append(transport._timers)

            asyncio.run(use())

        thread = threading.Thread(target=other_thread)
        thread.start()
        await asyncio.to_thread(thread.join)
        (theirs,) = seen
        assert theirs is not first
        assert theirs.thread == thread.ident  # type: ignore[attr-defined]

        # Back here: ours again, then a fork (the hook a child runs) makes new ones too.
        assert (await transport.request("GET", "/x", headers={}, timeout=5)).status == 200
        mine = transport._timers
        assert mine is not theirs
        _transport._forked()
        assert (await transport.request("GET", "/x", headers={}, timeout=5)).status == 200
        assert transport._timers is not mine
    finally:
        await transport.aclose()
