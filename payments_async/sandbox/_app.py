"""The sandbox as an aiohttp.web application: token endpoint, four API routes, control routes."""

from __future__ import annotations

import asyncio
import base64
import binascii
import email.utils
import hashlib
import ipaddress
import logging
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, TypeVar
from urllib.parse import parse_qsl

import msgspec
from aiohttp import http_exceptions, web
from aiohttp.http_exceptions import HttpProcessingError

from .._constants import (
    CAMT029_PATH,
    CAMT056_PATH,
    CLIENT_ID_HEADER,
    FORM_CONTENT_TYPE,
    JSON_CONTENT_TYPE,
    JWT_BEARER_GRANT,
    JWT_LEEWAY,
    PACS002_PATH,
    PACS008_PATH,
    SANDBOX_ASSERTION,
    SANDBOX_ISSUER,
    SANDBOX_KEY_ID,
    SANDBOX_SCA_TOKEN,
    SCA_HEADER,
    TOKEN_PATH,
    TOKEN_SCOPE,
)
from .._errors import ConfigurationError, ValidationError
from .._jwt import JwtVerificationError, verify_assertion, verify_sca_token
from ..iso20022 import Camt056, Pacs008, decode_camt056, decode_pacs008, encode, validate
from ._config import SHUTDOWN_TIMEOUT, FaultConfig, SandboxConfig
from ._lifecycle import CancellationRecord, CancellationStatus, PaymentRecord, PaymentStatus
from ._messages import cancellation_outcome_body, payment_status_body, submission_body
from ._notify import NOTIFIER_KEY, Notifier, install
from ._protocol import SandboxRunner, printable
from ._responses import ErrorCode, error_response, json_response, problems_response
from ._state import SandboxState

__all__ = ["STATE_KEY", "SandboxServer", "create_app"]

logger = logging.getLogger("payments_async.sandbox")

STATE_KEY: Final = web.AppKey("payments_async.sandbox.state", SandboxState)
CONTROL_PREFIX: Final = "/_sandbox"

_API_ROUTES: Final = frozenset({"pacs008", "pacs002", "camt056", "camt029"})
_JSON_ACCEPT: Final = ("application/json", "application/*", "*/*")
_GATEWAY_HTML: Final = (
    b"<html><head><title>502 Bad Gateway</title></head>"
    b"<body><h1>502 Bad Gateway</h1><p>sandbox: injected fault</p></body></html>"
)
_DROPPED: Final = "dropped"
_DISCONNECTED: Final = "disconnected"
_HTTP_CODES: Final = {
    404: ErrorCode.NOT_FOUND,
    405: ErrorCode.METHOD_NOT_ALLOWED,
    413: ErrorCode.BODY_TOO_LARGE,
}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _state(request: web.Request) -> SandboxState:
    return request.app[STATE_KEY]


# --- fault injection, stats and the access log: one middleware ----------------------------


def _drop(request: web.Request) -> web.Response:
    """Close the connection without answering; the response returned is never sent."""
    transport = request.transport
    if transport is not None:
        transport.close()
    request["status"] = _DROPPED
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


_BODY_METHODS: Final = frozenset({"POST", "PUT", "PATCH"})
# What aiohttp raises (as the cause of RequestPayloadError) for a compressed body that
# inflates past its limit: aiohttp >= 3.13.3 only; with an older one there is no such limit
# (an empty tuple matches nothing).
_DECOMPRESS_SIZE_ERROR: Final[type[Exception] | tuple[()]] = getattr(
    http_exceptions, "DecompressSizeError", ()
)


async def _receive_body(request: web.Request, state: SandboxState) -> web.Response | None:
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
        request["status"] = _DISCONNECTED
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


