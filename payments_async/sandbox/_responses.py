"""Error codes of the sandbox and the error envelope it answers with.

Body: ``{"errors": [{"code", "message", "level", "description"}]}`` (service-notes 4).
The codes are the sandbox's own (the service's are not published) and stable: tests and
clients may match on them. ``docs/sandbox.md`` lists each with its status.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from aiohttp import web

from .._errors import Problem
from ..iso20022 import ErrorEnvelope, ErrorItem, encode

__all__ = ["ErrorCode", "error_response", "json_response", "problems_response"]

JSON: Final = "application/json"


class ErrorCode:
    """Every error code the sandbox sends, with the HTTP status it comes with."""

    # token endpoint
    INVALID_REQUEST: Final = "INVALID_REQUEST"  # 400 malformed token request
    UNSUPPORTED_GRANT_TYPE: Final = "UNSUPPORTED_GRANT_TYPE"  # 400
    INVALID_SCOPE: Final = "INVALID_SCOPE"  # 400
    INVALID_CLIENT: Final = "INVALID_CLIENT"  # 401 unknown client or wrong secret
    INVALID_GRANT: Final = "INVALID_GRANT"  # 401 assertion failed verification
    ASSERTION_REPLAYED: Final = "ASSERTION_REPLAYED"  # 401 assertion jti seen before
    TOKEN_ENDPOINT_UNAVAILABLE: Final = "TOKEN_ENDPOINT_UNAVAILABLE"  # 5xx, outage switch
    # API headers and tokens
    HEADER_MISSING: Final = "HEADER_MISSING"  # 400
    UNSUPPORTED_MEDIA_TYPE: Final = "UNSUPPORTED_MEDIA_TYPE"  # 415
    NOT_ACCEPTABLE: Final = "NOT_ACCEPTABLE"  # 406
    TOKEN_MISSING: Final = "TOKEN_MISSING"  # 401 no Bearer credential
    TOKEN_INVALID: Final = "TOKEN_INVALID"  # 401 unknown or revoked access token
    TOKEN_EXPIRED: Final = "TOKEN_EXPIRED"  # 401
    CLIENT_ID_MISMATCH: Final = "CLIENT_ID_MISMATCH"  # 401 header != token's client
    SCA_TOKEN_INVALID: Final = "SCA_TOKEN_INVALID"  # 401 signature, kid, iss, claims
    SCA_TOKEN_EXPIRED: Final = "SCA_TOKEN_EXPIRED"  # 401
    SCA_BODY_HASH_MISMATCH: Final = "SCA_BODY_HASH_MISMATCH"  # 401 hd != SHA-256(body)
    SCA_TOKEN_REPLAYED: Final = "SCA_TOKEN_REPLAYED"  # 401 nonce or jti seen before
    # bodies and resources
    BODY_INVALID: Final = "BODY_INVALID"  # 400, one entry per problem
    BODY_TOO_LARGE: Final = "BODY_TOO_LARGE"  # 413 over max_body_size
    REQUEST_TIMEOUT: Final = "REQUEST_TIMEOUT"  # 408 body slower than body_read_timeout
    HEADER_TOO_LARGE: Final = "HEADER_TOO_LARGE"  # 431 a header over max_header_size
    NOT_FOUND: Final = "NOT_FOUND"  # 404
    FORBIDDEN: Final = "FORBIDDEN"  # 403 another client's message (if configured)
    METHOD_NOT_ALLOWED: Final = "METHOD_NOT_ALLOWED"  # 405
    CONFLICT: Final = "CONFLICT"  # 409 a control trigger on a record already final
    # injected faults
    INTERNAL_ERROR: Final = "INTERNAL_ERROR"  # 500
    SERVICE_UNAVAILABLE: Final = "SERVICE_UNAVAILABLE"  # 503
    RATE_LIMITED: Final = "RATE_LIMITED"  # 429


def json_response(
    status: int, body: bytes, headers: Mapping[str, str] | None = None
) -> web.Response:
    """A JSON response from already encoded bytes."""
    return web.Response(status=status, body=body, content_type=JSON, headers=headers)


def error_response(
    status: int,
    code: str,
    message: str,
    *,
    description: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> web.Response:
    """One-entry error envelope. Messages never contain tokens or secrets."""
    item = ErrorItem(code=code, message=message, level="ERROR", description=description)
    return json_response(status, encode(ErrorEnvelope(errors=[item])), headers)


def problems_response(problems: Iterable[Problem], *, summary: str) -> web.Response:
    """400 ``BODY_INVALID`` with one entry per validation problem, each naming its path."""
    items = [
        ErrorItem(
            code=ErrorCode.BODY_INVALID,
            message=f"{p.path}: {p.message}",
            level="ERROR",
            description=p.path,
        )
        for p in problems
    ]
    if not items:
        items = [ErrorItem(code=ErrorCode.BODY_INVALID, message=summary, level="ERROR")]
    return json_response(400, encode(ErrorEnvelope(errors=items)))
