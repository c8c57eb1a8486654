"""The receiver as an ``aiohttp.web`` application (mount it as a sub-app) or a small server."""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Final, Self

import msgspec
from aiohttp import http_exceptions, web
from aiohttp.typedefs import Handler

from .._constants import JSON_CONTENT_TYPE, NOTIFY_PATH
from .._errors import ConfigurationError
from .._serving import AppServer, ServerLimits
from ._core import NotificationRejected
from ._defaults import NOTIFY_BODY_READ_TIMEOUT
from ._receiver import NotificationReceiver

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


def _close_if_unread(request: web.BaseRequest, response: web.StreamResponse) -> None:
    """Say ``Connection: close`` when the request's body was not read to its end.

    The rest of that body would be read as the next request, so the server closes the
    connection after this answer; the answer has to say so (RFC 9112, section 9.6), or a
    kept-alive sender sends its next request on it and gets a reset.
    """
    content = request.content
    if not content.is_eof() or content.exception() is not None:
        response.force_close()


@web.middleware
async def _close_refused(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every answer to a request whose body was left unread closes its connection: 401,
    405, 408, 413 and a body that cannot be inflated alike."""
    try:
        response = await handler(request)
    except web.HTTPException as exc:  # aiohttp's own answers (405) are responses too
        _close_if_unread(request, exc)
        raise
    _close_if_unread(request, response)
    return response


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
        return _answer(400, b'{"error":"body incomplete"}')
    except TimeoutError:
        # A body announced and not sent would hold the connection (and this task) forever.
        receiver.stats.received += 1
        receiver.stats.rejected[408] += 1
        return _answer(408, b'{"error":"body not received within %g s"}' % timeout)
    except web.RequestPayloadError as exc:
        # A Content-Encoding aiohttp could not inflate; its error (the cause) names the kind.
        status = 413 if isinstance(exc.__cause__, _DECOMPRESS_SIZE_ERROR) else 400
        receiver.stats.received += 1
        receiver.stats.rejected[status] += 1
        return _answer(status, too_large if status == 413 else b'{"error":"malformed body"}')
    status, out = await receiver.handle(
        request.method, request.headers, bytes(body), authenticated=True
    )
    return _answer(status, out)


def _protocol_answer(status: int, message: str) -> web.Response:
    """The JSON answer to a request aiohttp's parser refused (see ``_serving``)."""
    return _answer(status, msgspec.json.encode({"error": message}))


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
    app = web.Application(
        client_max_size=receiver.max_body_bytes + _CHUNK, middlewares=[_close_refused]
    )
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
        limits: connections held at once and how long a slow one may stay
            (``ServerLimits()``: 4096, 10 s for the first headers, 30 s idle).

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
        limits: ServerLimits | None = None,
    ) -> None:
        self.receiver = receiver
        self.host = host
        self.path = path
        self._port = port
        self.app = create_app(receiver, path=path, body_read_timeout=body_read_timeout)
        self._server = AppServer(
            self.app, host=host, port=port, answer=_protocol_answer, log=logger, limits=limits
        )

    @property
    def url(self) -> str:
        """The full URL notifications are POSTed to."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self._port}{self.path}"

    async def start(self) -> None:
        """Bind and serve."""
        await self._server.start()
        self._port = self._server.port

    async def stop(self) -> None:
        """Stop serving."""
        await self._server.stop()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