@web.middleware
async def _middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    start = time.perf_counter()
    state = _state(request)
    route = request.match_info.route.name or "other"
    state.stats.requests[route] += 1
    status: int | str = 500
    try:
        refused = None
        if request.method in _BODY_METHODS and request.body_exists:
            refused = await _receive_body(request, state)
        response = refused or await _dispatch(request, handler, state, route)
        status = request.get("status") or response.status
        return response
    except web.HTTPException as exc:
        # aiohttp's own answers (unknown route, wrong method...): the same envelope.
        status = exc.status
        return error_response(
            exc.status, _HTTP_CODES.get(exc.status, ErrorCode.INVALID_REQUEST), exc.reason
        )
    finally:
        state.stats.responses[str(status)] += 1
        if logger.isEnabledFor(logging.INFO):
            ms = (time.perf_counter() - start) * 1000
            client = request.get("client_id")
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
    state.stats.faults[kind] += 1
    if kind == "drop_before":
        return _drop(request)
    if kind == "commit_then_drop":
        await handler(request)
        return _drop(request)
    return _fault_response(kind, state)


# --- POST /oauth/token --------------------------------------------------------------------


def _accepts_json(accept: str) -> bool:
    if accept == JSON_CONTENT_TYPE:
        return True
    accept = accept.lower()
    return any(t in accept for t in _JSON_ACCEPT)


def _parse_basic(header: str) -> tuple[str, str] | None:
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic" or not value.strip():
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    client_id, sep, secret = decoded.partition(":")
    if not sep:
        return None
    return client_id, secret


_FORM_KEYS: Final = ("grant_type", "assertion", "scope")
_MAX_FORM_FIELDS: Final = 100  # a token request has three; more is not a token request


def _parse_form(body: bytes) -> dict[str, str] | str:
    """The token request's known keys, or why the body is not a usable form.

    Unknown keys are ignored (RFC 6749 3.2; RFC 7521 4.1 names ``client_id``); a known
    key sent twice is refused (RFC 6749 3.2: parameters "MUST NOT be included more than
    once"); a missing one too.
    """
    try:
        text = body.decode("ascii")
        pairs = parse_qsl(
            text,
            keep_blank_values=True,
            encoding="utf-8",
            errors="strict",
            max_num_fields=_MAX_FORM_FIELDS,
        )
    except UnicodeDecodeError:
        return "the form body must be ASCII with UTF-8 percent-escapes"
    except ValueError:
        return f"the form has more than {_MAX_FORM_FIELDS} fields"
    found: dict[str, str] = {}
    repeated: list[str] = []
    for key, value in pairs:
        if key not in _FORM_KEYS:
            continue
        if key in found:
            repeated.append(key)
        found[key] = value
    missing = [k for k in _FORM_KEYS if k not in found]
    if missing or repeated:
        detail = []
        if missing:
            detail.append(f"missing: {', '.join(missing)}")
        if repeated:
            detail.append(f"repeated: {', '.join(sorted(set(repeated)))}")
        return "Form keys grant_type, assertion and scope are required once each (" + (
            "; ".join(detail) + ")"
        )
    return found


def _token_error(status: int, code: str, message: str) -> web.Response:
    headers = {"Cache-Control": "no-store"}
    if status == 401:
        headers["WWW-Authenticate"] = 'Basic realm="sandbox"'
    return error_response(status, code, message, headers=headers)


