"""Hook events: what the client tells metrics callbacks about each HTTP exchange."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ._errors import PaymentsError

__all__ = ["Hooks", "RequestEvent", "call_hook"]

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


def call_hook(hook: Callable[[Any], None] | None, arg: object) -> None:
    """Call ``hook(arg)``; whatever it raises is logged and never reaches the caller."""
    if hook is None:
        return
    try:
        hook(arg)
    except Exception:
        logger.exception("payments_async hook %r failed", hook)
