"""Serving an ``aiohttp.web`` application on a socket: start, stop, protocol errors as JSON.

Shared by the sandbox and the notification receiver. aiohttp's HTTP parser refuses some
requests itself (a header line over the size limit, too many headers, a malformed request
line or chunk header) before any handler or middleware runs: it answers ``text/plain``
quoting the offending bytes (which may be an ``Authorization`` header) and logs them with
a traceback. Served with `AppServer`, such a request gets a JSON answer built by
the application (431 for a header too large, 400 for anything else malformed, naming the
kind of problem only) and one log line; an error inside the server itself (a bug: 500)
keeps its traceback in the log.

Connections are bounded (`ServerLimits`): a connection must deliver its first request's
headers within ``header_timeout`` and is closed after ``idle_timeout`` without a request
(or with one trickling in) after an answer, so slow or silent callers (slowloris) free
their slot by themselves. At most ``max_connections`` are held: a connection arriving
beyond that first takes the slot of the oldest one that has not sent a complete request
(an attacker's slow headers cannot lock a real caller out, whose headers arrive at once),
and is closed at once, before any parsing, when every held connection is busy.
Refusals and a process out of file descriptors at ``accept`` are logged once per minute,
without a traceback.

aiohttp offers no public hook for these answers and bounds (aio-libs/aiohttp#3287), so
this module is the one place that reaches into its internals; ``tests/unit/test_serving.py``
fails if they change.
"""

from __future__ import annotations

import asyncio
import logging
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage, LineTooLong
from aiohttp.web_request import BaseRequest

__all__ = ["AppServer", "ErrorAnswer", "ServerLimits", "protocol_error"]

ErrorAnswer = Callable[[int, str], web.Response]
"""Builds the JSON answer to a refused request from its status and a message."""

_TOO_MANY_HEADERS: Final = "Too many headers received"  # aiohttp's BadHttpMessage text
_AIOHTTP_LINE_LIMIT: Final = 8190  # aiohttp's own default for max_line_size/max_field_size
DEFAULT_BACKLOG: Final = 2048  # listen backlog: a burst of connections waits, not dropped
_AIOHTTP_SHUTDOWN_TIMEOUT: Final = 60.0  # aiohttp's default grace for in-flight requests
DEFAULT_MAX_CONNECTIONS: Final = 4096  # connections held at once (see ServerLimits)
DEFAULT_HEADER_TIMEOUT: Final = 10.0  # seconds for a new connection's first request headers
DEFAULT_IDLE_TIMEOUT: Final = 30.0  # seconds a kept-alive connection waits for a request
_FD_RESERVE: Final = 128  # file descriptors left for the rest of the process
_LOG_EVERY: Final = 60.0  # seconds between two log lines about refused connections
_ACCEPT_EXHAUSTED: Final = "socket.accept() out of system resource"  # asyncio's message


def _fd_limit() -> int | None:
    """The soft limit on open files, or None where it is unknown or unlimited."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on Windows
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else int(soft)


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """How many connections a server holds and how long a slow one may stay.

    Attributes:
        max_connections: connections held at once. A connection arriving beyond it takes
            the slot of the oldest connection without a complete request in progress, or is
            closed at once when every held one is busy. Never more than the process's
            open-file limit minus 128 (the rest of the process needs files and sockets).
        header_timeout: seconds a new connection has to send its first request's headers
            in full; then it is closed without an answer.
        idle_timeout: seconds a kept-alive connection may wait for its next request (a
            request trickling in counts as waiting); then it is closed.

    The time a request's body may take is the application's (``body_read_timeout`` of the
    receiver and of the sandbox).

    Raises:
        ValueError: a number that is not positive and finite.
    """

    max_connections: int = DEFAULT_MAX_CONNECTIONS
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT

    def __post_init__(self) -> None:
        if isinstance(self.max_connections, bool) or not isinstance(self.max_connections, int):
            raise ValueError("max_connections must be an integer")
        if self.max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        for name in ("header_timeout", "idle_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not 0 < value <= sys.float_info.max:
                raise ValueError(f"{name} must be a positive, finite number of seconds")

    def effective_max_connections(self) -> int:
        """``max_connections``, lowered to fit the process's open-file limit."""
        limit = _fd_limit()
        if limit is None:
            return self.max_connections
        return max(1, min(self.max_connections, limit - _FD_RESERVE))


