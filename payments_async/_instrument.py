"""One instrument pipeline: logging, the user's ``Hooks`` and OpenTelemetry hear the same events.

The client and the token session tell an `Instruments` tuple what happens (an HTTP
exchange, a retry, a token fetch, an operation); each instrument turns that into its own
output. An instrument never changes what a call does, and a hook that raises is logged.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping, MutableMapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic, Literal, Protocol, TypeVar

import msgspec

from ._errors import PaymentsError
from ._models import ResponseHeaders

__all__ = [
    "Call",
    "Exchange",
    "HookInstrument",
    "Hooks",
    "Instrument",
    "Instruments",
    "LogInstrument",
    "RequestEvent",
    "TokenFetch",
]

logger = logging.getLogger("payments_async")


@dataclass(frozen=True, slots=True)
class RequestEvent:
    """What a hook is told about one HTTP attempt (never a body or a secret).

    Attributes:
        method: HTTP method.
        path: URL path (``/oauth/token`` for a token request).
        request_id: the exchange's ``X-Request-ID``.
        attempt: 1-based attempt number (of the operation, or of the token fetch).
        status: HTTP status, or None when no answer came.
        elapsed: seconds the attempt took, from sending to the whole answer (or failure).
        error: the error of a failed attempt, if any.
        kind: ``"request"`` for a call of the API, ``"token"`` for a token request.
        sleep: in an ``on_retry`` event, the seconds the client will sleep before the
            next attempt; None in ``on_request`` events.
        headers: in an ``on_request`` event, the answer's headers (``Date``,
            ``Retry-After``, rate-limit headers...; never ``Set-Cookie``), read-only and
            case-insensitive; None when no answer came, and in ``on_retry`` events.
    """

    method: str
    path: str
    request_id: str
    attempt: int
    status: int | None
    elapsed: float
    error: PaymentsError | None = None
    kind: Literal["request", "token"] = "request"
    sleep: float | None = None
    headers: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Hooks:
    """Optional callables for metrics. Exceptions raised by a hook are logged, not raised.

    Args:
        on_request: called after every HTTP attempt, token requests included
            (``event.kind == "token"``).
        on_retry: called before sleeping for a retry, with the failed attempt's event
            (``elapsed`` its duration, ``sleep`` the planned wait).
        on_token_refresh: called with the new token's lifetime in seconds.
    """

    on_request: Callable[[RequestEvent], None] | None = None
    on_retry: Callable[[RequestEvent], None] | None = None
    on_token_refresh: Callable[[float], None] | None = None


class Exchange(msgspec.Struct):
    """One HTTP exchange as the instruments see it; the transport fills in the answer.

    ``resend_count`` counts the sends of the same call before this one, whatever their
    cause (a retry, or the resend after a 401). ``span`` belongs to the tracing instrument;
    ``headers`` are the answer's, as the transport received them.
    """

    method: str
    path: str
    request_id: str
    attempt: int
    resend_count: int = 0
    kind: Literal["request", "token"] = "request"
    status: int | None = None
    elapsed: float = 0.0
    error: BaseException | None = None  # a cancellation included
    span: Any = None
    headers: Mapping[str, str] | None = None

    def event(self) -> RequestEvent | None:
        """The hook event of a finished exchange; None when a cancellation ended it."""
        error = self.error
        if error is not None and not isinstance(error, PaymentsError):
            return None
        return RequestEvent(
            self.method,
            self.path,
            self.request_id,
            self.attempt,
            self.status,
            self.elapsed,
            error,
            kind=self.kind,
            headers=None if self.headers is None else ResponseHeaders(self.headers),
        )


class Call:
    """One public operation: its name, kind (submit, read, wait) and what it found."""

    __slots__ = ("attributes", "error", "kind", "name", "outcome", "span")

    def __init__(self, name: str, kind: str, **attributes: Any) -> None:
        self.name = name
        self.kind = kind
        self.attributes = attributes
        self.outcome = "ok"
        self.error: BaseException | None = None
        self.span: Any = None

    def succeeded(self, outcome: str, **attributes: Any) -> None:
        """Record the result (``created``, ``replayed``, a final status...)."""
        self.outcome = outcome
        self.attributes.update(attributes)


class TokenFetch:
    """One access-token fetch (its token requests are exchanges of their own)."""

    __slots__ = ("error", "span")

    def __init__(self) -> None:
        self.error: BaseException | None = None
        self.span: Any = None


class Instrument(Protocol):
    """What one instrument hears. Every method returns at once and raises nothing."""

    def request_started(self, exchange: Exchange, headers: MutableMapping[str, str]) -> None:
        """An exchange is about to be sent (``headers`` may gain trace context)."""

    def request_ended(self, exchange: Exchange) -> None:
        """An exchange ended: ``status`` and ``elapsed`` set, or ``error``."""

    def retry(self, event: RequestEvent) -> None:
        """A failed attempt will be retried after ``event.sleep`` seconds."""

    def token_fetch_started(self, fetch: TokenFetch) -> None:
        """An access-token fetch begins."""

    def token_fetch_ended(self, fetch: TokenFetch) -> None:
        """An access-token fetch ended (``error`` set when it failed)."""

    def token_obtained(self, lifetime: float) -> None:
        """A new access token was stored; it lives ``lifetime`` seconds."""

    def operation_started(self, call: Call) -> None:
        """A public operation begins."""

    def operation_ended(self, call: Call) -> None:
        """A public operation ended (``error`` set when it raised)."""


class _Silent:
    """An instrument that hears everything and does nothing: override what you need."""

    __slots__ = ()

    def request_started(self, exchange: Exchange, headers: MutableMapping[str, str]) -> None:
        return None

    def request_ended(self, exchange: Exchange) -> None:
        return None

    def retry(self, event: RequestEvent) -> None:
        return None

    def token_fetch_started(self, fetch: TokenFetch) -> None:
        return None

    def token_fetch_ended(self, fetch: TokenFetch) -> None:
        return None

    def token_obtained(self, lifetime: float) -> None:
        return None

    def operation_started(self, call: Call) -> None:
        return None

    def operation_ended(self, call: Call) -> None:
        return None


class LogInstrument(_Silent):
    """DEBUG records on the ``payments_async`` logger: ids and timings, never secrets."""

    __slots__ = ()

    def request_ended(self, exchange: Exchange) -> None:
        if not logger.isEnabledFor(logging.DEBUG):
            return
        error = exchange.error
        logger.debug(
            "%s %s -> %s in %.1f ms (request_id=%s, attempt=%d)%s",
            exchange.method,
            exchange.path,
            exchange.status if error is None else "error",
            exchange.elapsed * 1000,
            exchange.request_id,
            exchange.attempt,
            f": {error}" if error is not None else "",
            extra={"event": f"{exchange.kind}.exchange", "request_id": exchange.request_id},
        )

    def retry(self, event: RequestEvent) -> None:
        logger.debug(
            "retry %s %s after attempt %d: %s; sleeping %.3fs (request_id=%s)",
            event.method,
            event.path,
            event.attempt,
            event.error,
            event.sleep,
            event.request_id,
        )


class HookInstrument(_Silent):
    """The user's `Hooks`; whatever a hook raises is logged, never raised."""

    __slots__ = ("_hooks",)

    def __init__(self, hooks: Hooks) -> None:
        self._hooks = hooks

    def request_ended(self, exchange: Exchange) -> None:
        if self._hooks.on_request is not None:
            event = exchange.event()
            if event is not None:
                _call(self._hooks.on_request, event)

    def retry(self, event: RequestEvent) -> None:
        _call(self._hooks.on_retry, event)

    def token_obtained(self, lifetime: float) -> None:
        _call(self._hooks.on_token_refresh, lifetime)


