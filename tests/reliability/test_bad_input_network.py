"""Item 5: malformed answers from the network. A tiny aiohttp.web server on 127.0.0.1
serves exactly what each case wants (real HTTP: truncation and oversize are real); every
case ends in a typed PaymentsError carrying the status and the request id, or, when no
status line arrived, a TransportError with the request id. Nothing escapes, nothing hangs.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from payments_async import (
    ApiError,
    AuthenticationError,
    Credentials,
    InvalidResponseError,
    Limits,
    NotFoundError,
    OutcomeUnknownError,
    PaymentsClient,
    PaymentsError,
    RetryPolicy,
    ServerError,
    Timeout,
    TransportError,
)
from payments_async._constants import LIMIT_RESPONSE_BYTES, TOKEN_PATH
from tests.factories import cancellation, credit_transfer
from tests.support.reliability import record

Responder = Callable[[web.Request], Awaitable[web.StreamResponse]]
SMALL_LIMIT = 64 * 1024
TOKEN_BODY = json.dumps(
    {"access_token": "tok-abc", "token_type": "bearer", "expires_in": 3600, "scope": "x"}
).encode()


@dataclass
class Scripted:
    """The server's script: what the token route and the API routes answer."""

    url: str
    api: Responder
    token: Responder
    hits: Counter[str]


async def _good_token(_: web.Request) -> web.StreamResponse:
    return web.Response(body=TOKEN_BODY, content_type="application/json")


def respond(
    status: int,
    body: bytes,
    content_type: str | None = "application/json",
    extra: dict[str, str] | None = None,
) -> Responder:
    async def handler(_: web.Request) -> web.StreamResponse:
        headers = {"Content-Type": content_type} if content_type else {}
        headers.update(extra or {})
        resp = web.Response(status=status, body=body, headers=headers)
        if not content_type:
            resp.content_type = "application/octet-stream"
            del resp.headers["Content-Type"]
        return resp

    return handler


def truncated(status: int = 200, declared: int = 1000) -> Responder:
    """Declare ``declared`` bytes, send a few, then close the connection."""

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(
            status=status,
            headers={"Content-Type": "application/json", "Content-Length": str(declared)},
        )
        await resp.prepare(request)
        await resp.write(b'{"fitoFIPmtStsRpt": {"txInf')
        assert request.transport is not None
        request.transport.close()
        return resp

    return handler


def streamed(total: int, chunk: int = 16 * 1024, delay: float = 0.0) -> Responder:
    """A chunked body (no Content-Length) of ``total`` bytes, optionally dripped."""

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        sent = 0
        try:
            while sent < total:
                await resp.write(b" " * min(chunk, total - sent))
                sent += chunk
                if delay:
                    await asyncio.sleep(delay)
        except (ConnectionError, RuntimeError):
            pass  # the client gave up: that is what the case checks
        return resp

    return handler


def silent() -> Responder:
    async def handler(_: web.Request) -> web.StreamResponse:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    return handler


