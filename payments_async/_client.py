"""PaymentsClient: the operations of the service through one request pipeline."""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
import time
from collections.abc import Awaitable, Callable, Coroutine
from types import TracebackType
from typing import Any, Final, Self, TypeVar

import aiohttp
import msgspec

from ._checks import check_payments_service_id
from ._clock import ClockSkew
from ._config import Limits, Timeout, call_timeout, check_seconds
from ._constants import (
    CLOCK_SKEW_THRESHOLD,
    NOTIFIED_POLL_INITIAL,
    NOTIFIED_POLL_MAX,
    POLL_TIMEOUT,
    TOKEN_PATH,
)
from ._credentials import Credentials
from ._errors import (
    ConfigurationError,
    OutcomeUnknownError,
    PaymentsError,
    TransportError,
    ValidationError,
)
from ._instrument import Call, Hooks, Instruments
from ._models import (
    Answered,
    CancellationOutcome,
    RawResponse,
    Submission,
    submission_result,
)
from ._operation import Operation
from ._pipeline import Pipeline
from ._polling import Chase, MessagePoll, NotificationSource, PollPolicy, Summary
from ._profile import ServiceProfile, check_request_path
from ._proxy import resolve_proxy
from ._rate import RateLimit, RateLimiter, rate_limiter
from ._retry import RetryPolicy, parse_retry_after
from ._telemetry import Telemetry
from ._tokens import TokenSession
from ._transport import Response, Transport, check_base_url
from .iso20022 import (
    Camt029,
    Camt056,
    Pacs002,
    Pacs008,
    Pacs028,
    PaymentStatus,
    build_status_request,
    decode_camt029,
    decode_pacs002,
    decode_submission,
    encode_validated,
    summarize_resolution,
    summarize_status_report,
    validate,
)

__all__ = ["METHODS", "PaymentsClient", "WithResponse"]

_log = logging.getLogger("payments_async")
T = TypeVar("T")
M = TypeVar("M")
S = TypeVar("S", bound=Summary)

METHODS: Final = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})
"""The methods ``request()`` sends; only POST, PUT and PATCH carry a body."""
_BODY_METHODS: Final = frozenset({"POST", "PUT", "PATCH"})
# Money as a JSON number, never a string, as the four operations write it.
_ENCODER: Final = msgspec.json.Encoder(decimal_format="number")


