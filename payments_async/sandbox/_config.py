"""Every configuration type of the sandbox (server, faults, notifications) and its defaults."""

from __future__ import annotations

import base64
import math
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from decimal import Decimal
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal

from .._profile import ServiceProfile
from .._serving import ServerLimits
from .._urls import redact_url

__all__ = [
    "DEFAULT_AMOUNT_LIMIT",
    "DEFAULT_BACKLOG",
    "DEFAULT_BODY_READ_TIMEOUT",
    "DEFAULT_FAULT_LATENCY",
    "DEFAULT_HOST",
    "DEFAULT_MAX_BODY_SIZE",
    "DEFAULT_MAX_HEADER_SIZE",
    "DEFAULT_NOTIFY_ATTEMPTS",
    "DEFAULT_NOTIFY_BACKOFF_INITIAL",
    "DEFAULT_NOTIFY_BACKOFF_MAX",
    "DEFAULT_NOTIFY_CONCURRENCY",
    "DEFAULT_NOTIFY_DELAY",
    "DEFAULT_NOTIFY_REORDER_DELAY",
    "DEFAULT_NOTIFY_TIMEOUT",
    "DEFAULT_OTHER_CLIENT_STATUS",
    "DEFAULT_PORT",
    "DEFAULT_PROCESSING_DELAY",
    "DEFAULT_REJECT_IBANS",
    "DEFAULT_RETRY_AFTER",
    "DEFAULT_SETTLEMENT_DELAY",
    "DEFAULT_TOKEN_LIFETIME",
    "NOTIFICATION_FAULT_KINDS",
    "REJECT_IBAN_AC04",
    "REJECT_IBAN_AC06",
    "SHUTDOWN_TIMEOUT",
    "ClientKey",
    "FaultConfig",
    "NotificationFaults",
    "NotificationSettings",
    "NotificationTarget",
    "SandboxConfig",
]

# --- Where the sandbox listens ------------------------------------------------------------
DEFAULT_HOST: Final = "127.0.0.1"  # loopback only: the control routes have no auth
DEFAULT_PORT: Final = 8765  # for ``python -m payments_async.sandbox``; tests use port 0
DEFAULT_BACKLOG: Final = 2048  # listen backlog: benchmarks open thousands of connections
SHUTDOWN_TIMEOUT: Final = 1.0  # seconds in-flight requests get when the server stops

# --- Limits on what a request may be (the service publishes none: ours) ---------------------
DEFAULT_MAX_BODY_SIZE: Final = 1024 * 1024  # bytes; a larger body is answered 413
DEFAULT_MAX_HEADER_SIZE: Final = 8190  # bytes per header line (aiohttp's own default); 431
DEFAULT_BODY_READ_TIMEOUT: Final = 10.0  # seconds to receive a whole body; then 408 + close

# --- Tokens --------------------------------------------------------------------------------
DEFAULT_TOKEN_LIFETIME: Final = 3600  # seconds, sent as expires_in (the service's is unpublished)

# --- Timing of the lifecycle (computed lazily from timestamps at read time) ----------------
DEFAULT_PROCESSING_DELAY: Final = 5.0  # seconds a payment stays PEND before ACCC/RJCT
DEFAULT_SETTLEMENT_DELAY: Final = 2.0  # seconds a cancellation stays PDCR before its outcome

# --- Reject rules (documented in docs/sandbox.md) -----------------------------------------
# Valid IBANs (mod-97 checked) reserved for the sandbox's reject rule: a pacs.008 whose
# creditor account is one of them ends RJCT with the mapped ISO status reason code.
REJECT_IBAN_AC04: Final = "DE76999999990000000404"  # AC04: closed account number
REJECT_IBAN_AC06: Final = "DE22999999990000000406"  # AC06: blocked account
DEFAULT_REJECT_IBANS: Final[Mapping[str, str]] = MappingProxyType(
    {REJECT_IBAN_AC04: "AC04", REJECT_IBAN_AC06: "AC06"}
)
# A payment above this amount ends RJCT with AM02 (amount above the allowed maximum).
DEFAULT_AMOUNT_LIMIT: Final = Decimal("1000000.00")

# --- Visibility of other clients' messages -------------------------------------------------
DEFAULT_OTHER_CLIENT_STATUS: Final = 404  # don't reveal that another client's id exists

# --- Faults --------------------------------------------------------------------------------
DEFAULT_FAULT_LATENCY: Final = 5.0  # seconds added when the latency fault fires
DEFAULT_RETRY_AFTER: Final = 1  # seconds sent in Retry-After with an injected 429