@pytest_asyncio.fixture
async def scripted() -> AsyncIterator[Scripted]:
    hits: Counter[str] = Counter()
    script = Scripted("", respond(200, b"{}"), _good_token, hits)

    async def token(request: web.Request) -> web.StreamResponse:
        hits["token"] += 1
        return await script.token(request)

    async def api(request: web.Request) -> web.StreamResponse:
        hits["api"] += 1
        return await script.api(request)

    app = web.Application()
    app.router.add_post(TOKEN_PATH, token)
    app.router.add_route("*", "/payments/{tail:.*}", api)
    runner = web.AppRunner(app, shutdown_timeout=0.1, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    script.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield script
    finally:
        await runner.cleanup()


@pytest_asyncio.fixture
async def client(scripted: Scripted) -> AsyncIterator[PaymentsClient]:
    creds = Credentials.sandbox()
    async with PaymentsClient(
        creds,
        base_url=scripted.url,
        retry=RetryPolicy.for_testing(attempts=2),
        # The call's deadline bounds every case (see the never-finishing server's test). A
        # 0.5 s read timeout as well once ended a token answer that an in-process server on
        # a loaded machine sent late: a malformed-answer case failed on a timeout instead.
        timeout=Timeout(total=2.0),
        limits=Limits(response_bytes=SMALL_LIMIT),
    ) as c:
        yield c


OPS: dict[str, Callable[..., Awaitable[Any]]] = {
    "submit_credit_transfer": lambda c, **kw: c.submit_credit_transfer(credit_transfer(), **kw),
    "request_cancellation": lambda c, **kw: c.request_cancellation(cancellation("E2E1"), **kw),
    "get_credit_transfer_status": lambda c, **kw: c.get_credit_transfer_status("pmt-1", **kw),
    "get_cancellation_outcome": lambda c, **kw: c.get_cancellation_outcome("cxl-1", **kw),
}
POSTS = {"submit_credit_transfer", "request_cancellation"}


async def _failure(client: PaymentsClient, op: str) -> PaymentsError:
    """Run the operation; it must raise a PaymentsError within a few seconds."""
    try:
        async with asyncio.timeout(6):
            result = await OPS[op](client)
    except PaymentsError as exc:
        caught = exc
    else:
        raise AssertionError(f"{op} accepted a malformed answer: {result!r}")
    assert caught.request_id, f"{op}: no request id in {caught!r}"
    assert str(caught)
    assert repr(caught)
    return caught


HTML_PAGE = b"<html><head><title>Bad Gateway</title></head><body><h1>oops</h1></body></html>"
PACS002_WRONG_TYPES = b'{"fitoFIPmtStsRpt": {"txInfAndSts": [{"txSts": 42}]}}'
CASES: dict[str, tuple[Responder, int]] = {
    "invalid JSON": (respond(200, b"{not json"), 200),
    "JSON array": (respond(200, b"[1, 2, 3]"), 200),
    "wrong root type": (respond(200, b'{"fitoFIPmtStsRpt": 5, "rsltnOfInvstgtn": 5}'), 200),
    "wrong field types": (respond(200, PACS002_WRONG_TYPES), 200),
    "empty object": (respond(200, b"{}"), 200),
    "empty body": (respond(200, b""), 200),
    "null": (respond(200, b"null"), 200),
    "HTML 200": (respond(200, HTML_PAGE, "text/html"), 200),
    "JSON as text/plain": (respond(200, b'{"data": {}}', "text/plain"), 200),
    "no content type": (respond(200, b"{}", None), 200),
    "HTML 500": (respond(500, HTML_PAGE, "text/html"), 500),
    "HTML 502": (respond(502, HTML_PAGE, "text/html"), 502),
    "plain 503": (respond(503, b"upstream unavailable", "text/plain"), 503),
    "HTML 404": (respond(404, HTML_PAGE, "text/html"), 404),
    "garbage 400": (respond(400, b"\x00\xff\xfe", "application/json"), 400),
    "envelope with wrong types 400": (respond(400, b'{"errors": [{"code": 5}]}'), 400),
    "oversize declared": (respond(200, b" " * (SMALL_LIMIT + 1)), 200),
    "oversize chunked": (streamed(SMALL_LIMIT * 4), 200),
    "truncated": (truncated(), 200),
}


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("case", sorted(CASES))
async def test_malformed_answer_gives_typed_error(
    scripted: Scripted, client: PaymentsClient, case: str, op: str
) -> None:
    responder, status = CASES[case]
    scripted.api = responder
    exc = await _failure(client, op)
    assert exc.status == status, repr(exc)  # a truncated body keeps the status that came
    if case == "truncated":
        assert isinstance(exc, OutcomeUnknownError if op in POSTS else TransportError)
    elif op in POSTS and (status >= 500 or 200 <= status < 300):
        # The service may have stored it: the caller is told to resubmit the same id.
        assert isinstance(exc, OutcomeUnknownError), repr(exc)
    elif status == 404:
        assert isinstance(exc, NotFoundError)
    elif status >= 500:
        assert isinstance(exc, ServerError)
    elif 200 <= status < 300:
        assert isinstance(exc, InvalidResponseError), repr(exc)
    else:
        assert isinstance(exc, ApiError)
    assert "<html>" not in str(exc)  # bodies are described, never copied


async def test_truncated_body_error_keeps_the_status(
    scripted: Scripted, client: PaymentsClient
) -> None:
    scripted.api = truncated()
    exc = await _failure(client, "get_credit_transfer_status")
    assert exc.status == 200, repr(exc)


async def test_body_above_the_named_default_limit_is_refused(scripted: Scripted) -> None:
    """LIMIT_RESPONSE_BYTES (1 MiB) + 1 byte, chunked so only counting can catch it."""
    scripted.api = streamed(LIMIT_RESPONSE_BYTES + 1)
    async with PaymentsClient(
        Credentials.sandbox(), base_url=scripted.url, retry=RetryPolicy.for_testing(attempts=1)
    ) as c:
        exc = await _failure(c, "get_credit_transfer_status")
    assert isinstance(exc, InvalidResponseError)
    assert f"{LIMIT_RESPONSE_BYTES}-byte limit" in str(exc)


@pytest.mark.parametrize(
    ("name", "responder"),
    [("silent server", silent()), ("body dripping forever", streamed(10**9, 1, 0.05))],
)
async def test_a_server_that_never_finishes_cannot_hang_an_operation(
    scripted: Scripted, client: PaymentsClient, name: str, responder: Responder
) -> None:
    """The retry deadline (2 s here) bounds every attempt, even one whose body keeps
    arriving a byte at a time (the read timeout alone would never fire)."""
    scripted.api = responder
    loop = asyncio.get_running_loop()
    start = loop.time()
    exc = await _failure(client, "get_credit_transfer_status")
    assert isinstance(exc, TransportError), repr(exc)
    assert loop.time() - start < 4.0


# A truncated or 5xx token answer is retried until the token fetch's own 30 s deadline:
# see test_token_storms.py::test_operation_deadline_bounds_the_token_wait.
@pytest.mark.parametrize(
    ("responder", "expected"),
    [
        pytest.param(respond(200, b"{not json"), InvalidResponseError, id="invalid JSON"),
        pytest.param(
            respond(200, b'{"access_token": 5, "token_type": "bearer"}'),
            InvalidResponseError,
            id="wrong types",
        ),
        pytest.param(
            respond(200, b'{"access_token": "t", "token_type": "mac", "expires_in": 1}'),
            InvalidResponseError,
            id="not bearer",
        ),
        pytest.param(respond(200, HTML_PAGE, "text/html"), InvalidResponseError, id="HTML 200"),
        pytest.param(respond(401, HTML_PAGE, "text/html"), AuthenticationError, id="HTML 401"),
        pytest.param(respond(400, b'{"errors": "nope"}'), AuthenticationError, id="bad envelope"),
    ],
)
async def test_malformed_token_answer_gives_typed_error(
    scripted: Scripted, client: PaymentsClient, responder: Responder, expected: type
) -> None:
    scripted.token = responder
    exc = await _failure(client, "get_credit_transfer_status")
    assert isinstance(exc, expected), repr(exc)
    assert scripted.hits["api"] == 0  # no API call without a token


# --- hypothesis: arbitrary statuses, bodies and content types ------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=20,
)
known_shapes = st.sampled_from(
    ["fitoFIPmtStsRpt", "rsltnOfInvstgtn", "data", "errors", "paymentsServiceId"]
).flatmap(lambda key: json_values.map(lambda v: {key: v}))
bodies = (
    st.binary(max_size=512)
    | json_values.map(lambda v: json.dumps(v).encode())
    | known_shapes.map(lambda v: json.dumps(v).encode())
    # Well-formed JSON with a byte that is not UTF-8 inside a key or a string (msgspec
    # raises UnicodeDecodeError, not its own error, for it), and numbers beyond a float.
    | known_shapes.map(lambda v: json.dumps(v).encode().replace(b'"', b'"\xff', 1))
    | st.sampled_from(
        [
            b'{"data": {"paymentsServiceId": "PS-\xff"}}',
            b'{"errors": [{"code": "X", "message": "caf\xe9"}]}',
            b'{"rsltnOfInvstgtn": {"assgnmt": {"id": "\xff"}}}',
            b'{"data": {"paymentsServiceId": "PS-1", "status": 1' + b"0" * 400 + b"}}",
        ]
    )
)
statuses = st.sampled_from([200, 201, 202, 204, 400, 401, 403, 404, 409, 418, 429, 500, 502, 503])
content_types = st.sampled_from(
    ["application/json", "application/json; charset=utf-8", "text/html", "text/plain", None]
)
# Headers the client reads: Retry-After (on any status) and Date (read after a 401).
retry_afters = st.sampled_from(
    ["0", "1", "-1", "1.5", "nan", "1e400", "9" * 400, "9" * 5000, "\u00b2", "soon", ""]
) | st.text(max_size=40).filter(lambda t: t.isprintable())
dates = st.sampled_from(
    [
        "Fri, 31 Dec 9999 23:59:59 GMT",
        "Mon, 01 Jan 0001 00:00:00 GMT",
        "Sun, 06 Nov 1994 08:49:37 -0000",
        "yesterday",
    ]
)
extra_headers = st.fixed_dictionaries({}, optional={"Retry-After": retry_afters, "Date": dates})
HYPOTHESIS_RUNS: Counter[str] = Counter()
ANSWERED_TOTAL = 30.0  # seconds: an answered call's total, far beyond what it needs
UNNAMED_TOTAL = 0.5  # seconds: a POST resubmitted after 202/204 without an id, to its end


