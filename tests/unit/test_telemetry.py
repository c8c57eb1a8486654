"""Telemetry scopes with the OpenTelemetry SDK's in-memory span exporter and metric reader."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web
from opentelemetry.trace import SpanKind, StatusCode
from yarl import URL

from payments_async import (
    ConfigurationError,
    Credentials,
    InvalidResponseError,
    NotFoundError,
    OutcomeUnknownError,
    PaymentsClient,
    RateLimitedError,
    RetryPolicy,
    ServerError,
    Telemetry,
    TransportError,
)
from payments_async._instrument import Call, Exchange, Instruments, RequestEvent
from payments_async._telemetry import url_template
from tests.support.http_servers import Serve
from tests.support.otel import Otel

BASE = URL("https://api.bank.example:8443")


@pytest.fixture
def otel() -> Iterator[Otel]:
    o = Otel()
    yield o
    o.close()


class _Http:
    """One exchange through the instrument pipeline, as the transport reports it."""

    def __init__(self, instruments: Instruments, exchange: Exchange, headers: Any) -> None:
        self._hearing = instruments.hearing_exchanges()
        self._exchange = exchange
        self._headers = headers

    def __enter__(self) -> _Http:
        for instrument in self._hearing:
            instrument.request_started(self._exchange, self._headers)
        return self

    def response(self, status: int) -> None:
        self._exchange.status = status

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self._exchange.error = exc
        for instrument in self._hearing:
            instrument.request_ended(self._exchange)


class _Pipeline:
    """The events a client sends, fed to a pipeline holding only the tracing instrument."""

    def __init__(self, instruments: Instruments) -> None:
        self._instruments = instruments

    def operation(self, name: str, kind: str, **attributes: Any) -> Any:
        return self._instruments.operation(Call(name, kind, **attributes))

    def token_fetch(self) -> Any:
        return self._instruments.token_fetch()

    def http(self, method: str, path: str, *, attempt: int, request_id: str, headers: Any) -> _Http:
        exchange = Exchange(method, path, request_id, attempt, resend_count=attempt - 1)
        return _Http(self._instruments, exchange, headers)

    def retry(self, method: str, path: str, error: Any) -> None:
        self._instruments.retry(RequestEvent(method, path, "r", 1, None, 0.0, error, sleep=0.0))


def _client(otel: Otel, **kw: Any) -> _Pipeline:
    return _Pipeline(Instruments(otel.telemetry(**kw).bind(BASE)))


def test_url_template_removes_ids() -> None:
    assert url_template("/payments/pacs002/v12/abc-123") == (
        "/payments/pacs002/v12/{paymentsServiceId}"
    )
    assert url_template("/payments/camt029/v09/X") == "/payments/camt029/v09/{paymentsServiceId}"
    assert url_template("/payments/pacs008/v10") == "/payments/pacs008/v10"
    assert url_template("/oauth/token") == "/oauth/token"


def test_operation_with_token_fetch_and_http_attempts(otel: Otel) -> None:
    ct = _client(otel)
    with ct.operation("submit_credit_transfer", "submit", **{"payments.message_id": "M1"}) as op:
        with (
            ct.token_fetch(),
            ct.http("POST", "/oauth/token", attempt=1, request_id="t1", headers={}) as h,
        ):
            h.response(200)
        with ct.http("POST", "/payments/pacs008/v10", attempt=1, request_id="r1", headers={}) as h:
            h.response(503)
        ct.retry("POST", "/payments/pacs008/v10", None)
        with ct.http("POST", "/payments/pacs008/v10", attempt=2, request_id="r1", headers={}) as h:
            h.response(201)
        op.succeeded("created", **{"payments.service_id": "PS1", "payments.created": True})

    spans = {(s.name, s.attributes.get("payments.attempt")): s for s in otel.spans()}
    operation = spans[("payments.submit_credit_transfer", None)]
    fetch = spans[("payments.token_fetch", None)]
    token_http = spans[("POST /oauth/token", 1)]
    first = spans[("POST /payments/pacs008/v10", 1)]
    second = spans[("POST /payments/pacs008/v10", 2)]

    assert operation.kind is SpanKind.INTERNAL
    assert operation.parent is None
    assert dict(operation.attributes) == {
        "payments.operation": "submit_credit_transfer",
        "payments.message_id": "M1",
        "payments.outcome": "created",
        "payments.service_id": "PS1",
        "payments.created": True,
    }
    assert fetch.parent.span_id == operation.context.span_id
    assert token_http.parent.span_id == fetch.context.span_id
    for http in (first, second):
        assert http.kind is SpanKind.CLIENT
        assert http.parent.span_id == operation.context.span_id
        assert http.context.trace_id == operation.context.trace_id
    assert dict(first.attributes) == {
        "http.request.method": "POST",
        "url.template": "/payments/pacs008/v10",
        "server.address": "api.bank.example",
        "server.port": 8443,
        "url.full": "https://api.bank.example:8443/payments/pacs008/v10",
        "payments.attempt": 1,
        "payments.request_id": "r1",
        "http.response.status_code": 503,
        "error.type": "503",
    }
    assert first.status.status_code is StatusCode.ERROR
    assert second.attributes["http.request.resend_count"] == 1
    assert second.attributes["http.response.status_code"] == 201
    assert "error.type" not in second.attributes
    assert second.status.status_code is StatusCode.UNSET

    durations = otel.points("http.client.request.duration")
    by_status = {p.attributes.get("http.response.status_code"): p for p in durations}
    assert set(by_status) == {200, 201, 503}
    assert by_status[503].attributes["error.type"] == "503"
    assert by_status[201].attributes == {
        "http.request.method": "POST",
        "url.template": "/payments/pacs008/v10",
        "server.address": "api.bank.example",
        "server.port": 8443,
        "http.response.status_code": 201,
    }
    assert all(p.count == 1 for p in durations)
    [retries] = otel.points("payments.client.retries")
    assert retries.value == 1
    [fetches] = otel.points("payments.client.token.fetches")
    assert (fetches.value, dict(fetches.attributes)) == (1, {"payments.outcome": "obtained"})
    [ops] = otel.points("payments.client.operations")
    assert dict(ops.attributes) == {
        "payments.operation": "submit_credit_transfer",
        "payments.outcome": "created",
    }
    [op_duration] = otel.points("payments.client.operation.duration")
    assert op_duration.count == 1


def test_errors_mark_spans_and_count_outcomes(otel: Otel) -> None:
    ct = _client(otel)
    unknown = OutcomeUnknownError("outcome unknown", message_id="M", method="POST", attempt=3)

    def cancel() -> None:
        with ct.operation("request_cancellation", "submit"):
            with (
                pytest.raises(TransportError),
                ct.http("POST", "/payments/camt056/v08", attempt=3, request_id="r", headers={}),
            ):
                raise TransportError("timed out waiting for the response", attempt=3)
            raise unknown

    with pytest.raises(OutcomeUnknownError):
        cancel()
    spans = {s.name: s for s in otel.spans()}
    op = spans["payments.request_cancellation"]
    http = spans["POST /payments/camt056/v08"]
    assert op.attributes["payments.outcome"] == "unknown"
    assert op.attributes["error.type"] == "OutcomeUnknownError"
    assert op.attributes["payments.attempts"] == 3
    assert op.status.status_code is StatusCode.ERROR
    assert http.attributes["error.type"] == "TransportError"
    assert "http.response.status_code" not in http.attributes
    assert [e.name for e in http.events] == ["exception"]
    [ops] = otel.points("payments.client.operations")
    assert dict(ops.attributes) == {
        "payments.operation": "request_cancellation",
        "payments.outcome": "unknown",
        "error.type": "OutcomeUnknownError",
    }
    [duration] = otel.points("http.client.request.duration")
    assert duration.attributes["error.type"] == "TransportError"


def test_failed_token_fetch_is_counted(otel: Otel) -> None:
    ct = _client(otel)
    with pytest.raises(TransportError), ct.token_fetch():
        raise TransportError("cannot connect")
    [fetches] = otel.points("payments.client.token.fetches")
    assert dict(fetches.attributes) == {
        "payments.outcome": "failed",
        "error.type": "TransportError",
    }


@pytest.mark.parametrize(
    ("error", "outcome", "error_type"),
    [
        (ServerError("503", status=503), "service_error", "ServerError"),
        (ServerError("500", status=500), "service_error", "ServerError"),
        (InvalidResponseError("not a pacs.002", status=200), "service_error", None),
        (RateLimitedError("429", status=429), "rate_limited", "RateLimitedError"),
        (TransportError("connection refused"), "transport_error", "TransportError"),
        (NotFoundError("404", status=404), "refused", "NotFoundError"),
        (TimeoutError(), "timeout", "timeout"),
        (asyncio.CancelledError(), "timeout", "timeout"),
    ],
    ids=lambda v: v if isinstance(v, str) else type(v).__name__,
)
def test_a_failed_operation_is_refused_only_when_the_service_said_no(
    otel: Otel, error: BaseException, outcome: str, error_type: str | None
) -> None:
    ct = _client(otel)
    with pytest.raises(type(error)), ct.operation("get_credit_transfer_status", "read"):
        raise error
    [span] = otel.spans()
    [ops] = otel.points("payments.client.operations")
    expected = error_type or type(error).__name__
    assert dict(ops.attributes) == {
        "payments.operation": "get_credit_transfer_status",
        "payments.outcome": outcome,
        "error.type": expected,
    }
    assert span.attributes["payments.operation"] == "get_credit_transfer_status"  # as metrics
    assert span.attributes["payments.outcome"] == outcome
    assert span.attributes["error.type"] == expected
    assert span.status.status_code is StatusCode.ERROR
    # A deadline's cancellation is not an exception to report (its traceback says nothing).
    assert [e.name for e in span.events] == ([] if outcome == "timeout" else ["exception"])


def test_a_token_fetch_cut_short_by_a_deadline_is_a_timeout(otel: Otel) -> None:
    ct = _client(otel)
    with pytest.raises(asyncio.CancelledError), ct.token_fetch():
        raise asyncio.CancelledError
    [fetches] = otel.points("payments.client.token.fetches")
    assert dict(fetches.attributes) == {"payments.outcome": "timeout", "error.type": "timeout"}
    [span] = otel.spans()
    assert span.attributes["error.type"] == "timeout"
    assert not span.events


async def test_a_token_fetch_the_client_abandons_at_its_deadline_is_a_timeout(
    otel: Otel, serve: Serve
) -> None:
    started = asyncio.Event()

    async def hang(request: web.Request) -> web.Response:
        started.set()
        await asyncio.sleep(60)
        return web.Response(status=500)

    base = await serve({("POST", "/oauth/token"): hang})
    async with PaymentsClient(
        Credentials.sandbox(), base_url=base, telemetry=otel.telemetry()
    ) as client:
        # The caller's deadline falls once the token request has reached the endpoint:
        # an event, not a guess at how long sending takes.
        deadline = asyncio.timeout(30)

        async def expire_once_sent() -> None:
            await started.wait()
            deadline.reschedule(asyncio.get_running_loop().time())

        expiry = asyncio.create_task(expire_once_sent())
        with pytest.raises(TimeoutError):
            async with deadline:
                await client.access_token_lifetime()
        await expiry
    [fetches] = otel.points("payments.client.token.fetches")
    assert dict(fetches.attributes) == {"payments.outcome": "timeout", "error.type": "timeout"}
    assert started.is_set()


def test_trace_context_headers_are_off_by_default(otel: Otel) -> None:
    headers: dict[str, str] = {"Accept": "application/json"}
    with _client(otel).http("GET", "/x", attempt=1, request_id="r", headers=headers):
        pass
    assert headers == {"Accept": "application/json"}


def test_trace_context_headers_can_be_switched_on(otel: Otel) -> None:
    headers: dict[str, str] = {}
    with _client(otel, propagate=True).http(
        "GET", "/x", attempt=1, request_id="r", headers=headers
    ):
        pass
    [span] = otel.spans()
    version, trace_id, span_id, _flags = headers["traceparent"].split("-")
    assert version == "00"
    assert int(trace_id, 16) == span.context.trace_id
    assert int(span_id, 16) == span.context.span_id


def test_missing_extra_is_a_clear_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(
        ConfigurationError, match=r"'otel' extra: pip install 'payments-async\[otel\]'"
    ):
        Telemetry()


async def test_the_get_resent_after_a_401_and_a_token_refresh_counts_as_a_resend(
    otel: Otel, serve: Serve
) -> None:
    tokens = iter(["tok-1", "tok-2"])

    async def token(request: web.Request) -> web.Response:
        await request.read()
        return web.json_response(
            {"access_token": next(tokens), "token_type": "bearer", "expires_in": 3600}
        )

    async def read(request: web.Request) -> web.Response:
        if request.headers["Authorization"] == "Bearer tok-1":  # revoked early
            return web.json_response({}, status=401)
        return web.json_response({"data": {"rsltnOfInvstgtn": {}}}, status=500)

    url = await serve(
        {("POST", "/oauth/token"): token, ("GET", "/payments/camt029/v09/{id}"): read}
    )
    async with PaymentsClient(
        Credentials.sandbox(),
        base_url=url,
        telemetry=otel.telemetry(),
        retry=RetryPolicy.for_testing(attempts=1),
    ) as client:
        with pytest.raises(ServerError):
            await client.get_cancellation_outcome("PS-1")
    gets = [s for s in otel.spans() if s.name.startswith("GET ")]
    assert [s.attributes["http.response.status_code"] for s in gets] == [401, 500]
    assert "http.request.resend_count" not in gets[0].attributes
    assert gets[1].attributes["http.request.resend_count"] == 1
    assert gets[1].attributes["payments.attempt"] == 1  # the same attempt, sent again
