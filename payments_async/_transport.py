"""The one place that talks aiohttp: send bytes, read a bounded body, map failures to ours."""

from __future__ import annotations

import asyncio
import collections
import heapq
import ipaddress
import math
import os
import re
import ssl
import threading
import time
from collections.abc import Coroutine, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

import aiohttp
import msgspec
from yarl import URL

from ._constants import (
    CAMT056_PATH,
    CONNECT_TIMEOUT,
    CONNECTION_LIMIT,
    MAX_RESPONSE_BYTES,
    PACS008_PATH,
    READ_TIMEOUT,
    TOKEN_PATH,
    URL_CACHE_SIZE,
)
from ._errors import (
    ApiError,
    AuthenticationError,
    ConfigurationError,
    InvalidResponseError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitedError,
    ServerError,
    TransportError,
)
from ._proxy import Proxy
from ._retry import parse_retry_after
from .iso20022._common import decode_error_envelope

if TYPE_CHECKING:
    from ._telemetry import ClientTelemetry

__all__ = ["Response", "Transport", "check_base_url", "error_from_response"]

_STATUS_ERRORS: dict[int, tuple[type[ApiError], str]] = {
    401: (AuthenticationError, "not authenticated"),
    403: (PermissionDeniedError, "permission denied"),
    404: (NotFoundError, "not found"),
    429: (RateLimitedError, "rate limited"),
}

_READ_CHUNK = 64 * 1024

# A path of these characters needs no percent-encoding and has no dot segments: its URL is
# built from the base URL's parts without yarl parsing and encoding the whole string again.
_PLAIN_PATH = re.compile(r"/[A-Za-z0-9/_-]*")
# The paths of every POST and token request: their URLs are built once per transport.
_FIXED_PATHS = (PACS008_PATH, CAMT056_PATH, TOKEN_PATH)


class _Slots:
    """At most ``limit`` holders at a time; the others wait in arrival order (FIFO).

    A semaphore whose free path is two attribute checks and no coroutine: it is taken and
    given back once per request.
    """

    __slots__ = ("_free", "_waiters")

    def __init__(self, limit: int) -> None:
        self._free = limit
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def try_take(self) -> bool:
        """Take a free slot at once if there is one and nobody is waiting for it."""
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return True
        return False

    async def take(self) -> None:
        """Wait for a slot; the caller bounds the wait (a timeout cancels it)."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.give()  # a slot was handed over as the wait ended: pass it on
            elif waiter in self._waiters:  # give() may have dropped it, cancelled, already
                self._waiters.remove(waiter)
            raise

    def give(self) -> None:
        """Give a slot back: to the first waiter still waiting, else to the free pool."""
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1


_forks = 0  # forks of this process so far, as seen by the child (see _Timers)


def _forked() -> None:
    global _forks
    _forks += 1


os.register_at_fork(after_in_child=_forked)


class _Timers:
    """The request timers of one transport on one loop, kept by one loop timer.

    ``loop.call_at`` per request costs a Python ``TimerHandle`` and a heap of them ordered
    by a Python ``__lt__``, and aiohttp's and asyncio's own bookkeeping around each; with
    thousands of requests a second that was the largest single cost of our request path
    over a hand-written client's (measured with ``benchmarks/bench_instructions.py``). Here
    each request's expiry is a tuple in a heap compared in C, and the loop holds one timer,
    armed for the earliest of them: the same firing times, a fraction of the cost.

    Entries are dropped lazily: a finished request only marks its entry dead, the heap is
    rebuilt from the live entries once it holds more than twice as many plus 64 (amortised
    O(1) per request), and the loop timer is cancelled as soon as no request is waiting.
    """

    __slots__ = ("_armed", "_handle", "_heap", "_seq", "forks", "live", "loop", "thread")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        # Whose they are: asyncio.current_task(loop) is only this request's task in the
        # loop's own thread and process (see Transport._exchange).
        self.thread = threading.get_ident()
        self.forks = _forks
        self._heap: list[tuple[float, int, _Deadline]] = []
        self._seq = 0  # entry ids: an entry is live while its deadline holds its id
        self.live = 0  # requests whose timer is set (their _Deadline counts them)
        self._handle: asyncio.TimerHandle | None = None
        self._armed = math.inf  # when the loop timer fires (inf: not armed)

    def add(self, when: float, deadline: _Deadline) -> int:
        """Register ``deadline`` to expire at ``when`` (loop time); returns the entry's id."""
        seq = self._seq = self._seq + 1
        heap = self._heap
        if len(heap) > 2 * self.live + 64:
            heap[:] = [e for e in heap if e[2]._seq == e[1]]
            heapq.heapify(heap)
        heapq.heappush(heap, (when, seq, deadline))
        if when < self._armed:
            self._arm(when)
        return seq

    def _arm(self, when: float) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._handle = self.loop.call_at(when, self._fire)
        self._armed = when

    def _fire(self) -> None:
        """Expire every live entry due by now, then arm for the next one."""
        self._handle = None
        due = max(self._armed, self.loop.time())
        self._armed = math.inf
        heap = self._heap
        while heap:
            when, seq, deadline = heap[0]
            if deadline._seq != seq:
                heapq.heappop(heap)  # finished or moved on: dead
            elif when <= due:
                heapq.heappop(heap)
                deadline._expire()
            else:
                self._arm(when)
                break

    def idle(self) -> None:
        """No request waits (``live`` fell to 0): no timer of ours is left on the loop."""
        self._heap.clear()
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._armed = math.inf


