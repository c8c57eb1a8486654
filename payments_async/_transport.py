"""The one place that talks aiohttp: send bytes, read a bounded body, map failures to ours."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Mapping, MutableMapping
from typing import Any

import aiohttp
import msgspec
from yarl import URL

from ._config import Limits, Timeout
from ._errors import (
    ApiError,
    AuthenticationError,
    ConfigurationError,
    InvalidResponseError,
    NotFoundError,
    PaymentsError,
    PermissionDeniedError,
    RateLimitedError,
    ServerError,
    TransportError,
)
from ._instrument import Exchange, Instruments, LogInstrument
from ._proxy import Proxy
from ._retry import parse_retry_after
from ._urls import is_loopback
from .iso20022._common import decode_error_envelope

__all__ = ["Response", "Transport", "check_base_url", "error_from_response"]

_STATUS_ERRORS: dict[int, tuple[type[ApiError], str]] = {
    401: (AuthenticationError, "not authenticated"),
    403: (PermissionDeniedError, "permission denied"),
    404: (NotFoundError, "not found"),
    429: (RateLimitedError, "rate limited"),
}

_READ_CHUNK = 64 * 1024


class Response(msgspec.Struct):
    """What came back: status, headers (case-insensitive) and the whole, bounded body.

    Nothing changes it after the transport returns it.
    """

    status: int
    headers: Mapping[str, str]
    body: bytes
    elapsed: float


def check_base_url(base_url: str | URL) -> URL:
    """Return ``base_url`` as a URL, refusing anything but https (http only on loopback).

    Raises:
        ConfigurationError: the scheme is not https, or http points off the machine.
    """
    url = URL(str(base_url))
    if not url.is_absolute() or url.host is None:
        raise ConfigurationError(f"base_url must be an absolute URL, got {str(url)!r}")
    if url.scheme == "https":
        pass
    elif url.scheme == "http":
        if not is_loopback(url.host):
            raise ConfigurationError(
                f"base_url must be https; plain http is only allowed on loopback "
                f"(the local sandbox), got host {url.host!r}"
            )
    else:
        raise ConfigurationError(f"base_url must be https, got scheme {url.scheme!r}")
    if url.user or url.password or url.query_string or url.fragment:
        raise ConfigurationError("base_url must not carry credentials, a query or a fragment")
    return url.with_path(url.path.rstrip("/"))


def _context(ex: Exchange, status: int | None) -> dict[str, Any]:
    """The fields every error of one exchange carries (built only when one is raised)."""
    ctx: dict[str, Any] = {
        "method": ex.method,
        "path": ex.path,
        "request_id": ex.request_id,
        "attempt": ex.attempt,
    }
    if status is not None:
        ctx["status"] = status
    return ctx


def _too_large(
    ex: Exchange, status: int, limit: int, length: int | None = None
) -> InvalidResponseError:
    """The error for a body past ``limit`` (``length``: what the answer declared, if it did)."""
    size = "response body exceeds" if length is None else f"response body of {length} bytes exceeds"
    return InvalidResponseError(f"{size} the {limit}-byte limit", **_context(ex, status))


def _proxy_refused(proxy: Proxy, ctx: dict[str, Any]) -> TransportError:
    ctx = {**ctx, "status": 407}
    return TransportError(
        f"the proxy {proxy} refused our credentials (407 Proxy Authentication Required): "
        "check the user and password in the proxy URL",
        request_sent=False,
        retryable=False,
        **ctx,
    )


def error_from_response(
    resp: Response,
    *,
    method: str,
    path: str,
    request_id: str | None = None,
    attempt: int | None = None,
) -> ApiError:
    """The typed error for a non-success response, with the service's codes if it sent any.

    A non-JSON body (a gateway's HTML page, plain text) is described by its content type
    and size only: bodies can echo input and are never copied into messages.
    """
    status = resp.status
    cls: type[ApiError]
    if status >= 500:
        cls, text = ServerError, "server error"
    else:
        cls, text = _STATUS_ERRORS.get(status, (ApiError, "request refused"))
    envelope = decode_error_envelope(resp.body)
    if envelope is None and resp.body:
        ctype = resp.headers.get("Content-Type", "unknown content type")
        text += f" (non-JSON body: {ctype.split(';')[0]}, {len(resp.body)} bytes)"
    return cls(
        text,
        method=method,
        path=path,
        status=status,
        request_id=request_id,
        attempt=attempt,
        errors=envelope.details() if envelope is not None else (),
        retry_after=parse_retry_after(resp.headers.get("Retry-After")),
    )


class Transport:
    """An aiohttp session (owned or borrowed) behind one ``request`` coroutine.

    Args:
        base_url: the service's base address (https, or http on loopback).
        session: an existing ``aiohttp.ClientSession`` to borrow; it is not closed here.
            Its settings never change what a request means: every request passes its
            own timeouts, ``raise_for_status=False`` and (if given) ``ssl_context``. A
            session with default ``auth`` or without automatic decompression is refused.
        ssl_context: a custom ``ssl.SSLContext`` (TLS verification is on by default);
            with a borrowed session it is passed with every request.
        timeout: the connect and read timeouts of requests that name none.
        limits: the requests in flight at most (the one limiter of the request path; a
            borrowed session's connector limit applies as well, inside the deadline) and
            the largest response body.
        proxy: the forward proxy to send every request through, or None.
        instruments: told about every exchange (logging only if None).

    Raises:
        ConfigurationError: a setting is of the wrong type or out of range.
    """

    def __init__(
        self,
        base_url: str | URL,
        *,
        session: aiohttp.ClientSession | None = None,
        ssl_context: ssl.SSLContext | None = None,
        timeout: Timeout | None = None,
        limits: Limits | None = None,
        proxy: Proxy | None = None,
        instruments: Instruments | None = None,
    ) -> None:
        self.base_url = check_base_url(base_url)
        if session is not None:
            if not isinstance(session, aiohttp.ClientSession):
                raise ConfigurationError("session must be an aiohttp.ClientSession")
            if session.auth is not None:
                raise ConfigurationError(
                    "the borrowed session has default auth, which would replace the "
                    "client's Authorization header: pass a session without auth"
                )
            if not session.auto_decompress:
                raise ConfigurationError(
                    "the borrowed session has auto_decompress=False: response bodies would "
                    "arrive compressed; pass a session with the default auto_decompress"
                )
        if ssl_context is not None and not isinstance(ssl_context, ssl.SSLContext):
            raise ConfigurationError("ssl_context must be an ssl.SSLContext")
        self.proxy = proxy
        # The proxy's credentials: aiohttp sends proxy_headers only with the CONNECT of an
        # https target; a plain-http request goes to the proxy itself, so there they travel
        # as a header of the request (the proxy consumes it; RFC 9110, 11.7.2).
        self._proxy_headers: dict[str, str] | None = None
        self._proxy_request_headers: dict[str, str] | None = None
        if proxy is not None and proxy.headers is not None:
            if self.base_url.scheme == "https":
                self._proxy_headers = proxy.headers
            else:
                self._proxy_request_headers = proxy.headers
        self.instruments = instruments if instruments is not None else Instruments(LogInstrument())
        self._base = str(self.base_url)
        self._session = session
        self._owns_session = session is None
        self._ssl_context = ssl_context
        self.timeout = timeout if timeout is not None else Timeout()
        self.limits = limits if limits is not None else Limits()
        # aiohttp keeps the connect timeout; the read timeout and the attempt's deadline
        # are one asyncio.timeout per exchange (see request).
        self._aiohttp_timeout = _aiohttp_timeout(self.timeout)
        self._options: dict[str, Any] = {"allow_redirects": False}
        if session is not None:
            # An owned session has these as its defaults (its connector carries the SSL
            # context); a borrowed one's own settings must not apply.
            self._options.update(
                raise_for_status=False,
                ssl=ssl_context if ssl_context is not None else True,
                timeout=self._aiohttp_timeout,
            )
        if proxy is not None:
            self._options.update(proxy=proxy.url, proxy_headers=self._proxy_headers)
        self._closed = False
        # The one limiter of the request path (FIFO): waiting for it counts against the
        # attempt's deadline, and requests wait here rather than inside aiohttp's pool.
        self._semaphore = asyncio.Semaphore(self.limits.connections)

    def _get_session(self) -> aiohttp.ClientSession:
        # Created lazily so that it binds to the running loop, never at import or __init__.
        if self._session is None:
            if self._closed:
                raise ConfigurationError("the client is closed")
            connector = aiohttp.TCPConnector(
                limit=0,  # unlimited: the semaphore is the one limiter
                ssl=self._ssl_context if self._ssl_context is not None else True,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=self._aiohttp_timeout,
                raise_for_status=False,
                trust_env=False,
                # The service authenticates by bearer and SCA tokens, never by cookie
                # (spec); a cookie it or a proxy sets is neither stored nor sent back.
                cookie_jar=aiohttp.DummyCookieJar(),
            )
        return self._session

    async def request(
        self,
        exchange: Exchange,
        headers: MutableMapping[str, str],
        *,
        body: bytes | None = None,
        timeout: float | None = None,
        timeouts: Timeout | None = None,
    ) -> Response:
        """Send ``body`` exactly as given and return the whole response.

        Every instrument that hears exchanges is told this one begins (it may add
        trace-context headers) and ends; ``exchange`` gets the status, the time it took
        or the error.

        Args:
            exchange: method, path, request id and attempt of this exchange.
            headers: all request headers (the caller builds them).
            body: the exact bytes to send, or None.
            timeout: seconds this attempt may take in all, the wait for a free connection
                included; None: only the connect and read timeouts bound it.
            timeouts: the connect and read timeouts (the transport's if None).

        Raises:
            TransportError: no HTTP answer (``request_sent`` tells if it may have arrived).
            InvalidResponseError: the body is larger than the size limit.
        """
        hearing = self.instruments.hearing_exchanges()
        if hearing:  # usually none does: no events at all
            for instrument in hearing:
                instrument.request_started(exchange, headers)
        session = self._session or self._get_session()
        url = URL(self._base + exchange.path)
        options = self._options
        if timeouts is None:
            timeouts = self.timeout
        elif timeouts.connect != self.timeout.connect:
            options = {**options, "timeout": _aiohttp_timeout(timeouts)}
        if self._proxy_request_headers is not None:
            headers = {**headers, **self._proxy_request_headers}
        read = timeouts.read
        loop = asyncio.get_running_loop()
        start = time.monotonic()
        now = loop.time()
        deadline = None if timeout is None else now + timeout
        status: int | None = None  # errors carry it once the status line has arrived
        sent = False  # True once the semaphore is ours: the request may go out
        semaphore = self._semaphore
        try:
            if semaphore.locked():  # wait for a free connection within the deadline
                async with asyncio.timeout_at(deadline):
                    await semaphore.acquire()
                now = loop.time()
            else:
                await semaphore.acquire()  # free: returns at once
            try:
                sent = True
                # One timer bounds the exchange: the read timeout (the answer to begin,
                # then each wait for more of the body), never past the deadline.
                when = now + read
                if deadline is not None and deadline < when:
                    when = deadline
                async with asyncio.timeout_at(when) as timer:
                    async with session.request(
                        exchange.method, url, data=body, headers=headers, **options
                    ) as resp:
                        status = resp.status
                        if status == 407 and self.proxy is not None:
                            # The proxy's answer to a plain-http request, not the service's.
                            raise _proxy_refused(self.proxy, _context(exchange, status))
                        # The whole body, refused once it passes the limit (declared or
                        # counted).
                        limit = self.limits.response_bytes
                        length = resp.content_length
                        if length is not None and length > limit:
                            raise _too_large(exchange, status, limit, length)
                        content = resp.content
                        if content.is_eof():  # all of it has arrived: no read waits
                            data = await content.read(limit + 1)
                            if len(data) > limit:
                                raise _too_large(exchange, status, limit)
                        else:
                            chunks: list[bytes] = []
                            size = 0
                            while True:
                                timer.reschedule(_sooner(loop.time() + read, deadline))
                                chunk = await content.read(_READ_CHUNK)
                                if not chunk:
                                    break
                                size += len(chunk)
                                if size > limit:
                                    raise _too_large(exchange, status, limit)
                                chunks.append(chunk)
                            data = b"".join(chunks)
            finally:
                semaphore.release()
        except BaseException as exc:
            error = _failure(exc, exchange, status, sent=sent, proxy=self.proxy)
            exchange.error = error
            exchange.status = error.status if isinstance(error, PaymentsError) else None
            exchange.elapsed = time.monotonic() - start
            for instrument in hearing:
                instrument.request_ended(exchange)
            if error is exc:
                raise
            # aiohttp's proxy errors are not chained: they hold the CONNECT request's
            # headers, Proxy-Authorization included.
            raise error from (None if isinstance(exc, aiohttp.ClientHttpProxyError) else exc)
        exchange.status = status
        exchange.headers = resp.headers
        exchange.elapsed = elapsed = time.monotonic() - start
        if hearing:
            for instrument in hearing:
                instrument.request_ended(exchange)
        return Response(status, resp.headers, data, elapsed)

    async def aclose(self) -> None:
        """Close the session if we own it; a borrowed one is left open."""
        self._closed = True
        session, self._session = self._session, None
        if session is not None and self._owns_session:
            await session.close()


def _aiohttp_timeout(timeout: Timeout) -> aiohttp.ClientTimeout:
    """What aiohttp enforces: connecting. The read timeout and the deadline are one
    ``asyncio.timeout`` of the exchange."""
    return aiohttp.ClientTimeout(total=None, sock_connect=timeout.connect)


def _sooner(when: float, deadline: float | None) -> float:
    """``when``, or the deadline if that comes first."""
    return when if deadline is None or when < deadline else deadline


def _failure(
    exc: BaseException, ex: Exchange, status: int | None, *, sent: bool, proxy: Proxy | None
) -> BaseException:
    """Our error for what ended an exchange (``exc`` itself when it is not aiohttp's).

    ``sent``: the semaphore was taken, so the request may have gone out.
    """
    if isinstance(exc, aiohttp.ClientHttpProxyError):
        # The proxy refused the CONNECT tunnel.
        if exc.status == 407 and proxy is not None:
            return _proxy_refused(proxy, _context(ex, status))
        return TransportError(
            f"the proxy refused the tunnel: {exc.status} {exc.message[:60]}",
            request_sent=False,
            **_context(ex, status),
        )
    if isinstance(exc, aiohttp.ClientProxyConnectionError):
        return TransportError(
            f"cannot connect to the proxy {proxy}: {type(exc.os_error).__name__}",
            request_sent=False,
            **_context(ex, status),
        )
    if isinstance(exc, aiohttp.ClientSSLError):
        # Certificate not trusted, wrong host name, handshake refused: no HTTP request
        # reached the service, and trying again cannot change the answer.
        return TransportError(
            f"TLS failed: {type(exc).__name__} (pass an ssl_context that trusts the "
            "service's certificate if it uses a private CA)",
            request_sent=False,
            retryable=False,
            **_context(ex, status),
        )
    if isinstance(exc, aiohttp.ClientConnectorError):
        return TransportError(
            f"cannot connect: {type(exc).__name__}", request_sent=False, **_context(ex, status)
        )
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return TransportError("connect timeout", request_sent=False, **_context(ex, status))
    if isinstance(exc, TimeoutError):  # the deadline (asyncio.timeout) or a read (aiohttp)
        if not sent:
            return TransportError(
                "timed out waiting for a free connection",
                request_sent=False,
                queued=True,
                **_context(ex, status),
            )
        return TransportError("timed out waiting for the response", **_context(ex, status))
    if isinstance(exc, aiohttp.ClientPayloadError):
        return TransportError("response body truncated", **_context(ex, status))
    if isinstance(exc, aiohttp.ClientError):
        return TransportError(f"connection failed: {type(exc).__name__}", **_context(ex, status))
    return exc
