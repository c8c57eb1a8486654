"""PaymentsClient: the four operations of the service through one request pipeline."""

from __future__ import annotations

import asyncio
import copy
import functools
import itertools
import logging
import math
import os
import random
import re
import ssl
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Protocol, Self, TypeVar

import aiohttp
import msgspec
import tenacity  # for the before_sleep hook's RetryCallState
from multidict import CIMultiDict

from ._clock import ClockSkew
from ._constants import (
    CAMT029_PATH,
    CAMT056_PATH,
    CLIENT_ID_HEADER,
    CLOCK_SKEW_THRESHOLD,
    CONNECT_TIMEOUT,
    CONNECTION_LIMIT,
    JSON_CONTENT_TYPE,
    MAX_RESPONSE_BYTES,
    NOTIFIED_POLL_INITIAL,
    NOTIFIED_POLL_MAX,
    PACS002_PATH,
    PACS008_PATH,
    POLL_TIMEOUT,
    READ_TIMEOUT,
    REQUEST_ID_HEADER,
    SCA_HEADER,
    TOKEN_PATH,
    USER_AGENT,
)
from ._credentials import Credentials
from ._errors import (
    ConfigurationError,
    InvalidResponseError,
    OutcomeUnknownError,
    PaymentsError,
    ServerError,
    SigningError,
    TransportError,
    ValidationError,
)
from ._hooks import Hooks, RequestEvent, call_hook
from ._jwt import SignedToken
from ._polling import NotificationSource, Poll, PollPolicy
from ._proxy import resolve_proxy
from ._retry import RetryPolicy
from ._telemetry import NO_SCOPE, Telemetry
from ._tokens import AccessToken, TokenSession
from ._transport import Response, Transport, check_base_url, error_from_response
from .iso20022 import (
    Camt029,
    Camt056,
    CancellationResolution,
    Outcome,
    Pacs002,
    Pacs008,
    PaymentStatus,
    SubmissionResult,
    decode_camt029,
    decode_pacs002,
    decode_submission,
    encode_validated,
    summarize_resolution,
    summarize_status_report,
)

__all__ = ["CancellationOutcome", "PaymentsClient", "Submission"]

logger = logging.getLogger("payments_async")
T = TypeVar("T")
M = TypeVar("M")
S = TypeVar("S", bound="_Summary")


class _Summary(Protocol):
    @property
    def outcome(self) -> Outcome: ...

    @property
    def codes(self) -> tuple[str, ...]: ...


_MIN_ATTEMPT_TIMEOUT = 0.05  # seconds: an attempt started at the deadline still gets a try

_RETURN_ADVICE = (
    "the cancellation was rejected: ask the beneficiary of the original payment to return "
    "the funds with a pacs.004 return request"
)


class Submission(msgspec.Struct, frozen=True):
    """The result of submitting a pacs.008 or camt.056.

    Immutable, compared and hashed by value. A frozen ``msgspec.Struct`` (one is made per
    POST: a twelfth of a frozen dataclass's construction cost);
    ``msgspec.structs.asdict(submission)`` gives its fields as a dict.

    Attributes:
        payments_service_id: the service's id of the stored message; read its status with it.
        message_id: the id we sent (``grpHdr.msgId`` or ``assgnmt.id``).
        echoed_id: the id the service echoed (``paymentId``), if it did.
        status: the service's status at submission (``PENDING``).
        creation_date_time: when the service stored it (no zone designator, as sent).
        created: True for 201 (stored now); False for 200 (an earlier attempt or an
            earlier call had stored it: the message exists exactly once).
        attempts: how many HTTP attempts this call took.
        request_id: the ``X-Request-ID`` of the call.
    """

    payments_service_id: str
    message_id: str
    echoed_id: str | None
    status: str | None
    creation_date_time: str | None
    created: bool
    attempts: int
    request_id: str

    @property
    def replayed(self) -> bool:
        """True when the service answered 200: the message had been stored before."""
        return not self.created


