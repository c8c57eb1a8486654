"""The receiver as an ``aiohttp.web`` application (mount it as a sub-app) or a small server."""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Final, Self

from aiohttp import http_exceptions, web
from aiohttp.http_exceptions import BadHttpMessage, LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from .._constants import JSON_CONTENT_TYPE, NOTIFY_BODY_READ_TIMEOUT, NOTIFY_PATH
from .._errors import ConfigurationError
from ._core import NotificationRejected
from ._dispatch import NotificationReceiver

__all__ = ["RECEIVER_KEY", "ReceiverServer", "create_app"]

RECEIVER_KEY: Final = web.AppKey("payments_async.notifications.receiver", NotificationReceiver)
_BODY_READ_TIMEOUT_KEY: Final = web.AppKey("payments_async.notifications.body_read_timeout", float)
_CHUNK: Final = 64 * 1024
# What aiohttp raises (as the cause of RequestPayloadError) for a compressed body that
# inflates past its limit: aiohttp >= 3.13.3 only; with an older one there is no such limit
# (an empty tuple matches nothing).
_DECOMPRESS_SIZE_ERROR: Final[type[Exception] | tuple[()]] = getattr(
    http_exceptions, "DecompressSizeError", ()
)

logger = logging.getLogger("payments_async.notifications")


def _answer(status: int, body: bytes) -> web.Response:
    return web.Response(status=status, body=body, content_type=JSON_CONTENT_TYPE)


async def _receive(request: web.Request) -> web.Response:
    receiver = request.app[RECEIVER_KEY]
    # Credentials first, from the headers alone: a caller without them gets 401 before a
    # byte of its body is read.
    try:
        await receiver.check_credentials(request.headers)
    except NotificationRejected as exc:
        return web.Response(
            status=401,
            body=b'{"error":"' + exc.message.encode() + b'"}',
            content_type=JSON_CONTENT_TYPE,
            headers={"WWW-Authenticate": 'Basic realm="notifications", Bearer'},
        )
    limit = receiver.max_body_bytes
    too_large = b'{"error":"body too large"}'
    if request.content_length is not None and request.content_length > limit:
        receiver.stats.received += 1
        receiver.stats.rejected[413] += 1
        return _answer(413, too_large)
    body = bytearray()
    timeout = request.app[_BODY_READ_TIMEOUT_KEY]
    try:
        async with asyncio.timeout(timeout):
            async for chunk in request.content.iter_chunked(_CHUNK):
                body += chunk
                if len(body) > limit:
                    receiver.stats.received += 1
                    receiver.stats.rejected[413] += 1
                    return _answer(413, too_large)
    except ConnectionError:
        # The caller left mid-body: nobody reads an answer, and it is no bug to log with a
        # traceback (aiohttp's "Error handling request" when this escapes).
        logger.debug("caller disconnected before its body arrived")
        response = _answer(400, b'{"error":"body incomplete"}')
        response.force_close()
        return response
    except TimeoutError:
        # A body announced and not sent would hold the connection (and this task) forever.
        receiver.stats.received += 1
        receiver.stats.rejected[408] += 1
        response = _answer(408, b'{"error":"body not received within %g s"}' % timeout)
        response.force_close()
        return response
    except web.RequestPayloadError as exc:
        # A Content-Encoding aiohttp could not inflate; its error (the cause) names the kind.
        status = 413 if isinstance(exc.__cause__, _DECOMPRESS_SIZE_ERROR) else 400
        receiver.stats.received += 1
        receiver.stats.rejected[status] += 1
        response = _answer(status, too_large if status == 413 else b'{"error":"malformed body"}')
        response.force_close()  # the rest of the body cannot be read
        return response
    status, out = await receiver.handle(
        request.method, request.headers, bytes(body), authenticated=True
    )
    return _answer(status, out)


