"""What aiohttp answers before any handler runs, made to speak the sandbox's error envelope.

aiohttp's HTTP parser refuses some requests itself (a header line over the size limit, too
many headers, a malformed request line or chunk header). It then calls
``RequestHandler.handle_error``, which bypasses the application and its middlewares, logs
a traceback and answers ``text/plain``. The sandbox installs a ``RequestHandler`` whose
``handle_error`` answers the JSON error envelope (431 for a header too large, 400 for
anything else malformed) and logs one line; an error inside a handler (a bug: 500) still
gets its traceback logged.
"""

from __future__ import annotations

import logging
from typing import Final

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage, LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from ._responses import ErrorCode, error_response

__all__ = ["SandboxRunner", "printable"]

_TOO_MANY_HEADERS: Final = "Too many headers received"  # aiohttp's BadHttpMessage text

logger = logging.getLogger("payments_async.sandbox")


def printable(text: str) -> str:
    """``text`` with every non-printable character escaped (``\\n`` -> ``\\x0a``).

    For log lines: values from the caller (paths, ids) cannot break a line or forge one.
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)


def _protocol_error(status: int, exc: BaseException | None) -> tuple[int, str, str]:
    """Status, code and message for an error aiohttp raised before any handler ran.

    The message names the kind of problem only: aiohttp's own text quotes the offending
    bytes, which may be a credential (a long ``Authorization`` header).
    """
    if isinstance(exc, LineTooLong):
        limit = exc.args[1] if len(exc.args) > 1 else "the limit"
        return 431, ErrorCode.HEADER_TOO_LARGE, f"Request line or header over {limit} bytes"
    if isinstance(exc, BadHttpMessage) and exc.message == _TOO_MANY_HEADERS:
        return 431, ErrorCode.HEADER_TOO_LARGE, "Too many header lines"
    if isinstance(exc, BadHttpMessage):
        return status, ErrorCode.INVALID_REQUEST, f"Malformed HTTP request ({type(exc).__name__})"
    return 500, ErrorCode.INTERNAL_ERROR, "Internal error"


class _JsonErrorHandler(RequestHandler):
    """aiohttp's connection handler, answering its own errors with the JSON envelope."""

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        code, error, text = _protocol_error(status, exc)
        if code == 500:
            # A bug in the sandbox, not bad input: keep the traceback.
            self.log_exception("Error handling request", exc_info=exc)
        else:
            logger.info("refused malformed request: %s %s", code, text)
        if request.writer.output_size > 0:
            raise ConnectionError("Response already started: cannot send the error")
        response = error_response(code, error, text)
        response.force_close()
        return response


class _JsonErrorServer(web.Server):
    def __call__(self) -> RequestHandler:
        return _JsonErrorHandler(self, loop=self._loop, **self._kwargs)


class SandboxRunner(web.AppRunner):
    """``web.AppRunner`` whose connections answer protocol errors with the JSON envelope.

    Takes the arguments of ``web.AppRunner`` (``max_line_size``, ``max_field_size``...).
    """

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        # Server keeps its handler factory in __call__; this subclass changes only that.
        server.__class__ = _JsonErrorServer
        return server