class PaymentsClient:
    """Async client of the Payments Initiation and Cancellation Service.

    Use it as an async context manager; it owns one ``aiohttp.ClientSession`` with
    keep-alive and no cookie jar (the service authenticates by tokens, never by cookie),
    or borrows the one you pass (and then leaves it open, its cookie jar as you set it):

    ```python
    async with PaymentsClient(credentials, base_url=url) as client:
        sub = await client.request_cancellation(cancellation)
        outcome = await client.wait_for_cancellation_outcome(sub.payments_service_id)
    ```

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
        retry: the retry policy of every operation (attempts and waits).
        poll: the polling schedule of the waiters.
        timeout: how long each call may take (``total``) and its connect, read and
            token-fetch limits; a call can pass its own. ``Timeout()`` when None.
        limits: requests in flight at most (more wait their turn, inside their own
            deadline) and the largest response body. ``Limits()`` when None.
        hooks: metrics callbacks, told about every HTTP exchange, retry and new token.
        proxy: a forward proxy for every request, ``http://[user:password@]host:port``
            (percent-encode special characters in the credentials). The credentials go
            only into ``Proxy-Authorization``, never into logs, reprs or errors. HTTPS
            to the service goes through a CONNECT tunnel: the proxy sees no content.
        trust_env: when ``proxy`` is None, use ``HTTPS_PROXY`` (``HTTP_PROXY`` for an
            http base URL) unless ``NO_PROXY`` lists the host; read once, here.
        telemetry: OpenTelemetry spans and metrics (extra ``otel``); None: no tracing,
            and ``opentelemetry`` is never imported. Logging, ``hooks`` and ``telemetry``
            hear the same events.
        profile: the service edition's paths and client-id header; the spec's when None.
        clock_skew_threshold: seconds of difference between the service's clock (the
            ``Date`` of token answers and 401s) and ours past which JWTs are signed on
            the service's time; None trusts our clock.
        rate_limit: requests per second at most (a number, a ``RateLimit``, or a shared
            ``RateLimiter``); what takes a slot: see ``RateLimit``. None: no client rate.

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
        timeout: Timeout | None = None,
        limits: Limits | None = None,
        hooks: Hooks | None = None,
        proxy: str | None = None,
        trust_env: bool = False,
        telemetry: Telemetry | None = None,
        profile: ServiceProfile | None = None,
        clock_skew_threshold: float | None = CLOCK_SKEW_THRESHOLD,
        rate_limit: float | RateLimit | RateLimiter | None = None,
    ) -> None:
        if not isinstance(credentials, Credentials):
            raise ConfigurationError("credentials must be a payments_async.Credentials")
        for name, value, kind in (
            ("retry", retry, RetryPolicy),
            ("poll", poll, PollPolicy),
            ("timeout", timeout, Timeout),
            ("limits", limits, Limits),
            ("hooks", hooks, Hooks),
            ("telemetry", telemetry, Telemetry),
            ("profile", profile, ServiceProfile),
        ):
            if value is not None and not isinstance(value, kind):
                raise ConfigurationError(f"{name} must be a payments_async.{kind.__name__} or None")
        if proxy is not None and not isinstance(proxy, str):
            raise ConfigurationError("proxy must be a URL string or None")
        if not isinstance(trust_env, bool):
            raise ConfigurationError("trust_env must be True or False")
        self._credentials = credentials
        self._profile = profile = profile or ServiceProfile()
        url = check_base_url(base_url)
        try:
            clock = ClockSkew(clock_skew_threshold)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        self._timeout = timeout or Timeout()
        # Every event goes to each of these: logging, the user's hooks, OpenTelemetry.
        instruments = Instruments.of(
            hooks, telemetry.bind(url, profile) if telemetry is not None else None
        )
        transport = Transport(
            url,
            session=session,
            ssl_context=ssl_context,
            timeout=self._timeout,
            limits=limits,
            proxy=resolve_proxy(proxy, trust_env=trust_env, base_url=url),
            instruments=instruments,
        )
        self._rng = random.Random()
        self._pipeline = Pipeline(
            transport,
            TokenSession(
                transport,
                credentials,
                fetch_deadline=self._timeout.token,
                on_refresh=lambda token: instruments.token_obtained(token.remaining()),
                clock=clock,
                instruments=instruments,
            ),
            credentials,
            client_id_header=profile.client_id_header,
            retry=retry or RetryPolicy(),
            rate=rate_limiter(rate_limit),
            clock=clock,
            instruments=instruments,
            rng=self._rng,
        )
        self._poll = poll or PollPolicy()
        self._notices: NotificationSource | None = None
        self._notified_poll = PollPolicy(initial=NOTIFIED_POLL_INITIAL, maximum=NOTIFIED_POLL_MAX)

    @property
    def profile(self) -> ServiceProfile:
        """The service edition's paths and client-id header this client uses."""
        return self._profile

    @property
    def with_response(self) -> WithResponse:
        """The operations that send or read a message, each returning ``(result,
        response)``: the answer's status, headers, elapsed time and attempts beside the
        usual result (see `RawResponse`)."""
        return WithResponse(self)

    @property
    def base_url(self) -> str:
        """The service's base address."""
        return str(self._pipeline.transport.base_url)

    @property
    def clock_offset(self) -> float:
        """Seconds added to our clock when signing JWTs (0.0 while our clock is trusted).

        Learned from the ``Date`` header of token answers and 401s; worth monitoring: a
        non-zero value means this machine's clock is off by more than the threshold.
        """
        return self._pipeline.clock.offset

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
        await self._pipeline.aclose()

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
        await self._pipeline.tokens.rotate(credentials)
        self._credentials = credentials
        self._pipeline.use(credentials)

    def attach_notifications(
        self, source: NotificationSource | None, *, poll: PollPolicy | None = None
    ) -> None:
        """Let a notification receiver wake the waiters and track submissions (None: detach).

        ``NotificationReceiver`` calls this when it starts and stops. While attached, a
        waiter returns as soon as the receiver has confirmed a final status for its id and
        polls only as a safety net, on ``poll`` (by default from ``NOTIFIED_POLL_INITIAL``
        to ``NOTIFIED_POLL_MAX`` s); each accepted submission is told to the receiver.

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
        token = await self._pipeline.tokens.get()
        return token.remaining()

    async def submit_credit_transfer(
        self, transfer: Pacs008, *, timeout: float | Timeout | None = None
    ) -> Submission:
        """Submit a pacs.008 credit transfer (``POST /payments/pacs008/v10``).

        Args:
            transfer: the message; validated before anything is sent.
            timeout: this call's ``Timeout``, or a number of seconds for its ``total``
                (every attempt, the wait for a connection and a token fetch included).
                The client's ``timeout`` when None.

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
            ConfigurationError: ``timeout`` is neither a positive number nor a Timeout.
        """
        _check_type(transfer, Pacs008, "submit_credit_transfer")
        sub, _ = await self._submit(
            "submit_credit_transfer", self._profile.pacs008_path, transfer, timeout
        )
        return sub

    async def request_cancellation(
        self, cancellation: Camt056, *, timeout: float | Timeout | None = None
    ) -> Submission:
        """Request the cancellation of a payment with a camt.056 (``POST /payments/camt056/v08``).

        Args:
            cancellation: the message; validated before anything is sent.
            timeout: this call's ``Timeout``, or a number of seconds for its ``total``
                (every attempt, the wait for a connection and a token fetch included).
                The client's ``timeout`` when None.

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
            ConfigurationError: ``timeout`` is neither a positive number nor a Timeout.
        """
        _check_type(cancellation, Camt056, "request_cancellation")
        sub, _ = await self._submit(
            "request_cancellation", self._profile.camt056_path, cancellation, timeout
        )
        return sub

    async def request_status_update(
        self, status_request: Pacs028, *, timeout: float | Timeout | None = None
    ) -> Submission:
        """Chase an unanswered recall with a pacs.028 (``POST /payments/pacs028/v03``).

        SEPA's request for status update on a camt.056 the beneficiary bank has not
        answered. Build it with ``build_status_request(cancellation)`` (or from the
        camt.056's ids); it is signed, sent and made idempotent as the other POSTs are:
        an SCA token over the exact bytes, retries that resend those bytes, and the
        service's idempotency on ``grpHdr.msgId`` (201 the first time, 200 after).
        The recall's answer is still read as a camt.029 (``get_cancellation_outcome`` or
        ``wait_for_cancellation_outcome``); ``wait_for_cancellation_outcome`` can send
        this request itself (``chase_after``).

        Args:
            status_request: the message; validated before anything is sent.
            timeout: this call's ``Timeout``, or a number of seconds for its ``total``.
                The client's ``timeout`` when None.

        Returns:
            The submission of the status request (its own ``payments_service_id``).

        Raises:
            ValidationError: not a Pacs028, or it breaks a rule; nothing was sent.
            OutcomeUnknownError: the POST may have been stored but no valid answer said
                so; resubmit the same message (same ``grpHdr.msgId``).
            ApiError: the service refused it (a recall it does not know, say).
            ConfigurationError: ``timeout`` is neither a positive number nor a Timeout.
        """
        _check_type(status_request, Pacs028, "request_status_update")
        sub, _ = await self._submit(
            "request_status_update", self._profile.pacs028_path, status_request, timeout
        )
        return sub

    async def get_credit_transfer_status(
        self, payments_service_id: str, *, timeout: float | Timeout | None = None
    ) -> Pacs002:
        """Read a credit transfer's pacs.002 status report once.

        Args:
            payments_service_id: the id the service gave the submission.
            timeout: this call's ``Timeout``, or a number of seconds for its ``total``.
                The client's ``timeout`` when None.

        Raises:
            ValidationError: the id is not 1-128 of ``[A-Za-z0-9_-]``; nothing was sent.
            NotFoundError: no such payment for this client.
            ApiError: any other refusal.
            ConfigurationError: ``timeout`` is neither a positive number nor a Timeout.
        """
        message, _ = await self._read_once(
            "get_credit_transfer_status",
            self._profile.pacs002_path,
            payments_service_id,
            decode_pacs002,
            timeout,
        )
        return message

    async def get_cancellation_outcome(
        self, payments_service_id: str, *, timeout: float | Timeout | None = None
    ) -> Camt029:
        """Read a cancellation's camt.029 resolution once (it may still be pending).

        Args:
            payments_service_id: the id the service gave the submission.
            timeout: this call's ``Timeout``, or a number of seconds for its ``total``.
                The client's ``timeout`` when None.

        Raises:
            ValidationError: the id is not 1-128 of ``[A-Za-z0-9_-]``; nothing was sent.
            NotFoundError: no such cancellation for this client.
            ApiError: any other refusal.
            ConfigurationError: ``timeout`` is neither a positive number nor a Timeout.
        """
        message, _ = await self._read_once(
            "get_cancellation_outcome",
            self._profile.camt029_path,
            payments_service_id,
            decode_camt029,
            timeout,
        )
        return message

    async def wait_for_cancellation_outcome(
        self,
        payments_service_id: str,
        *,
        timeout: float = POLL_TIMEOUT,
        chase_after: float | None = None,
        recall: Camt056 | str | None = None,
    ) -> CancellationOutcome:
        """Poll camt.029 until a final code (ACCC, RJTC, CNCL, RJCR, ACCR, ...) appears, or
        a notification receiver (``attach_notifications``) confirms one.

        Codes that cannot be classified (an unknown ``sts.conf``) or that contradict each
        other (``sts.conf`` ACCC with ``txCxlSts`` RJCR) are returned as soon as a second
        poll confirms them, with ``outcome`` ``Outcome.UNKNOWN`` and every raw code.

        With ``chase_after``, the wait chases an unanswered recall as SEPA does: each time
        ``chase_after`` seconds pass without a final outcome (counted from the start of
        the wait, then from the last chase), it sends one pacs.028 request for status
        update about ``recall`` (``request_status_update``, a new message each time) and
        goes on waiting: never more than one per quiet period. A chase that fails for a
        passing reason (a timeout, a 5xx, an unknown outcome) is logged and tried again
        one quiet period later (after an unknown outcome, with the same message); one the
        service refuses (a 4xx) ends the wait.

        Args:
            payments_service_id: the id returned by ``request_cancellation``.
            timeout: seconds to wait for a final outcome (not a ``Timeout``: each read
                within it follows the client's ``timeout``).
            chase_after: the quiet period in seconds after which a pacs.028 is sent;
                None (the default): never chase.
            recall: the camt.056 waited for, or its ``assgnmt.id`` (the ``message_id`` of
                its `Submission`): what the pacs.028 names. Needed with ``chase_after``.

        Returns:
            The outcome; when rejected, ``return_request_needed`` says whether the funds
            must be asked back.

        Raises:
            PollTimeoutError: no final code before ``timeout`` (carries every code seen).
            NotFoundError: the id stayed unknown past the grace period.
            ValidationError: the id is not 1-128 of ``[A-Za-z0-9_-]``, or ``recall``
                cannot be named in a pacs.028 (an ``assgnmt.id`` over 35 characters,
                say); nothing was sent.
            ApiError: the service refused a chase (a recall it does not know, say).
            ConfigurationError: ``timeout`` or ``chase_after`` is not a positive number,
                or ``chase_after`` is given without ``recall``.
        """
        chase = None
        if chase_after is not None:
            chase = (check_seconds("chase_after", chase_after), self._chaser(recall))
        resolution, summary = await self._wait_for(
            "wait_for_cancellation_outcome",
            self._profile.camt029_path,
            payments_service_id,
            decode_camt029,
            summarize_resolution,
            timeout,
            "cancellation outcome",
            chase=chase,
        )
        return CancellationOutcome.from_resolution(payments_service_id, resolution, summary)

    async def wait_for_payment_status(
        self, payments_service_id: str, *, timeout: float = POLL_TIMEOUT
    ) -> PaymentStatus:
        """Poll pacs.002 until a final status (ACCC, ACSC, RJCT, ...) appears, or a
        notification receiver (``attach_notifications``) confirms one.

        Unclassifiable or contradicting codes are returned as soon as a second poll
        confirms them, with ``outcome`` ``Outcome.UNKNOWN`` and every raw code.

        Args:
            payments_service_id: the id returned by ``submit_credit_transfer``.
            timeout: seconds to wait for a final status (not a ``Timeout``: each read
                within it follows the client's ``timeout``).

        Raises:
            PollTimeoutError: no final status before ``timeout`` (carries every code seen).
            NotFoundError: the id stayed unknown past the grace period.
            ValidationError: the id is not 1-128 of ``[A-Za-z0-9_-]``; nothing was sent.
            ConfigurationError: ``timeout`` is not a positive number.
        """
        _, status = await self._wait_for(
            "wait_for_payment_status",
            self._profile.pacs002_path,
            payments_service_id,
            decode_pacs002,
            summarize_status_report,
            timeout,
            "payment status",
        )
        return status

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        content: bytes | None = None,
        sca: bool = True,
        idempotency_id: str | None = None,
        timeout: float | Timeout | None = None,
    ) -> RawResponse:
        """Call an operation of the service the client does not wrap (a pacs.004 return...).

        The request goes through the same pipeline as the operations: the access
        token, the client-id and request-id headers, an SCA token over the exact body
        bytes, the transport, its limits and deadlines, the typed errors, hooks, logging
        and telemetry (the operation is named ``request``). The body is encoded once;
        every attempt sends those bytes.

        A request without a body (GET, DELETE) is retried as the reads are. One with a
        body is retried only when ``idempotency_id`` names the id by which the service
        recognises a resent body (a pacs.004's ``grpHdr.msgId``): the retries resend the
        same bytes, and an answer never seen raises ``OutcomeUnknownError``, as for the
        operations that send a message. Without it the request is sent once (a 401 is
        answered by one resend with a new token: the service refused it before acting);
        if it may have arrived but no answer said so, ``OutcomeUnknownError`` says that.

        ```python
        response = await client.request(
            "POST", "/payments/pacs004/v09", json=pacs004, idempotency_id=msg_id
        )
        print(response.status, response.json()["paymentsServiceId"])
        ```

        Args:
            method: GET, POST, PUT, PATCH or DELETE.
            path: the path under the base URL, ``/payments/...``: letters, digits and
                ``/ _ . ~ -``; no scheme, host, query or ``..``.
            json: the body as an object msgspec encodes (a dict, a ``msgspec.Struct``;
                ``Decimal`` as a JSON number). None: no body, unless ``content`` is given.
            content: the body as bytes, sent exactly (``Content-Type: application/json``).
            sca: sign an SCA token over the body (``sca-token``), as every POST of the
                service needs; requests without a body never carry one.
            idempotency_id: the id the service deduplicates this body by; with it, the
                request is retried and the SCA token's ``payment_id`` claim is this id.
            timeout: this call's ``Timeout``, or a number of seconds for its ``total``.

        Returns:
            The 2xx answer: status, headers, body bytes, ``json()``, elapsed time, attempts.

        Raises:
            ValidationError: a method, path or body this method refuses; nothing was sent.
            ApiError: the service answered with an error (``NotFoundError`` for an
                operation it does not have, with the codes of its error envelope).
            OutcomeUnknownError: a request with a body may have been stored, no answer
                said so.
            TransportError: no answer (a request without a body, or not sent at all).
            ConfigurationError: ``timeout`` is neither a positive number nor a Timeout.
        """
        if not isinstance(method, str) or method.upper() not in METHODS:
            raise ValidationError.single("method", f"method must be one of {sorted(METHODS)}")
        method = method.upper()
        try:
            check_request_path(path)
        except ConfigurationError as exc:
            raise ValidationError.single("path", exc.message) from None
        if path == TOKEN_PATH:
            raise ValidationError.single("path", "the token endpoint is the client's own business")
        body = _body(method, json, content)
        if idempotency_id is not None and (
            not isinstance(idempotency_id, str) or not idempotency_id
        ):
            raise ValidationError.single("idempotency_id", "must be a non-empty string")
        if idempotency_id is not None and body is None:
            raise ValidationError.single("idempotency_id", "only a request with a body takes one")
        timeouts = call_timeout(self._timeout, timeout)
        deadline = time.monotonic() + timeouts.total
        op = Operation(method, path, timeouts, body, payment_id=idempotency_id, sca=bool(sca))
        instruments = self._pipeline.instruments
        call = None
        if instruments.hears_operations:
            attributes = {} if idempotency_id is None else {"payments.message_id": idempotency_id}
            call = Call("request", "read" if body is None else "submit", **attributes)
        with instruments.operation(call):
            try:
                resp = await self._pipeline.send(
                    op, deadline, retried=body is None or idempotency_id is not None
                )
            except PaymentsError as exc:
                if body is None or not op.maybe_stored:
                    raise
                advice = (
                    "send the same body with the same idempotency id to learn it"
                    if idempotency_id is not None
                    else "it was not retried: pass idempotency_id to have it retried safely"
                )
                raise op.outcome_unknown(exc, idempotency_id or "", advice) from exc
            if call is not None:
                call.succeeded(
                    str(resp.status),
                    **{"payments.attempts": op.attempts, "payments.request_id": op.request_id},
                )
            return _raw(resp, op)

    def _chaser(self, recall: Camt056 | str | None) -> Callable[[float], Awaitable[object]]:
        """What one chase of ``recall`` sends: a new pacs.028 about it each time (the same
        one again after an unknown outcome, so the service stores it once), within the
        client's timeout and never past the wait's deadline (the seconds it is given)."""
        if isinstance(recall, Camt056):
            camt056: Camt056 | None = recall
            assignment_id: str | None = None
        elif isinstance(recall, str) and recall:
            camt056, assignment_id = None, recall
        else:
            raise ConfigurationError(
                "chase_after needs recall: the camt.056 waited for, or its assgnmt.id"
            )

        # what the chases will send, checked now: a bad id is refused before anything is sent
        validate(build_status_request(camt056, assignment_id=assignment_id))

        unknown: list[Pacs028] = []  # a chase whose outcome is unknown: resent, not replaced

        async def chase(remaining: float) -> Submission:
            if unknown:
                message = unknown.pop()
            else:
                message = build_status_request(camt056, assignment_id=assignment_id)
            total = min(self._timeout.total, max(remaining, 0.001))
            try:
                return await self.request_status_update(message, timeout=total)
            except OutcomeUnknownError:
                unknown.append(message)
                raise

        return chase

    # --- how the operations use the pipeline ---------------------------------------------
    #
    # caller -> _submit / _read_once / _wait_for (the operation's instruments; the waiters
    # read through the pipeline themselves) -> Pipeline.send / Pipeline.read.

    async def _submit(
        self,
        name: str,
        path: str,
        message: Pacs008 | Camt056 | Pacs028,
        timeout: float | Timeout | None,
        *,
        capture: bool = False,
    ) -> tuple[Submission, RawResponse | None]:
        """POST ``message`` as the operation ``name``; with ``capture``, its answer too.

        A 202 or 204 (accepted, processing not completed) without a submission result is
        followed by resubmissions of the same bytes until the service names the id (it
        answers 200 with it) or the deadline passes (``OutcomeUnknownError``).
        """
        timeouts = self._timeout if timeout is None else call_timeout(self._timeout, timeout)
        deadline = time.monotonic() + timeouts.total
        message_id = message.message_id
        instruments = self._pipeline.instruments
        call = None
        if instruments.hears_operations:
            call = Call(name, "submit", **{"payments.message_id": message_id})
        with instruments.operation(call):
            # Validated before any I/O and encoded once: these bytes are signed and sent,
            # every attempt.
            body = encode_validated(message)
            op = Operation("POST", path, timeouts, body, message_id, capture=capture)
            try:
                resp = await self._pipeline.send(op, deadline)
                if resp.status > 201:  # 202, 204: the id may not have been named yet
                    resp = await self._named(op, resp, deadline)
            except PaymentsError as exc:
                # Whatever ended the retries (a 429, a 401, a timeout...), if an earlier
                # attempt may have been stored, the honest answer is "unknown", not "failed".
                # One already unknown (an accepted POST whose id was never named) says so
                # itself, with this call's context.
                if not op.maybe_stored or isinstance(exc, OutcomeUnknownError):
                    raise
                raise op.outcome_unknown(
                    exc, message_id, "resubmit the same message to learn it"
                ) from exc
            result = submission_result(
                resp.status, resp.headers.get("Content-Type", ""), resp.body, message_id, op.context
            )
            sub = Submission(
                payments_service_id=result.payments_service_id,
                message_id=message_id,
                echoed_id=result.payment_id,
                status=result.status,
                creation_date_time=result.creation_date_time,
                created=resp.status != 200,  # 201, or 202 with its result
                attempts=op.attempts,
                request_id=op.request_id,
                http_status=resp.status,
            )
            if call is not None:
                call.succeeded(
                    "created" if sub.created else "replayed",
                    **{
                        "payments.service_id": sub.payments_service_id,
                        "payments.created": sub.created,
                        "payments.replayed": sub.replayed,
                        "payments.attempts": sub.attempts,
                        "payments.request_id": sub.request_id,
                    },
                )
            if self._notices is not None and not isinstance(message, Pacs028):
                # the receiver tracks it before we return it (a status request has no
                # outcome of its own to track)
                await self._notices.submitted(sub, path)
            return sub, _raw(resp, op) if capture else None

    async def _named(self, op: Operation, resp: Response, deadline: float) -> Response:
        """The answer naming the id of a POST the service accepted (202/204) without one.

        A 202 whose JSON body is a submission result (it names a ``paymentsServiceId``)
        is returned, for the caller to judge. After a 202 without one (no body, another
        content type, or JSON that names no id) or a 204, the same bytes are resubmitted
        under the same message id, after the retry policy's backoff (or the answer's
        ``Retry-After``, capped as a 429's is), until an answer names the id.

        Raises:
            OutcomeUnknownError: the deadline passed first; the message was accepted.
            PaymentsError: a resubmission's own error.
        """
        op.maybe_stored = True  # accepted: whatever happens next, it may be stored
        retry = self._pipeline.retry
        resubmits = 0
        while resp.status in (202, 204):
            if resp.status == 202 and _names_an_id(resp):
                return resp  # the submission result, judged by the caller
            resubmits += 1
            pause = parse_retry_after(resp.headers.get("Retry-After"))
            if pause is None:
                pause = retry.backoff(resubmits, None, self._rng)
            pause = min(pause, retry.retry_after_cap)
            if time.monotonic() + pause >= deadline:
                raise _unnamed(op, resp.status, resubmits - 1)
            _log.debug(
                "%s %s -> %d without an id; resubmitting the same message in %.2fs",
                op.method,
                op.path,
                resp.status,
                pause,
            )
            await asyncio.sleep(pause)
            try:
                resp = await self._pipeline.send(op, deadline)
            except TransportError as exc:
                if exc.request_sent:
                    raise
                raise _unnamed(op, resp.status, resubmits - 1) from exc  # no time left
        return resp

    async def _read_once(
        self,
        name: str,
        prefix: str,
        payments_service_id: str,
        decoder: Callable[[bytes], T],
        timeout: float | Timeout | None,
        *,
        capture: bool = False,
    ) -> tuple[T, RawResponse | None]:
        """GET ``prefix/{id}`` once (with retries) as the operation ``name``; both getters."""
        path = f"{prefix}/{check_payments_service_id(payments_service_id)}"
        timeouts = call_timeout(self._timeout, timeout)
        deadline = time.monotonic() + timeouts.total
        instruments = self._pipeline.instruments
        call = None
        if instruments.hears_operations:
            call = Call(name, "read", **{"payments.service_id": payments_service_id})
        with instruments.operation(call):
            op = Operation("GET", path, timeouts, capture=capture)
            message = await self._pipeline.read(op, decoder, deadline)
            answer = op.response
            return message, _raw(answer, op) if answer is not None else None

    def _wait_for(
        self,
        name: str,
        prefix: str,
        payments_service_id: str,
        decoder: Callable[[bytes], M],
        summarize: Callable[[M], S],
        timeout: float,
        what: str,
        *,
        chase: Chase | None = None,
    ) -> Coroutine[Any, Any, tuple[M, S]]:
        """Poll ``prefix/{id}`` until the summary of its message is settled; both waiters.

        Not a coroutine itself: the wait's one coroutine below the caller is ``Poll.run``
        (thousands of waiters may be alive at once).
        """
        path = f"{prefix}/{check_payments_service_id(payments_service_id)}"
        seconds = check_seconds("timeout", timeout)
        notices = self._notices
        message_type: type[Any] = Camt029 if prefix == self._profile.camt029_path else Pacs002
        instruments = self._pipeline.instruments
        return MessagePoll(
            self._pipeline,
            path,
            decoder,
            summarize,
            message_type,
            "cancellation" if message_type is Camt029 else "payment",
            self._timeout,
            Call(name, "wait", **{"payments.service_id": payments_service_id})
            if instruments.hears_operations
            else None,
            payments_service_id,
            timeout=seconds,
            policy=self._poll if notices is None else self._notified_poll,
            what=what,
            rng=self._rng,
            source=notices,
            chase=chase,
        ).run()


class WithResponse:
    """The client's operations that send or read a message, each returning
    ``Answered(result, response)``.

    Reached as ``client.with_response``; each method takes what the client's method of
    the same name takes and raises what it raises.

    ```python
    submission, response = await client.with_response.submit_credit_transfer(transfer)
    print(response.status, response.headers.get("Date"), response.attempts)
    ```
    """

    __slots__ = ("_client",)

    def __init__(self, client: PaymentsClient) -> None:
        self._client = client

    async def submit_credit_transfer(
        self, transfer: Pacs008, *, timeout: float | Timeout | None = None
    ) -> Answered[Submission]:
        """``PaymentsClient.submit_credit_transfer`` and its answer."""
        client = self._client
        _check_type(transfer, Pacs008, "submit_credit_transfer")
        return _answered(
            await client._submit(
                "submit_credit_transfer",
                client.profile.pacs008_path,
                transfer,
                timeout,
                capture=True,
            )
        )

    async def request_cancellation(
        self, cancellation: Camt056, *, timeout: float | Timeout | None = None
    ) -> Answered[Submission]:
        """``PaymentsClient.request_cancellation`` and its answer."""
        client = self._client
        _check_type(cancellation, Camt056, "request_cancellation")
        return _answered(
            await client._submit(
                "request_cancellation",
                client.profile.camt056_path,
                cancellation,
                timeout,
                capture=True,
            )
        )

    async def request_status_update(
        self, status_request: Pacs028, *, timeout: float | Timeout | None = None
    ) -> Answered[Submission]:
        """``PaymentsClient.request_status_update`` and its answer."""
        client = self._client
        _check_type(status_request, Pacs028, "request_status_update")
        return _answered(
            await client._submit(
                "request_status_update",
                client.profile.pacs028_path,
                status_request,
                timeout,
                capture=True,
            )
        )

    async def get_credit_transfer_status(
        self, payments_service_id: str, *, timeout: float | Timeout | None = None
    ) -> Answered[Pacs002]:
        """``PaymentsClient.get_credit_transfer_status`` and its answer."""
        client = self._client
        return _answered(
            await client._read_once(
                "get_credit_transfer_status",
                client.profile.pacs002_path,
                payments_service_id,
                decode_pacs002,
                timeout,
                capture=True,
            )
        )

    async def get_cancellation_outcome(
        self, payments_service_id: str, *, timeout: float | Timeout | None = None
    ) -> Answered[Camt029]:
        """``PaymentsClient.get_cancellation_outcome`` and its answer."""
        client = self._client
        return _answered(
            await client._read_once(
                "get_cancellation_outcome",
                client.profile.camt029_path,
                payments_service_id,
                decode_camt029,
                timeout,
                capture=True,
            )
        )


def _names_an_id(resp: Response) -> bool:
    """True when a 202's body is a submission result naming the service's id.

    An acknowledgement that names none (``{}``, ``{"status": ...}``, unreadable JSON) is
    a 202 without a result: its id is learnt by resubmitting, which is always safe, not
    reported as an unknown outcome while the call has time.
    """
    if not resp.body or "json" not in resp.headers.get("Content-Type", "").lower():
        return False
    try:
        decode_submission(resp.body)
    except ValidationError:
        return False
    return True


def _unnamed(op: Operation, status: int, resubmits: int) -> OutcomeUnknownError:
    """The error for a POST accepted (``status``) whose id no answer named in time."""
    return OutcomeUnknownError(
        f"the service accepted the message ({status}) but named no id before the call's "
        f"deadline, after {resubmits} resubmission(s); resubmit the same message to learn it",
        message_id=op.payment_id or "",
        status=status,
        **op.context(),
    )


def _answered(pair: tuple[T, RawResponse | None]) -> Answered[T]:
    result, response = pair
    assert response is not None  # captured: the call returned, so a 2xx was kept
    return Answered(result, response)


def _check_type(message: object, kind: type[Any], name: str) -> None:
    if not isinstance(message, kind):
        raise ValidationError.single(
            "$", f"{name} expects a {kind.__name__}, got {type(message).__name__}"
        )


def _raw(resp: Response, op: Operation) -> RawResponse:
    """The answer to a call's last attempt as the caller sees it (headers not copied)."""
    return RawResponse(
        resp.status, resp.headers, resp.body, resp.elapsed, op.attempts, op.request_id
    )


def _body(method: str, json: Any, content: bytes | None) -> bytes | None:
    """The exact bytes to send, or None."""
    if json is not None and content is not None:
        raise ValidationError.single("$", "pass json or content, not both")
    if content is not None and not isinstance(content, bytes):
        raise ValidationError.single("$", f"content must be bytes, got {type(content).__name__}")
    if json is not None:
        try:
            content = _ENCODER.encode(json)
        except (TypeError, msgspec.EncodeError) as exc:
            raise ValidationError.single("$", f"json cannot be encoded: {exc}") from None
    if content is not None and method not in _BODY_METHODS:
        raise ValidationError.single("$", f"a {method} request carries no body")
    return content