class _QuietErrorHandler(RequestHandler):
    """aiohttp's connection handler, minus the quoting of what its parser refused.

    aiohttp answers a request its parser refuses (a header line without a colon or over
    the size limit) with the offending bytes in a ``text/plain`` body and logs them with a
    traceback; that line may be the ``Authorization`` header, i.e. the credentials. Here
    such a request gets a JSON error naming the kind of problem only, and one log line.
    """

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if not isinstance(exc, BadHttpMessage):  # a bug, not bad input: aiohttp's answer
            return super().handle_error(request, status, exc, message)
        if isinstance(exc, LineTooLong) or exc.message == "Too many headers received":
            status = 431
        kind = type(exc).__name__
        logger.info("refused malformed request: %s (%s)", status, kind)
        if request.writer.output_size > 0:
            raise ConnectionError("Response already started: cannot send the error")
        response = _answer(status, b'{"error":"malformed HTTP request (' + kind.encode() + b')"}')
        response.force_close()
        return response


class _QuietErrorServer(web.Server):
    def __call__(self) -> RequestHandler:
        return _QuietErrorHandler(self, loop=self._loop, **self._kwargs)


class _Runner(web.AppRunner):
    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        # Server keeps its handler factory in __call__; this subclass changes only that.
        server.__class__ = _QuietErrorServer
        return server


def create_app(
    receiver: NotificationReceiver,
    *,
    path: str = NOTIFY_PATH,
    body_read_timeout: float = NOTIFY_BODY_READ_TIMEOUT,
) -> web.Application:
    """An ``aiohttp.web.Application`` that receives notifications at ``path``.

    Mount it with ``parent.add_subapp("/hooks", create_app(receiver))`` or serve it with
    ``ReceiverServer``. Start the receiver (``async with receiver``) before traffic arrives;
    until then notifications are answered 503 so the service redelivers them.

    Args:
        receiver: the receiver that authenticates, parses and processes notifications.
        path: the route (POST).
        body_read_timeout: seconds an authenticated request's body may take to arrive in
            full (counted once its headers are read); a slower one is answered 408 and
            its connection closed.

    Raises:
        ConfigurationError: ``body_read_timeout`` is not a positive, finite number.
    """
    if not 0 < body_read_timeout <= sys.float_info.max:  # also NaN and inf
        raise ConfigurationError("body_read_timeout must be a positive, finite number of seconds")
    app = web.Application(client_max_size=receiver.max_body_bytes + _CHUNK)
    app[RECEIVER_KEY] = receiver
    app[_BODY_READ_TIMEOUT_KEY] = float(body_read_timeout)
    app.router.add_post(path, _receive, name="notification")
    return app


class ReceiverServer:
    """The receiver's app on a loopback (or given) socket, as an async context manager.

    ``async with ReceiverServer(receiver, port=0) as server:`` serves ``server.url``.

    Args:
        receiver: the receiver (start it yourself, or use both as context managers).
        host: address to bind.
        port: port to bind; 0 picks a free one.
        path: the route.
        body_read_timeout: seconds a body may take to arrive in full; a slower one gets
            408 and its connection closed (see ``create_app``).

    Raises:
        ConfigurationError: ``body_read_timeout`` is not a positive, finite number.
    """

    def __init__(
        self,
        receiver: NotificationReceiver,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        path: str = NOTIFY_PATH,
        body_read_timeout: float = NOTIFY_BODY_READ_TIMEOUT,
    ) -> None:
        self.receiver = receiver
        self.host = host
        self.path = path
        self._port = port
        self._runner: web.AppRunner | None = None
        self.app = create_app(receiver, path=path, body_read_timeout=body_read_timeout)

    @property
    def url(self) -> str:
        """The full URL notifications are POSTed to."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self._port}{self.path}"

    async def start(self) -> None:
        """Bind and serve."""
        runner = _Runner(
            self.app,
            access_log=None,
            handle_signals=False,
            # A refused body (408, 413, 400) is not drained for aiohttp's 10 s: the
            # connection closes at once, as the sandbox's does. Only a request answered
            # before its body was read is affected (a caller refused or too slow); and
            # a body that cannot be decoded no longer logs aiohttp's "Unhandled exception"
            # when aiohttp tries to drain it.
            lingering_time=0,
        )
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self._port)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self._port = int(runner.addresses[0][1])

    async def stop(self) -> None:
        """Stop serving."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