@dataclass(frozen=True, slots=True)
class CancellationOutcome:
    """The final answer to a cancellation request (from camt.029).

    Attributes:
        payments_service_id: the cancellation's id.
        outcome: ``Outcome.ACCEPTED`` or ``Outcome.REJECTED`` (or ``UNKNOWN`` for a final
            code we cannot classify, surfaced rather than guessed).
        status: raw ``sts.conf``.
        tx_statuses: raw ``txCxlSts`` codes.
        reason_codes: ``cxlStsRsnInf[].rsn.cd`` codes.
        reason_texts: ``addtlInf`` texts (nulls dropped).
        return_request_needed: True when rejected and the funds may sit with the
            beneficiary (the reason codes decide; see ``docs/outcomes.md``): they can only
            come back through a pacs.004 return requested from the beneficiary.
        message: a sentence for people.
        resolution: the decoded camt.029.
    """

    payments_service_id: str
    outcome: Outcome
    status: str | None
    tx_statuses: tuple[str, ...]
    reason_codes: tuple[str, ...]
    reason_texts: tuple[str, ...]
    return_request_needed: bool
    message: str
    resolution: Camt029

    @property
    def accepted(self) -> bool:
        """True when the payment was cancelled."""
        return self.outcome is Outcome.ACCEPTED

    @property
    def rejected(self) -> bool:
        """True when the cancellation was refused (see ``return_request_needed``)."""
        return self.outcome is Outcome.REJECTED

    @classmethod
    def from_resolution(
        cls, payments_service_id: str, resolution: Camt029, summary: CancellationResolution
    ) -> CancellationOutcome:
        """Build the outcome from a camt.029 and its classification."""
        needed = summary.needs_return_request
        reasons = ", ".join(summary.reason_codes) or "no reason code"
        if summary.outcome is Outcome.ACCEPTED:
            message = "the cancellation was accepted: the payment will not be executed"
        elif needed:
            message = f"{_RETURN_ADVICE} (reason: {reasons})"
        elif summary.outcome is Outcome.REJECTED:
            message = (
                f"the cancellation was rejected (reason: {reasons}); the funds are not with "
                "the beneficiary, so no return request is needed"
            )
        else:
            codes = ", ".join(summary.codes) or "none"
            message = (
                f"the outcome is unknown: the codes ({codes}) cannot be classified or "
                "contradict each other; ask the service before acting on this payment"
            )
        return cls(
            payments_service_id=payments_service_id,
            outcome=summary.outcome,
            status=summary.status,
            tx_statuses=summary.tx_statuses,
            reason_codes=summary.reason_codes,
            reason_texts=summary.reason_texts,
            return_request_needed=needed,
            message=message,
            resolution=resolution,
        )


class _Waiter(Poll[tuple[M, S]]):
    """One ``wait_for_*`` call: what its poll loop reads, held in slots (no closures).

    ``fetch`` is one GET of ``path`` within the wait's deadline; ``peek`` takes a final
    message the notification source has confirmed, when it is of the awaited type.
    """

    __slots__ = ("_client", "_deadline", "_decoder", "_path", "_summarize", "_type")

    def __init__(
        self,
        client: PaymentsClient,
        path: str,
        decoder: Callable[[bytes], M],
        summarize: Callable[[M], S],
        message_type: type[M],
        deadline: float,
        payments_service_id: str,
        **options: Any,
    ) -> None:
        super().__init__(payments_service_id, **options)
        self._client = client
        self._path = path
        self._decoder = decoder
        self._summarize = summarize
        self._type = message_type
        self._deadline = deadline

    async def fetch(self) -> tuple[M, S]:
        # Any queueing for a connection happens in the transport, inside the deadline.
        client = self._client
        # Each read within the retry policy's deadline, and never past the waiter's.
        deadline = min(self._deadline, time.monotonic() + client._retry.timeout)
        message = await client._read(self._path, self._decoder, deadline)
        return message, self._summarize(message)

    def status_of(self, result: tuple[M, S]) -> tuple[Outcome, tuple[str, ...]]:
        summary = result[1]
        return summary.outcome, summary.codes

    def peek(self) -> tuple[M, S] | None:
        source = self._source
        if source is None:
            return None
        # A receiver's confirmed final message: the waiter returns without a read.
        kind = "cancellation" if self._type is Camt029 else "payment"
        message = source.confirmed(self._id, kind)
        if isinstance(message, self._type):
            return message, self._summarize(message)
        return None