class _Deadline:
    """One request's timer: ``asyncio.timeout`` semantics at a fraction of its cost.

    Set when made, for the request's ``task``: it fires ``read_timeout`` from now or
    ``timeout`` from now (the attempt's deadline; None: none), whichever comes first;
    ``next_read`` sets it that way again before each read of a body still arriving. When
    it fires, the task is cancelled; :meth:`stop` turns that ``CancelledError`` into
    ``TimeoutError``, while a cancellation from outside stays a cancellation (the same
    ``cancelling()`` / ``uncancel()`` bookkeeping as asyncio's). ``asyncio.timeout``
    spends ~2 µs per request on its state machine and async context protocol, and a loop
    timer per request more (see :class:`_Timers`); this is an entry in the transport's
    timers, made here and left in :meth:`stop`. Also a context manager (``with``).
    """

    __slots__ = ("_cancelling", "_end", "_expired", "_read", "_seq", "_task", "_timers")

    def __init__(
        self,
        timers: _Timers,
        task: asyncio.Task[Any] | None,
        read_timeout: float,
        timeout: float | None,
    ) -> None:
        if task is None:
            raise RuntimeError("a request must run inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        self._expired = False
        self._timers = timers
        self._read = read_timeout
        now = timers.loop.time()
        when = now + read_timeout
        if timeout is None:
            self._end: float | None = None
        else:
            end = self._end = now + timeout
            if end < when:
                when = end
        timers.live += 1
        self._seq = timers.add(when, self)

    def _expire(self) -> None:
        self._expired = True
        self._task.cancel()

    def next_read(self) -> None:
        """Allow one more read: ``read_timeout`` from now, never past the deadline."""
        if not self._expired:
            when = self._timers.loop.time() + self._read
            end = self._end
            self._seq = self._timers.add(when if end is None or when < end else end, self)

    def stop(self, exc: BaseException | None = None) -> None:
        """Take the timer down; ``exc``: the exception leaving the request, if any.

        Raises:
            TimeoutError: ``exc`` is the ``CancelledError`` of this timer's own expiry
                (nobody else cancelled the task meanwhile). As ``asyncio.timeout``, the
                timer's ``cancel()`` is taken back whenever it fired.
        """
        if self._seq < 0:
            return  # stopped already: the count of live requests must not drop twice
        self._seq = -1  # the entry is dead
        timers = self._timers
        timers.live -= 1
        if not timers.live:
            timers.idle()
        if (
            self._expired
            and self._task.uncancel() <= self._cancelling
            and isinstance(exc, asyncio.CancelledError)
        ):
            raise TimeoutError from exc

    def __enter__(self) -> _Deadline:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop(exc)


class Response(msgspec.Struct):
    """What came back: status, headers (case-insensitive) and the whole, bounded body.

    A Struct (built in C: one is made per request); nothing changes it after the
    transport returns it.
    """

    status: int
    headers: Mapping[str, str]
    body: bytes
    elapsed: float


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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
        if not _is_loopback(url.host):
            raise ConfigurationError(
                f"base_url must be https; plain http is only allowed on loopback "
                f"(the local sandbox), got host {url.host!r}"
            )
    else:
        raise ConfigurationError(f"base_url must be https, got scheme {url.scheme!r}")
    if url.user or url.password or url.query_string or url.fragment:
        raise ConfigurationError("base_url must not carry credentials, a query or a fragment")
    return url.with_path(url.path.rstrip("/"))


def _context(
    method: str, path: str, request_id: str | None, attempt: int | None, status: int | None
) -> dict[str, Any]:
    """The fields every error of one exchange carries (built only when one is raised)."""
    ctx: dict[str, Any] = {
        "method": method,
        "path": path,
        "request_id": request_id,
        "attempt": attempt,
    }
    if status is not None:
        ctx["status"] = status
    return ctx


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
            own timeout, ``raise_for_status=False`` and (if given) ``ssl_context``. A
            session with default ``auth`` or without automatic decompression is refused.
        ssl_context: a custom ``ssl.SSLContext`` (TLS verification is on by default);
            with a borrowed session it is passed with every request.
        connect_timeout: seconds to establish a connection.
        read_timeout: seconds to wait for the answer to begin (from the start of the
            attempt, connecting included) and for each later read of its body.
        connection_limit: at most this many requests in flight: the one limiter of the
            request path (an owned session's connector is not limited on its own; a
            borrowed session's connector limit applies as well, inside the deadline).
        max_response_bytes: bodies longer than this are refused.
        proxy: the forward proxy to send every request through, or None.
        telemetry: spans and the duration metric of every exchange, or None.

    Raises:
        ConfigurationError: a setting is of the wrong type or out of range.
    """

    def __init__(
        self,
        base_url: str | URL,
        *,
        session: aiohttp.ClientSession | None = None,
        ssl_context: ssl.SSLContext | None = None,
        connect_timeout: float = CONNECT_TIMEOUT,
        read_timeout: float = READ_TIMEOUT,
        connection_limit: int = CONNECTION_LIMIT,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        proxy: Proxy | None = None,
        telemetry: ClientTelemetry | None = None,
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
        self.telemetry = telemetry
        self._base = str(self.base_url)
        self._base_path = self.base_url.raw_path.rstrip("/")
        self._urls: dict[str, URL] = {path: self._url_of(path) for path in _FIXED_PATHS}
        self._proxy_url = proxy.url if proxy is not None else None
        self._session = session
        self._owns_session = session is None
        self._ssl_context = ssl_context
        # Per request: True (default verification) for an owned session, whose connector
        # already carries the context; the context itself for a borrowed session.
        self._request_ssl: ssl.SSLContext | bool = (
            ssl_context if ssl_context is not None and session is not None else True
        )
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        # What aiohttp enforces: connecting only. The deadline and the read timeout are kept
        # by one timer of ours per request (see _exchange), not by aiohttp's total timer
        # plus a per-read timer rescheduled on every chunk received.
        self._aiohttp_timeouts = aiohttp.ClientTimeout(
            total=None, sock_connect=connect_timeout, sock_read=None
        )
        # What each request passes to aiohttp besides method, URL, body and headers: no
        # redirects followed, our proxy; for a borrowed session also our timeouts, status
        # handling and TLS context, so that its own defaults do not apply. A session we own
        # already has those as its defaults (_get_session): each keyword aiohttp need not
        # process is work saved per request.
        options: dict[str, Any] = {"allow_redirects": False}
        if self._proxy_url is not None:
            options.update(proxy=self._proxy_url, proxy_headers=self._proxy_headers)
        if session is not None:
            options.update(
                timeout=self._aiohttp_timeouts, raise_for_status=False, ssl=self._request_ssl
            )
        self._request_options = options
        self._connection_limit = connection_limit
        self._max_response_bytes = max_response_bytes
        self._closed = False
        self._timers: _Timers | None = None  # the requests' timers, on the session's loop
        # The one limiter of the request path: at most connection_limit requests in
        # flight. The rest wait here, within their deadline, as bare coroutines rather
        # than request objects queued inside aiohttp's pool, and pool waiting never eats
        # the connect timeout.
        self._slots = _Slots(connection_limit)

    def _url(self, path: str) -> URL:
        """The absolute URL of ``path``, without re-parsing the base for plain paths.

        Kept (a bounded table): a poll reads the same path again and again, and aiohttp
        caches what it computes from a URL object (host, origin, connection key) on the
        object itself, so a URL used before costs less to send again.
        """
        urls = self._urls
        url = urls.get(path)
        if url is None:
            url = self._url_of(path)
            if len(urls) >= URL_CACHE_SIZE:
                urls.clear()
                urls.update({p: self._url_of(p) for p in _FIXED_PATHS})
            urls[path] = url
        return url

    def _url_of(self, path: str) -> URL:
        if _PLAIN_PATH.fullmatch(path):
            return self.base_url.with_path(self._base_path + path, encoded=True)
        return URL(self._base + path)

    def _get_session(self) -> aiohttp.ClientSession:
        # Created lazily so that it binds to the running loop, never at import or __init__.
        if self._session is None:
            if self._closed:
                raise ConfigurationError("the client is closed")
            connector = aiohttp.TCPConnector(
                limit=0,  # unlimited: the semaphore in request() is the one limiter
                ssl=self._ssl_context if self._ssl_context is not None else True,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=self._aiohttp_timeouts,
                raise_for_status=False,
                trust_env=False,
                # The service authenticates by bearer and SCA tokens, never by cookie
                # (spec); a cookie it or a proxy sets is neither stored nor sent back.
                cookie_jar=aiohttp.DummyCookieJar(),
            )
        return self._session

    def request(
        self,
        method: str,
        path: str,
        *,
        headers: Mapping[str, str],
        body: bytes | None = None,
        timeout: float | None = None,
        request_id: str | None = None,
        attempt: int | None = None,
    ) -> Coroutine[Any, Any, Response]:
        """Send ``body`` exactly as given and return the whole response (await the result).

        Not a coroutine function itself: it hands back the one coroutine that does the
        exchange (inside a CLIENT span when telemetry is on), so a request's awaits pass
        through no frame of ours that only forwards.

        Args:
            method: HTTP method.
            path: path below the base URL, starting with ``/``.
            headers: all request headers (the caller builds them).
            body: the exact bytes to send, or None.
            timeout: overall seconds for this attempt, or None for the read timeout only.
            request_id: for error context.
            attempt: for error context.

        Raises:
            TransportError: no HTTP answer (``request_sent`` tells if it may have arrived).
            InvalidResponseError: the body is larger than the size limit.
        """
        if self.telemetry is None:
            return self._exchange(method, path, headers, body, timeout, request_id, attempt)
        return self._traced_exchange(
            self.telemetry, method, path, headers, body, timeout, request_id, attempt
        )

    async def _traced_exchange(
        self,
        telemetry: ClientTelemetry,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: bytes | None,
        timeout: float | None,
        request_id: str | None,
        attempt: int | None,
    ) -> Response:
        """``_exchange`` inside a CLIENT span (which may add trace-context headers)."""
        sent = dict(headers)
        with telemetry.http(
            method,
            path,
            attempt=attempt or 1,
            request_id=request_id or "",
            headers=sent,
        ) as span:
            resp = await self._exchange(method, path, sent, body, timeout, request_id, attempt)
            span.response(resp.status)
            return resp

    async def _exchange(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: bytes | None,
        timeout: float | None,
        request_id: str | None,
        attempt: int | None,
    ) -> Response:
        """Take a slot (within ``timeout``), send, read the bounded body, give the slot back."""
        session = self._session or self._get_session()
        url = self._urls.get(path)
        if url is None:
            url = self._url(path)
        slots = self._slots
        start = time.monotonic()
        if slots._free > 0 and not slots._waiters:  # _Slots.try_take, without its call
            slots._free -= 1
        else:
            try:
                async with asyncio.timeout(timeout):
                    await slots.take()
            except TimeoutError as exc:
                raise TransportError(
                    "timed out waiting for a free connection",
                    request_sent=False,
                    method=method,
                    path=path,
                    request_id=request_id,
                    attempt=attempt,
                ) from exc
            if timeout is not None:
                timeout = max(timeout - (time.monotonic() - start), 0.001)
        if self._proxy_request_headers is not None:
            headers = {**headers, **self._proxy_request_headers}
        # One timer bounds the attempt: the wait for the answer to begin (the read timeout,
        # or the deadline if sooner), then each read of a body that had not fully arrived
        # with the headers (never past the deadline).
        # The request's task, found without asyncio.get_running_loop(): on Python 3.11 every
        # call of it is a getpid() system call (its fork check), two per request with
        # current_task() on top. The timers know their loop, thread and process: made in
        # this thread and process, with a task of their loop running, they are ours;
        # otherwise (the first request, a new loop, another thread, a forked child) they
        # are made again here.
        timers = self._timers
        if (
            timers is None
            or timers.thread != threading.get_ident()
            or timers.forks != _forks
            or (task := asyncio.current_task(timers.loop)) is None
        ):
            loop = asyncio.get_running_loop()
            timers = self._timers = _Timers(loop)
            task = asyncio.current_task(loop)
        status: int | None = None  # errors carry it once the status line has arrived
        try:
            timer = _Deadline(timers, task, self._read_timeout, timeout)
            try:
                # Awaited, not entered: the response is released below, as the context
                # manager would, without its two extra coroutines per request.
                resp = await session.request(
                    method, url, data=body, headers=headers, **self._request_options
                )
                try:
                    status = resp.status
                    if status == 407 and self.proxy is not None:
                        # The proxy's answer to a plain-http request, not the service's.
                        raise _proxy_refused(
                            self.proxy, _context(method, path, request_id, attempt, status)
                        )
                    limit = self._max_response_bytes
                    if resp.content.is_eof():
                        # All of it arrived with the headers: no read can wait, and the
                        # bytes are in aiohttp's buffer already; measured once read.
                        data = await resp.read()
                        length: int | None = len(data)
                    else:
                        length = resp.content_length  # declared: refused before reading
                        data = None
                    if length is not None and length > limit:
                        raise InvalidResponseError(
                            f"response body of {length} bytes exceeds the {limit}-byte limit",
                            **_context(method, path, request_id, attempt, status),
                        )
                    if data is None:
                        data = await self._read_body(
                            resp,
                            limit,
                            timer,
                            _context(method, path, request_id, attempt, status),
                        )
                finally:
                    resp.release()
            except BaseException as exc:
                timer.stop(exc)  # our own expiry leaves as TimeoutError
                raise
            timer.stop()
            return Response(status, resp.headers, data, time.monotonic() - start)
        except aiohttp.ClientHttpProxyError as exc:
            # The proxy refused the CONNECT tunnel. Not chained: aiohttp's exception holds
            # the CONNECT request's headers, Proxy-Authorization included.
            ctx = _context(method, path, request_id, attempt, status)
            if exc.status == 407 and self.proxy is not None:
                raise _proxy_refused(self.proxy, ctx) from None
            raise TransportError(
                f"the proxy refused the tunnel: {exc.status} {exc.message[:60]}",
                request_sent=False,
                **ctx,
            ) from None
        except aiohttp.ClientProxyConnectionError as exc:
            raise TransportError(
                f"cannot connect to the proxy {self.proxy}: {type(exc.os_error).__name__}",
                request_sent=False,
                **_context(method, path, request_id, attempt, status),
            ) from exc
        except aiohttp.ClientSSLError as exc:
            # Certificate not trusted, wrong host name, handshake refused: no HTTP request
            # reached the service, and trying again cannot change the answer.
            raise TransportError(
                f"TLS failed: {type(exc).__name__} (pass an ssl_context that trusts the "
                "service's certificate if it uses a private CA)",
                request_sent=False,
                retryable=False,
                **_context(method, path, request_id, attempt, status),
            ) from exc
        except aiohttp.ClientConnectorError as exc:
            raise TransportError(
                f"cannot connect: {type(exc).__name__}",
                request_sent=False,
                **_context(method, path, request_id, attempt, status),
            ) from exc
        except aiohttp.ConnectionTimeoutError as exc:
            raise TransportError(
                "connect timeout",
                request_sent=False,
                **_context(method, path, request_id, attempt, status),
            ) from exc
        except TimeoutError as exc:
            raise TransportError(
                "timed out waiting for the response",
                **_context(method, path, request_id, attempt, status),
            ) from exc
        except aiohttp.ClientPayloadError as exc:
            raise TransportError(
                "response body truncated", **_context(method, path, request_id, attempt, status)
            ) from exc
        except aiohttp.ClientError as exc:
            raise TransportError(
                f"connection failed: {type(exc).__name__}",
                **_context(method, path, request_id, attempt, status),
            ) from exc
        finally:
            if slots._waiters:
                slots.give()
            else:
                slots._free += 1  # _Slots.give with nobody waiting, without its call

    @staticmethod
    async def _read_body(
        resp: aiohttp.ClientResponse, limit: int, timer: _Deadline, ctx: dict[str, Any]
    ) -> bytes:
        """Read a body still arriving, each read within the read timeout (and the deadline),
        refusing it once it passes ``limit`` bytes."""
        chunks: list[bytes] = []
        size = 0
        while True:
            timer.next_read()
            chunk = await resp.content.read(_READ_CHUNK)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > limit:
                raise InvalidResponseError(f"response body exceeds the {limit}-byte limit", **ctx)
            chunks.append(chunk)

    async def aclose(self) -> None:
        """Close the session if we own it; a borrowed one is left open."""
        self._closed = True
        session, self._session = self._session, None
        if session is not None and self._owns_session:
            await session.close()
