"""Protocol hygiene: what every request's body and log line go through before a route runs."""

from __future__ import annotations

import asyncio
from typing import Final

from aiohttp import http_exceptions, web
from aiohttp.http_exceptions import HttpProcessingError

from ._request_keys import STATUS
from ._responses import ErrorCode, error_response
from ._state import SandboxState

__all__ = [
    "BODY_METHODS",
    "printable",
    "protocol_answer",
    "receive_body",
]

_DISCONNECTED: Final = "disconnected"
BODY_METHODS: Final = frozenset({"POST", "PUT", "PATCH"})
# What aiohttp raises (as the cause of RequestPayloadError) for a compressed body that
# inflates past its limit: aiohttp >= 3.13.3 only; with an older one there is no such limit
# (an empty tuple matches nothing).
_DECOMPRESS_SIZE_ERROR: Final[type[Exception] | tuple[()]] = getattr(
    http_exceptions, "DecompressSizeError", ()
)


async def receive_body(request: web.Request, state: SandboxState) -> web.Response | None:
    """Read the whole body into the request (later reads are free); None when it arrived.

    Otherwise the answer: 413 over ``max_body_size`` (or a compressed body inflating past
    aiohttp's limit), 408 (connection closed) slower than ``body_read_timeout``, 400 for a
    broken chunked or compressed body; a client that went away gets one log line and a
    response nobody reads.
    """
    config = state.config
    length = request.content_length
    if length is not None and length > config.max_body_size:
        return _closing(_too_large(config.max_body_size))
    try:
        async with asyncio.timeout(config.body_read_timeout):
            await request.read()
    except TimeoutError:
        return _closing(
            error_response(
                408,
                ErrorCode.REQUEST_TIMEOUT,
                f"Request body not received within {config.body_read_timeout:g} s",
            )
        )
    except web.HTTPRequestEntityTooLarge:
        return _closing(_too_large(config.max_body_size))
    except ConnectionError:
        # No traceback and no line of its own: the access log line says "disconnected".
        request[STATUS] = _DISCONNECTED
        return _closing(error_response(400, ErrorCode.INVALID_REQUEST, "Body incomplete"))
    except HttpProcessingError as exc:
        return _closing(_malformed_body(exc))
    except web.RequestPayloadError as exc:
        # A body aiohttp could not inflate (Content-Encoding): its error is the cause.
        cause = exc.__cause__
        if isinstance(cause, _DECOMPRESS_SIZE_ERROR):
            return _closing(_too_large(config.max_body_size))
        return _closing(_malformed_body(cause or exc))
    return None


def _malformed_body(exc: BaseException) -> web.Response:
    # The kind only: aiohttp's text may quote the received bytes.
    return error_response(400, ErrorCode.INVALID_REQUEST, f"Malformed body ({type(exc).__name__})")


def _too_large(limit: int) -> web.Response:
    return error_response(413, ErrorCode.BODY_TOO_LARGE, f"Request body larger than {limit} bytes")


def _closing(response: web.Response) -> web.Response:
    """The response, with the connection closed after it (the body may be unread)."""
    response.force_close()
    return response


def printable(text: str) -> str:
    """``text`` with every non-printable character escaped (``\\n`` -> ``\\x0a``).

    For log lines: values from the caller (paths, ids) cannot break a line or forge one.
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)


def protocol_answer(status: int, message: str) -> web.Response:
    """The error envelope for a request aiohttp's parser refused (see ``_serving``)."""
    if status == 431:
        code = ErrorCode.HEADER_TOO_LARGE
    elif status == 500:
        code = ErrorCode.INTERNAL_ERROR
    else:
        code = ErrorCode.INVALID_REQUEST
    return error_response(status, code, message)
