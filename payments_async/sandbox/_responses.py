"""Error codes of the sandbox and the error envelope it answers with.

Body: ``{"errors": [{"code", "message", "level", "description"}]}`` (service-notes 4), every
entry with all four: ``description`` names what is at fault (a field's JSON path, the missing
headers), or else says what the code means.
The codes are the sandbox's own (the service's are not published) and stable: tests and
clients may match on them. ``docs/sandbox.md`` lists each with its status.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from aiohttp import web

from .._errors import Problem
from ..iso20022 import ErrorEnvelope, ErrorItem, encode

__all__ = [
    "DESCRIPTIONS",
    "ErrorCode",
    "error_item",
    "error_response",
    "json_response",
    "problems_response",
]

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


DESCRIPTIONS: Final[Mapping[str, str]] = {
    ErrorCode.INVALID_REQUEST: "The request is malformed: a form key, header or body is wrong.",
    ErrorCode.UNSUPPORTED_GRANT_TYPE: "grant_type must be the JWT bearer grant.",
    ErrorCode.INVALID_SCOPE: "scope must be makePayments.",
    ErrorCode.INVALID_CLIENT: "The client id or secret (HTTP Basic) is wrong or missing.",
    ErrorCode.INVALID_GRANT: "The authentication JWT (assertion) failed verification.",
    ErrorCode.ASSERTION_REPLAYED: "The assertion's jti was used before; sign a new one.",
    ErrorCode.TOKEN_ENDPOINT_UNAVAILABLE: "The token endpoint is unavailable; try again later.",
    ErrorCode.HEADER_MISSING: "A required header is missing.",
    ErrorCode.UNSUPPORTED_MEDIA_TYPE: "The body must be sent as application/json.",
    ErrorCode.NOT_ACCEPTABLE: "The answer is JSON: Accept must allow application/json.",
    ErrorCode.TOKEN_MISSING: "No Bearer access token in Authorization.",
    ErrorCode.TOKEN_INVALID: "The access token is unknown or revoked; request a new one.",
    ErrorCode.TOKEN_EXPIRED: "The access token has expired; request a new one.",
    ErrorCode.CLIENT_ID_MISMATCH: "X-Service-Client-Id is not the client of the access token.",
    ErrorCode.SCA_TOKEN_INVALID: "The sca-token failed verification.",
    ErrorCode.SCA_TOKEN_EXPIRED: "The sca-token has expired; sign a new one.",
    ErrorCode.SCA_BODY_HASH_MISMATCH: "The sca-token's hd is not the SHA-256 of the body sent.",
    ErrorCode.SCA_TOKEN_REPLAYED: "The sca-token's jti or nonce was used before; sign a new one.",
    ErrorCode.BODY_INVALID: "The message breaks an ISO 20022 or SEPA rule.",
    ErrorCode.BODY_TOO_LARGE: "The request body is larger than the service accepts.",
    ErrorCode.REQUEST_TIMEOUT: "The request body did not arrive in time.",
    ErrorCode.HEADER_TOO_LARGE: "A request line or header is longer than the service accepts.",
    ErrorCode.NOT_FOUND: "No such resource or operation.",
    ErrorCode.FORBIDDEN: "The client may not see or do this.",
    ErrorCode.METHOD_NOT_ALLOWED: "The operation does not take this HTTP method.",
    ErrorCode.INTERNAL_ERROR: "The service failed; try again later.",
    ErrorCode.SERVICE_UNAVAILABLE: "The service is unavailable; try again later.",
    ErrorCode.RATE_LIMITED: "Too many requests; wait as Retry-After says.",
    ErrorCode.CONFLICT: "The record is already final: a trigger cannot change it again.",
}
"""What each code means, the ``description`` of an entry that names no field."""


def error_item(code: str, message: str, description: str | None = None) -> ErrorItem:
    """One entry of the error envelope, with its four fields (service-notes 4).

    Every entry the sandbox sends is built here.

    Args:
        code: an `ErrorCode`.
        message: what went wrong with this request.
        description: what is at fault (a field's JSON path, the missing headers); by
            default what the code means.
    """
    return ErrorItem(
        code=code,
        message=message,
        level="ERROR",
        description=DESCRIPTIONS[code] if description is None else description,
    )


def error_response(
    status: int,
    code: str,
    message: str,
    *,
    description: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> web.Response:
    """One-entry error envelope. Messages never contain tokens or secrets."""
    item = error_item(code, message, description)
    return json_response(status, encode(ErrorEnvelope(errors=[item])), headers)


def problems_response(problems: Iterable[Problem], *, summary: str) -> web.Response:
    """400 ``BODY_INVALID`` with one entry per validation problem, each naming its path."""
    items = [error_item(ErrorCode.BODY_INVALID, f"{p.path}: {p.message}", p.path) for p in problems]
    if not items:
        items = [error_item(ErrorCode.BODY_INVALID, summary)]
    return json_response(400, encode(ErrorEnvelope(errors=items)))
