"""OpenTelemetry spans and metrics for the client (optional extra ``otel``): one instrument.

Nothing here imports ``opentelemetry`` until a `Telemetry` is built; a client
without one does not have this instrument in its pipeline at all.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import MutableMapping
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Final

from ._constants import (
    CAMT029_PATH,
    OTEL_DURATION_BUCKETS,
    OTEL_INSTRUMENTATION_NAME,
    PACS002_PATH,
)
from ._errors import (
    ApiError,
    ConfigurationError,
    InvalidResponseError,
    OutcomeUnknownError,
    PaymentsError,
    PollTimeoutError,
    RateLimitedError,
    ServerError,
    TransportError,
    ValidationError,
)
from ._instrument import Call, Exchange, RequestEvent, TokenFetch
from ._version import __version__

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import Span, TracerProvider
    from yarl import URL

    from ._profile import ServiceProfile

__all__ = ["Telemetry", "TracingInstrument", "url_template"]

_INSTALL_HINT: Final = "pip install 'payments-async[otel]'"

Routes = tuple[tuple[str, str], ...]


def id_routes(*read_paths: str) -> Routes:
    """The prefixes of paths with an id in them, and their template (OTel: url.template)."""
    return tuple((path + "/", path + "/{paymentsServiceId}") for path in read_paths)


_ID_ROUTES: Final = id_routes(PACS002_PATH, CAMT029_PATH)


def url_template(path: str, routes: Routes = _ID_ROUTES) -> str:
    """The route of ``path`` with ids replaced by ``{paymentsServiceId}`` (span names, metrics).

    ``routes``: the read paths' prefixes and templates (the spec's by default).
    """
    for prefix, template in routes:
        if path.startswith(prefix):
            return template
    return path


def outcome_of_error(exc: BaseException) -> str:
    """A low-cardinality word for how an operation failed (the ``payments.outcome`` value).

    ``refused`` and ``invalid`` are requests to fix (the service said no to what was
    sent, or nothing was sent); ``rate_limited``, ``service_error`` and
    ``transport_error`` are the service's or the network's trouble; ``timeout`` is a
    deadline that cut the call short (a cancellation included).
    """
    if isinstance(exc, OutcomeUnknownError):
        return "unknown"  # may have been stored: resubmit to learn
    if isinstance(exc, PollTimeoutError):
        return "poll_timeout"
    if isinstance(exc, ValidationError):
        return "invalid"  # nothing was sent
    if isinstance(exc, RateLimitedError):
        return "rate_limited"
    if isinstance(exc, ServerError | InvalidResponseError):
        return "service_error"  # a 5xx, or a 2xx whose body is not what the spec says
    if isinstance(exc, ApiError):
        return "refused"
    if isinstance(exc, TransportError):
        return "transport_error"
    if _cut_short(exc):
        return "timeout"
    return "error"


def _cut_short(exc: BaseException) -> bool:
    """Whether ``exc`` is a deadline or a cancellation (a caller's ``asyncio.timeout``
    cancels the work it bounds; a client closing cancels a token fetch nobody waits for)."""
    return isinstance(exc, asyncio.CancelledError | TimeoutError)


@functools.cache
def _otel() -> SimpleNamespace:
    """The OpenTelemetry API pieces the scopes use, imported once, on first use."""
    from opentelemetry import context, propagate, trace
    from opentelemetry.trace import SpanKind, Status, StatusCode

    return SimpleNamespace(
        context=context,
        propagate=propagate,
        trace=trace,
        SpanKind=SpanKind,
        Status=Status,
        StatusCode=StatusCode,
    )


def _error_type(exc: BaseException) -> str:
    # OTel's error.type: a low-cardinality class name (ours are public and stable), or
    # "timeout", the value the HTTP conventions give a deadline.
    if isinstance(exc, PaymentsError):
        return type(exc).__name__
    return "timeout" if _cut_short(exc) else type(exc).__qualname__


class Telemetry:
    """OpenTelemetry tracing and metrics for a `PaymentsClient` (extra ``otel``).

    Pass one to the client (``PaymentsClient(..., telemetry=Telemetry())``). Each
    operation gets an INTERNAL span (``payments.submit_credit_transfer``,
    ``payments.wait_for_payment_status``, ...) with a CLIENT child span per HTTP attempt,
    named ``{method} {url.template}`` (``GET /payments/pacs002/v12/{paymentsServiceId}``:
    no ids in names) and attributed per the OpenTelemetry HTTP client semantic
    conventions, and a ``payments.token_fetch`` child span per access-token fetch (with
    its own HTTP spans). Ids go in attributes (``payments.message_id``,
    ``payments.service_id``, ``payments.request_id``); secrets, tokens and bodies never
    do.

    Metrics: ``http.client.request.duration`` (histogram, seconds, every HTTP attempt,
    token requests included), ``payments.client.operation.duration`` (histogram),
    ``payments.client.operations`` (counter by operation and outcome),
    ``payments.client.retries`` (counter) and ``payments.client.token.fetches``
    (counter by outcome: ``obtained``, ``failed``, or ``timeout`` when a deadline or the
    client closing cut it short). ``payments.operation`` is the operation's name
    (``submit_credit_transfer``) in spans and metrics alike. ``payments.outcome`` of a
    failed operation: ``refused`` or ``invalid`` (requests to fix), ``unknown`` (a POST
    that may be stored: resubmit), ``rate_limited``, ``service_error`` (5xx, or a 2xx the
    spec does not describe), ``transport_error`` (no answer), ``poll_timeout``,
    ``timeout`` (a deadline or cancellation) or ``error``.

    Args:
        tracer_provider: where spans go; the global provider if None.
        meter_provider: where metrics go; the global provider if None.
        propagate: inject W3C trace-context headers (``traceparent``) into requests to
            the service. Off by default: a bank's API should not receive them unasked.

    Raises:
        ConfigurationError: ``opentelemetry-api`` is not installed (the ``otel`` extra).
    """

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        propagate: bool = False,
    ) -> None:
        try:
            from opentelemetry import metrics, trace
        except ImportError as exc:
            raise ConfigurationError(
                f"Telemetry needs OpenTelemetry's API, the 'otel' extra: {_INSTALL_HINT}"
            ) from exc
        self.propagate = propagate
        self._tracer = trace.get_tracer(
            OTEL_INSTRUMENTATION_NAME, __version__, tracer_provider=tracer_provider
        )
        meter = metrics.get_meter(
            OTEL_INSTRUMENTATION_NAME, __version__, meter_provider=meter_provider
        )
        self._http_duration = meter.create_histogram(
            "http.client.request.duration",
            unit="s",
            description="Duration of HTTP client requests.",
            explicit_bucket_boundaries_advisory=list(OTEL_DURATION_BUCKETS),
        )
        self._operation_duration = meter.create_histogram(
            "payments.client.operation.duration",
            unit="s",
            description="Duration of client operations, all attempts and waits included.",
            explicit_bucket_boundaries_advisory=list(OTEL_DURATION_BUCKETS),
        )
        self._operations = meter.create_counter(
            "payments.client.operations",
            unit="{operation}",
            description="Finished client operations by operation and outcome.",
        )
        self._retries = meter.create_counter(
            "payments.client.retries",
            unit="{retry}",
            description="Retries scheduled after a failed attempt.",
        )
        self._token_fetches = meter.create_counter(
            "payments.client.token.fetches",
            unit="{fetch}",
            description="Access-token fetches by outcome (obtained or failed).",
        )

    def __repr__(self) -> str:
        return f"Telemetry(propagate={self.propagate})"

    def bind(self, base_url: URL, profile: ServiceProfile | None = None) -> TracingInstrument:
        """The instrument of one client talking to ``base_url`` (the client calls this);
        ``profile`` names its read paths (the spec's when None)."""
        routes = _ID_ROUTES
        if profile is not None:
            routes = id_routes(profile.pacs002_path, profile.camt029_path)
        return TracingInstrument(self, base_url, routes)


class _Span:
    """A started span and when it started; made current unless it is a leaf."""

    __slots__ = ("span", "start", "token")

    def __init__(self, span: Span, token: object) -> None:
        self.span = span
        self.token = token
        self.start = time.perf_counter()


class TracingInstrument:
    """One client's OpenTelemetry instrument: spans and metrics of every event it hears."""

    __slots__ = ("_base", "_otel", "_routes", "_server", "_tel")

    def __init__(self, telemetry: Telemetry, base_url: URL, routes: Routes = _ID_ROUTES) -> None:
        self._tel = telemetry
        self._routes = routes
        self._otel = _otel()
        self._base = str(base_url)
        self._server: dict[str, Any] = {"server.address": base_url.host or ""}
        if base_url.port is not None:
            self._server["server.port"] = base_url.port

    def _start(
        self, name: str, kind: str, attributes: dict[str, Any], *, leaf: bool = False
    ) -> _Span:
        otel = self._otel
        span = self._tel._tracer.start_span(
            name, kind=getattr(otel.SpanKind, kind), attributes=attributes
        )
        # A leaf (an HTTP exchange) has no children: it is not made the current span.
        token = None if leaf else otel.context.attach(otel.trace.set_span_in_context(span))
        return _Span(span, token)

    def _end(self, started: _Span, exc: BaseException | None) -> float:
        otel = self._otel
        elapsed = time.perf_counter() - started.start
        span = started.span
        if exc is not None:
            error_type = _error_type(exc)
            span.set_attribute("error.type", error_type)
            if not _cut_short(exc):  # a cancellation's traceback says nothing
                # Our errors' messages carry ids, statuses and codes, never secrets or bodies.
                span.record_exception(exc)
            span.set_status(otel.Status(otel.StatusCode.ERROR, error_type))
        span.end()
        if started.token is not None:
            otel.context.detach(started.token)
        return elapsed

    # --- HTTP exchanges: a CLIENT span each, and the duration metric --------------------

    def request_started(self, exchange: Exchange, headers: MutableMapping[str, str]) -> None:
        template = url_template(exchange.path, self._routes)
        attrs: dict[str, Any] = {
            "http.request.method": exchange.method,
            "url.template": template,
            **self._server,
            "url.full": self._base + exchange.path,
            "payments.attempt": exchange.attempt,
            "payments.request_id": exchange.request_id,
        }
        if exchange.resend_count:
            attrs["http.request.resend_count"] = exchange.resend_count
        started = exchange.span = self._start(
            f"{exchange.method} {template}", "CLIENT", attrs, leaf=True
        )
        if self._tel.propagate:
            otel = self._otel
            otel.propagate.inject(headers, context=otel.trace.set_span_in_context(started.span))

    def request_ended(self, exchange: Exchange) -> None:
        started: _Span | None = exchange.span
        if started is None:
            return
        metric: dict[str, Any] = {
            "http.request.method": exchange.method,
            "url.template": url_template(exchange.path, self._routes),
            **self._server,
        }
        status = exchange.status
        if status is not None and exchange.error is None:
            metric["http.response.status_code"] = status
            started.span.set_attribute("http.response.status_code", status)
            if status >= 400:
                metric["error.type"] = str(status)
                started.span.set_attribute("error.type", str(status))
                started.span.set_status(self._otel.Status(self._otel.StatusCode.ERROR))
        if exchange.error is not None:
            metric["error.type"] = _error_type(exchange.error)
        elapsed = self._end(started, exchange.error)
        self._tel._http_duration.record(elapsed, metric)

    # --- retries -------------------------------------------------------------------------

    def retry(self, event: RequestEvent) -> None:
        attrs: dict[str, Any] = {
            "http.request.method": event.method,
            "url.template": url_template(event.path, self._routes),
        }
        if event.error is not None:
            attrs["error.type"] = _error_type(event.error)
        self._tel._retries.add(1, attrs)

    # --- token fetches -------------------------------------------------------------------

    def token_fetch_started(self, fetch: TokenFetch) -> None:
        fetch.span = self._start("payments.token_fetch", "INTERNAL", {})

    def token_fetch_ended(self, fetch: TokenFetch) -> None:
        exc = fetch.error
        self._end(fetch.span, exc)
        outcome = "obtained" if exc is None else "timeout" if _cut_short(exc) else "failed"
        attrs: dict[str, Any] = {"payments.outcome": outcome}
        if exc is not None:
            attrs["error.type"] = _error_type(exc)
        self._tel._token_fetches.add(1, attrs)

    def token_obtained(self, lifetime: float) -> None:
        return None

    # --- operations: an INTERNAL span each, the outcome counter and duration -------------

    def operation_started(self, call: Call) -> None:
        attrs: dict[str, Any] = {"payments.operation": call.name, **call.attributes}
        call.span = self._start(f"payments.{call.name}", "INTERNAL", attrs)

    def operation_ended(self, call: Call) -> None:
        started: _Span = call.span
        exc = call.error
        span = started.span
        if exc is None:
            for key, value in call.attributes.items():
                if value is not None:
                    span.set_attribute(key, value)
        outcome = call.outcome if exc is None else outcome_of_error(exc)
        span.set_attribute("payments.outcome", outcome)
        if isinstance(exc, PaymentsError) and exc.attempt is not None:
            span.set_attribute("payments.attempts", exc.attempt)
        elapsed = self._end(started, exc)
        attrs: dict[str, Any] = {"payments.operation": call.name, "payments.outcome": outcome}
        if exc is not None:
            attrs["error.type"] = _error_type(exc)
        self._tel._operations.add(1, attrs)
        self._tel._operation_duration.record(elapsed, attrs)