async def _token(request: web.Request) -> web.Response:
    state = _state(request)
    config = state.config
    state.stats.token_requests += 1
    outage = state.token_outage_status()
    if outage is not None:
        return error_response(
            outage, ErrorCode.TOKEN_ENDPOINT_UNAVAILABLE, "Token endpoint unavailable (switch)"
        )
    if request.content_type != FORM_CONTENT_TYPE:
        return _token_error(
            400, ErrorCode.INVALID_REQUEST, f"Content-Type must be {FORM_CONTENT_TYPE}"
        )
    accept = request.headers.get("Accept")
    if accept is None:
        return _token_error(400, ErrorCode.INVALID_REQUEST, "Accept header is required")
    if not _accepts_json(accept):
        return _token_error(406, ErrorCode.NOT_ACCEPTABLE, "Accept must allow application/json")
    auth = request.headers.get("Authorization")
    if auth is None:
        return _token_error(
            401, ErrorCode.INVALID_CLIENT, "HTTP Basic client authentication required"
        )
    basic = _parse_basic(auth)
    if basic is None:
        return _token_error(
            400, ErrorCode.INVALID_REQUEST, "Authorization must be Basic base64(client_id:secret)"
        )
    client_id, secret = basic
    request["client_id"] = client_id
    form = _parse_form(await request.read())
    if isinstance(form, str):
        return _token_error(400, ErrorCode.INVALID_REQUEST, form)
    grant_type, assertion, scope = form["grant_type"], form["assertion"], form["scope"]
    if grant_type != JWT_BEARER_GRANT:
        return _token_error(
            400, ErrorCode.UNSUPPORTED_GRANT_TYPE, f"grant_type must be {JWT_BEARER_GRANT}"
        )
    if scope != TOKEN_SCOPE:
        return _token_error(400, ErrorCode.INVALID_SCOPE, f"scope must be {TOKEN_SCOPE}")
    if not assertion:
        return _token_error(400, ErrorCode.INVALID_REQUEST, "assertion must not be empty")
    client = state.registry.get(client_id)
    if client is None or not client.secret_matches(secret):
        return _token_error(401, ErrorCode.INVALID_CLIENT, "Unknown client or wrong client secret")
    if client.predefined and config.accept_predefined_tokens and assertion == SANDBOX_ASSERTION:
        # The predefined assertion stands for the predefined kid and iss.
        token = state.issue_token(client_id, kid=SANDBOX_KEY_ID, iss=SANDBOX_ISSUER)
    else:
        now = state.now()
        leeway = config.jwt_leeway if config.jwt_leeway is not None else JWT_LEEWAY
        try:
            claims = verify_assertion(
                assertion, keys=client.keys, client_id=client_id, now=now, leeway=leeway
            )
        except JwtVerificationError as exc:
            return _token_error(401, ErrorCode.INVALID_GRANT, f"Assertion refused: {exc.reason}")
        if not state.assertion_jtis.check_and_add(
            f"{client_id}\x00{claims['jti']}", float(claims["exp"]) + leeway, now
        ):
            return _token_error(401, ErrorCode.ASSERTION_REPLAYED, "Assertion jti was already used")
        kid = _header_kid(assertion)
        token = state.issue_token(client_id, kid=kid, iss=client.keys[kid].iss)
    lifetime = config.token_lifetime
    body = {
        "access_token": token,
        "token_type": "bearer",
        "expires_in": str(lifetime) if config.expires_in_as_string else lifetime,
        "scope": TOKEN_SCOPE,
    }
    return json_response(
        200, msgspec.json.encode(body), {"Cache-Control": "no-store", "Pragma": "no-cache"}
    )


# --- API checks -------------------------------------------------------------------------


def _authorize(
    request: web.Request, state: SandboxState, *, post: bool, accept_required: bool
) -> str | web.Response:
    """Check the headers of an API call; the client id, or the error response."""
    headers = request.headers
    auth = headers.get("Authorization")
    if auth is None or auth[:7].lower() != "bearer " or not auth[7:].strip():
        return error_response(
            401,
            ErrorCode.TOKEN_MISSING,
            "Authorization: Bearer <access token> is required",
            headers={"WWW-Authenticate": "Bearer"},
        )
    missing = []
    claimed = headers.get(CLIENT_ID_HEADER)
    if claimed is None:
        missing.append(CLIENT_ID_HEADER)
    accept = headers.get("Accept")
    if accept is None and accept_required:
        missing.append("Accept")
    if post:
        if "Content-Type" not in headers:
            missing.append("Content-Type")
        if SCA_HEADER not in headers:
            missing.append(SCA_HEADER)
    if missing:
        return error_response(
            400,
            ErrorCode.HEADER_MISSING,
            f"Required header(s) missing: {', '.join(missing)}",
            description=", ".join(missing),
        )
    if post and request.content_type != JSON_CONTENT_TYPE:
        return error_response(
            415, ErrorCode.UNSUPPORTED_MEDIA_TYPE, f"Content-Type must be {JSON_CONTENT_TYPE}"
        )
    if accept is not None and not _accepts_json(accept):
        return error_response(
            406, ErrorCode.NOT_ACCEPTABLE, f"Accept must allow {JSON_CONTENT_TYPE}"
        )
    issued = state.access_token(auth[7:].strip())
    if issued is None:
        return error_response(
            401,
            ErrorCode.TOKEN_INVALID,
            "Access token unknown or revoked",
            headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
        )
    if state.now() >= issued.expires_at:
        return error_response(
            401,
            ErrorCode.TOKEN_EXPIRED,
            "Access token expired",
            headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
        )
    owner = issued.client_id
    if claimed != owner:
        return error_response(
            401,
            ErrorCode.CLIENT_ID_MISMATCH,
            f"{CLIENT_ID_HEADER} does not match the client the access token was issued to",
        )
    request["client_id"] = owner
    request["access_token"] = issued
    return owner


