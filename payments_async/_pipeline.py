"""The request pipeline: token, headers, rate slot, SCA signature, transport and retries.

``PaymentsClient`` composes one ``Pipeline`` and asks it for two things: send an operation
(``send``) and read a message (``read``). The pipeline owns the transport, the token
session, the retry policy, the rate limiter, the clock and the instruments; the poller
reads through it too. Nothing here knows the four operations' names or results.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import logging
import random
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Literal, TypeVar

from multidict import CIMultiDict

from ._clock import ClockSkew
from ._constants import JSON_CONTENT_TYPE, REQUEST_ID_HEADER, SCA_HEADER, TOKEN_PATH, USER_AGENT
from ._credentials import Credentials, RequestSigner
from ._errors import (
    InvalidResponseError,
    PaymentsError,
    ServerError,
    SigningError,
    TransportError,
    ValidationError,
)
from ._instrument import Exchange, Instruments, RequestEvent
from ._jwt import SignedToken
from ._operation import Operation
from ._rate import RateLimiter, scoped_limiter, take_slot
from ._retry import RetryPolicy
from ._tokens import AccessToken, TokenSession
from ._transport import Response, Transport, error_from_response

__all__ = ["Pipeline"]

_log = logging.getLogger("payments_async")
T = TypeVar("T")


class Pipeline:
    """Sends one operation's attempts: what every call of a client goes through.

    Args:
        transport: the one place that talks HTTP.
        tokens: the access-token session (cache, refresh, single flight).
        credentials: who signs the SCA tokens until a rotation.
        client_id_header: the header that names the client id.
        retry: when and how long to retry.
        rate: the client's rate limiter, or None.
        clock: the service's clock as learned from its answers.
        instruments: logging, hooks and telemetry: told about every exchange and retry.
        rng: the random source of retry jitter.
    """

    __slots__ = (
        "_base_headers",
        "_post_headers",
        "_rng",
        "_signer",
        "clock",
        "instruments",
        "rate",
        "retry",
        "tokens",
        "transport",
    )

    def __init__(
        self,
        transport: Transport,
        tokens: TokenSession,
        credentials: Credentials,
        *,
        client_id_header: str,
        retry: RetryPolicy,
        rate: RateLimiter | None,
        clock: ClockSkew,
        instruments: Instruments,
        rng: random.Random,
    ) -> None:
        self.transport = transport
        self.tokens = tokens
        self.retry = retry
        self.rate = rate
        self.clock = clock
        self.instruments = instruments
        self._rng = rng
        self._signer: RequestSigner = credentials.signer()
        # Each request's headers start as a copy of one of these (aiohttp's CIMultiDict).
        self._base_headers: CIMultiDict[str] = CIMultiDict(
            {
                client_id_header: credentials.client_id,
                "Accept": JSON_CONTENT_TYPE,
                "User-Agent": USER_AGENT,
            }
        )
        self._post_headers = CIMultiDict(self._base_headers)
        self._post_headers["Content-Type"] = JSON_CONTENT_TYPE

    def use(self, credentials: Credentials) -> None:
        """Sign later SCA tokens with ``credentials`` (after the token session rotated)."""
        self._signer = credentials.signer()

    async def aclose(self) -> None:
        """Stop the token refresher and close the transport."""
        try:
            await self.tokens.aclose()
        finally:
            await self.transport.aclose()

    def send(
        self, op: Operation, deadline: float, *, retried: bool = True
    ) -> Coroutine[Any, Any, Response]:
        """The 2xx answer to ``op``, retried under the policy when ``retried``, to await.

        Not a coroutine itself: it returns the retry loop's (or the one attempt's), so a
        read in flight holds one frame less (thousands of waiters may be reading at once).

        Args:
            op: the call's state across its attempts (request id, body, counters).
            deadline: ``time.monotonic()`` past which no attempt starts.
            retried: False sends once (a body the service could not deduplicate).

        Raises:
            PaymentsError: the typed error of the last attempt.
        """
        if not retried:
            return self._attempt(op, deadline)
        return self.retry.run(
            functools.partial(self._attempt, op, deadline),
            rng=self._rng,
            on_retry=functools.partial(self._retried, op),
            deadline=deadline,
        )

    async def read(self, op: Operation, decoder: Callable[[bytes], T], deadline: float) -> T:
        """GET ``op.path`` with retries until ``deadline`` and decode its JSON body.

        Raises:
            InvalidResponseError: the answer is not JSON or not the expected message.
            PaymentsError: the typed error of the last attempt.
        """
        resp = await self.send(op, deadline)
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

    def _retried(self, op: Operation, attempt: int, exc: BaseException, sleep: float) -> None:
        err = exc if isinstance(exc, PaymentsError) else None
        kind: Literal["request", "token"] = (
            "token" if err is not None and err.path == TOKEN_PATH else "request"
        )
        self.instruments.retry(
            RequestEvent(
                op.method,
                op.path,
                op.request_id,
                attempt,
                err.status if err else None,
                op.elapsed,
                err,
                kind=kind,
                sleep=sleep,
            )
        )

    async def _attempt(self, op: Operation, deadline: float) -> Response:
        """One attempt; a 401 invalidates that exact token and resends once with a new one."""
        op.attempts += 1
        # Each step gets what is left of the deadline, counted again after every wait (a
        # token, a signature, a rate slot, a 401), so it holds even if the service stalls;
        # once it has passed, nothing more is sent.
        # The cached token without a coroutine; a fetch's failures: this call was not sent.
        token = self.tokens.current or await self.access_token(op, deadline - time.monotonic())
        headers = (self._post_headers if op.body is not None else self._base_headers).copy()
        headers[REQUEST_ID_HEADER] = op.request_id
        for resend in (False, True):
            if (limiter := scoped_limiter() or self.rate) is not None:  # before signing
                await take_slot(limiter, deadline, op.context(), 0.0)
            headers["Authorization"] = "Bearer " + token.value
            signed_with = self.clock.offset
            if op.body is not None and op.sca:
                # SCA tokens are single use (unique jti and nonce): every send carries a
                # fresh one over the same bytes, from the signer that obtained this access
                # token, so after a key rotation kid and iss match the token's assertion.
                signer = token.signer or self._signer
                sca = await _signed_within(
                    signer.sign_sca_token(op.body, payment_id=op.payment_id, now=self.clock.now()),
                    deadline - time.monotonic(),
                )
                headers[SCA_HEADER] = sca.value
            # Every send of this call after the first is a resend, whatever its cause.
            exchange = Exchange(
                op.method, op.path, op.request_id, op.attempts, resend_count=op.sends
            )
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                raise TransportError(
                    "the call's deadline passed before the request was sent",
                    request_sent=False,
                    retryable=False,
                    queued=True,
                    **op.context(),
                )
            op.sends += 1
            try:
                resp = await self.transport.request(
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
            self.clock.observe(resp.headers.get("Date"), elapsed=resp.elapsed)
            if op.body is not None and self.clock.explains(signed_with):
                # The SCA token was judged on a clock ours was off from; the access token
                # is not in question. One resend, signed on the service's time.
                _log.info(
                    "%s %s -> 401 while our clock was %.0fs off the service's; resending "
                    "once with an SCA token signed on its time",
                    op.method,
                    op.path,
                    self.clock.offset - signed_with,
                )
                continue
            # The token may have been revoked or expired early: one refresh, one resend.
            self.tokens.invalidate(token)
            _log.debug("%s %s -> 401; refreshing the token once", op.method, op.path)
            token = await self.access_token(op, deadline - time.monotonic())
        if 200 <= resp.status < 300:
            if op.capture:
                op.response = resp
            return resp
        err = error_from_response(
            resp, method=op.method, path=op.path, request_id=op.request_id, attempt=op.attempts
        )
        if isinstance(err, ServerError):
            op.maybe_stored = True  # a 5xx can follow a commit
        raise err

    async def access_token(self, op: Operation, timeout: float) -> AccessToken:
        """The cached token at no cost, or a fetch bounded by ``timeout`` seconds.

        Raises:
            TransportError: no token before ``timeout`` (nothing was sent; no fetch is
                started when ``timeout`` has already run out).
            PaymentsError: the token endpoint's own error.
        """
        token = self.tokens.current
        if token is not None:
            return token
        if timeout <= 0:
            raise TransportError(
                "the call's deadline passed before an access token was fetched",
                request_sent=False,
                retryable=False,
                queued=True,
                **op.context(),
            )
        started = time.monotonic()
        try:
            async with asyncio.timeout(timeout):
                return await self.tokens.get()
        except TimeoutError as exc:
            # The shared fetch goes on for other callers; this operation's time is up. Say
            # what the token endpoint did, in a copy: other tasks may raise the shared error.
            op.elapsed = time.monotonic() - started
            last = self.tokens.last_error
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
    """A signer's token, or SigningError once the operation's time is up."""
    try:
        async with asyncio.timeout(timeout):
            return await pending
    except TimeoutError:
        raise SigningError("the signer gave no signature before the operation's deadline") from None