# --- Notifications (our extension: the real sandbox sends none) ---------------------------
DEFAULT_NOTIFY_ATTEMPTS: Final = 8  # deliveries of one notification before giving up
DEFAULT_NOTIFY_BACKOFF_INITIAL: Final = 0.05  # seconds before the first redelivery...
DEFAULT_NOTIFY_BACKOFF_MAX: Final = 2.0  # ...doubling up to this (jittered 50-100%)
DEFAULT_NOTIFY_TIMEOUT: Final = 5.0  # seconds one delivery may take
DEFAULT_NOTIFY_CONCURRENCY: Final = 64  # deliveries in flight at once
DEFAULT_NOTIFY_DELAY: Final = 1.0  # seconds the delay fault holds a notification
DEFAULT_NOTIFY_REORDER_DELAY: Final = 0.2  # seconds the reorder fault holds one back
NOTIFICATION_FAULT_KINDS: Final = ("loss", "duplicate", "reorder", "delay", "wrong_credentials")


def _finite(value: float) -> bool:
    """False for NaN, an infinity, and an int beyond a float's range (JSON has no bound).

    Compared rather than ``math.isfinite``, which raises OverflowError for such an int.
    """
    return -sys.float_info.max <= value <= sys.float_info.max


@dataclass(frozen=True, slots=True)
class FaultConfig:
    """Fault injection: shares of requests that fail, off by default, seeded.

    The exclusive faults (``error_500`` ... ``no_content_204``) are drawn with one random
    number per request, so their shares must add up to at most 1. Latency is drawn
    independently and adds ``latency_seconds`` before the request is handled.

    Attributes:
        error_500: share of API requests answered 500 without being handled.
        error_502: share answered 502 with a gateway's HTML body (not JSON).
        error_503: share answered 503 without being handled.
        rate_limit_429: share answered 429 with ``Retry-After: retry_after``.
        drop_before: share whose connection is closed without an answer, nothing stored.
        commit_then_drop: share that are handled (state changes) and then the connection is
            closed without an answer.
        accepted_202: share of POSTs that are handled and, when stored now (201),
            answered 202 Accepted with the same submission result instead.
        accepted_202_empty: the same, answered 202 without a body: the client learns
            the id by resubmitting the same message (answered 200 with it).
        no_content_204: the same, answered 204 No Content.
        latency: share delayed by ``latency_seconds`` before being handled.
        latency_seconds: the added delay; pick it above the client's read timeout to make
            the client give up while the sandbox still stores the request.
        retry_after: seconds in the ``Retry-After`` header of an injected 429.
        apply_to_token: also inject faults into ``POST /oauth/token`` (off by default).
        seed: seed of the ``random.Random`` drawing the faults; same seed, same sequence.
    """

    error_500: float = 0.0
    error_502: float = 0.0
    error_503: float = 0.0
    rate_limit_429: float = 0.0
    drop_before: float = 0.0
    commit_then_drop: float = 0.0
    accepted_202: float = 0.0
    accepted_202_empty: float = 0.0
    no_content_204: float = 0.0
    latency: float = 0.0
    latency_seconds: float = DEFAULT_FAULT_LATENCY
    retry_after: int = DEFAULT_RETRY_AFTER
    apply_to_token: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        shares = self.exclusive_shares()
        for name, value in (*shares, ("latency", self.latency)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"fault share {name} must be within [0, 1], got {value}")
        if sum(v for _, v in shares) > 1.0 + 1e-9:
            raise ValueError("the exclusive fault shares add up to more than 1")
        if self.latency_seconds < 0 or self.retry_after < 0:
            raise ValueError("latency_seconds and retry_after must not be negative")
        if not _finite(self.latency_seconds):
            raise ValueError("latency_seconds must be a finite number of seconds")

    def exclusive_shares(self) -> tuple[tuple[str, float], ...]:
        """The mutually exclusive faults as ``(kind, share)`` pairs, in drawing order."""
        return (
            ("error_500", self.error_500),
            ("error_502", self.error_502),
            ("error_503", self.error_503),
            ("rate_limit_429", self.rate_limit_429),
            ("drop_before", self.drop_before),
            ("commit_then_drop", self.commit_then_drop),
            ("accepted_202", self.accepted_202),
            ("accepted_202_empty", self.accepted_202_empty),
            ("no_content_204", self.no_content_204),
        )

    @property
    def enabled(self) -> bool:
        """True when any fault can fire."""
        return self.latency > 0 or any(v > 0 for _, v in self.exclusive_shares())

    def to_dict(self) -> dict[str, Any]:
        """The settings as a JSON-ready dict (what ``GET /_sandbox/faults`` returns)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FaultConfig:
        """Build from a JSON object; unknown keys are refused, missing ones take defaults.

        Raises:
            ValueError: an unknown key, a value of the wrong type or out of range.
        """
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ValueError(f"unknown fault settings: {', '.join(unknown)}")
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            default = getattr(cls(), key)
            if isinstance(default, bool):
                if not isinstance(value, bool):
                    raise ValueError(f"{key} must be a boolean")
            elif isinstance(default, int):
                if isinstance(value, bool) or not isinstance(value, int):
                    raise ValueError(f"{key} must be an integer")
            elif isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{key} must be a number")
            kwargs[key] = value
        return cls(**kwargs)


@dataclass(frozen=True, slots=True)
class ClientKey:
    """A client key registered when the sandbox starts (``SandboxConfig.clients``).

    Several entries with one ``client_id`` (and the same secret) register several keys
    for that client, as during a key rotation.

    Attributes:
        client_id: the client id.
        client_secret: its client secret (never logged or shown in ``repr``).
        public_key_pem: the RSA public key in PEM (unencrypted, >= 2048 bits).
        kid: the key id its JWTs carry in the header.
        iss: the issuer its JWTs carry in ``iss``.
    """

    client_id: str
    client_secret: str = field(repr=False)
    public_key_pem: str | bytes = field(repr=False)
    kid: str
    iss: str


@dataclass(frozen=True, slots=True)
class NotificationTarget:
    """Where and how the sandbox notifies one client.

    Attributes:
        url: the client's receiver (http or https).
        payload: ``"short"`` (id + URIs) or ``"full"`` (the pacs.002/camt.029 report with a
            top-level ``paymentsServiceId``).
        username: HTTP Basic user name to present (with ``password``)...
        password: ...and its password.
        bearer: or a bearer token to present (OAuth 2.0).
    """

    url: str
    payload: Literal["short", "full"] = "short"
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    bearer: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ValueError("url must be an http:// or https:// URL")
        if self.payload not in ("short", "full"):
            raise ValueError("payload must be 'short' or 'full'")
        basic = self.username is not None or self.password is not None
        if basic and not (self.username and self.password):
            raise ValueError("HTTP Basic needs both username and password")
        if basic == (self.bearer is not None):
            # The service notes: the client's endpoint is protected (OAuth 2.0 or Basic).
            raise ValueError("give exactly one of username+password or bearer")
        if self.bearer is not None and not self.bearer:
            raise ValueError("bearer must not be empty")

    def authorization(self, *, wrong: bool = False) -> str:
        """The ``Authorization`` header; ``wrong`` spoils it (the wrong-credentials fault)."""
        spoil = "-wrong" if wrong else ""
        if self.bearer is not None:
            return f"Bearer {self.bearer}{spoil}"
        raw = f"{self.username}:{self.password}{spoil}".encode()
        return "Basic " + base64.b64encode(raw).decode("ascii")

    def describe(self) -> dict[str, Any]:
        """The target without its secrets (what ``GET /_sandbox/notifications`` shows).

        A user name and password inside ``url`` are hidden too.
        """
        return {
            "url": redact_url(self.url),
            "payload": self.payload,
            "auth": "bearer" if self.bearer is not None else "basic",
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NotificationTarget:
        """Build from a JSON object (``url``, ``payload``, ``username``/``password`` or ``bearer``).

        Raises:
            ValueError: an unknown key or a bad value.
        """
        known = {"url", "payload", "username", "password", "bearer"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown notification settings: {', '.join(unknown)}")
        for key in known & set(data):
            if not isinstance(data[key], str):
                raise ValueError(f"{key} must be a string")
        return cls(**data)


@dataclass(frozen=True, slots=True)
class NotificationFaults:
    """Faults of notification delivery, each drawn independently per notification.

    Attributes:
        loss: share never sent at all (the waiter's poll fallback must find them).
        duplicate: share sent twice.
        reorder: share held back ``reorder_seconds`` so later ones overtake them.
        delay: share held back ``delay_seconds``.
        wrong_credentials: share whose first delivery presents spoiled credentials (the
            receiver must answer 401; the redelivery presents the right ones).
        delay_seconds: hold of the delay fault.
        reorder_seconds: hold of the reorder fault.
        seed: seed of the ``random.Random`` drawing them; same seed, same sequence.
    """

    loss: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0
    delay: float = 0.0
    wrong_credentials: float = 0.0
    delay_seconds: float = DEFAULT_NOTIFY_DELAY
    reorder_seconds: float = DEFAULT_NOTIFY_REORDER_DELAY
    seed: int = 0

    def __post_init__(self) -> None:
        for kind in NOTIFICATION_FAULT_KINDS:
            value = getattr(self, kind)
            if isinstance(value, bool) or not 0.0 <= value <= 1.0:
                raise ValueError(f"notification fault share {kind} must be within [0, 1]")
        for name in ("delay_seconds", "reorder_seconds"):
            hold = getattr(self, name)
            # Compared, not math.isfinite: an int beyond a float's range (JSON has no bound)
            # would fail every delivery that adds it; NaN and inf are no hold either.
            if not 0 <= hold <= sys.float_info.max:
                raise ValueError(f"{name} must be a finite number of seconds, not negative")

    @property
    def enabled(self) -> bool:
        """True when any fault can fire."""
        return any(getattr(self, kind) > 0 for kind in NOTIFICATION_FAULT_KINDS)

    def to_dict(self) -> dict[str, Any]:
        """The settings as a JSON-ready dict."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NotificationFaults:
        """Build from a JSON object; unknown keys and non-numbers are refused.

        Raises:
            ValueError: an unknown key or a bad value.
        """
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown notification fault settings: {', '.join(unknown)}")
        for key, value in data.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{key} must be a number")
            if key == "seed" and not isinstance(value, int):
                raise ValueError("seed must be an integer")
        return cls(**data)


@dataclass(frozen=True, slots=True)
class NotificationSettings:
    """Notification delivery of the sandbox (off until a client has a target).

    Attributes:
        targets: client id -> where and how to notify it.
        faults: delivery faults (off by default).
        max_attempts: deliveries of one notification before giving up.
        backoff_initial: seconds before the first redelivery, doubling...
        backoff_max: ...up to this.
        timeout: seconds one delivery may take.
        concurrency: deliveries in flight at once.
    """

    targets: Mapping[str, NotificationTarget] = field(default_factory=dict)
    faults: NotificationFaults = field(default_factory=NotificationFaults)
    max_attempts: int = DEFAULT_NOTIFY_ATTEMPTS
    backoff_initial: float = DEFAULT_NOTIFY_BACKOFF_INITIAL
    backoff_max: float = DEFAULT_NOTIFY_BACKOFF_MAX
    timeout: float = DEFAULT_NOTIFY_TIMEOUT
    concurrency: int = DEFAULT_NOTIFY_CONCURRENCY

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.concurrency < 1:
            raise ValueError("max_attempts and concurrency must be >= 1")
        for name in ("backoff_initial", "backoff_max", "timeout"):
            if not 0 <= getattr(self, name) <= sys.float_info.max:  # also NaN and inf
                raise ValueError(f"{name} must be a finite number of seconds, not negative")
        if self.timeout <= 0:
            raise ValueError("timeout must be positive")


@dataclass(frozen=True, slots=True)
class SandboxConfig:
    """Everything the sandbox can be told, each default named in this module.

    Attributes:
        host: address to bind; loopback unless ``allow_non_loopback`` is set.
        port: port to bind; 0 picks a free one (what tests use).
        allow_non_loopback: permit binding a non-loopback address. The ``/_sandbox/``
            control routes need no authentication, so this is off by default.
        backlog: listen backlog of the socket.
        token_lifetime: seconds an access token lives (``expires_in``).
        expires_in_as_string: send ``expires_in`` as a quoted string, like the spec's
            sample body, instead of a number.
        processing_delay: seconds a payment stays ``PEND`` before its final status.
        settlement_delay: seconds a cancellation stays ``PDCR`` before its outcome.
        reject_creditor_ibans: creditor IBAN -> ISO reason code; such payments end RJCT.
        amount_limit: payments above this amount end RJCT with AM02; None disables it
            (an int or float is taken as the Decimal of its text).
        wrap_payment_result: answer a pacs.008 POST with ``{"data": {...}}`` like the
            camt.056 one (True) or with the bare submission result (False).
        other_client_status: status for another client's ``paymentsServiceId``: 404
            (default: existence is not revealed) or 403.
        accept_predefined_tokens: accept ``SANDBOX_ASSERTION`` / ``SANDBOX_SCA_TOKEN``
            from the predefined client.
        clients: client keys registered at start (several per client allowed).
        max_body_size: largest request body accepted, in bytes; larger ones get 413.
        max_header_size: longest request line or header line accepted, in bytes; a longer
            header gets 431, a longer request line 400.
        body_read_timeout: seconds a request body may take to arrive in full (counted
            from the end of the headers); a slower one gets 408 and its connection closed.
        persist_path: SQLite file keeping clients, payments and cancellations across
            restarts; None keeps everything in memory.
        faults: fault injection settings (off by default).
        clock: wall-clock source in epoch seconds; used for every timestamp, token expiry
            and JWT check, so tests can inject a manual clock.
        jwt_leeway: clock skew tolerated when checking JWT ``exp``/``nbf``/``iat``.
        notifications: status notifications to clients' receivers (our extension; off
            until a client has a target).
        clock_skew: seconds the sandbox's clock runs ahead of ``clock`` (negative: behind).
            Everything the sandbox times (JWT checks, token expiry, lifecycle, the
            ``Date`` header) uses the skewed time, like a service whose clock is off
            from the client's.
        profile: the edition of the service it emulates: its four operations answer at
            the profile's paths and it reads the client id from the profile's header
            (the specification's by default; give the client the same profile).
        connection_limits: connections held at once, and the time a connection may take
            to send its first headers or stay idle (``ServerLimits``; ours).
    """

    host: str = DEFAULT_HOST
    port: int = 0
    allow_non_loopback: bool = False
    backlog: int = DEFAULT_BACKLOG
    token_lifetime: int = DEFAULT_TOKEN_LIFETIME
    expires_in_as_string: bool = False
    processing_delay: float = DEFAULT_PROCESSING_DELAY
    settlement_delay: float = DEFAULT_SETTLEMENT_DELAY
    reject_creditor_ibans: Mapping[str, str] = field(default_factory=lambda: DEFAULT_REJECT_IBANS)
    amount_limit: Decimal | None = DEFAULT_AMOUNT_LIMIT
    wrap_payment_result: bool = True
    other_client_status: int = DEFAULT_OTHER_CLIENT_STATUS
    accept_predefined_tokens: bool = True
    clients: tuple[ClientKey, ...] = ()
    max_body_size: int = DEFAULT_MAX_BODY_SIZE
    max_header_size: int = DEFAULT_MAX_HEADER_SIZE
    body_read_timeout: float = DEFAULT_BODY_READ_TIMEOUT
    persist_path: Path | str | None = None
    faults: FaultConfig = field(default_factory=FaultConfig)
    clock: Callable[[], float] = time.time
    jwt_leeway: float | None = None
    notifications: NotificationSettings = field(default_factory=NotificationSettings)
    clock_skew: float = 0.0
    profile: ServiceProfile = field(default_factory=ServiceProfile)
    connection_limits: ServerLimits = field(default_factory=ServerLimits)

    def __post_init__(self) -> None:
        # Checked here, not left to the event loop: uvloop takes a port above 65535 modulo
        # 65536 and would listen on some other port instead of refusing it. OverflowError,
        # as socket.bind() and asyncio raise for it (the CLI reports it in one line).
        if not 0 <= self.port <= 65535:
            raise OverflowError(f"port must be 0-65535, got {self.port}")
        if self.token_lifetime <= 0:
            raise ValueError("token_lifetime must be positive")
        # Not a number or infinite: nothing documents inf as "never"; both became a 500.
        for name in ("processing_delay", "settlement_delay"):
            delay = getattr(self, name)
            if not (_finite(delay) and delay >= 0):
                raise ValueError(f"{name} must be a finite number of seconds, not negative")
        limit: object = self.amount_limit  # typed Decimal, given whatever callers pass
        if isinstance(limit, int | float) and not isinstance(limit, bool):
            # A plain number compared well before finite amounts were checked: keep it.
            limit = Decimal(str(limit))
            object.__setattr__(self, "amount_limit", limit)
        if limit is not None and not (isinstance(limit, Decimal) and limit.is_finite()):
            raise ValueError("amount_limit must be a finite amount (or None to disable it)")
        if self.other_client_status not in (403, 404):
            raise ValueError("other_client_status must be 403 or 404")
        if self.max_body_size <= 0 or self.max_header_size <= 0:
            raise ValueError("max_body_size and max_header_size must be positive")
        if not (_finite(self.body_read_timeout) and self.body_read_timeout > 0):
            raise ValueError("body_read_timeout must be a positive, finite number of seconds")
        if self.jwt_leeway is not None and not _finite(self.jwt_leeway):
            raise ValueError("jwt_leeway must be a finite number of seconds")
        if not math.isfinite(self.clock_skew):
            raise ValueError("clock_skew must be a finite number of seconds")
        if not isinstance(self.profile, ServiceProfile):
            raise ValueError("profile must be a payments_async.ServiceProfile")