def protocol_error(status: int, exc: BaseException | None) -> tuple[int, str]:
    """Status and message for an error aiohttp raised before any handler ran.

    The message names the kind of problem only: aiohttp's own text quotes the offending
    bytes, which may be a credential (a long ``Authorization`` header).

    Args:
        status: the status aiohttp chose.
        exc: what its parser raised (None or anything else: a bug, 500).

    Returns:
        ``(431, ...)`` for a header line too long or too many of them, ``(status, ...)``
        for another malformed request, ``(500, "Internal error")`` otherwise.
    """
    if isinstance(exc, LineTooLong):
        limit = exc.args[1] if len(exc.args) > 1 else "the limit"
        return 431, f"Request line or header over {limit} bytes"
    if isinstance(exc, BadHttpMessage) and exc.message == _TOO_MANY_HEADERS:
        return 431, "Too many header lines"
    if isinstance(exc, BadHttpMessage):
        return status, f"Malformed HTTP request ({type(exc).__name__})"
    return 500, "Internal error"


class _Refusals:
    """Counts refused and evicted connections; one log line per minute at most."""

    def __init__(self, log: logging.Logger) -> None:
        self._log = log
        self._logged_at = -math.inf
        self.refused = 0
        self.evicted = 0
        self._unlogged = 0

    def note(self, *, evicted: bool, limit: int) -> None:
        if evicted:
            self.evicted += 1
        else:
            self.refused += 1
        self._unlogged += 1
        now = time.monotonic()
        if now - self._logged_at >= _LOG_EVERY:
            self._log.warning(
                "connection limit (%d) reached: %d connections refused or evicted "
                "(slow or silent callers; logged at most once a minute)",
                limit,
                self._unlogged,
            )
            self._logged_at = now
            self._unlogged = 0


class _AcceptExhausted(logging.Filter):
    """Keeps asyncio's "out of file descriptors at accept" to one line a minute, no traceback."""

    def __init__(self) -> None:
        super().__init__()
        self._logged_at = -math.inf

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.getMessage().startswith(_ACCEPT_EXHAUSTED):
            return True
        now = time.monotonic()
        if now - self._logged_at < _LOG_EVERY:
            return False
        self._logged_at = now
        record.exc_info = None
        record.exc_text = None
        record.msg = (
            "cannot accept connections: the process is out of file descriptors "
            "(retrying every second; logged at most once a minute)"
        )
        record.args = ()
        return True


class _JsonErrorHandler(web.RequestHandler):
    """aiohttp's connection handler, answering its own errors through an ``ErrorAnswer``,
    and closing a connection whose first request's headers do not arrive in time."""

    answer: ErrorAnswer
    log: logging.Logger
    header_timeout: float
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._header_timer = self._loop.call_later(self.header_timeout, self._headers_late)

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._header_timer is not None and self._request_count:
            self._header_timer.cancel()  # a whole request line and headers arrived
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if not self._request_count:
            self.force_close()

    @property
    def waiting(self) -> bool:
        """True while no complete request is queued or being handled on this connection."""
        return not self._messages and self._current_request is None

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        code, text = protocol_error(status, exc)
        if code == 500:
            # A bug, not bad input: keep the traceback.
            self.log_exception("Error handling request", exc_info=exc)
        else:
            self.log.info("refused malformed request: %s %s", code, text)
        if request.writer.output_size > 0:
            raise ConnectionError("Response already started: cannot send the error")
        response = self.answer(code, text)
        response.force_close()
        return response


