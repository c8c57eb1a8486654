"""The aiohttp internals ``payments_async._serving`` relies on, checked so an upgrade fails here.

aiohttp has no public hook for the answer to a request its parser refuses
(aio-libs/aiohttp#3287). ``_serving`` is the one module that reaches in; if a test here
fails, aiohttp changed one of the internals below: adapt ``_serving`` (the sandbox's and the
receiver's 400/431 tests show the behaviour to keep).
"""

from __future__ import annotations

import asyncio
import inspect
import logging

import aiohttp.http_parser
import msgspec
import pytest
from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage, LineTooLong

from payments_async import _serving
from payments_async._serving import AppServer, protocol_error


def test_aiohttp_still_has_the_hooks_serving_overrides() -> None:
    # AppRunner builds its web.Server in _make_server (overridden to change its class).
    assert inspect.iscoroutinefunction(web.AppRunner._make_server)
    # web.Server builds each connection's handler in __call__ from _loop and _kwargs.
    assert "RequestHandler(self, loop=self._loop, **self._kwargs)" in inspect.getsource(
        web.Server.__call__
    )
    # RequestHandler answers its parser's errors through handle_error(request, status, exc,
    # message), the method _serving overrides.
    params = list(inspect.signature(web.RequestHandler.handle_error).parameters)
    assert params == ["self", "request", "status", "exc", "message"]
    assert "handle_error" in inspect.getsource(web.RequestHandler)
    # The texts and classes protocol_error tells apart.
    assert issubclass(LineTooLong, BadHttpMessage)
    assert _serving._TOO_MANY_HEADERS in inspect.getsource(aiohttp.http_parser)


def test_protocol_error_names_the_kind_only() -> None:
    secret = "Authorization: Basic c2VjcmV0"
    assert protocol_error(400, LineTooLong(secret, "8190")) == (
        431,
        "Request line or header over 8190 bytes",
    )
    assert protocol_error(400, BadHttpMessage("Too many headers received")) == (
        431,
        "Too many header lines",
    )
    assert protocol_error(400, BadHttpMessage(secret)) == (
        400,
        "Malformed HTTP request (BadHttpMessage)",
    )
    assert protocol_error(500, RuntimeError(secret)) == (500, "Internal error")


async def test_a_refused_request_gets_the_applications_json(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="test.serving")

    def answer(status: int, message: str) -> web.Response:
        return web.json_response({"status": status, "message": message}, status=status)

    server = AppServer(
        web.Application(),
        host="127.0.0.1",
        port=0,
        answer=answer,
        log=logging.getLogger("test.serving"),
        max_field_size=100,
    )
    assert not server.started
    with pytest.raises(RuntimeError):
        _ = server.port
    await server.start()
    try:
        assert server.started
        assert server.open_connections == 0
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nX-Long: " + b"s" * 200 + b"\r\n\r\n")
        reply = await asyncio.wait_for(reader.read(), timeout=5)
        writer.close()
    finally:
        await server.stop()
    await server.stop()  # idempotent
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.split(b" ")[1] == b"431"
    assert b"application/json" in head
    assert msgspec.json.decode(body) == {
        "status": 431,
        "message": "Request line or header over 100 bytes",
    }
    assert b"sss" not in reply
    assert [r.getMessage() for r in caplog.records if r.name == "test.serving"] == [
        "refused malformed request: 431 Request line or header over 100 bytes"
    ]
