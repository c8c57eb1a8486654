"""The error tree: every exception payments-async raises.

```text
PaymentsError                      root: catch this to catch everything we raise
├── ValidationError                bad input, found before anything was sent
│   └── BulkInputError             a bulk input file with problems, each with its line
│                                  (``payments_async.bulk``)
├── ConfigurationError             bad key, credentials or client settings
├── SigningError                   a signer (thread pool, HSM) failed to sign
├── TransportError                 connect/read failure or timeout, no HTTP answer
├── OutcomeUnknownError            a POST may or may not have been stored: resubmit
│                                  with the same message id (it is idempotent)
├── PollTimeoutError               a waiter's deadline passed; carries every raw code seen
├── NotificationRejected           a notification the receiver refuses; ``status`` is
│                                  the HTTP status to answer (401, 413, 422, ...)
├── InboxError                     a notification inbox cannot be opened, read or
│   │                              written (``payments_async.notifications``)
│   ├── InboxFull                  the inbox holds as many unprocessed items as it may
│   ├── InboxBusyError             another receiver holds the SQLite inbox (one writer)
│   └── InboxUnavailableError      the inbox's database is away (an outage); retry later
├── JournalError                   a bulk run's journal cannot be used: unreadable, of
│   │                              another input or schema (``payments_async.bulk``)
│   ├── JournalUnavailableError    its database is away or its disk full (an outage):
│   │                              every change is kept; rerun to resume
│   ├── JournalBusyError           another run holds the journal; nothing was sent
│   ├── AlreadyRecalledError       the payment's recall is already recorded in the
│   │                              journal (one recall per payment); nothing was sent
│   └── RunControlError            a pause, resume or abort that cannot be taken;
│       │                          nothing was recorded
│       ├── RunNotFoundError       no such run in the journal or database
│       ├── RunFinishedError       no row left to send or wait for
│       └── RunAbortedError        the run was aborted: no pause or resume any more
├── ResultsWriteError              a bulk run's results file cannot be written (also an
│                                  ``OSError``); the journal keeps every outcome
└── ApiError                       the service answered with an error (any 4xx)
    ├── AuthenticationError        401 (after one token refresh), or the token
    │                              endpoint refused our credentials or assertion
    ├── PermissionDeniedError      403
    ├── NotFoundError              404
    ├── RateLimitedError           429, with ``retry_after`` when the service sent it
    ├── ServerError                5xx
    └── InvalidResponseError       a 2xx whose body is not what the spec describes
```

Every error raised for an HTTP exchange carries the method, path, status, the service's
error codes and the client's request id and attempt number, and ``str(err)`` starts with
what a support engineer needs. Foreign exceptions (aiohttp, msgspec, joserfc) are
translated at exactly one boundary and chained with ``from exc``. No error message ever
contains a secret (client secret, token, private key). Every error pickles with its type,
message and attributes (process pools and task queues move them between processes); the
``__cause__`` chain stays behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ApiError",
    "AuthenticationError",
    "ConfigurationError",
    "InvalidResponseError",
    "NotFoundError",
    "NotificationRejected",
    "OutcomeUnknownError",
    "PaymentsError",
    "PermissionDeniedError",
    "PollTimeoutError",
    "Problem",
    "RateLimitedError",
    "ServerError",
    "ServiceErrorDetail",
    "SigningError",
    "TransportError",
    "ValidationError",
]


@dataclass(frozen=True, slots=True)
class Problem:
    """One validation problem: where (a JSON path such as ``$.grpHdr.msgId``) and what."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(frozen=True, slots=True)
class ServiceErrorDetail:
    """One entry of the service's error envelope ``{"errors": [...]}``."""

    code: str | None
    message: str | None = None
    level: str | None = None
    description: str | None = None

    def __str__(self) -> str:
        parts = [p for p in (self.code, self.message or self.description) if p]
        return ": ".join(parts) if parts else "(no detail)"