class _Refused(asyncio.Protocol):
    """The protocol of a connection over the limit: closed at once, nothing read."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.abort()  # type: ignore[attr-defined]  # a Transport; RST, no lingering


class _JsonErrorServer(web.Server):
    answer: ErrorAnswer
    log: logging.Logger
    limits: ServerLimits
    max_connections: int
    refusals: _Refusals

    def __call__(self) -> web.RequestHandler:
        held = self._connections
        if len(held) >= self.max_connections and not self._evict():
            self.refusals.note(evicted=False, limit=self.max_connections)
            return _Refused()  # type: ignore[return-value]  # asyncio takes any Protocol
        handler = _JsonErrorHandler(self, loop=self._loop, **self._kwargs)
        handler.answer = self.answer
        handler.log = self.log
        handler.header_timeout = self.limits.header_timeout
        return handler

    def _evict(self) -> bool:
        """Close the oldest connection waiting for a request; False when all are busy."""
        for handler in self._connections:  # in the order they connected
            if isinstance(handler, _JsonErrorHandler) and handler.waiting:
                handler.force_close()
                # connection_lost comes later; its slot is free now.
                self._connections.pop(handler, None)
                self.refusals.note(evicted=True, limit=self.max_connections)
                return True
        return False


class _Runner(web.AppRunner):
    def __init__(
        self,
        app: web.Application,
        answer: ErrorAnswer,
        log: logging.Logger,
        limits: ServerLimits,
        **kwargs: object,
    ) -> None:
        super().__init__(app, keepalive_timeout=limits.idle_timeout, **kwargs)  # type: ignore[arg-type]
        self._answer = answer
        self._log = log
        self._limits = limits
        self.refusals = _Refusals(log)

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        if type(server) is not web.Server:  # pragma: no cover - guards an aiohttp upgrade
            raise RuntimeError(f"aiohttp built a {type(server).__name__}, not a web.Server")
        # web.Server builds each connection's handler in __call__; the subclass changes
        # only that, so the server aiohttp configured is kept as it is.
        server.__class__ = _JsonErrorServer
        assert isinstance(server, _JsonErrorServer)
        server.answer = self._answer
        server.log = self._log
        server.limits = self._limits
        server.max_connections = self._limits.effective_max_connections()
        server.refusals = self.refusals
        return server


class AppServer:
    """One ``aiohttp.web.Application`` on a TCP socket; start and stop it.

    No access log, no signal handling, and a refused request body is not drained (the
    connection closes at once after the answer).

    Args:
        app: the application.
        host: address to bind.
        port: port to bind; 0 picks a free one.
        answer: builds the JSON answer to a request aiohttp's parser refused.
        log: the logger of the one line such a refusal logs.
        backlog: listen backlog of the socket.
        shutdown_timeout: seconds in-flight requests get when the server stops.
        max_line_size: longest request line accepted, in bytes (431 beyond; 400 for the
            request line).
        max_field_size: longest header line accepted, in bytes (431 beyond).
        limits: connections held at once and how long a slow one may stay.
    """

    def __init__(
        self,
        app: web.Application,
        *,
        host: str,
        port: int,
        answer: ErrorAnswer,
        log: logging.Logger,
        backlog: int = DEFAULT_BACKLOG,
        shutdown_timeout: float = _AIOHTTP_SHUTDOWN_TIMEOUT,
        max_line_size: int = _AIOHTTP_LINE_LIMIT,
        max_field_size: int = _AIOHTTP_LINE_LIMIT,
        limits: ServerLimits | None = None,
    ) -> None:
        self.app = app
        self.host = host
        self._requested_port = port
        self._answer = answer
        self._log = log
        self._backlog = backlog
        self._shutdown_timeout = shutdown_timeout
        self._max_line_size = max_line_size
        self._max_field_size = max_field_size
        self.limits = limits if limits is not None else ServerLimits()
        self._runner: _Runner | None = None
        self._accept_filter: _AcceptExhausted | None = None
        self._port: int | None = None

    @property
    def port(self) -> int:
        """The bound port.

        Raises:
            RuntimeError: the server is not started.
        """
        if self._port is None:
            raise RuntimeError("the server is not started")
        return self._port

    @property
    def started(self) -> bool:
        """True between a successful `start` and `stop`."""
        return self._runner is not None

    @property
    def open_connections(self) -> int:
        """Connections the server holds now (0 when it is not started)."""
        runner = self._runner
        if runner is None or runner.server is None:
            return 0
        return len(runner.server.connections)

    @property
    def refused_connections(self) -> int:
        """Connections closed at once because every held one was busy (since start)."""
        return 0 if self._runner is None else self._runner.refusals.refused

    @property
    def evicted_connections(self) -> int:
        """Connections without a complete request closed to make room (since start)."""
        return 0 if self._runner is None else self._runner.refusals.evicted

    @property
    def url(self) -> str:
        """``http://<host>:<port>`` (an IPv6 host in brackets).

        Raises:
            RuntimeError: the server is not started.
        """
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        """Start the application (its startup signals) and bind; cleaned up if binding fails."""
        runner = _Runner(
            self.app,
            self._answer,
            self._log,
            self.limits,
            access_log=None,
            handle_signals=False,
            shutdown_timeout=self._shutdown_timeout,
            max_line_size=self._max_line_size,
            max_field_size=self._max_field_size,
            lingering_time=0,
        )
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self._requested_port, backlog=self._backlog)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self._port = int(runner.addresses[0][1])
        self._accept_filter = _AcceptExhausted()
        logging.getLogger("asyncio").addFilter(self._accept_filter)

    async def stop(self) -> None:
        """Stop serving and clean the application up (its cleanup signals); idempotent."""
        runner, self._runner = self._runner, None
        accept_filter, self._accept_filter = self._accept_filter, None
        if accept_filter is not None:
            logging.getLogger("asyncio").removeFilter(accept_filter)
        if runner is not None:
            await runner.cleanup()
