"""OpenTelemetry spans and metrics for the client (optional extra ``otel``).

Nothing here imports ``opentelemetry`` until a :class:`Telemetry` is built: a client
without one pays a ``None`` check per operation and per attempt, nothing more.
"""

from __future__ import annotations

import functools
import time
from collections.abc import MutableMapping
from types import SimpleNamespace, TracebackType
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
    OutcomeUnknownError,
    PaymentsError,
    PollTimeoutError,
    TransportError,
    ValidationError,
)

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import Span, TracerProvider
    from yarl import URL

__all__ = ["NO_SCOPE", "ClientTelemetry", "Telemetry", "url_template"]

_INSTALL_HINT: Final = "pip install 'payments-async[otel]'"

# Paths with an id in them, and their template (OTel: url.template, low cardinality).
_ID_ROUTES: Final = (
    (PACS002_PATH + "/", PACS002_PATH + "/{paymentsServiceId}"),
    (CAMT029_PATH + "/", CAMT029_PATH + "/{paymentsServiceId}"),
)


def url_template(path: str) -> str:
    """The route of ``path`` with ids replaced by ``{paymentsServiceId}`` (span names, metrics)."""
    for prefix, template in _ID_ROUTES:
        if path.startswith(prefix):
            return template
    return path


def outcome_of_error(exc: BaseException) -> str:
    """A low-cardinality word for how an operation failed (the ``payments.outcome`` value)."""
    if isinstance(exc, OutcomeUnknownError):
        return "unknown"  # may have been stored: resubmit to learn
    if isinstance(exc, PollTimeoutError):
        return "poll_timeout"
    if isinstance(exc, ValidationError):
        return "invalid"  # nothing was sent
    if isinstance(exc, ApiError):
        return "refused"
    if isinstance(exc, TransportError):
        return "transport_error"
    return "error"


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
    # OTel's error.type: a low-cardinality class name. Ours are public and stable.
    return type(exc).__name__ if isinstance(exc, PaymentsError) else type(exc).__qualname__


class Telemetry:
    """OpenTelemetry tracing and metrics for a :class:`PaymentsClient` (extra ``otel``).

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
    (counter by outcome).

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
        from . import __version__

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

    def bind(self, base_url: URL) -> ClientTelemetry:
        """The instruments for one client talking to ``base_url`` (the client calls this)."""
        return ClientTelemetry(self, base_url)


class ClientTelemetry:
    """One client's instruments: scopes for operations, HTTP attempts and token fetches."""

    __slots__ = ("_base", "_otel", "_server", "_tel")

    def __init__(self, telemetry: Telemetry, base_url: URL) -> None:
        self._tel = telemetry
        self._otel = _otel()
        self._base = str(base_url)
        self._server: dict[str, Any] = {"server.address": base_url.host or ""}
        if base_url.port is not None:
            self._server["server.port"] = base_url.port

    def operation(self, name: str, kind: str, **attributes: str) -> OperationScope:
        """A span and the outcome metrics of one public call (``kind``: submit, read, wait)."""
        return OperationScope(self, name, kind, attributes)

    def http(
        self,
        method: str,
        path: str,
        *,
        attempt: int,
        request_id: str,
        headers: MutableMapping[str, str],
    ) -> HttpScope:
        """A CLIENT span and the duration metric of one HTTP exchange.

        With ``propagate``, the span's ``traceparent`` is written into ``headers``.
        """
        return HttpScope(self, method, path, attempt, request_id, headers)

    def token_fetch(self) -> TokenFetchScope:
        """A span around one access-token fetch (its HTTP attempts are children)."""
        return TokenFetchScope(self)

    def retry(self, method: str, path: str, error: BaseException | None) -> None:
        """Count a retry about to be slept for."""
        attrs: dict[str, Any] = {
            "http.request.method": method,
            "url.template": url_template(path),
        }
        if error is not None:
            attrs["error.type"] = _error_type(error)
        self._tel._retries.add(1, attrs)


class _Scope:
    """Start a span on enter (as the current one, unless it is a leaf); end it on exit."""

    __slots__ = ("_ct", "_span", "_start", "_token")

    _ct: ClientTelemetry
    _span: Span
    _start: float
    _token: object

    def _begin(
        self, name: str, kind: str, attributes: dict[str, Any], *, leaf: bool = False
    ) -> None:
        otel = self._ct._otel
        self._span = self._ct._tel._tracer.start_span(
            name, kind=getattr(otel.SpanKind, kind), attributes=attributes
        )
        # A leaf (an HTTP exchange) has no children: making it current would only cost.
        self._token = (
            None if leaf else otel.context.attach(otel.trace.set_span_in_context(self._span))
        )
        self._start = time.perf_counter()

    def _end(self, exc: BaseException | None) -> float:
        otel = self._ct._otel
        elapsed = time.perf_counter() - self._start
        span = self._span
        if exc is not None:
            span.set_attribute("error.type", _error_type(exc))
            # Our errors' messages carry ids, statuses and codes, never secrets or bodies.
            span.record_exception(exc)
            span.set_status(otel.Status(otel.StatusCode.ERROR, type(exc).__name__))
        span.end()
        if self._token is not None:
            otel.context.detach(self._token)
        return elapsed


