"""How long a call may take and how much it may hold: the ``Timeout`` and ``Limits`` values."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ._constants import (
    LIMIT_CONNECTIONS,
    LIMIT_RESPONSE_BYTES,
    TIMEOUT_CONNECT,
    TIMEOUT_READ,
    TIMEOUT_TOKEN,
    TIMEOUT_TOTAL,
)
from ._errors import ConfigurationError

__all__ = ["Limits", "Timeout", "call_timeout", "check_seconds"]


def check_seconds(name: str, value: object) -> float:
    """``value`` as a float, refused if it is not a positive, finite number of seconds.

    Raises:
        ConfigurationError: not a number (a bool is not one), not finite, or not > 0.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(f"{name} must be a number of seconds, got {type(value).__name__}")
    try:
        seconds = float(value)
    except OverflowError:  # an int too large for a float
        seconds = math.inf
    if not math.isfinite(seconds) or seconds <= 0:
        raise ConfigurationError(f"{name} must be a positive, finite number of seconds")
    return seconds


@dataclass(frozen=True, slots=True)
class Timeout:
    """How long a call may take, in seconds (every field a positive, finite number).

    Pass one to ``PaymentsClient(timeout=...)`` for every call, or to a single call
    (``timeout=Timeout(...)``; a plain number there means ``total``). The waiters'
    ``timeout=`` is a different knob: how long to wait for a final status.

    Args:
        total: one call in all: every attempt, the backoff between them, the wait for a
            free connection, signing and an access-token fetch included. The call raises
            once it has passed; a POST that may have arrived raises
            ``OutcomeUnknownError``.
        connect: establishing one connection (TCP, proxy and TLS).
        read: the answer to begin once the request has its connection (opening a new
            one included), and each later wait for more of its body; a stalled attempt
            fails after it and may be retried within ``total``.
        token: one access-token fetch, its retries included; each token request may
            take up to a third of it, so a fetch has room to retry. A call waiting for
            the token is still bounded by its own ``total``.

    Raises:
        ConfigurationError: a field is not a positive, finite number.
    """

    total: float = TIMEOUT_TOTAL
    connect: float = TIMEOUT_CONNECT
    read: float = TIMEOUT_READ
    token: float = TIMEOUT_TOKEN

    def __post_init__(self) -> None:
        for name in ("total", "connect", "read", "token"):
            value = check_seconds(f"Timeout.{name}", getattr(self, name))
            object.__setattr__(self, name, value)

    def with_total(self, total: float) -> Timeout:
        """The same timeouts with another ``total``."""
        return Timeout(total=total, connect=self.connect, read=self.read, token=self.token)


def call_timeout(default: Timeout, timeout: float | Timeout | None) -> Timeout:
    """One call's timeouts: ``default``, or a number of seconds for its ``total``, or its own.

    Raises:
        ConfigurationError: ``timeout`` is neither None, a positive number nor a Timeout.
    """
    if timeout is None:
        return default
    if isinstance(timeout, Timeout):
        return timeout
    return default.with_total(check_seconds("timeout", timeout))


@dataclass(frozen=True, slots=True)
class Limits:
    """How much one client may hold at once.

    Args:
        connections: requests in flight (and open connections) at most; further requests
            and polls wait their turn in arrival order, inside their own ``total``. The
            one concurrency limit of the request path.
        response_bytes: response bodies longer than this are refused
            (``InvalidResponseError``).

    Raises:
        ConfigurationError: a field is not an int >= 1.
    """

    connections: int = LIMIT_CONNECTIONS
    response_bytes: int = LIMIT_RESPONSE_BYTES

    def __post_init__(self) -> None:
        for name in ("connections", "response_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"Limits.{name} must be an int >= 1, got {value!r}")
