"""The control routes under ``/_sandbox`` (no auth: the sandbox binds to loopback).

``GET /stats``, ``GET``/``POST /faults``, ``POST /revoke-tokens``, ``POST /token-outage``,
``GET /messages``, ``POST /clients``, and the notification routes: ``POST /notifications``
(subscribe: ``client_id``, ``url``, ``payload``, credentials), ``POST
/notifications/remove``, ``GET /notifications`` (counters, targets without secrets) and
``POST /notification-faults``; the per-id triggers (``_triggers``): ``POST
/payments/{id}/settle``, ``POST /cancellations/{id}/resolve``, ``POST
/notifications/{id}/send`` and ``POST /notifications/{id}/drop``.
"""

from __future__ import annotations

import sys
from typing import Any, Final

import msgspec
from aiohttp import web

from .._errors import ConfigurationError
from ._config import FaultConfig, NotificationFaults, NotificationTarget
from ._notify import NOTIFIER_KEY
from ._responses import ErrorCode, error_response, json_response
from ._state import state_of
from ._triggers import add_trigger_routes

__all__ = ["CONTROL_PREFIX", "add_control_routes"]

CONTROL_PREFIX: Final = "/_sandbox"


def _json(data: Any, status: int = 200) -> web.Response:
    return json_response(status, msgspec.json.encode(data))


async def _read_json_object(
    request: web.Request, *, empty: bool = True
) -> dict[str, Any] | web.Response:
    """The body as a JSON object (``{}`` for a blank one if ``empty``), or the 400 answer."""
    raw = await request.read()
    if empty and not raw.strip():
        return {}
    try:
        data = msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return error_response(400, ErrorCode.INVALID_REQUEST, "Body must be a JSON object")
    except RecursionError:
        return error_response(400, ErrorCode.INVALID_REQUEST, "Body is nested too deeply")
    if not isinstance(data, dict):
        return error_response(400, ErrorCode.INVALID_REQUEST, "Body must be a JSON object")
    return data


async def _get_stats(request: web.Request) -> web.Response:
    out = state_of(request).snapshot()
    out["notifications"] = request.app[NOTIFIER_KEY].snapshot()
    return _json(out)


async def _get_faults(request: web.Request) -> web.Response:
    return _json(state_of(request).faults.config.to_dict())


async def _set_faults(request: web.Request) -> web.Response:
    data = await _read_json_object(request)
    if isinstance(data, web.Response):
        return data
    try:
        faults = FaultConfig.from_dict(data)
    except (TypeError, ValueError) as exc:
        return error_response(400, ErrorCode.INVALID_REQUEST, str(exc))
    state_of(request).set_faults(faults)
    return _json(faults.to_dict())


async def _revoke_tokens(request: web.Request) -> web.Response:
    return _json({"revoked": state_of(request).revoke_tokens()})


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
    state_of(request).fail_token_endpoint(float(seconds), status)
    return _json({"seconds": seconds, "status": status})


async def _get_messages(request: web.Request) -> web.Response:
    return _json(state_of(request).messages(request.query.get("client_id")))


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
        state_of(request).register_client(client_id, secret, pem, kid=kid, iss=iss)
    except ConfigurationError as exc:
        return error_response(400, ErrorCode.INVALID_REQUEST, exc.message)
    return _json({"client_id": client_id, "kid": kid, "iss": iss}, status=201)


def _bad(message: str) -> web.Response:
    return error_response(400, ErrorCode.INVALID_REQUEST, message)


async def _subscribe(request: web.Request) -> web.Response:
    data = await _read_json_object(request, empty=False)
    if isinstance(data, web.Response):
        return data
    client_id = data.pop("client_id", None)
    if not isinstance(client_id, str) or not client_id:
        return _bad("client_id (a non-empty string) is required")
    try:
        target = NotificationTarget.from_dict(data)
    except (TypeError, ValueError) as exc:
        return _bad(str(exc))
    notifier = request.app[NOTIFIER_KEY]
    notifier.base_url = str(request.url.origin())
    notifier.subscribe(client_id, target)
    return _json({"client_id": client_id, **target.describe()}, status=201)


async def _unsubscribe(request: web.Request) -> web.Response:
    data = await _read_json_object(request, empty=False)
    if isinstance(data, web.Response):
        return data
    client_id = data.get("client_id")
    if not isinstance(client_id, str):
        return _bad("client_id (a string) is required")
    return _json({"removed": request.app[NOTIFIER_KEY].unsubscribe(client_id)})


async def _get_notifications(request: web.Request) -> web.Response:
    return _json(request.app[NOTIFIER_KEY].snapshot())


async def _set_notification_faults(request: web.Request) -> web.Response:
    data = await _read_json_object(request, empty=False)
    if isinstance(data, web.Response):
        return data
    try:
        faults = NotificationFaults.from_dict(data)
    except (TypeError, ValueError) as exc:
        return _bad(str(exc))
    request.app[NOTIFIER_KEY].set_faults(faults)
    return _json(faults.to_dict())


def add_control_routes(app: web.Application) -> None:
    """Add every ``/_sandbox`` route to ``app`` (its state and notifier already set)."""
    r = app.router
    p = CONTROL_PREFIX
    r.add_get(p + "/stats", _get_stats, name="control-stats")
    r.add_get(p + "/faults", _get_faults, name="control-faults-get")
    r.add_post(p + "/faults", _set_faults, name="control-faults")
    r.add_post(p + "/revoke-tokens", _revoke_tokens, name="control-revoke")
    r.add_post(p + "/token-outage", _token_outage, name="control-outage")
    r.add_get(p + "/messages", _get_messages, name="control-messages")
    r.add_post(p + "/clients", _register_client, name="control-clients")
    r.add_post(p + "/notifications", _subscribe, name="control-notify")
    r.add_post(p + "/notifications/remove", _unsubscribe, name="control-notify-remove")
    r.add_get(p + "/notifications", _get_notifications, name="control-notify-get")
    r.add_post(p + "/notification-faults", _set_notification_faults, name="control-notify-faults")
    add_trigger_routes(app, p)