def _header_kid(token: str) -> str:
    """The ``kid`` of a token that already passed verification (so it has one)."""
    segment = token.partition(".")[0]
    header = msgspec.json.decode(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    return str(header["kid"])


def _check_sca(
    request: web.Request, state: SandboxState, client_id: str, body: bytes
) -> web.Response | None:
    """Verify the sca-token against the raw body bytes; None when it passes.

    Beyond signature and claims: its ``kid`` and ``iss`` are those of the assertion the
    access token was issued for (spec, Authentication 5), and its ``jti`` and ``nonce``
    are single use (spec, SCA JWT claims: "unique id", "unique message id").
    """
    token = request.headers[SCA_HEADER]
    client = state.registry.get(client_id)
    if client is None:  # removed since the token was issued: cannot happen today
        return error_response(401, ErrorCode.TOKEN_INVALID, "Client no longer registered")
    config = state.config
    if client.predefined and config.accept_predefined_tokens and token == SANDBOX_SCA_TOKEN:
        return None  # the documented exception: reusable, not bound to a body
    now = state.now()
    leeway = config.jwt_leeway if config.jwt_leeway is not None else JWT_LEEWAY
    try:
        claims = verify_sca_token(token, body, keys=client.keys, now=now, leeway=leeway)
    except JwtVerificationError as exc:
        reason = exc.reason
        if reason.startswith("hd does not match"):
            code = ErrorCode.SCA_BODY_HASH_MISMATCH
        elif reason == "token expired":
            code = ErrorCode.SCA_TOKEN_EXPIRED
        else:
            code = ErrorCode.SCA_TOKEN_INVALID
        return error_response(401, code, f"sca-token refused: {reason}")
    issued = request["access_token"]
    if _header_kid(token) != issued.kid or claims["iss"] != issued.iss:
        return error_response(
            401,
            ErrorCode.SCA_TOKEN_INVALID,
            "sca-token refused: kid and iss must be those of the assertion the access "
            "token was issued for",
        )
    keep_until = float(claims["exp"]) + leeway
    # Both are recorded before either is judged: a token reusing only one of them still
    # burns the other.
    jti_new = state.sca_jtis.check_and_add(f"{client_id}\x00{claims['jti']}", keep_until, now)
    nonce_new = state.sca_nonces.check_and_add(f"{client_id}\x00{claims['nonce']}", keep_until, now)
    if not (jti_new and nonce_new):
        which = "jti" if not jti_new else "nonce"
        return error_response(
            401, ErrorCode.SCA_TOKEN_REPLAYED, f"sca-token {which} was already used"
        )
    return None


def _other_client(state: SandboxState) -> web.Response:
    if state.config.other_client_status == 403:
        return error_response(403, ErrorCode.FORBIDDEN, "This message belongs to another client")
    return _not_found()


def _not_found() -> web.Response:
    return error_response(404, ErrorCode.NOT_FOUND, "No message with this paymentsServiceId")


def _body_hash(msg: object) -> str:
    # Only counted (stats: replays_changed_body), never used to refuse: the canonical
    # re-encoding, so other whitespace or key order is not a change.
    return hashlib.sha256(encode(msg)).hexdigest()


M = TypeVar("M", Pacs008, Camt056)


async def _signed_message(
    request: web.Request,
    state: SandboxState,
    decode: Callable[[bytes], M],
    *,
    accept_required: bool,
) -> tuple[str, M] | web.Response:
    """Check token and SCA over the raw body, then decode and validate it.

    Returns the caller's client id and the message, or the refusal (400/401).
    """
    client_id = _authorize(request, state, post=True, accept_required=accept_required)
    if isinstance(client_id, web.Response):
        return client_id
    body = await request.read()  # the raw bytes: hd is checked against exactly these
    refused = _check_sca(request, state, client_id, body)
    if refused is not None:
        return refused
    try:
        msg = decode(body)
        validate(msg)
    except ValidationError as exc:
        return problems_response(exc.problems, summary=exc.message)
    return client_id, msg


async def _post_pacs008(request: web.Request) -> web.Response:
    state = _state(request)
    signed = await _signed_message(request, state, decode_pacs008, accept_required=False)
    if isinstance(signed, web.Response):
        return signed
    client_id, msg = signed
    record, created = state.submit_payment(client_id, msg, _body_hash(msg))
    if created:
        request.app[NOTIFIER_KEY].stored(record, str(request.url.origin()))
    out = submission_body(
        record.payments_service_id,
        record.msg_id,
        record.created_at,
        wrap=state.config.wrap_payment_result,
    )
    return json_response(201 if created else 200, out)


async def _post_camt056(request: web.Request) -> web.Response:
    state = _state(request)
    signed = await _signed_message(request, state, decode_camt056, accept_required=True)
    if isinstance(signed, web.Response):
        return signed
    client_id, msg = signed
    record, created = state.submit_cancellation(client_id, msg, _body_hash(msg))
    if created:
        request.app[NOTIFIER_KEY].stored(record, str(request.url.origin()))
    out = submission_body(
        record.payments_service_id, record.assignment_id, record.created_at, wrap=True
    )
    return json_response(201 if created else 200, out)


class _BodyCache:
    """Encoded GET bodies by id, rebuilt only when the status or its time changes.

    Per id it keeps the status's fields (a tuple of strings, bools and None) and the body
    (bytes): objects the garbage collector does not track. Keeping the status object
    itself (a fresh one per final record) made two tracked objects per id read: 20,000
    more for the collector to traverse per 10,000 settled cancellations, and full
    collections of 0.1-0.15 s in the sandbox's process that delayed its notifications.
    """

    def __init__(self) -> None:
        self._statuses: dict[str, tuple[object, ...]] = {}
        self._bodies: dict[str, bytes] = {}

    def get(self, key: str, status: PaymentStatus | CancellationStatus, at: float) -> bytes | None:
        if self._statuses.get(key) != (*_fields(status), at):
            return None
        return self._bodies[key]

    def put(
        self, key: str, status: PaymentStatus | CancellationStatus, at: float, body: bytes
    ) -> None:
        self._statuses[key] = (*_fields(status), at)
        self._bodies[key] = body


def _fields(status: PaymentStatus | CancellationStatus) -> tuple[object, ...]:
    # Every field, read from the class itself: a field added later is compared too. The
    # body's time is compared beside them: it can move without the status changing.
    return tuple(getattr(status, name) for name in status.__slots__)


_BODIES_KEY: Final = web.AppKey("payments_async.sandbox.bodies", _BodyCache)


R = TypeVar("R", PaymentRecord, CancellationRecord)


def _own_record(
    request: web.Request, records: Mapping[str, R], *, accept_required: bool
) -> R | web.Response:
    """The caller's record named in the path, or the refusal (401/400, 404, 403/404)."""
    state = _state(request)
    client_id = _authorize(request, state, post=False, accept_required=accept_required)
    if isinstance(client_id, web.Response):
        return client_id
    record = records.get(request.match_info["payments_service_id"])
    if record is None:
        return _not_found()
    if record.client_id != client_id:
        return _other_client(state)
    return record


async def _get_pacs002(request: web.Request) -> web.Response:
    state = _state(request)
    record = _own_record(request, state.payments, accept_required=False)
    if isinstance(record, web.Response):
        return record
    status = record.status_at(state.now())
    if record.cancel_effective_at is not None and status.final:
        at = record.cancel_effective_at
    else:
        at = record.processed_at if status.final else record.created_at
    cache = request.app[_BODIES_KEY]
    body = cache.get(record.payments_service_id, status, at)
    if body is None:
        body = payment_status_body(record, status, at)
        cache.put(record.payments_service_id, status, at, body)
    return json_response(200, body)


async def _get_camt029(request: web.Request) -> web.Response:
    state = _state(request)
    record = _own_record(request, state.cancellations, accept_required=True)
    if isinstance(record, web.Response):
        return record
    status = record.status_at(state.now())
    at = record.settles_at if status.final else record.created_at
    cache = request.app[_BODIES_KEY]
    body = cache.get(record.payments_service_id, status, at)
    if body is None:
        body = cancellation_outcome_body(record, status, at)
        cache.put(record.payments_service_id, status, at, body)
    return json_response(200, body)


# --- control routes (/_sandbox/..., no auth: the sandbox binds to loopback) ---------------


def _json(data: Any, status: int = 200) -> web.Response:
    return json_response(status, msgspec.json.encode(data))


async def _read_json_object(request: web.Request) -> dict[str, Any] | web.Response:
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        data = msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return error_response(400, ErrorCode.INVALID_REQUEST, "Body must be a JSON object")
    if not isinstance(data, dict):
        return error_response(400, ErrorCode.INVALID_REQUEST, "Body must be a JSON object")
    return data


async def _get_stats(request: web.Request) -> web.Response:
    out = _state(request).snapshot()
    out["notifications"] = request.app[NOTIFIER_KEY].snapshot()
    return _json(out)


async def _get_faults(request: web.Request) -> web.Response:
    return _json(_state(request).faults.config.to_dict())


async def _set_faults(request: web.Request) -> web.Response:
    data = await _read_json_object(request)
    if isinstance(data, web.Response):
        return data
    try:
        faults = FaultConfig.from_dict(data)
    except (TypeError, ValueError) as exc:
        return error_response(400, ErrorCode.INVALID_REQUEST, str(exc))
    _state(request).set_faults(faults)
    return _json(faults.to_dict())


async def _revoke_tokens(request: web.Request) -> web.Response:
    return _json({"revoked": _state(request).revoke_tokens()})


async def _token_outage(request: web.Request) -> web.Response:
    data = await _read_json_object(request)
    if isinstance(data, web.Response):
        return data
    seconds = data.get("seconds", 0)
    status = data.get("status", 503)
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not 0 <= seconds <= sys.float_info.max  # JSON integers have no bound
        or not isinstance(status, int)
        or not 400 <= status <= 599
    ):
        return error_response(
            400,
            ErrorCode.INVALID_REQUEST,
            'Expected {"seconds": >= 0, "status": 400..599 (default 503)}',
        )
    _state(request).fail_token_endpoint(float(seconds), status)
    return _json({"seconds": seconds, "status": status})


