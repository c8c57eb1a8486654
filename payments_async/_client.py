"""PaymentsClient: the four operations of the service through one request pipeline."""

from __future__ import annotations

import asyncio
import copy
import functools
import logging
import random
import ssl
import time
from collections.abc import Awaitable, Callable, Coroutine
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

import aiohttp
import tenacity  # for the before_sleep hook's RetryCallState
from multidict import CIMultiDict

from ._checks import check_payments_service_id
from ._clock import ClockSkew
from ._config import Limits, Timeout, call_timeout, check_seconds
from ._constants import (
    CLOCK_SKEW_THRESHOLD,
    JSON_CONTENT_TYPE,
    NOTIFIED_POLL_INITIAL,
    NOTIFIED_POLL_MAX,
    POLL_TIMEOUT,
    REQUEST_ID_HEADER,
    SCA_HEADER,
    TOKEN_PATH,
    USER_AGENT,
)
from ._credentials import Credentials
from ._errors import (
    ConfigurationError,
    InvalidResponseError,
    PaymentsError,
    ServerError,
    SigningError,
    TransportError,
    ValidationError,
)
from ._instrument import Call, Exchange, Hooks, Instruments, RequestEvent
from ._jwt import SignedToken
from ._models import CancellationOutcome, Submission, submission_result
from ._operation import Operation as _Operation
from ._polling import MessagePoll, NotificationSource, PollPolicy, Summary
from ._profile import ServiceProfile
from ._proxy import resolve_proxy
from ._rate import RateLimit, RateLimiter, rate_limiter, scoped_limiter, take_slot
from ._request import request as _request
from ._response import CAPTURE, RawResponse, WithResponse
from ._retry import RetryPolicy
from ._telemetry import Telemetry
from ._tokens import AccessToken, TokenSession
from ._transport import Response, Transport, check_base_url, error_from_response
from .iso20022 import (
    Camt029,
    Camt056,
    Pacs002,
    Pacs008,
    PaymentStatus,
    decode_camt029,
    decode_pacs002,
    encode_validated,
    summarize_resolution,
    summarize_status_report,
)

__all__ = ["PaymentsClient"]

_log = logging.getLogger("payments_async")
T = TypeVar("T")
M = TypeVar("M")
S = TypeVar("S", bound=Summary)