class PaymentsError(Exception):
    """Root of every exception raised by payments-async.

    Attributes:
        method: HTTP method of the exchange, when there was one.
        path: URL path of the exchange (never the query or a token).
        status: HTTP status received, if any.
        request_id: the client-generated ``X-Request-ID`` of the exchange.
        attempt: the attempt number (1-based) that produced this error.
        errors: the service's error entries, when its body carried the error envelope.
    """

    def __init__(
        self,
        message: str,
        *,
        method: str | None = None,
        path: str | None = None,
        status: int | None = None,
        request_id: str | None = None,
        attempt: int | None = None,
        errors: Sequence[ServiceErrorDetail] = (),
    ) -> None:
        self.message = message
        self.method = method
        self.path = path
        self.status = status
        self.request_id = request_id
        self.attempt = attempt
        self.errors: tuple[ServiceErrorDetail, ...] = tuple(errors)
        super().__init__(message)

    @property
    def codes(self) -> tuple[str, ...]:
        """The service's error codes, in the order it sent them."""
        return tuple(e.code for e in self.errors if e.code)

    def __str__(self) -> str:
        head: list[str] = []
        if self.method and self.path:
            head.append(f"{self.method} {self.path}")
        if self.status is not None:
            head.append(f"-> {self.status}")
        ctx: list[str] = []
        if self.request_id:
            ctx.append(f"request_id={self.request_id}")
        if self.attempt is not None:
            ctx.append(f"attempt={self.attempt}")
        text = self.message
        if self.errors:
            text += " [" + "; ".join(str(e) for e in self.errors) + "]"
        prefix = " ".join(head)
        suffix = f" ({', '.join(ctx)})" if ctx else ""
        return f"{prefix}: {text}{suffix}" if prefix else f"{text}{suffix}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # The default reduce calls ``cls(*args)``, which the keyword-only constructors of
        # the subclasses refuse: rebuild from the attributes instead.
        return (_restore, (type(self), self.args, dict(self.__dict__)))


def _restore(cls: type[PaymentsError], args: tuple[Any, ...], state: dict[str, Any]) -> Any:
    """Unpickle a PaymentsError without calling its constructor."""
    err = cls.__new__(cls)
    Exception.__init__(err, *args)
    err.__dict__.update(state)
    return err


class ValidationError(PaymentsError, ValueError):
    """Input breaks an ISO 20022 / SEPA / service rule; raised before any network I/O.

    Attributes:
        problems: every problem found, each with its JSON path.
    """

    def __init__(self, problems: Sequence[Problem], *, message: str | None = None) -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        n = len(self.problems)
        summary = message or f"{n} validation problem{'s' if n != 1 else ''}"
        detail = "; ".join(str(p) for p in self.problems)
        super().__init__(f"{summary}: {detail}" if detail else summary)

    @classmethod
    def single(cls, path: str, message: str) -> ValidationError:
        """A ValidationError with one problem."""
        return cls([Problem(path, message)])

    @property
    def paths(self) -> tuple[str, ...]:
        """The JSON paths of the problems, in order."""
        return tuple(p.path for p in self.problems)


class ConfigurationError(PaymentsError):
    """The client is set up wrongly: a bad key, missing credentials, an unsafe base URL."""


class SigningError(PaymentsError):
    """A signer failed to produce a signature; nothing was sent with it.

    Raised when a `payments_async.signing.Signer` raises or returns something
    other than signature bytes (an HSM that went away, a closed thread-pool signer). The
    cause is chained; the message names the kid, never key material or a PIN.
    """