async def _get_messages(request: web.Request) -> web.Response:
    return _json(_state(request).messages(request.query.get("client_id")))


async def _register_client(request: web.Request) -> web.Response:
    data = await _read_json_object(request)
    if isinstance(data, web.Response):
        return data
    fields = ("client_id", "client_secret", "public_key_pem", "kid", "iss")
    values = [data.get(f) for f in fields]
    if not all(isinstance(v, str) and v for v in values):
        return error_response(
            400, ErrorCode.INVALID_REQUEST, f"Expected non-empty strings: {', '.join(fields)}"
        )
    client_id, secret, pem, kid, iss = (str(v) for v in values)
    try:
        _state(request).register_client(client_id, secret, pem, kid=kid, iss=iss)
    except ConfigurationError as exc:
        return error_response(400, ErrorCode.INVALID_REQUEST, exc.message)
    return _json({"client_id": client_id, "kid": kid, "iss": iss}, status=201)


# --- assembly -------------------------------------------------------------------------


def create_app(config: SandboxConfig | None = None) -> web.Application:
    """Build the sandbox application.

    Args:
        config: the configuration; defaults to ``SandboxConfig()``.

    Returns:
        An ``aiohttp.web.Application``; its state is ``app[STATE_KEY]``. Its SQLite file
        (if any) is closed when the application is cleaned up.
    """
    config = config or SandboxConfig()
    state = SandboxState(config)
    app = web.Application(middlewares=[_middleware], client_max_size=config.max_body_size)
    app[STATE_KEY] = state
    app[_BODIES_KEY] = _BodyCache()
    r = app.router
    r.add_post(TOKEN_PATH, _token, name="token")
    r.add_post(PACS008_PATH, _post_pacs008, name="pacs008")
    r.add_get(PACS002_PATH + "/{payments_service_id}", _get_pacs002, name="pacs002")
    r.add_post(CAMT056_PATH, _post_camt056, name="camt056")
    r.add_get(CAMT029_PATH + "/{payments_service_id}", _get_camt029, name="camt029")
    r.add_get(CONTROL_PREFIX + "/stats", _get_stats, name="control-stats")
    r.add_get(CONTROL_PREFIX + "/faults", _get_faults, name="control-faults-get")
    r.add_post(CONTROL_PREFIX + "/faults", _set_faults, name="control-faults")
    r.add_post(CONTROL_PREFIX + "/revoke-tokens", _revoke_tokens, name="control-revoke")
    r.add_post(CONTROL_PREFIX + "/token-outage", _token_outage, name="control-outage")
    r.add_get(CONTROL_PREFIX + "/messages", _get_messages, name="control-messages")
    r.add_post(CONTROL_PREFIX + "/clients", _register_client, name="control-clients")
    install(app, state, config.notifications)  # our extension: see sandbox/_notify.py

    async def _close(_: web.Application) -> None:
        state.close()

    app.on_cleanup.append(_close)
    app.on_response_prepare.append(_date_header)
    return app