_MIN_ATTEMPT_TIMEOUT = 0.05  # seconds: an attempt started at the deadline still gets a try


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
        self._signer = credentials.signer()
        self._profile = profile = profile or ServiceProfile()
        url = check_base_url(base_url)
        try:
            self._clock = ClockSkew(clock_skew_threshold)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        self._timeout = timeout or Timeout()
        # Every event goes to each of these: logging, the user's hooks, OpenTelemetry.
        self._instruments = Instruments.of(
            hooks, telemetry.bind(url, profile) if telemetry is not None else None
        )
        self._transport = Transport(
            url,
            session=session,
            ssl_context=ssl_context,
            timeout=self._timeout,
            limits=limits,
            proxy=resolve_proxy(proxy, trust_env=trust_env, base_url=url),
            instruments=self._instruments,
        )
        self._retry = retry or RetryPolicy()
        self._rate = rate_limiter(rate_limit)
        self._poll = poll or PollPolicy()
        self._notices: NotificationSource | None = None
        self._notified_poll = PollPolicy(initial=NOTIFIED_POLL_INITIAL, maximum=NOTIFIED_POLL_MAX)
        self._rng = random.Random()
        self._tokens = TokenSession(
            self._transport,
            credentials,
            fetch_deadline=self._timeout.token,
            on_refresh=lambda token: self._instruments.token_obtained(token.remaining()),
            clock=self._clock,
            instruments=self._instruments,
        )
        # Each request's headers start as a copy of one of these (aiohttp's CIMultiDict).
        self._base_headers: CIMultiDict[str] = CIMultiDict(
            {
                profile.client_id_header: credentials.client_id,
                "Accept": JSON_CONTENT_TYPE,
                "User-Agent": USER_AGENT,
            }
        )
        self._post_headers = CIMultiDict(self._base_headers)
        self._post_headers["Content-Type"] = JSON_CONTENT_TYPE

    request = _request

    @property
    def profile(self) -> ServiceProfile:
        """The service edition's paths and client-id header this client uses."""
        return self._profile

    @property
    def with_response(self) -> WithResponse:
        """The four operations, each returning ``(result, response)``: the answer's status,
        headers, elapsed time and attempts beside the usual result (see `RawResponse`)."""
        return WithResponse(self)

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
        token = await self._tokens.get()
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
        if not isinstance(transfer, Pacs008):
            raise ValidationError.single(
                "$", f"submit_credit_transfer expects a Pacs008, got {type(transfer).__name__}"
            )
        return await self._submit(
            "submit_credit_transfer", self._profile.pacs008_path, transfer, timeout
        )

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
        if not isinstance(cancellation, Camt056):
            raise ValidationError.single(
                "$", f"request_cancellation expects a Camt056, got {type(cancellation).__name__}"
            )
        return await self._submit(
            "request_cancellation", self._profile.camt056_path, cancellation, timeout
        )

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
        return await self._read_once(
            "get_credit_transfer_status",
            self._profile.pacs002_path,
            payments_service_id,
            decode_pacs002,
            timeout,
        )

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
        return await self._read_once(
            "get_cancellation_outcome",
            self._profile.camt029_path,
            payments_service_id,
            decode_camt029,
            timeout,
        )

    async def wait_for_cancellation_outcome(
        self, payments_service_id: str, *, timeout: float = POLL_TIMEOUT
    ) -> CancellationOutcome:
        """Poll camt.029 until a final code (ACCC, RJTC, CNCL, RJCR, ACCR, ...) appears, or
        a notification receiver (``attach_notifications``) confirms one.

        Codes that cannot be classified (an unknown ``sts.conf``) or that contradict each
        other (``sts.conf`` ACCC with ``txCxlSts`` RJCR) are returned as soon as a second
        poll confirms them, with ``outcome`` ``Outcome.UNKNOWN`` and every raw code.

        Args:
            payments_service_id: the id returned by ``request_cancellation``.
            timeout: seconds to wait for a final outcome (not a ``Timeout``: each read
                within it follows the client's ``timeout``).

        Returns:
            The outcome; when rejected, ``return_request_needed`` says whether the funds
            must be asked back.

        Raises:
            PollTimeoutError: no final code before ``timeout`` (carries every code seen).
            NotFoundError: the id stayed unknown past the grace period.
            ValidationError: the id is not 1-128 of ``[A-Za-z0-9_-]``; nothing was sent.
            ConfigurationError: ``timeout`` is not a positive number.
        """
        resolution, summary = await self._wait_for(
            "wait_for_cancellation_outcome",
            self._profile.camt029_path,
            payments_service_id,
            decode_camt029,
            summarize_resolution,
            timeout,
            "cancellation outcome",
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

    # --- the pipeline --------------------------------------------------------------------
    #
    # caller -> _submit / _read_once / _wait_for (the operation's instruments; _read_once
    # and the waiters -> _read_message) -> _attempt (token, one resend after a 401) ->
    # Transport.request; after a failed attempt 1, _retries runs the next attempts under
    # the retry policy. Attempt 1 runs outside the retry machinery: a call that succeeds
    # at once passes through none of it.

    async def _submit(
        self,
        name: str,
        path: str,
        message: Pacs008 | Camt056,
        timeout: float | Timeout | None,
    ) -> Submission:
        """POST ``message`` as the operation ``name``."""
        timeouts = self._timeout if timeout is None else call_timeout(self._timeout, timeout)
        deadline = time.monotonic() + timeouts.total
        message_id = message.message_id
        call = None
        if self._instruments.hears_operations:
            call = Call(name, "submit", **{"payments.message_id": message_id})
        with self._instruments.operation(call):
            # Encoded once: these bytes are signed and sent, every attempt. They are
            # validated before any I/O unless these exact bytes passed validation before.
            body, digest = encode_validated(message)
            op = _Operation("POST", path, timeouts, body, message_id, digest)
            try:
                try:
                    resp = await self._attempt(op, deadline)
                except Exception as exc:
                    resp = await self._retries(op, deadline, exc)
            except PaymentsError as exc:
                # Whatever ended the retries (a 429, a 401, a timeout...), if an earlier
                # attempt may have been stored, the honest answer is "unknown", not "failed".
                if not op.maybe_stored:
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
                created=resp.status == 201,
                attempts=op.attempts,
                request_id=op.request_id,
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
            if self._notices is not None:  # the receiver tracks it before we return it
                await self._notices.submitted(sub, path)
            return sub

    async def _read_once(
        self,
        name: str,
        prefix: str,
        payments_service_id: str,
        decoder: Callable[[bytes], T],
        timeout: float | Timeout | None,
    ) -> T:
        """GET ``prefix/{id}`` once (with retries) as the operation ``name``; both getters."""
        path = f"{prefix}/{check_payments_service_id(payments_service_id)}"
        timeouts = call_timeout(self._timeout, timeout)
        deadline = time.monotonic() + timeouts.total
        call = None
        if self._instruments.hears_operations:
            call = Call(name, "read", **{"payments.service_id": payments_service_id})
        with self._instruments.operation(call):
            return await self._read_message(path, decoder, deadline, timeouts)

    def _wait_for(
        self,
        name: str,
        prefix: str,
        payments_service_id: str,
        decoder: Callable[[bytes], M],
        summarize: Callable[[M], S],
        timeout: float,
        what: str,
    ) -> Coroutine[Any, Any, tuple[M, S]]:
        """Poll ``prefix/{id}`` until the summary of its message is settled; both waiters.

        Not a coroutine itself: the wait's only frame below the caller is ``Poll.run``, as
        thousands of waiters may be alive at once (``benchmarks/bench_polling.py``).
        """
        path = f"{prefix}/{check_payments_service_id(payments_service_id)}"
        seconds = check_seconds("timeout", timeout)
        notices = self._notices
        message_type: type[Any] = Camt029 if prefix == self._profile.camt029_path else Pacs002
        return MessagePoll(
            self,
            path,
            decoder,
            summarize,
            message_type,
            "cancellation" if message_type is Camt029 else "payment",
            self._timeout,
            self._instruments,
            Call(name, "wait", **{"payments.service_id": payments_service_id})
            if self._instruments.hears_operations
            else None,
            payments_service_id,
            timeout=seconds,
            policy=self._poll if notices is None else self._notified_poll,
            what=what,
            rng=self._rng,
            source=notices,
        ).run()

    async def _read_message(
        self, path: str, decoder: Callable[[bytes], T], deadline: float, timeouts: Timeout
    ) -> T:
        """GET ``path`` with retries until ``deadline`` (``time.monotonic()``), decode the body."""
        op = _Operation("GET", path, timeouts)
        try:
            resp = await self._attempt(op, deadline)
        except Exception as exc:
            resp = await self._retries(op, deadline, exc)
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

    async def _retries(self, op: _Operation, deadline: float, failure: Exception) -> Response:
        """After attempt 1 failed with ``failure``: attempts under the retry policy until
        a 2xx, a final error or the deadline."""
        return await self._retry.retry_after(
            failure,
            functools.partial(self._attempt, op, deadline),
            rng=self._rng,
            before_sleep=functools.partial(self._before_retry, op),
            deadline=deadline,
        )

    def _before_retry(self, op: _Operation, state: tenacity.RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        err = exc if isinstance(exc, PaymentsError) else None
        kind: Literal["request", "token"] = (
            "token" if err is not None and err.path == TOKEN_PATH else "request"
        )
        self._instruments.retry(
            RequestEvent(
                op.method,
                op.path,
                op.request_id,
                state.attempt_number,
                err.status if err else None,
                op.elapsed,
                err,
                kind=kind,
                sleep=state.upcoming_sleep,
            )
        )

    async def _attempt(self, op: _Operation, deadline: float) -> Response:
        """One attempt; a 401 invalidates that exact token and resends once with a new one."""
        op.attempts += 1
        # Each step gets what is left of the deadline, counted again after every wait (a
        # token, a signature, a rate slot, a 401), so it holds even if the service stalls.
        timeout = max(deadline - time.monotonic(), _MIN_ATTEMPT_TIMEOUT)
        # The cached token without a coroutine; a fetch's failures: this call was not sent.
        token = self._tokens.current
        if token is None:
            token = await self._access_token(op, timeout)
            timeout = max(deadline - time.monotonic(), _MIN_ATTEMPT_TIMEOUT)
        headers = (self._post_headers if op.body is not None else self._base_headers).copy()
        headers[REQUEST_ID_HEADER] = op.request_id
        for resend in (False, True):
            if (limiter := scoped_limiter() or self._rate) is not None:  # before signing
                timeout = await take_slot(limiter, deadline, op.context(), _MIN_ATTEMPT_TIMEOUT)
            headers["Authorization"] = "Bearer " + token.value
            signed_with = self._clock.offset
            if op.body is not None and op.sca:
                # SCA tokens are single use (unique jti and nonce): every send carries a
                # fresh one over the same bytes, from the signer that obtained this access
                # token, so after a key rotation kid and iss match the token's assertion.
                signer = token.signer or self._signer
                sca = signer.sign_sca_token(
                    op.body, payment_id=op.payment_id, now=self._clock.now(), digest=op.digest
                )
                if not isinstance(sca, SignedToken):  # an async signer (thread pool, HSM)
                    sca = await _signed_within(sca, timeout)
                    timeout = max(deadline - time.monotonic(), _MIN_ATTEMPT_TIMEOUT)
                headers[SCA_HEADER] = sca.value
            # Every send of this call after the first is a resend, whatever its cause.
            exchange = Exchange(
                op.method, op.path, op.request_id, op.attempts, resend_count=op.sends
            )
            op.sends += 1
            try:
                resp = await self._transport.request(
                    exchange, headers, body=op.body, timeout=timeout, timeouts=op.timeouts
                )
            except PaymentsError as exc:
                if isinstance(exc, TransportError):
                    op.maybe_stored = op.maybe_stored or exc.request_sent
                elif isinstance(exc, InvalidResponseError):
                    op.maybe_stored = True  # a garbled answer can follow a commit
                op.elapsed = exchange.elapsed
                raise
            op.elapsed = resp.elapsed
            if limiter is not None:
                limiter.observe(resp.status, resp.headers)
            if resp.status != 401 or resend:
                break
            self._clock.observe(resp.headers.get("Date"), elapsed=resp.elapsed)
            if op.body is not None and self._clock.explains(signed_with):
                # The SCA token was judged on a clock ours was off from; the access token
                # is not in question. One resend, signed on the service's time.
                _log.info(
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
            _log.debug("%s %s -> 401; refreshing the token once", op.method, op.path)
            timeout = max(deadline - time.monotonic(), _MIN_ATTEMPT_TIMEOUT)
            token = await self._access_token(op, timeout)
            timeout = max(deadline - time.monotonic(), _MIN_ATTEMPT_TIMEOUT)
        if 200 <= resp.status < 300:
            if (answers := CAPTURE.get()) is not None:  # a with_response call
                answers.append(RawResponse.of(resp, op.attempts, op.request_id))
            if op.attempts == 1 and (budget := self._retry.budget) is not None:
                budget.record_success()  # a success at once refills the shared budget
            return resp
        err = error_from_response(
            resp, method=op.method, path=op.path, request_id=op.request_id, attempt=op.attempts
        )
        if isinstance(err, ServerError):
            op.maybe_stored = True  # a 5xx can follow a commit
        raise err

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
            # The shared fetch goes on for other callers; this operation's time is up. Say
            # what the token endpoint did, in a copy: other tasks may raise the shared error.
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