class OperationScope(_Scope):
    """The span of one operation; tell it the result with :meth:`succeeded`."""

    __slots__ = ("_attrs", "_kind", "_name", "_outcome")

    def __init__(
        self, ct: ClientTelemetry, name: str, kind: str, attributes: dict[str, str]
    ) -> None:
        self._ct = ct
        self._name = name
        self._kind = kind
        self._attrs = attributes
        self._outcome = "ok"

    def __enter__(self) -> OperationScope:
        attrs: dict[str, Any] = {"payments.operation": self._kind, **self._attrs}
        self._begin(f"payments.{self._name}", "INTERNAL", attrs)
        return self

    def succeeded(self, outcome: str, **attributes: Any) -> None:
        """Record the outcome (``created``, ``replayed``, a final status...; ``ok`` if not told)."""
        self._outcome = outcome
        for key, value in attributes.items():
            if value is not None:
                self._span.set_attribute(key, value)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        outcome = self._outcome if exc is None else outcome_of_error(exc)
        self._span.set_attribute("payments.outcome", outcome)
        if isinstance(exc, PaymentsError) and exc.attempt is not None:
            self._span.set_attribute("payments.attempts", exc.attempt)
        elapsed = self._end(exc)
        attrs: dict[str, Any] = {"payments.operation": self._name, "payments.outcome": outcome}
        if exc is not None:
            attrs["error.type"] = _error_type(exc)
        tel = self._ct._tel
        tel._operations.add(1, attrs)
        tel._operation_duration.record(elapsed, attrs)


class HttpScope(_Scope):
    """The CLIENT span of one HTTP exchange; tell it the status with :meth:`response`."""

    __slots__ = ("_headers", "_metric", "_span_attrs")

    def __init__(
        self,
        ct: ClientTelemetry,
        method: str,
        path: str,
        attempt: int,
        request_id: str,
        headers: MutableMapping[str, str],
    ) -> None:
        self._ct = ct
        self._headers = headers
        template = url_template(path)
        self._metric: dict[str, Any] = {
            "http.request.method": method,
            "url.template": template,
            **ct._server,
        }
        self._span_attrs = (method, template, path, attempt, request_id)

    def __enter__(self) -> HttpScope:
        method, template, path, attempt, request_id = self._span_attrs
        attrs: dict[str, Any] = {
            **self._metric,
            "url.full": self._ct._base + path,
            "payments.attempt": attempt,
            "payments.request_id": request_id,
        }
        if attempt > 1:
            attrs["http.request.resend_count"] = attempt - 1
        self._begin(f"{method} {template}", "CLIENT", attrs, leaf=True)
        if self._ct._tel.propagate:
            otel = self._ct._otel
            otel.propagate.inject(self._headers, context=otel.trace.set_span_in_context(self._span))
        return self

    def response(self, status: int) -> None:
        """Record the answer's status (4xx and 5xx mark the span as an error)."""
        otel = self._ct._otel
        self._metric["http.response.status_code"] = status
        self._span.set_attribute("http.response.status_code", status)
        if status >= 400:
            self._metric["error.type"] = str(status)
            self._span.set_attribute("error.type", str(status))
            self._span.set_status(otel.Status(otel.StatusCode.ERROR))

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            self._metric["error.type"] = _error_type(exc)
        elapsed = self._end(exc)
        self._ct._tel._http_duration.record(elapsed, self._metric)


class TokenFetchScope(_Scope):
    """The span of one access-token fetch and the fetch counter."""

    __slots__ = ()

    def __init__(self, ct: ClientTelemetry) -> None:
        self._ct = ct

    def __enter__(self) -> TokenFetchScope:
        self._begin("payments.token_fetch", "INTERNAL", {})
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._end(exc)
        attrs: dict[str, Any] = {"payments.outcome": "obtained" if exc is None else "failed"}
        if exc is not None:
            attrs["error.type"] = _error_type(exc)
        self._ct._tel._token_fetches.add(1, attrs)


class _NoScope:
    """Stands in for an :class:`OperationScope` when telemetry is off: does nothing."""

    __slots__ = ()

    def __enter__(self) -> _NoScope:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def succeeded(self, outcome: str, **attributes: Any) -> None:
        """Nothing to record."""


NO_SCOPE: Final = _NoScope()  # one shared instance: entering it costs no allocation