async def _date_header(request: web.Request, response: web.StreamResponse) -> None:
    """``Date`` on the sandbox's own clock (skewed or manual), as a real service's would be."""
    response.headers["Date"] = email.utils.formatdate(_state(request).now(), usegmt=True)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class SandboxServer:
    """The sandbox on a real socket, as an async context manager.

    ``async with SandboxServer(SandboxConfig()) as sb:`` binds ``config.host`` (loopback)
    on ``config.port`` (0: a free port) and stops it on exit.

    Args:
        config: the configuration; defaults to ``SandboxConfig()``.

    Raises:
        ConfigurationError: a non-loopback host without ``allow_non_loopback``.
    """

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        if not self.config.allow_non_loopback and not _is_loopback(self.config.host):
            raise ConfigurationError(
                f"refusing to bind {self.config.host!r}: the sandbox's control routes have "
                "no authentication; bind a loopback address or set allow_non_loopback"
            )
        self.app = create_app(self.config)
        self.state: SandboxState = self.app[STATE_KEY]
        self.notifier: Notifier = self.app[NOTIFIER_KEY]
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    @property
    def port(self) -> int:
        """The bound port.

        Raises:
            RuntimeError: the server is not started.
        """
        if self._port is None:
            raise RuntimeError("the sandbox server is not started")
        return self._port

    @property
    def url(self) -> str:
        """``http://<host>:<port>``, the base URL clients use."""
        host = self.config.host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        """Bind and start serving."""
        runner = SandboxRunner(
            self.app,
            access_log=None,
            shutdown_timeout=SHUTDOWN_TIMEOUT,
            handle_signals=False,
            max_line_size=self.config.max_header_size,
            max_field_size=self.config.max_header_size,
            # A refused body (408, 413) is not drained: the connection closes at once.
            lingering_time=0,
        )
        await runner.setup()
        try:
            site = web.TCPSite(
                runner, self.config.host, self.config.port, backlog=self.config.backlog
            )
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self._port = int(runner.addresses[0][1])

    async def stop(self) -> None:
        """Stop serving and close the state (and its SQLite file)."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> SandboxServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def register_client(
        self, client_id: str, secret: str, public_key_pem: str | bytes, *, kid: str, iss: str
    ) -> None:
        """Register a client and its public key (see ``SandboxState.register_client``).

        Called again with the same client id and secret and another kid, it adds a second
        key (a key rotation): an access token is then bound to the kid of the assertion it
        was issued for, and SCA tokens sent with it must carry that kid.

        Raises:
            ConfigurationError: the key is under 2048 bits, malformed or not RSA.
        """
        self.state.register_client(client_id, secret, public_key_pem, kid=kid, iss=iss)

    def stats(self) -> dict[str, Any]:
        """The counters, as ``GET /_sandbox/stats`` returns them."""
        out = self.state.snapshot()
        out["notifications"] = self.notifier.snapshot()
        return out

    def set_faults(self, faults: FaultConfig) -> None:
        """Replace the fault settings (and reseed)."""
        self.state.set_faults(faults)