class PaymentsClient:
    """Async client of the Payments Initiation and Cancellation Service.

    Use it as an async context manager; it owns one ``aiohttp.ClientSession`` with
    keep-alive and no cookie jar (the service authenticates by tokens, never by cookie),
    or borrows the one you pass (and then leaves it open, its cookie jar as you set it)::

        async with PaymentsClient(credentials, base_url=url) as client:
            sub = await client.request_cancellation(cancellation)
            outcome = await client.wait_for_cancellation_outcome(sub.payments_service_id)

    Every POST is validated, encoded once, and those exact bytes are hashed into the SCA
    token and sent. Retries resend the same bytes with the same message id, so the
    service's idempotency guarantees a message is stored at most once.

    Args:
        credentials: who we are (see ``Credentials``).
        base_url: the service's base address; https, or http on loopback (the sandbox).
        session: an ``aiohttp.ClientSession`` to borrow instead of owning one. Its
            ``raise_for_status`` and timeouts never apply to the client's requests; a
            session with default ``auth`` or ``auto_decompress=False`` is refused.
        ssl_context: a custom ``ssl.SSLContext``; TLS verification is on by default. With
            a borrowed session it is passed with every request.
        retry: the retry policy of every operation.
        poll: the polling schedule of the waiters.
        connect_timeout: seconds to connect.
        read_timeout: seconds to wait for an answer to begin (counted from the start of
            the attempt, connecting included) and for each later read of its body.
        connection_limit: at most this many requests in flight (and open connections);
            further requests and polls wait their turn, inside their own deadlines. The
            one concurrency limit of the request path.
        max_response_bytes: refuse response bodies larger than this.
        hooks: metrics callbacks.
        proxy: a forward proxy for every request, ``http://[user:password@]host:port``
            (percent-encode special characters in the credentials). The credentials go
            only into ``Proxy-Authorization``, never into logs, reprs or errors. HTTPS
            to the service goes through a CONNECT tunnel: the proxy sees no content.
        trust_env: when ``proxy`` is None, use ``HTTPS_PROXY`` (``HTTP_PROXY`` for an
            http base URL) unless ``NO_PROXY`` lists the host; read once, here.
        telemetry: OpenTelemetry spans and metrics (extra ``otel``); None: no tracing,
            and ``opentelemetry`` is never imported.
        clock_skew_threshold: seconds of difference between the service's clock (the
            ``Date`` of token answers and 401s) and ours past which JWTs are signed on
            the service's time; None trusts our clock.

    Raises:
        ConfigurationError: a setting is of the wrong type or out of range (checked here,
            before anything is sent).
    """

    def __init__(
        self,
        credentials: Credentials,
        *,
        base_url: str,
        session: aiohttp.ClientSession | None = None,
        ssl_context: ssl.SSLContext | None = None,
        retry: RetryPolicy | None = None,
        poll: PollPolicy | None = None,
        connect_timeout: float = CONNECT_TIMEOUT,
        read_timeout: float = READ_TIMEOUT,
        connection_limit: int = CONNECTION_LIMIT,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        hooks: Hooks | None = None,
        proxy: str | None = None,
        trust_env: bool = False,
        telemetry: Telemetry | None = None,
        clock_skew_threshold: float | None = CLOCK_SKEW_THRESHOLD,
    ) -> None:
        if not isinstance(credentials, Credentials):
            raise ConfigurationError("credentials must be a payments_async.Credentials")
        _check_seconds("connect_timeout", connect_timeout)
        _check_seconds("read_timeout", read_timeout)
        for name, count in (
            ("connection_limit", connection_limit),
            ("max_response_bytes", max_response_bytes),
        ):
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise ConfigurationError(f"{name} must be an int >= 1, got {count!r}")
        for name, value, kind in (
            ("retry", retry, RetryPolicy),
            ("poll", poll, PollPolicy),
            ("hooks", hooks, Hooks),
        ):
            if value is not None and not isinstance(value, kind):
                raise ConfigurationError(f"{name} must be a {kind.__name__} or None")
        if telemetry is not None and not isinstance(telemetry, Telemetry):
            raise ConfigurationError("telemetry must be a payments_async.Telemetry or None")
        if proxy is not None and not isinstance(proxy, str):
            raise ConfigurationError("proxy must be a URL string or None")
        if not isinstance(trust_env, bool):
            raise ConfigurationError("trust_env must be True or False")
        self._credentials = credentials
        self._signer = credentials.signer()
        url = check_base_url(base_url)
        self._telemetry = telemetry.bind(url) if telemetry is not None else None
        try:
            self._clock = ClockSkew(clock_skew_threshold)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        self._transport = Transport(
            url,
            session=session,
            ssl_context=ssl_context,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            connection_limit=connection_limit,
            max_response_bytes=max_response_bytes,
            proxy=resolve_proxy(proxy, trust_env=trust_env, base_url=url),
            telemetry=self._telemetry,
        )
        self._retry = retry or RetryPolicy()
        self._poll = poll or PollPolicy()
        self._notices: NotificationSource | None = None
        self._notified_poll = PollPolicy(initial=NOTIFIED_POLL_INITIAL, maximum=NOTIFIED_POLL_MAX)
        self._hooks = hooks or Hooks()
        self._rng = random.Random()
        on_refresh = self._hooks.on_token_refresh
        self._tokens = TokenSession(
            self._transport,
            credentials,
            on_refresh=(lambda token: call_hook(on_refresh, token.remaining()))
            if on_refresh is not None
            else None,
            on_request=self._hooks.on_request,
            clock=self._clock,
            telemetry=self._telemetry,
        )
        # Each request's headers start as a copy of one of these (a copy made in C). A
        # CIMultiDict, aiohttp's own header type: given a dict, aiohttp first builds a
        # CIMultiDict from it on every request.
        self._base_headers: CIMultiDict[str] = CIMultiDict(
            {
                CLIENT_ID_HEADER: credentials.client_id,
                "Accept": JSON_CONTENT_TYPE,
                "User-Agent": USER_AGENT,
            }
        )
        self._post_headers = CIMultiDict(self._base_headers)
        self._post_headers["Content-Type"] = JSON_CONTENT_TYPE

    @property
    def base_url(self) -> str:
        """The service's base address."""
        return str(self._transport.base_url)

    @property
    def clock_offset(self) -> float:
        """Seconds added to our clock when signing JWTs (0.0 while our clock is trusted).

        Learned from the ``Date`` header of token answers and 401s; worth monitoring: a
        non-zero value means this machine's clock is off by more than the threshold.
        """
        return self._clock.offset

    def __repr__(self) -> str:
        return (
            f"PaymentsClient(base_url={self.base_url!r}, client_id={self._credentials.client_id!r})"
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop the token refresher and close the session (if we own it)."""
        try:
            await self._tokens.aclose()
        finally:
            await self._transport.aclose()

    async def rotate_credentials(self, credentials: Credentials) -> None:
        """Move to new credentials (a new key and kid, a new secret) while the client runs.

        Register the new public key with the service first (both keys stay registered
        during the change). This fetches an access token with the new credentials and,
        once the service grants it, uses them for every later token: assertion and SCA
        tokens. Calls already under way finish with the old key and the access token it
        obtained; none is interrupted, and no request pairs an access token of one kid
        with an SCA token of another. If the service refuses the new credentials, the
        error is raised and the old ones stay in use.

        Args:
            credentials: the new credentials, for the same client id.

        Raises:
            ConfigurationError: not ``Credentials``, another client id, or the client is
                closed.
            AuthenticationError: the service refused the new credentials.
            TransportError: the token endpoint could not be reached in time.
        """
        if not isinstance(credentials, Credentials):
            raise ConfigurationError("credentials must be a payments_async.Credentials")
        await self._tokens.rotate(credentials)
        self._credentials = credentials
        self._signer = credentials.signer()

    def attach_notifications(
        self, source: NotificationSource | None, *, poll: PollPolicy | None = None
    ) -> None:
        """Let a notification receiver wake the waiters (None detaches it).

        ``NotificationReceiver`` calls this when it starts and stops. While attached, a
        waiter returns as soon as the receiver has confirmed a final status for its id,
        and polls only as a safety net, on ``poll`` (by default from
        ``NOTIFIED_POLL_INITIAL`` growing to ``NOTIFIED_POLL_MAX`` seconds).

        Args:
            source: the receiver, or None.
            poll: the safety-net polling schedule while attached.
        """
        self._notices = source
        if poll is not None:
            self._notified_poll = poll

    # --- the operations ------------------------------------------------------------------

    async def access_token_lifetime(self) -> float:
        """Obtain (or reuse) the access token; return the seconds it has left.

        Useful to check credentials before a bulk run; the token itself never leaves the
        client.
        """
        token = await self._tokens.get()
        return token.remaining()

    async def submit_credit_transfer(
        self, transfer: Pacs008, *, timeout: float | None = None
    ) -> Submission:
        """Submit a pacs.008 credit transfer (``POST /payments/pacs008/v10``).

        Args:
            transfer: the message; validated before anything is sent.
            timeout: seconds this call may take in all: every attempt, the wait for a
                connection and a token fetch included. The retry policy's ``timeout``
                when None.

        Returns:
            The submission; ``created`` is False when the service already had this
            ``grpHdr.msgId`` (200) — the payment then exists once, not twice.

        Raises:
            ValidationError: the message is not a Pacs008 or breaks a rule; nothing was
                sent.
            OutcomeUnknownError: the POST may have been stored but no valid answer said
                so (retries ran out, or the answer was not one the spec allows); resubmit
                the same message to learn the outcome.
            ApiError: the service refused it (see the error tree). A failure of the token
                endpoint before the POST was sent raises its own error (``path`` is
                ``/oauth/token``): the message was certainly not stored.
            ConfigurationError: ``timeout`` is not a positive number.
        """
        if not isinstance(transfer, Pacs008):
            raise ValidationError.single(
                "$", f"submit_credit_transfer expects a Pacs008, got {type(transfer).__name__}"
            )
        seconds = self._retry.timeout if timeout is None else _check_seconds("timeout", timeout)
        if self._telemetry is None:
            return await self._post(PACS008_PATH, transfer, transfer.message_id, seconds)
        return await self._submit(PACS008_PATH, transfer, "submit_credit_transfer", seconds)

    async def request_cancellation(
        self, cancellation: Camt056, *, timeout: float | None = None
    ) -> Submission:
        """Request the cancellation of a payment with a camt.056 (``POST /payments/camt056/v08``).

        Args:
            cancellation: the message; validated before anything is sent.
            timeout: seconds this call may take in all: every attempt, the wait for a
                connection and a token fetch included. The retry policy's ``timeout``
                when None.

        Returns:
            The submission (status PENDING); wait for the answer with
            ``wait_for_cancellation_outcome(submission.payments_service_id)``.

        Raises:
            ValidationError: the message is not a Camt056 or breaks a rule; nothing was
                sent.
            OutcomeUnknownError: the POST may have been stored but no valid answer said
                so; resubmit the same message (same ``assgnmt.id``).
            ApiError: the service refused it (a token endpoint failure before the POST
                raises its own error, ``path`` ``/oauth/token``).
            ConfigurationError: ``timeout`` is not a positive number.
        """
        if not isinstance(cancellation, Camt056):
            raise ValidationError.single(
                "$", f"request_cancellation expects a Camt056, got {type(cancellation).__name__}"
            )
        seconds = self._retry.timeout if timeout is None else _check_seconds("timeout", timeout)
        if self._telemetry is None:
            return await self._post(CAMT056_PATH, cancellation, cancellation.message_id, seconds)
        return await self._submit(CAMT056_PATH, cancellation, "request_cancellation", seconds)

    async def get_credit_transfer_status(
        self, payments_service_id: str, *, timeout: float | None = None
    ) -> Pacs002:
        """Read a credit transfer's pacs.002 status report once.

        Args:
            payments_service_id: the id the service gave the submission.
            timeout: seconds this call may take in all: every attempt, the wait for a
                connection and a token fetch included. The retry policy's ``timeout``
                when None.

        Raises:
            NotFoundError: no such payment for this client.
            ApiError: any other refusal.
            ConfigurationError: ``timeout`` is not a positive number.
        """
        path = f"{PACS002_PATH}/{_check_id(payments_service_id)}"
        tel = self._telemetry
        seconds = self._retry.timeout if timeout is None else _check_seconds("timeout", timeout)
        deadline = time.monotonic() + seconds
        if tel is None:
            return await self._read(path, decode_pacs002, deadline)
        with tel.operation(
            "get_credit_transfer_status", "read", **{"payments.service_id": payments_service_id}
        ):
            return await self._read(path, decode_pacs002, deadline)

    async def get_cancellation_outcome(
        self, payments_service_id: str, *, timeout: float | None = None
    ) -> Camt029:
        """Read a cancellation's camt.029 resolution once (it may still be pending).

        Args:
            payments_service_id: the id the service gave the submission.
            timeout: seconds this call may take in all: every attempt, the wait for a
                connection and a token fetch included. The retry policy's ``timeout``
                when None.

        Raises:
            NotFoundError: no such cancellation for this client.
            ApiError: any other refusal.
            ConfigurationError: ``timeout`` is not a positive number.
        """
        path = f"{CAMT029_PATH}/{_check_id(payments_service_id)}"
        tel = self._telemetry
        seconds = self._retry.timeout if timeout is None else _check_seconds("timeout", timeout)
        deadline = time.monotonic() + seconds
        if tel is None:
            return await self._read(path, decode_camt029, deadline)
        with tel.operation(
            "get_cancellation_outcome", "read", **{"payments.service_id": payments_service_id}
        ):
            return await self._read(path, decode_camt029, deadline)

    async def wait_for_cancellation_outcome(
        self, payments_service_id: str, *, timeout: float = POLL_TIMEOUT
    ) -> CancellationOutcome:
        """Poll camt.029 until a final code (ACCC, RJTC, CNCL, RJCR, ACCR, ...) appears.

        Codes that cannot be classified (an unknown ``sts.conf``) or that contradict each
        other (``sts.conf`` ACCC with ``txCxlSts`` RJCR) are returned as soon as a second
        poll confirms them, with ``outcome`` ``Outcome.UNKNOWN`` and every raw code.

        With a notification receiver attached (``attach_notifications``), it returns as
        soon as the receiver has confirmed a final outcome for this id, and polls only as
        the safety net.

        Args:
            payments_service_id: the id returned by ``request_cancellation``.
            timeout: overall deadline in seconds.

        Returns:
            The outcome; when rejected, ``return_request_needed`` says whether the funds
            must be asked back.

        Raises:
            PollTimeoutError: no final code before the deadline (carries every code seen).
            NotFoundError: the id stayed unknown past the grace period.
            ConfigurationError: ``timeout`` is not a positive number.
        """

        path = f"{CAMT029_PATH}/{_check_id(payments_service_id)}"
        tel = self._telemetry
        with (
            tel.operation(
                "wait_for_cancellation_outcome",
                "wait",
                **{"payments.service_id": payments_service_id},
            )
            if tel is not None
            else NO_SCOPE
        ) as scope:
            resolution, summary = await self._wait(
                path,
                decode_camt029,
                summarize_resolution,
                payments_service_id,
                timeout,
                "cancellation outcome",
                Camt029,
            )
            if tel is not None:
                scope.succeeded(summary.outcome.value, **{"payments.status": summary.status})
        return CancellationOutcome.from_resolution(payments_service_id, resolution, summary)

    async def wait_for_payment_status(
        self, payments_service_id: str, *, timeout: float = POLL_TIMEOUT
    ) -> PaymentStatus:
        """Poll pacs.002 until a final status (ACCC, ACSC, RJCT, ...) appears.

        Unclassifiable or contradicting codes are returned as soon as a second poll
        confirms them, with ``outcome`` ``Outcome.UNKNOWN`` and every raw code.

        With a notification receiver attached (``attach_notifications``), it returns as
        soon as the receiver has confirmed a final status for this id, and polls only as
        the safety net.

        Raises:
            PollTimeoutError: no final status before the deadline (carries every code seen).
            NotFoundError: the id stayed unknown past the grace period.
            ConfigurationError: ``timeout`` is not a positive number.
        """

        path = f"{PACS002_PATH}/{_check_id(payments_service_id)}"
        tel = self._telemetry
        with (
            tel.operation(
                "wait_for_payment_status", "wait", **{"payments.service_id": payments_service_id}
            )
            if tel is not None
            else NO_SCOPE
        ) as scope:
            _, status = await self._wait(
                path,
                decode_pacs002,
                summarize_status_report,
                payments_service_id,
                timeout,
                "payment status",
                Pacs002,
            )
            if tel is not None:
                scope.succeeded(status.outcome.value, **{"payments.status": status.status})
        return status

    def _wait(
        self,
        path: str,
        decoder: Callable[[bytes], M],
        summarize: Callable[[M], S],
        payments_service_id: str,
        timeout: float,
        what: str,
        message_type: type[M],
    ) -> Coroutine[Any, Any, tuple[M, S]]:
        """Poll ``path`` until the summary of its message is settled; both waiters use it.

        Not a coroutine itself: the waiter's only frame below the caller is ``Poll.run``.
        """
        _check_seconds("timeout", timeout)
        notices = self._notices
        return _Waiter(
            self,
            path,
            decoder,
            summarize,
            message_type,
            time.monotonic() + timeout,
            payments_service_id,
            timeout=timeout,
            policy=self._poll if notices is None else self._notified_poll,
            what=what,
            rng=self._rng,
            source=notices,
        ).run()

    # --- the pipeline --------------------------------------------------------------------
    #
    # caller -> [_submit: span] -> _post/_read -> _attempt (token, one resend after a 401)
    # -> Transport.request; after a failed attempt 1, _retried (the retry policy) runs the
    # next attempts. Kept flat: every frame here is held by each of thousands of
    # concurrent waiters while its poll waits for a free connection, and is passed again
    # each time a request resumes.

    async def _submit(
        self, path: str, message: Pacs008 | Camt056, name: str, seconds: float
    ) -> Submission:
        """``_post`` inside the operation span ``name`` (telemetry on; else ``_post`` alone)."""
        tel = self._telemetry
        if tel is None:
            return await self._post(path, message, message.message_id, seconds)
        with tel.operation(name, "submit", **{"payments.message_id": message.message_id}) as scope:
            sub = await self._post(path, message, message.message_id, seconds)
            scope.succeeded(
                "created" if sub.created else "replayed",
                **{
                    "payments.service_id": sub.payments_service_id,
                    "payments.created": sub.created,
                    "payments.replayed": sub.replayed,
                    "payments.attempts": sub.attempts,
                    "payments.request_id": sub.request_id,
                },
            )
            return sub

    async def _post(
        self, path: str, message: Pacs008 | Camt056, message_id: str, seconds: float
    ) -> Submission:
        # Encoded once: these bytes are signed and sent, every attempt. They are validated
        # before any I/O unless these exact bytes passed validation before (a builder's).
        body, digest = encode_validated(message)
        op = _Operation("POST", path, body, message_id, digest)
        deadline = time.monotonic() + seconds
        try:
            # Attempt 1 runs here, outside the retry machinery (see _retried).
            try:
                resp = await self._attempt(op, deadline)
            except Exception as exc:
                resp = await self._retried(op, deadline, exc)
            else:
                budget = self._retry.budget  # _succeeded(), without its frame
                if budget is not None:
                    budget.record_success()
        except PaymentsError as exc:
            # Whatever ended the retries (a 429, a 401, a timeout...), if an earlier
            # attempt may have been stored, the honest answer is "unknown", not "failed".
            if not op.maybe_stored:
                raise
            raise OutcomeUnknownError(
                f"outcome unknown after {op.attempts} attempt(s): {exc.message}; resubmit "
                f"the same message to learn it",
                message_id=message_id,
                status=exc.status,
                **op.context(),
            ) from exc
        # The answer the spec describes, checked in this frame; anything else goes to
        # _check_submission, which says what is wrong.
        result = None
        if (resp.status == 201 or resp.status == 200) and "json" in resp.headers.get(
            "Content-Type", ""
        ).lower():
            try:  # noqa: SIM105 - contextlib.suppress costs a context manager per POST
                result = decode_submission(resp.body)
            except ValidationError:
                pass
        if result is None or (result.payment_id is not None and result.payment_id != message_id):
            result = self._check_submission(op, resp, message_id)
        return Submission(
            payments_service_id=result.payments_service_id,
            message_id=message_id,
            echoed_id=result.payment_id,
            status=result.status,
            creation_date_time=result.creation_date_time,
            created=resp.status == 201,
            attempts=op.attempts,
            request_id=op.request_id,
        )

    @staticmethod
    def _check_submission(op: _Operation, resp: Response, message_id: str) -> SubmissionResult:
        """The decoded answer to a POST, or OutcomeUnknownError if it is not one the spec allows.

        The POST was received (a 2xx came back), so whatever is wrong with the answer,
        the message may be stored: the error is "unknown", chained from the
        InvalidResponseError that says what was wrong.
        """
        problem: str | None = None
        result: SubmissionResult | None = None
        ctype = resp.headers.get("Content-Type", "")
        if resp.status not in (200, 201):
            problem = f"status {resp.status} is neither 201 (stored) nor 200 (already stored)"
        elif "json" not in ctype.lower():
            problem = f"expected a JSON body, got content type {ctype.split(';')[0] or 'none'!r}"
        else:
            try:
                result = decode_submission(resp.body)
            except ValidationError as exc:
                problem = f"unreadable body: {exc.message}"
            else:
                echoed = result.payment_id
                if echoed is not None and echoed != message_id:
                    problem = f"the echoed paymentId {echoed[:40]!r} is not the id sent"
        if problem is None and result is not None:
            return result
        invalid = InvalidResponseError(
            problem or "invalid answer", status=resp.status, **op.context()
        )
        raise OutcomeUnknownError(
            f"the service answered {resp.status} but not as the spec describes ({problem}); "
            "resubmit the same message to learn its outcome",
            message_id=message_id,
            status=resp.status,
            **op.context(),
        ) from invalid

    async def _read(self, path: str, decoder: Callable[[bytes], T], deadline: float) -> T:
        """GET ``path`` with retries until ``deadline`` (``time.monotonic()``), decode the body."""
        op = _Operation("GET", path)
        try:
            resp = await self._attempt(op, deadline)
        except Exception as exc:
            resp = await self._retried(op, deadline, exc)
        else:
            self._succeeded()
        ctype = resp.headers.get("Content-Type", "")
        if "json" not in ctype.lower():
            raise InvalidResponseError(
                f"expected a JSON body, got content type {ctype.split(';')[0] or 'none'!r}",
                status=resp.status,
                **op.context(),
            )
        try:
            return decoder(resp.body)
        except ValidationError as exc:
            raise InvalidResponseError(
                f"unexpected body: {exc.message}", status=resp.status, **op.context()
            ) from exc

    async def _retried(self, op: _Operation, deadline: float, exc: Exception) -> Response:
        """After attempt 1 failed with ``exc``: attempts under the retry policy until a 2xx,
        a final error or the deadline.

        Attempt 1 runs in the caller (``_post``, ``_read``), outside the retry machinery: a
        call that succeeds at once passes through no retry frame (every frame of the chain
        is paid again each time the request resumes). After a failure the policy takes
        over from it.
        """
        return await self._retry.retry_after(
            exc,
            functools.partial(self._attempt, op, deadline),
            rng=self._rng,
            before_sleep=functools.partial(self._before_retry, op),
            deadline=deadline,
        )

    def _succeeded(self) -> None:
        """Attempt 1 succeeded: give the shared retry budget its refill."""
        budget = self._retry.budget
        if budget is not None:
            budget.record_success()

    def _before_retry(self, op: _Operation, state: tenacity.RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        err = exc if isinstance(exc, PaymentsError) else None
        wait = state.upcoming_sleep
        kind: Literal["request", "token"] = (
            "token" if err is not None and err.path == TOKEN_PATH else "request"
        )
        if self._telemetry is not None:
            self._telemetry.retry(op.method, op.path, exc)
        logger.debug(
            "retry %s %s after attempt %d: %s; sleeping %.3fs (request_id=%s)",
            op.method,
            op.path,
            state.attempt_number,
            err,
            wait,
            op.request_id,
        )
        if self._hooks.on_retry is not None:
            call_hook(
                self._hooks.on_retry,
                RequestEvent(
                    op.method,
                    op.path,
                    op.request_id,
                    state.attempt_number,
                    err.status if err else None,
                    op.elapsed,
                    err,
                    kind=kind,
                    sleep=wait,
                ),
            )

    async def _attempt(self, op: _Operation, deadline: float) -> Response:
        """One attempt; a 401 invalidates that exact token and resends once with a new one."""
        op.attempts += 1
        # Each step gets what is left of the deadline (counted again after every step that
        # waited: a token fetch, an async signature, a send answered 401), so the deadline
        # holds even when the service stops answering mid-response.
        timeout = max(deadline - time.monotonic(), _MIN_ATTEMPT_TIMEOUT)
        # The cached token without a coroutine; a fetch's failures: this call was not sent.
        token = self._tokens.current
        if token is None:
            token = await self._access_token(op, timeout)
            timeout = max(deadline - time.monotonic(), _MIN_ATTEMPT_TIMEOUT)
        headers = (self._post_headers if op.body is not None else self._base_headers).copy()
        headers[REQUEST_ID_HEADER] = op.request_id
        for resend in (False, True):
            headers["Authorization"] = "Bearer " + token.value
            signed_with = self._clock.offset
            if op.body is not None:
                # SCA tokens are single use (unique jti and nonce): every send, the resend
                # after a 401 included, carries a fresh one over the same body bytes. It
                # comes from the signer that obtained this access token: after a key
                # rotation, kid and iss still match the token's assertion.
                signer = token.signer or self._signer
                sca = signer.sign_sca_token(
                    op.body, payment_id=op.payment_id, now=self._clock.now(), digest=op.digest
                )
                if not isinstance(sca, SignedToken):  # an async signer (thread pool, HSM)
                    sca = await _signed_within(sca, timeout)
                    timeout = max(deadline - time.monotonic(), _MIN_ATTEMPT_TIMEOUT)
                headers[SCA_HEADER] = sca.value
            start = time.monotonic()
            try:
                resp = await self._transport.request(
                    op.method,
                    op.path,
                    headers=headers,
                    body=op.body,
                    timeout=timeout,
                    request_id=op.request_id,
                    attempt=op.attempts,
                )
            except PaymentsError as exc:
                if isinstance(exc, TransportError):
                    op.maybe_stored = op.maybe_stored or exc.request_sent
                elif isinstance(exc, InvalidResponseError):
                    op.maybe_stored = True  # a garbled answer can follow a commit
                self._observe(op, exc.status, time.monotonic() - start, exc)
                raise
            op.elapsed = resp.elapsed
            if self._hooks.on_request is not None or logger.isEnabledFor(logging.DEBUG):
                self._observe(op, resp.status, resp.elapsed, None)
            if resp.status != 401 or resend:
                break
            self._clock.observe(resp.headers.get("Date"), elapsed=resp.elapsed)
            if op.body is not None and self._clock.explains(signed_with):
                # The SCA token was judged on a clock ours was off from; the access token
                # is not in question. One resend, signed on the service's time.
                logger.info(
                    "%s %s -> 401 while our clock was %.0fs off the service's; resending "
                    "once with an SCA token signed on its time",
                    op.method,
                    op.path,
                    self._clock.offset - signed_with,
                )
                timeout = max(deadline - time.monotonic(), _MIN_ATTEMPT_TIMEOUT)
                continue
            # The token may have been revoked or expired early: one refresh, one resend.
            self._tokens.invalidate(token)
            logger.debug("%s %s -> 401; refreshing the token once", op.method, op.path)
            timeout = max(deadline - time.monotonic(), _MIN_ATTEMPT_TIMEOUT)
            token = await self._access_token(op, timeout)
            timeout = max(deadline - time.monotonic(), _MIN_ATTEMPT_TIMEOUT)
        if 200 <= resp.status < 300:
            return resp
        err = error_from_response(
            resp, method=op.method, path=op.path, request_id=op.request_id, attempt=op.attempts
        )
        if isinstance(err, ServerError):
            op.maybe_stored = True  # a 5xx can follow a commit
        raise err

    def _observe(
        self, op: _Operation, status: int | None, elapsed: float, error: PaymentsError | None
    ) -> None:
        """Log one HTTP exchange at DEBUG and tell the on_request hook (ids, no secrets)."""
        op.elapsed = elapsed
        if self._hooks.on_request is None and not logger.isEnabledFor(logging.DEBUG):
            return  # nobody listens: no record, no event object
        logger.debug(
            "%s %s -> %s in %.1f ms (request_id=%s, attempt=%d)%s",
            op.method,
            op.path,
            status if error is None else "error",
            elapsed * 1000,
            op.request_id,
            op.attempts,
            f": {error.message}" if error is not None else "",
        )
        if self._hooks.on_request is not None:
            call_hook(
                self._hooks.on_request,
                RequestEvent(
                    op.method, op.path, op.request_id, op.attempts, status, elapsed, error
                ),
            )

    async def _access_token(self, op: _Operation, timeout: float) -> AccessToken:
        """The cached token at no cost, or a fetch bounded by the operation's deadline."""
        token = self._tokens.current
        if token is not None:
            return token
        started = time.monotonic()
        try:
            async with asyncio.timeout(timeout):
                return await self._tokens.get()
        except TimeoutError as exc:
            # The shared fetch goes on for other callers; this operation's time is up.
            # Say what the token endpoint did (its own path, status and request id), in a
            # copy: the shared error object may be raised in other tasks at the same time.
            op.elapsed = time.monotonic() - started
            last = self._tokens.last_error
            if last is not None:
                raise copy.copy(last) from exc
            raise TransportError(
                "no answer from the token endpoint before the operation's deadline",
                request_sent=False,
                method="POST",
                path=TOKEN_PATH,
                attempt=op.attempts,
            ) from exc
        except PaymentsError:
            op.elapsed = time.monotonic() - started
            raise


async def _signed_within(pending: Awaitable[SignedToken], timeout: float) -> SignedToken:
    """An async signer's token, or SigningError once the operation's time is up."""
    try:
        async with asyncio.timeout(timeout):
            return await pending
    except TimeoutError:
        raise SigningError("the signer gave no signature before the operation's deadline") from None


class _Operation(msgspec.Struct, gc=False):
    """One call's state across its attempts: the same request id and body bytes.

    A Struct (built in C, one per call; only strings, bytes and numbers, so not tracked
    by the garbage collector); its request id is drawn in ``__post_init__``.
    """

    method: str
    path: str
    body: bytes | None = None
    payment_id: str | None = None
    digest: bytes | None = None  # SHA-256 of body, for the SCA token's hd claim
    request_id: str = ""
    attempts: int = 0
    maybe_stored: bool = False  # True once an attempt may have reached the service
    elapsed: float = 0.0  # how long the last attempt took, for the retry hook

    def __post_init__(self) -> None:
        self.request_id = f"{_request_ids.prefix}{next(_request_ids.count):016x}"

    def context(self) -> dict[str, Any]:
        """The fields every error of this call carries."""
        return {
            "method": self.method,
            "path": self.path,
            "request_id": self.request_id,
            "attempt": self.attempts,
        }


class _RequestIds:
    """``X-Request-ID`` values: 64 random bits per process, then a counter (32 hex digits).

    Unique within the process by the counter and across processes by the random half,
    drawn again in a forked child; a third of the cost of 128 fresh random bits per call.
    The id names a call in logs and errors: it needs to be unique, not unguessable.
    """

    __slots__ = ("count", "prefix")

    def __init__(self) -> None:
        self.reseed()

    def reseed(self) -> None:
        self.prefix = os.urandom(8).hex()
        self.count = itertools.count()


_request_ids = _RequestIds()
os.register_at_fork(after_in_child=_request_ids.reseed)


def _check_seconds(name: str, value: object) -> float:
    """``value``, refused if it is not a positive, finite number of seconds."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(f"{name} must be a number of seconds, got {type(value).__name__}")
    try:
        seconds = float(value)
    except OverflowError:  # an int too large for a float
        seconds = math.inf
    if not math.isfinite(seconds) or seconds <= 0:
        raise ConfigurationError(f"{name} must be a positive, finite number of seconds")
    return seconds


_SERVICE_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")


def _check_id(payments_service_id: str) -> str:
    """Refuse an id that would change the URL path (slashes, dots, controls, empty)."""
    if not isinstance(payments_service_id, str) or not _SERVICE_ID.fullmatch(payments_service_id):
        raise ValidationError.single("$.paymentsServiceId", "must be 1-128 of [A-Za-z0-9_-]")
    return payments_service_id
