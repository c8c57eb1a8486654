"""The access-token session: JWT Bearer grant, cache, single flight, background refresh."""

from __future__ import annotations

import asyncio
import base64
import contextvars
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from ._clock import ClockSkew
from ._constants import (
    FORM_CONTENT_TYPE,
    JSON_CONTENT_TYPE,
    JWT_BEARER_GRANT,
    REQUEST_ID_HEADER,
    TIMEOUT_TOKEN,
    TOKEN_PATH,
    TOKEN_REFRESH_FRACTION,
    TOKEN_REFRESH_LEEWAY,
    TOKEN_REFRESH_MIN_INTERVAL,
    TOKEN_RETRY_INITIAL,
    TOKEN_RETRY_MAX,
    TOKEN_SCOPE,
    USER_AGENT,
)
from ._credentials import Credentials, RequestSigner
from ._errors import (
    AuthenticationError,
    ConfigurationError,
    InvalidResponseError,
    PaymentsError,
    ValidationError,
)
from ._instrument import Exchange, Instruments
from ._operation import new_request_id
from ._retry import is_retryable
from ._transport import Transport, error_from_response
from .iso20022._common import decode_error_envelope, decode_token_response

__all__ = ["AccessToken", "TokenSession"]

_log = logging.getLogger("payments_async")


@dataclass(frozen=True, slots=True)
class AccessToken:
    """An access token and when it stops being usable.

    Attributes:
        value: the opaque bearer token. A secret: kept out of ``repr``.
        expires_at: the session's clock (``time.monotonic()`` unless it was given another)
            at which it expires (request start + ``expires_in``, so the time the request
            took counts against it).
        obtained_at: the session's clock when its request was sent.
        lifetime: ``expires_in`` as the service gave it, in seconds.
        scope: the scope the service granted, if it said.
        signer: the signer whose assertion obtained this token. The SCA tokens of requests
            sent with it must come from the same signer (same kid and iss: spec,
            Authentication 5), so a key rotation never pairs an old token with a new kid.
    """

    value: str = field(repr=False)
    expires_at: float
    obtained_at: float
    lifetime: float
    scope: str | None = None
    signer: RequestSigner | None = field(default=None, repr=False, compare=False)

    @property
    def authorization(self) -> str:
        """The ``Authorization`` header value: ``Bearer <token>``."""
        return f"Bearer {self.value}"

    def remaining(self, now: float | None = None) -> float:
        """Seconds until expiry (negative once expired), on the monotonic clock."""
        return self.expires_at - (time.monotonic() if now is None else now)

    def is_valid(self, now: float | None = None) -> bool:
        """Whether the token has not yet expired."""
        return self.remaining(now) > 0


@dataclass(frozen=True, slots=True)
class _Identity:
    """Who asks for tokens: the signer of the assertion and the HTTP Basic credentials."""

    signer: RequestSigner
    basic_authorization: str = field(repr=False)

    @classmethod
    def of(cls, credentials: Credentials) -> _Identity:
        basic = f"{credentials.client_id}:{credentials.client_secret}".encode()
        return cls(credentials.signer(), "Basic " + base64.b64encode(basic).decode("ascii"))


def _consume_result(task: asyncio.Task[AccessToken]) -> None:
    # Waiters may all have been cancelled; retrieve the outcome so asyncio never logs
    # "Task exception was never retrieved" for a fetch nobody awaited to the end.
    if not task.cancelled():
        task.exception()


