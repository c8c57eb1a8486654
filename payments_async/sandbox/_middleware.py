"""The one middleware every request passes: stats, body reception, injected faults, access log."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final

from aiohttp import web

from ._hygiene import BODY_METHODS, printable, receive_body
from ._request_keys import CLIENT_ID, STATUS
from ._responses import ErrorCode, error_response
from ._state import SandboxState, state_of

__all__ = ["middleware"]

logger = logging.getLogger("payments_async.sandbox")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_API_ROUTES: Final = frozenset({"pacs008", "pacs002", "camt056", "camt029", "pacs028"})
_GATEWAY_HTML: Final = (
    b"<html><head><title>502 Bad Gateway</title></head>"
    b"<body><h1>502 Bad Gateway</h1><p>sandbox: injected fault</p></body></html>"
)

_DROPPED: Final = "dropped"
# Faults that change only the answer to a POST the handler stored now (201).
_ACCEPTED: Final = frozenset({"accepted_202", "accepted_202_empty", "no_content_204"})

_HTTP_CODES: Final = {
    404: ErrorCode.NOT_FOUND,
    405: ErrorCode.METHOD_NOT_ALLOWED,
    413: ErrorCode.BODY_TOO_LARGE,
}


def _drop(request: web.Request) -> web.Response:
    """Close the connection without answering; the response returned is never sent."""
    transport = request.transport
    if transport is not None:
        transport.close()
    request[STATUS] = _DROPPED
    return web.Response(status=500)


def _fault_response(kind: str, state: SandboxState) -> web.Response:
    if kind == "error_500":
        return error_response(500, ErrorCode.INTERNAL_ERROR, "Injected fault: internal error")
    if kind == "error_502":
        return web.Response(status=502, body=_GATEWAY_HTML, content_type="text/html")
    if kind == "error_503":
        return error_response(
            503, ErrorCode.SERVICE_UNAVAILABLE, "Injected fault: service unavailable"
        )
    retry_after = str(state.faults.config.retry_after)
    return error_response(
        429,
        ErrorCode.RATE_LIMITED,
        "Injected fault: too many requests",
        headers={"Retry-After": retry_after},
    )


@web.middleware
async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    start = time.perf_counter()
    state = state_of(request)
    route = request.match_info.route.name or "other"
    state.stats.requests[route] += 1
    status: int | str = 500
    try:
        refused = None
        if request.method in BODY_METHODS and request.body_exists:
            refused = await receive_body(request, state)
        response = refused or await _dispatch(request, handler, state, route)
        status = request.get(STATUS) or response.status
        return response
    except web.HTTPException as exc:
        # aiohttp's own answers (unknown route, wrong method...): the same envelope. A
        # 405 names the methods the route has (RFC 9110, 15.5.6: Allow is required).
        status = exc.status
        allow = exc.headers.get("Allow")
        return error_response(
            exc.status,
            _HTTP_CODES.get(exc.status, ErrorCode.INVALID_REQUEST),
            exc.reason,
            headers=None if allow is None else {"Allow": allow},
        )
    finally:
        state.stats.responses[str(status)] += 1
        if logger.isEnabledFor(logging.INFO):
            ms = (time.perf_counter() - start) * 1000
            client = request.get(CLIENT_ID)
            # Paths and client ids come from the caller: escaped, so a %0a in an id
            # cannot start a forged log line.
            path = printable(request.path)
            client = None if client is None else printable(client)
            logger.info(
                "%s %s %s client=%s %.1fms",
                request.method,
                path,
                status,
                client,
                ms,
                extra={
                    "http_method": request.method,
                    "http_path": path,
                    "http_status": status,
                    "client_id": client,
                    "duration_ms": round(ms, 3),
                },
            )


async def _dispatch(
    request: web.Request, handler: Handler, state: SandboxState, route: str
) -> web.StreamResponse:
    if route not in _API_ROUTES and route != "token":
        return await handler(request)
    if not state.faults.applies(route == "token"):
        return await handler(request)
    decision = state.faults.draw()
    if decision.delay:
        state.stats.faults["latency"] += 1
        # Receive the whole request first: a client that gives up during the delay still
        # has its request handled (and stored), the "outcome unknown" case.
        await request.read()
        await asyncio.sleep(decision.delay)
    kind = decision.kind
    if kind is None:
        return await handler(request)
    if kind in _ACCEPTED:
        return await _accepted(request, handler, state, kind)
    state.stats.faults[kind] += 1
    if kind == "drop_before":
        return _drop(request)
    if kind == "commit_then_drop":
        await handler(request)
        return _drop(request)
    return _fault_response(kind, state)


async def _accepted(
    request: web.Request, handler: Handler, state: SandboxState, kind: str
) -> web.StreamResponse:
    """The handler's answer; a 201 to a POST becomes 202 (with or without its body) or 204.

    A replay (200), a refusal and a GET are answered as the handler answered them: the
    service names the id of a message it has stored when it is resubmitted (200).
    """
    response = await handler(request)
    if request.method != "POST" or response.status != 201:
        return response
    state.stats.faults[kind] += 1
    if kind == "accepted_202":
        response.set_status(202)
        return response
    return web.Response(status=202 if kind == "accepted_202_empty" else 204)
