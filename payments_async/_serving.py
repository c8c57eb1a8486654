"""Serving an ``aiohttp.web`` application on a socket: start, stop, protocol errors as JSON.

Shared by the sandbox and the notification receiver. aiohttp's HTTP parser refuses some
requests itself (a header line over the size limit, too many headers, a malformed request
line or chunk header) before any handler or middleware runs: it answers ``text/plain``
quoting the offending bytes (which may be an ``Authorization`` header) and logs them with
a traceback. Served with :class:`AppServer`, such a request gets a JSON answer built by
the application (431 for a header too large, 400 for anything else malformed, naming the
kind of problem only) and one log line; an error inside the server itself (a bug: 500)
keeps its traceback in the log.

aiohttp offers no public hook for these answers (aio-libs/aiohttp#3287), so this module
is the one place that reaches into its internals; ``tests/unit/test_serving.py`` fails
if they change.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage, LineTooLong
from aiohttp.web_request import BaseRequest

__all__ = ["AppServer", "ErrorAnswer", "protocol_error"]

ErrorAnswer = Callable[[int, str], web.Response]
"""Builds the JSON answer to a refused request from its status and a message."""

_TOO_MANY_HEADERS: Final = "Too many headers received"  # aiohttp's BadHttpMessage text
_AIOHTTP_LINE_LIMIT: Final = 8190  # aiohttp's own default for max_line_size/max_field_size
_AIOHTTP_BACKLOG: Final = 128  # asyncio's and aiohttp's default listen backlog
_AIOHTTP_SHUTDOWN_TIMEOUT: Final = 60.0  # aiohttp's default grace for in-flight requests


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


class _JsonErrorHandler(web.RequestHandler):
    """aiohttp's connection handler, answering its own errors through an ``ErrorAnswer``."""

    answer: ErrorAnswer
    log: logging.Logger

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


class _JsonErrorServer(web.Server):
    answer: ErrorAnswer
    log: logging.Logger

    def __call__(self) -> web.RequestHandler:
        handler = _JsonErrorHandler(self, loop=self._loop, **self._kwargs)
        handler.answer = self.answer
        handler.log = self.log
        return handler


class _Runner(web.AppRunner):
    def __init__(
        self, app: web.Application, answer: ErrorAnswer, log: logging.Logger, **kwargs: object
    ) -> None:
        super().__init__(app, **kwargs)  # type: ignore[arg-type]
        self._answer = answer
        self._log = log

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
    """

    def __init__(
        self,
        app: web.Application,
        *,
        host: str,
        port: int,
        answer: ErrorAnswer,
        log: logging.Logger,
        backlog: int = _AIOHTTP_BACKLOG,
        shutdown_timeout: float = _AIOHTTP_SHUTDOWN_TIMEOUT,
        max_line_size: int = _AIOHTTP_LINE_LIMIT,
        max_field_size: int = _AIOHTTP_LINE_LIMIT,
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
        self._runner: web.AppRunner | None = None
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
        """True between a successful :meth:`start` and :meth:`stop`."""
        return self._runner is not None

    @property
    def open_connections(self) -> int:
        """Connections the server holds now (0 when it is not started)."""
        runner = self._runner
        if runner is None or runner.server is None:
            return 0
        return len(runner.server.connections)

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

    async def stop(self) -> None:
        """Stop serving and clean the application up (its cleanup signals); idempotent."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