class TokenSession:
    """Obtains, caches and refreshes the access token (OAuth 2.0 JWT Bearer grant).

    * **Single flight.** However many callers find no valid token at once, exactly one
      token request is in flight; they all await it.
    * **Background refresh.** A task started lazily on the first `get` (inside the
      running loop) refreshes the token ``min(refresh_leeway, refresh_fraction *
      expires_in)`` seconds before it expires, so callers normally never wait. If that
      refresh fails while the old token is still valid, the old one keeps being served and
      the refresh is retried with capped exponential backoff.
    * **401 from the API.** Call `invalidate` with the token that was refused, then
      `get` again, and retry the request once. ``invalidate`` only clears the token
      if it is still the current one, so many requests failing with the same token cause
      one new token, not one each.
    * **Errors.** 400/401 from the token endpoint raise `AuthenticationError` with
      the service's error codes (not retried); transport failures, 408, 429 and 5xx are
      retried with backoff until ``fetch_deadline`` and then raised (``TransportError``,
      ``ServerError``, ``RateLimitedError``); other statuses raise the matching
      `ApiError`; a 2xx whose body is not a token response raises
      `InvalidResponseError`.

    Tokens, assertions and the client secret are never logged; DEBUG records on the
    ``payments_async`` logger carry an ``event`` field (``token.requested``,
    ``token.obtained``, ``token.retry``, ``token.refresh_failed``, ``token.invalidated``)
    plus timings and lifetimes.

    Args:
        transport: the transport to send the token request through (not closed here).
        credentials: who we are; its signer makes the assertion.
        refresh_leeway: refresh this many seconds before expiry...
        refresh_fraction: ...or this share of the token's lifetime, whichever is smaller.
        retry_initial: first backoff delay (seconds) after a failed attempt.
        retry_max: cap on a backoff delay.
        fetch_deadline: seconds one fetch may take, retries included; each token request
            may take up to a third of it.
        on_refresh: called with each new token (metrics, tests); exceptions it raises are
            logged and ignored.
        clock: the service's clock, learned from the ``Date`` of token answers; the
            assertion is signed on it. A 401 that a corrected clock explains is retried
            once. A private one if None.
        instruments: told about each fetch and each token request (of kind
            ``"token"``); the transport's if None.
        monotonic: the session's clock, in seconds: tokens' ``obtained_at`` and
            ``expires_at``, the refresh times and the fetch deadline are read on it
            (pass ``now=`` to a token's ``is_valid``/``remaining`` if it is not
            ``time.monotonic``). The background refresh reads it to plan its wait each
            time a token is stored, so a clock moved forward then (by ``on_refresh``,
            which runs first) brings the refresh forward as much: a test need not wait.
    """

    def __init__(
        self,
        transport: Transport,
        credentials: Credentials,
        *,
        refresh_leeway: float = TOKEN_REFRESH_LEEWAY,
        refresh_fraction: float = TOKEN_REFRESH_FRACTION,
        retry_initial: float = TOKEN_RETRY_INITIAL,
        retry_max: float = TOKEN_RETRY_MAX,
        fetch_deadline: float = TIMEOUT_TOKEN,
        on_refresh: Callable[[AccessToken], object] | None = None,
        clock: ClockSkew | None = None,
        instruments: Instruments | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if refresh_leeway < 0 or not 0 <= refresh_fraction < 1:
            raise ConfigurationError("refresh_leeway must be >= 0 and refresh_fraction in [0, 1)")
        if retry_initial <= 0 or retry_max < retry_initial:
            raise ConfigurationError("need 0 < retry_initial <= retry_max")
        if fetch_deadline <= 0:
            raise ConfigurationError("fetch_deadline must be positive")
        self._transport = transport
        self._identity = _Identity.of(credentials)
        self._client_id = credentials.client_id
        self._rotating = asyncio.Lock()
        self._refresh_leeway = refresh_leeway
        self._refresh_fraction = refresh_fraction
        self._retry_initial = retry_initial
        self._retry_max = retry_max
        self._fetch_deadline = fetch_deadline
        self._on_refresh = on_refresh
        self._monotonic = monotonic
        self.last_error: PaymentsError | None = None
        self._clock = clock if clock is not None else ClockSkew()
        self._instruments = instruments if instruments is not None else transport.instruments
        self._token: AccessToken | None = None
        self._inflight: asyncio.Task[AccessToken] | None = None
        self._refresher: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()  # set whenever _token is replaced or cleared
        self._closed = False

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("cached" if self._token else "empty")
        return f"<TokenSession client_id={self._client_id!r} {state}>"

    @property
    def current(self) -> AccessToken | None:
        """The cached token if it is still valid, without any I/O; else None."""
        token = self._token  # token.is_valid(), inline: read before every request
        return token if token is not None and token.expires_at > self._monotonic() else None

    async def get(self) -> AccessToken:
        """Return a valid access token, fetching one only if none is cached.

        Raises:
            AuthenticationError: the token endpoint refused the credentials or assertion.
            TransportError: no answer from the token endpoint before ``fetch_deadline``.
            ServerError: the token endpoint kept failing until ``fetch_deadline``.
            InvalidResponseError: the token response did not match the spec.
            ConfigurationError: the session is closed.
        """
        if self._closed:
            raise ConfigurationError("the token session is closed")
        self._ensure_refresher()
        token = self._token
        if token is not None and token.is_valid(self._monotonic()):
            return token
        return await self._fetch_shared()

    def invalidate(self, token: AccessToken) -> bool:
        """Forget ``token`` if it is still the current one (compare-and-clear).

        Call it when the API answers 401 to a request made with ``token``; the next
        `get` fetches a new one. A token already replaced is left alone, so a burst
        of 401s for the same token yields one new token.

        Returns:
            True if the cached token was cleared.
        """
        current = self._token
        if current is None or (current is not token and current.value != token.value):
            return False
        self._token = None
        self._changed.set()
        _log.debug(
            "access token invalidated after %.1fs of %ss",
            self._monotonic() - current.obtained_at,
            current.lifetime,
            extra={"event": "token.invalidated", "lifetime": current.lifetime},
        )
        return True

    async def rotate(self, credentials: Credentials) -> AccessToken:
        """Switch to new credentials (a new key and kid, or secret) without a gap.

        A token is fetched with the new credentials first; only when the service grants
        it do they replace the old ones, together with the cached token. Requests that
        already hold the old token finish with it and the old signer; every later token
        (assertion and SCA tokens alike) uses the new one. A fetch with the old
        credentials still in flight serves only the callers already waiting for it.

        Args:
            credentials: the new credentials, for the same client id.

        Returns:
            The new access token.

        Raises:
            ConfigurationError: another client id, or the session is closed.
            AuthenticationError: the service refused the new credentials (for example the
                new public key is not registered yet); the old ones stay in use.
        """
        if self._closed:
            raise ConfigurationError("the token session is closed")
        if credentials.client_id != self._client_id:
            raise ConfigurationError(
                f"rotation keeps the client id: new credentials must be for {self._client_id!r}"
            )
        identity = _Identity.of(credentials)
        async with self._rotating:
            token = await self._fetch(identity)
            self._identity = identity
            self._inflight = None
            self._store(token)
        _log.info(
            "credentials rotated to kid %r",
            identity.signer.key_id,
            extra={"event": "token.rotated", "kid": identity.signer.key_id},
        )
        return token

    async def aclose(self) -> None:
        """Cancel and await the background refresh and any fetch in flight; drop the token.

        Idempotent. The transport is not closed (its owner closes it).
        """
        self._closed = True
        self._token = None
        tasks = [t for t in (self._refresher, self._inflight) if t is not None and not t.done()]
        self._refresher = None
        self._inflight = None
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def __aenter__(self) -> TokenSession:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # --- single flight ------------------------------------------------------------------

    async def _fetch_shared(self) -> AccessToken:
        task = self._inflight
        if task is None or task.done():
            task = asyncio.get_running_loop().create_task(
                self._fetch(self._identity), name="payments_async: token fetch"
            )
            task.add_done_callback(_consume_result)
            self._inflight = task
        try:
            # shield: one waiter being cancelled must not cancel the fetch the others await.
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if self._closed and task.cancelled() and (me is None or not me.cancelling()):
                raise ConfigurationError("the token session was closed") from None
            raise

    async def _fetch(self, identity: _Identity) -> AccessToken:
        """One fetch: attempts with backoff until success, a final error or the deadline.

        The token is cached only if ``identity`` is still the session's (no rotation
        happened meanwhile); it is returned to this fetch's callers either way.
        """
        with self._instruments.token_fetch():
            return await self._fetch_attempts(identity)

    async def _fetch_attempts(self, identity: _Identity) -> AccessToken:
        deadline = self._monotonic() + self._fetch_deadline
        attempt = 0
        clock_retried = False
        while True:
            attempt += 1
            signed_with = self._clock.offset
            try:
                token = await self._exchange_token(attempt, deadline, identity)
            except PaymentsError as exc:
                # Kept so that a caller whose own deadline ends this wait can raise what
                # the token endpoint actually did, not a bare timeout.
                self.last_error = exc
                if not clock_retried and exc.status == 401 and self._clock.explains(signed_with):
                    # The 401's Date showed our clock off by more than the threshold: the
                    # assertion was judged on the service's time. Once, at once, on it.
                    clock_retried = True
                    _log.info(
                        "token request refused (401) while our clock was %.0fs off the "
                        "service's; signing again on the service's time",
                        self._clock.offset - signed_with,
                        extra={"event": "token.clock_corrected", "offset": self._clock.offset},
                    )
                    continue
                if not is_retryable(exc):
                    raise
                delay = self._backoff(attempt)
                retry_after = getattr(exc, "retry_after", None)
                if isinstance(retry_after, float | int):
                    delay = min(max(delay, float(retry_after)), self._retry_max)
                if self._monotonic() + delay >= deadline:
                    raise
                _log.debug(
                    "token request attempt %d failed (%s); retrying in %.2fs",
                    attempt,
                    type(exc).__name__,
                    delay,
                    extra={
                        "event": "token.retry",
                        "attempt": attempt,
                        "status": exc.status,
                        "delay": delay,
                    },
                )
                await asyncio.sleep(delay)
                continue
            self.last_error = None
            if identity is self._identity:
                self._store(token)
            return token

    def _backoff(self, failures: int) -> float:
        """Capped exponential backoff with jitter (half fixed, half random)."""
        ceiling = min(self._retry_max, self._retry_initial * 2.0 ** (failures - 1))
        return ceiling * (0.5 + random.random() / 2)

    async def _exchange_token(
        self, attempt: int, deadline: float, identity: _Identity
    ) -> AccessToken:
        signed = await identity.signer.sign_assertion(now=self._clock.now())
        assertion = signed.value
        body = urlencode(
            {"grant_type": JWT_BEARER_GRANT, "assertion": assertion, "scope": TOKEN_SCOPE}
        ).encode("ascii")
        request_id = new_request_id()
        headers = {
            "Authorization": identity.basic_authorization,
            "Content-Type": FORM_CONTENT_TYPE,
            "Accept": JSON_CONTENT_TYPE,
            "User-Agent": USER_AGENT,
            REQUEST_ID_HEADER: request_id,
        }
        started = self._monotonic()
        timeout = max(0.001, min(self._fetch_deadline / 3, deadline - started))
        exchange = Exchange(
            "POST", TOKEN_PATH, request_id, attempt, resend_count=attempt - 1, kind="token"
        )
        resp = await self._transport.request(exchange, headers, body=body, timeout=timeout)
        if resp.status in (200, 401):
            self._clock.observe(resp.headers.get("Date"), elapsed=resp.elapsed)
        ctx: dict[str, Any] = {
            "method": "POST",
            "path": TOKEN_PATH,
            "status": resp.status,
            "request_id": request_id,
            "attempt": attempt,
        }
        if resp.status in (400, 401):
            envelope = decode_error_envelope(resp.body)
            raise AuthenticationError(
                "the token endpoint refused the credentials or assertion (check the client "
                "id and secret, and that key id, issuer and public key are registered)",
                errors=envelope.details() if envelope is not None else (),
                **ctx,
            )
        if not 200 <= resp.status < 300:
            raise error_from_response(
                resp, method="POST", path=TOKEN_PATH, request_id=request_id, attempt=attempt
            )
        try:
            decoded = decode_token_response(resp.body)
        except ValidationError as exc:
            raise InvalidResponseError(
                f"the token response does not match the spec: {exc}",
                **ctx,
            ) from exc
        if decoded.token_type.lower() != "bearer":
            raise InvalidResponseError(
                f"token_type {decoded.token_type[:20]!r} is not 'bearer'",
                **ctx,
            )
        return AccessToken(
            value=decoded.access_token,
            expires_at=started + decoded.expires_in,
            obtained_at=started,
            lifetime=float(decoded.expires_in),
            scope=decoded.scope,
            signer=identity.signer,
        )

    def _store(self, token: AccessToken) -> None:
        self._token = token
        self._changed.set()
        elapsed = self._monotonic() - token.obtained_at
        _log.debug(
            "access token obtained in %.3fs, expires in %ss",
            elapsed,
            token.lifetime,
            extra={"event": "token.obtained", "lifetime": token.lifetime, "elapsed": elapsed},
        )
        if self._on_refresh is not None:
            try:
                self._on_refresh(token)
            except Exception:
                _log.warning("on_refresh callback failed", exc_info=True)

    # --- background refresh -------------------------------------------------------------

    def _ensure_refresher(self) -> None:
        task = self._refresher
        if task is not None and not task.done():
            return
        if task is not None and not task.cancelled() and task.exception() is not None:
            _log.error(
                "token refresher stopped unexpectedly; restarting", exc_info=task.exception()
            )
        # A context of its own: the refresher outlives the call that started it, and must
        # not carry that call's context (its trace span) into every later refresh.
        self._refresher = asyncio.get_running_loop().create_task(
            self._refresh_loop(),
            name="payments_async: token refresh",
            context=contextvars.Context(),
        )

    def _refresh_at(self, token: AccessToken) -> float:
        lead = min(self._refresh_leeway, self._refresh_fraction * token.lifetime)
        earliest = token.obtained_at + min(TOKEN_REFRESH_MIN_INTERVAL, token.lifetime / 2)
        return max(token.expires_at - lead, earliest)

    async def _wait_for_change(self, timeout: float | None) -> bool:
        """Wait until the token changes (True) or ``timeout`` passes (False)."""
        try:
            async with asyncio.timeout(timeout):
                await self._changed.wait()
        except TimeoutError:
            return False
        return True

    async def _refresh_loop(self) -> None:
        failures = 0
        failed_for: AccessToken | None = None
        while True:
            self._changed.clear()
            token = self._token
            now = self._monotonic()
            if failures and token is not failed_for:
                failures = 0  # someone else got a new token meanwhile
            if token is None or not token.is_valid(now):
                # Nothing worth refreshing ahead of time: the next get() fetches in the
                # foreground. Sleep until a token appears.
                await self._wait_for_change(None)
                continue
            wait = self._backoff(failures) if failures else self._refresh_at(token) - now
            if wait > 0 and await self._wait_for_change(wait):
                continue
            try:
                await self._fetch_shared()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                failed_for = token
                _log.warning(
                    "background token refresh failed (%s); still serving the current token "
                    "for %.0fs more",
                    exc,
                    token.remaining(self._monotonic()),
                    extra={
                        "event": "token.refresh_failed",
                        "failures": failures,
                        "remaining": token.remaining(self._monotonic()),
                    },
                )
            else:
                failures = 0
