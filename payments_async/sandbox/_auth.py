"""Authentication: the token endpoint and the checks of every API call (token, headers, SCA)."""

from __future__ import annotations

import base64
import binascii
from typing import Final
from urllib.parse import parse_qsl

import msgspec
from aiohttp import web

from .._constants import (
    FORM_CONTENT_TYPE,
    JSON_CONTENT_TYPE,
    JWT_BEARER_GRANT,
    JWT_LEEWAY,
    SANDBOX_ASSERTION,
    SANDBOX_ISSUER,
    SANDBOX_KEY_ID,
    SANDBOX_SCA_TOKEN,
    SCA_HEADER,
    TOKEN_SCOPE,
)
from .._jwt import JwtVerificationError, verify_assertion, verify_sca_token
from ._request_keys import ACCESS_TOKEN, CLIENT_ID
from ._responses import ErrorCode, error_response, json_response
from ._state import SandboxState, state_of

__all__ = ["accepts_json", "authorize", "check_sca", "token"]

_JSON_ACCEPT: Final = ("application/json", "application/*", "*/*")


def accepts_json(accept: str) -> bool:
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


async def token(request: web.Request) -> web.Response:
    state = state_of(request)
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
    if not accepts_json(accept):
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
    request[CLIENT_ID] = client_id
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
        kid = header_kid(assertion)
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


def authorize(
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
    client_id_header = state.config.profile.client_id_header
    claimed = headers.get(client_id_header)
    if claimed is None:
        missing.append(client_id_header)
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
    if accept is not None and not accepts_json(accept):
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
            f"{client_id_header} does not match the client the access token was issued to",
        )
    request[CLIENT_ID] = owner
    request[ACCESS_TOKEN] = issued
    return owner


def header_kid(token: str) -> str:
    """The ``kid`` of a token that already passed verification (so it has one)."""
    segment = token.partition(".")[0]
    header = msgspec.json.decode(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    return str(header["kid"])


def check_sca(
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
    issued = request[ACCESS_TOKEN]
    if header_kid(token) != issued.kid or claims["iss"] != issued.iss:
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