def _call(hook: Callable[[Any], None] | None, arg: object) -> None:
    if hook is None:
        return
    try:
        hook(arg)
    except Exception:
        logger.exception("payments_async hook %r failed", hook)


class Instruments:
    """The instruments of one client, in one tuple; each event goes to all of them.

    Which instruments hear operations and exchanges is sorted once, here: when none
    does, the client builds no event for them and tells nobody.
    """

    __slots__ = ("_exchanges", "_logged_exchanges", "all", "hears_operations")

    def __init__(self, *instruments: Instrument) -> None:
        self.all: tuple[Instrument, ...] = instruments
        self.hears_operations = any(
            _hears(i, "operation_started") or _hears(i, "operation_ended") for i in instruments
        )
        self._logged_exchanges = tuple(
            i for i in instruments if _hears(i, "request_started") or _hears(i, "request_ended")
        )
        self._exchanges = tuple(
            i for i in self._logged_exchanges if not isinstance(i, LogInstrument)
        )

    @classmethod
    def of(cls, hooks: Hooks | None, tracing: Instrument | None) -> Instruments:
        """Logging, then the user's hooks and the tracing instrument when given."""
        instruments: list[Instrument] = [LogInstrument()]
        if hooks is not None:
            instruments.append(HookInstrument(hooks))
        if tracing is not None:
            instruments.append(tracing)
        return cls(*instruments)

    def hearing_exchanges(self) -> tuple[Instrument, ...]:
        """The instruments that hear an exchange begun now (logging only at DEBUG).

        The caller tells each of them ``request_started`` and ``request_ended``; when the
        tuple is empty (no hook, no tracing, no DEBUG logging) it skips both.
        """
        if logger.isEnabledFor(logging.DEBUG):
            return self._logged_exchanges
        return self._exchanges

    def retry(self, event: RequestEvent) -> None:
        for instrument in self.all:
            instrument.retry(event)

    def token_obtained(self, lifetime: float) -> None:
        for instrument in self.all:
            instrument.token_obtained(lifetime)

    def token_fetch(self) -> _Scope[TokenFetch]:
        """``with instruments.token_fetch():`` around one access-token fetch."""
        return _Scope(self, "token_fetch_started", "token_fetch_ended", TokenFetch())

    def operation(self, call: Call | None) -> AbstractContextManager[Call | None]:
        """``with instruments.operation(call):`` around one public operation.

        ``call`` is None when no instrument hears operations (`hears_operations`): then
        nothing happens on entry or exit.
        """
        if call is None:
            return _UNHEARD
        return _Scope(self, "operation_started", "operation_ended", call)


def _hears(instrument: Instrument, event: str) -> bool:
    """Whether ``instrument`` does anything with ``event`` (does not inherit `_Silent`'s)."""
    return getattr(type(instrument), event, None) is not getattr(_Silent, event)


_UNHEARD: AbstractContextManager[None] = contextlib.nullcontext()


class _Event(Protocol):
    error: BaseException | None


E = TypeVar("E", bound=_Event)


class _Scope(Generic[E]):
    """Tell every instrument ``started(event)`` on entry and, in reverse order,
    ``ended(event)`` on exit (with ``event.error`` set to what was raised)."""

    __slots__ = ("_ended", "_event", "_instruments", "_started")

    def __init__(self, instruments: Instruments, started: str, ended: str, event: E) -> None:
        self._instruments = instruments
        self._event = event
        self._started = started
        self._ended = ended

    def __enter__(self) -> E:
        for instrument in self._instruments.all:
            getattr(instrument, self._started)(self._event)
        return self._event

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._event.error = exc
        for instrument in reversed(self._instruments.all):
            getattr(instrument, self._ended)(self._event)
