"""How long a call may take and how much it may hold: the ``Timeout`` and ``Limits`` values."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

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


@dataclass(frozen=True, slots=True, init=False)
class Timeout:
    """How long a call may take, in seconds (every field a positive, finite number).

    Pass one to ``PaymentsClient(timeout=...)`` for every call, or to a single call
    (``timeout=Timeout(...)``; a plain number there means ``total``). The waiters'
    ``timeout=`` is a different knob: how long to wait for a final status.

    Args:
        total: one call in all: every attempt, the backoff between them, the wait for a
            free connection, signing and an access-token fetch included. The call raises
            once it has passed, and sends nothing more; a POST that may have arrived
            raises ``OutcomeUnknownError``.
        connect: establishing one connection (TCP, proxy and TLS).
        read: the answer to begin once the request has its connection (opening a new
            one included), and each later wait for more of its body; a stalled attempt
            fails after it and may be retried within ``total``.
        token: one access-token fetch, its retries included; each token request may
            take up to a third of it, so a fetch has room to retry. A call waiting for
            the token is still bounded by its own ``total``.

    ``connect``, ``read`` and ``token`` left out (None) take their defaults
    (``TIMEOUT_CONNECT``, ``TIMEOUT_READ``, ``TIMEOUT_TOKEN``), cut to ``total``:
    ``Timeout(total=2)`` is a two-second call in every part.

    Raises:
        ConfigurationError: a field is not a positive, finite number, or ``connect``,
            ``read`` or ``token`` given longer than ``total`` (a part of a call cannot
            take longer than the whole of it).
    """

    total: float
    connect: float
    read: float
    token: float
    # The parts given rather than defaulted: ``with_total`` cuts only those to a new total
    # and takes the others from their defaults again.
    _given: frozenset[str] = field(init=False, repr=False, compare=False)

    def __init__(
        self,
        total: float = TIMEOUT_TOTAL,
        connect: float | None = None,
        read: float | None = None,
        token: float | None = None,
    ) -> None:
        whole = check_seconds("Timeout.total", total)
        object.__setattr__(self, "total", whole)
        given = frozenset(
            name
            for name, value in (("connect", connect), ("read", read), ("token", token))
            if value is not None
        )
        object.__setattr__(self, "_given", given)
        for name, value, default in (
            ("connect", connect, TIMEOUT_CONNECT),
            ("read", read, TIMEOUT_READ),
            ("token", token, TIMEOUT_TOKEN),
        ):
            if value is None:
                seconds = min(default, whole)
            else:
                seconds = check_seconds(f"Timeout.{name}", value)
                if seconds > whole:
                    raise ConfigurationError(
                        f"Timeout.{name} ({seconds:g}s) is longer than Timeout.total "
                        f"({whole:g}s): a part of a call cannot take longer than the call"
                    )
            object.__setattr__(self, name, seconds)

    def with_total(self, total: float) -> Timeout:
        """The same timeouts with another ``total``: a part given is cut to it, a part
        left out is its default cut to it."""
        whole = check_seconds("timeout", total)
        parts = {name: min(getattr(self, name), whole) for name in self._given}
        return Timeout(total=whole, **parts)


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