class TransportError(PaymentsError):
    """The request got no HTTP answer: connection refused or dropped, or a timeout.

    Attributes:
        request_sent: False when the failure happened before any byte of the request
            could have reached the service (e.g. connection refused), so a POST was
            certainly not stored; True when it may have been.
        retryable: False when trying again cannot help (a TLS certificate that is not
            trusted): the error is raised at once instead of being retried.
        queued: True when the call's time ran out on the client's side before it tried
            the service (waiting for a free connection or a rate-limit slot, or the
            process paused): this says nothing about whether the service can be reached.
    """

    def __init__(
        self,
        message: str,
        *,
        request_sent: bool = True,
        retryable: bool = True,
        queued: bool = False,
        **context: Any,
    ) -> None:
        self.request_sent = request_sent
        self.retryable = retryable
        self.queued = queued
        super().__init__(message, **context)


class OutcomeUnknownError(PaymentsError):
    """A POST may have been stored by the service, but no answer said so.

    The service is idempotent on the message id, so resubmitting the *same* message (same
    ``grpHdr.msgId`` of a pacs.008 or pacs.028, ``assgnmt.id`` of a camt.056) is safe: it
    answers 200 with the existing ``paymentsServiceId`` if the earlier attempt was stored,
    201 if it was not.

    Attributes:
        message_id: ``grpHdr.msgId`` (pacs.008) or ``assgnmt.id`` (camt.056) to resubmit;
            for ``client.request()``, its ``idempotency_id`` ("" when none was named).
    """

    def __init__(self, message: str, *, message_id: str, **context: Any) -> None:
        self.message_id = message_id
        super().__init__(
            f"{message} (message_id={message_id})" if message_id else message, **context
        )


class PollTimeoutError(PaymentsError, TimeoutError):
    """A waiter's deadline passed before a final status appeared.

    Attributes:
        payments_service_id: the id that was polled.
        last_status: the last raw status code seen (``sts.conf`` or ``txSts``), or None.
        statuses: every distinct raw code seen while polling (group and transaction
            codes), in the order first seen; empty if no answer was read.
        last_error: the error of the last read when it failed (a service that cannot
            be reached, say), None when the last read was answered; its text ends the
            message.
    """

    def __init__(
        self,
        message: str,
        *,
        payments_service_id: str,
        last_status: str | None,
        statuses: Sequence[str] = (),
        last_error: PaymentsError | None = None,
    ) -> None:
        self.payments_service_id = payments_service_id
        self.last_status = last_status
        self.statuses: tuple[str, ...] = tuple(statuses)
        self.last_error = last_error
        seen = ", ".join(self.statuses) or "none"
        failed = f"; the last read failed: {last_error}" if last_error is not None else ""
        super().__init__(
            f"{message} (payments_service_id={payments_service_id}, codes seen: {seen}){failed}"
        )


class NotificationRejected(PaymentsError):
    """A notification the receiver refuses; ``status`` is the HTTP status to answer.

    401 for missing or wrong credentials, 405 for a method other than POST, 413 for an
    oversized body, 415 for a body that is not JSON, 400 for malformed JSON, 422 for JSON
    that is not a notification (unknown shape, bad id, a URI not under ``base_url``).
    Nothing has been processed when it is raised.
    """


class ApiError(PaymentsError):
    """The service answered with an error status (a 4xx not covered by a subclass).

    Attributes:
        retry_after: seconds the service asked us to wait (``Retry-After``), if it did.
    """

    def __init__(self, message: str, *, retry_after: float | None = None, **context: Any):
        self.retry_after = retry_after
        super().__init__(message, **context)


class AuthenticationError(ApiError):
    """401: the access token, assertion or SCA token was refused (after one refresh)."""


class PermissionDeniedError(ApiError):
    """403: this client may not see or do this."""


class NotFoundError(ApiError):
    """404: no message with that ``paymentsServiceId`` (for this client)."""


class RateLimitedError(ApiError):
    """429: too many requests; ``retry_after`` says how long the service asked us to wait."""


class ServerError(ApiError):
    """5xx: the service failed."""


class InvalidResponseError(ApiError):
    """A success status whose body does not decode as the spec describes."""