async def _arbitrary_answer(
    data: st.DataObject, scripted: Scripted, client: PaymentsClient, label: str
) -> None:
    op = data.draw(st.sampled_from(sorted(OPS)), label="op")
    status = data.draw(statuses, label="status")
    body = data.draw(bodies, label="body")
    ctype = data.draw(content_types, label="content type")
    extra = data.draw(extra_headers, label="headers")
    if status == 204:
        body = b""
    scripted.api = respond(status, body, ctype, extra)
    # Each answer comes at once: how it is classified is the question, so a call gets far
    # more time than a loaded machine needs (the client's 2 s once ended a 403 case as an
    # unknown outcome). Only a POST answered 202/204 without an id ends at its deadline,
    # resubmitted until then: it gets half a second.
    unnamed = op in POSTS and status in (202, 204)
    total = UNNAMED_TOTAL if unnamed else ANSWERED_TOTAL
    caught: PaymentsError | None = None
    try:
        async with asyncio.timeout(total + 10):
            await OPS[op](client, timeout=total)
    except PaymentsError as exc:
        caught = exc
    if caught is not None:
        assert caught.request_id
        if unnamed and isinstance(caught, OutcomeUnknownError):
            # Resubmitted until the deadline, which passed before a resubmission was sent
            # (the error names that answer's status) or while one was unanswered (none).
            assert caught.status in (status, None), repr(caught)
        else:
            assert caught.status == status, repr(caught)
        assert str(caught)
        HYPOTHESIS_RUNS[f"{label}: {type(caught).__name__}"] += 1
    else:
        # Only a 2xx JSON answer that happens to decode may succeed.
        assert 200 <= status < 300, (status, ctype, body)
        assert ctype is not None
        assert "json" in ctype, (status, ctype, body)
        HYPOTHESIS_RUNS[f"{label}: decoded"] += 1


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
async def test_arbitrary_answers_give_typed_errors(
    data: st.DataObject, scripted: Scripted, client: PaymentsClient
) -> None:
    await _arbitrary_answer(data, scripted, client, "default")


@pytest.mark.soak
@settings(
    max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
async def test_arbitrary_answers_give_typed_errors_soak(
    data: st.DataObject, scripted: Scripted, client: PaymentsClient
) -> None:
    await _arbitrary_answer(data, scripted, client, "soak")


@pytest.fixture(scope="module", autouse=True)
def _report_example_counts() -> Iterator[None]:
    """After the module's tests: how many hypothesis examples ran, by outcome."""
    yield
    if HYPOTHESIS_RUNS:
        record(
            "bad input from the network: hypothesis examples",
            total=sum(HYPOTHESIS_RUNS.values()),
            **dict(HYPOTHESIS_RUNS),
        )
