"""Per-id triggers for users' tests: settle, resolve, notify or drop a notification, now.

Like ``stripe trigger`` and Increase's simulations, a test makes one thing happen at once
instead of waiting for the sandbox's timers: a payment settles ACCC or RJCT with a reason,
a cancellation is resolved accepted or rejected with a reason, a notification is sent now,
or the next notification of an id is dropped. Routes under ``/_sandbox`` (no auth, like
every control route) and the same operations on ``SandboxServer``.
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec
from aiohttp import web

from ._lifecycle import ACCC, RJCT, CancellationRecord, PaymentRecord
from ._notify import NOTIFIER_KEY, Notifier
from ._responses import ErrorCode, error_response, json_response
from ._state import SandboxState, state_of

__all__ = [
    "TriggerRefused",
    "add_trigger_routes",
    "drop_next_notification",
    "resolve_cancellation",
    "send_notification",
    "settle_payment",
]

# ISO 20022 external code sets (ExternalStatusReason1Code,
# ExternalPaymentCancellationRejection1Code): four upper-case letters or digits.
_REASON: Final = re.compile(r"[A-Z0-9]{4}")
_MAX_REASON_TEXT: Final = 105  # camt.029 addtlInf is Max105Text
_DEFAULT_REJECTION: Final = "CUST"  # as when the beneficiary refuses (ours)


class TriggerRefused(Exception):
    """A trigger that cannot be applied; ``status`` and ``code`` are the HTTP answer's.

    Args:
        status: 400 (bad input), 404 (no such id) or 409 (the record is already final).
        code: the sandbox error code.
        message: what was wrong (no secrets).
    """

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def _bad(message: str) -> TriggerRefused:
    return TriggerRefused(400, ErrorCode.INVALID_REQUEST, message)


def _conflict(message: str) -> TriggerRefused:
    return TriggerRefused(409, ErrorCode.CONFLICT, message)


def _unknown(psid: str, what: str) -> TriggerRefused:
    return TriggerRefused(404, ErrorCode.NOT_FOUND, f"No {what} with paymentsServiceId {psid!r}")


def _reason(value: object, *, field: str = "reason") -> str:
    if not isinstance(value, str) or not _REASON.fullmatch(value):
        raise _bad(f"{field} must be an ISO 20022 reason code: 4 upper-case letters or digits")
    return value


def settle_payment(
    state: SandboxState,
    notifier: Notifier,
    psid: str,
    status: object,
    reason: object = None,
    *,
    base_url: str | None = None,
) -> PaymentRecord:
    """Settle a pending payment now: ``ACCC``, or ``RJCT`` with ``reason``.

    Raises:
        TriggerRefused: 400 for a status other than ACCC/RJCT, a reason with ACCC or a
            missing/malformed one with RJCT; 404 for an unknown id; 409 when the payment
            is no longer pending (already final, or stopped by a cancellation).
    """
    if status not in (ACCC, RJCT):
        raise _bad('status must be "ACCC" or "RJCT"')
    if status == ACCC and reason is not None:
        raise _bad("ACCC takes no reason")
    code = _reason(reason) if status == RJCT else None
    record = state.payments.get(psid)
    if record is None:
        raise _unknown(psid, "payment")
    now = state.now()
    if record.cancelled_by is not None:
        raise _conflict(f"the payment is being stopped by cancellation {record.cancelled_by}")
    if record.status_at(now).final:
        raise _conflict("the payment is already final")
    record.processed_at = now
    record.final_code = str(status)
    record.final_reason = code
    state.save(record)
    notifier.stored(record, base_url or notifier.base_url or "")
    return record


def resolve_cancellation(
    state: SandboxState,
    notifier: Notifier,
    psid: str,
    outcome: object,
    reason: object = None,
    text: object = None,
    *,
    base_url: str | None = None,
) -> CancellationRecord:
    """Resolve a pending cancellation now: ``accepted``, or ``rejected`` with a reason.

    Accepting stops the original payment (RJCT DS02 from now on); it is refused when the
    cancellation has no payment it can still stop (the original is final, unknown, or
    stopped by another cancellation). Rejecting releases a payment this cancellation was
    stopping: it goes on to its own outcome.

    Raises:
        TriggerRefused: 400 for bad input; 404 for an unknown id; 409 when the
            cancellation is already final, or cannot be accepted.
    """
    if outcome not in ("accepted", "rejected"):
        raise _bad('outcome must be "accepted" or "rejected"')
    if outcome == "accepted" and (reason is not None or text is not None):
        raise _bad("an accepted cancellation takes no reason")
    code = None
    if outcome == "rejected":
        code = _reason(_DEFAULT_REJECTION if reason is None else reason)
        if text is not None and (
            not isinstance(text, str) or not 0 < len(text) <= _MAX_REASON_TEXT
        ):
            raise _bad(f"text must be a string of 1-{_MAX_REASON_TEXT} characters")
    record = state.cancellations.get(psid)
    if record is None:
        raise _unknown(psid, "cancellation")
    now = state.now()
    if record.status_at(now).final:
        raise _conflict("the cancellation is already final")
    original = state.payments.get(record.original_payment_id or "")
    stopping = original is not None and original.cancelled_by == psid
    if outcome == "accepted" and not stopping:
        raise _conflict(
            "the cancellation has no payment it can still stop (the original is final, "
            "unknown or stopped by another cancellation); resolve it as rejected"
        )
    record.settles_at = now
    record.accepted = outcome == "accepted"
    record.reason_code = code
    record.reason_text = text if isinstance(text, str) else None
    if original is not None and stopping:
        if record.accepted:
            original.cancel_effective_at = now
        else:
            original.cancelled_by = None
            original.cancel_effective_at = None
        state.save(original)
    state.save(record)
    base = base_url or notifier.base_url or ""
    notifier.stored(record, base)
    if original is not None and stopping and not record.accepted:
        notifier.stored(original, base)  # released: its own outcome is notified
    return record


def send_notification(
    state: SandboxState, notifier: Notifier, psid: str, *, base_url: str | None = None
) -> dict[str, Any]:
    """Send the notification of an id's current status now (again, if it was sent).

    Raises:
        TriggerRefused: 404 for an unknown id; 409 when its client has no notification
            target.
    """
    if psid not in state.payments and psid not in state.cancellations:
        raise _unknown(psid, "payment or cancellation")
    if base_url is not None and notifier.base_url is None:
        notifier.base_url = base_url
    sent = notifier.send_now(psid)
    if sent is None:
        raise _conflict("its client has no notification target (POST /_sandbox/notifications)")
    return sent


def drop_next_notification(state: SandboxState, notifier: Notifier, psid: str) -> int:
    """Drop the next notification of this id (it counts as lost); returns drops pending.

    Raises:
        TriggerRefused: 404 for an unknown id.
    """
    if psid not in state.payments and psid not in state.cancellations:
        raise _unknown(psid, "payment or cancellation")
    return notifier.drop_next(psid)


# --- routes ---------------------------------------------------------------------------------


async def _body(request: web.Request) -> dict[str, Any]:
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        data = msgspec.json.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        raise _bad("Body must be a JSON object") from None
    if not isinstance(data, dict):
        raise _bad("Body must be a JSON object")
    return data


def _only(data: dict[str, Any], *allowed: str) -> None:
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise _bad(f"unknown field(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}")


def _answer(refused: TriggerRefused) -> web.Response:
    return error_response(refused.status, refused.code, refused.message)


def _payment_view(state: SandboxState, record: PaymentRecord) -> dict[str, Any]:
    status = record.status_at(state.now())
    return {
        "paymentsServiceId": record.payments_service_id,
        "status": status.code,
        "reason": status.reason,
    }


async def _settle(request: web.Request) -> web.Response:
    state, notifier = state_of(request), request.app[NOTIFIER_KEY]
    try:
        data = await _body(request)
        _only(data, "status", "reason")
        record = settle_payment(
            state,
            notifier,
            request.match_info["psid"],
            data.get("status"),
            data.get("reason"),
            base_url=str(request.url.origin()),
        )
    except TriggerRefused as exc:
        return _answer(exc)
    return json_response(200, msgspec.json.encode(_payment_view(state, record)))


async def _resolve(request: web.Request) -> web.Response:
    state, notifier = state_of(request), request.app[NOTIFIER_KEY]
    try:
        data = await _body(request)
        _only(data, "outcome", "reason", "text")
        record = resolve_cancellation(
            state,
            notifier,
            request.match_info["psid"],
            data.get("outcome"),
            data.get("reason"),
            data.get("text"),
            base_url=str(request.url.origin()),
        )
    except TriggerRefused as exc:
        return _answer(exc)
    status = record.status_at(state.now())
    out = {
        "paymentsServiceId": record.payments_service_id,
        "status": status.conf,
        "txCxlSts": status.tx_status,
        "reason": status.reason,
    }
    return json_response(200, msgspec.json.encode(out))


async def _send(request: web.Request) -> web.Response:
    state, notifier = state_of(request), request.app[NOTIFIER_KEY]
    try:
        _only(await _body(request))
        sent = send_notification(
            state, notifier, request.match_info["psid"], base_url=str(request.url.origin())
        )
    except TriggerRefused as exc:
        return _answer(exc)
    return json_response(202, msgspec.json.encode(sent))


async def _drop(request: web.Request) -> web.Response:
    state, notifier = state_of(request), request.app[NOTIFIER_KEY]
    psid = request.match_info["psid"]
    try:
        _only(await _body(request))
        pending = drop_next_notification(state, notifier, psid)
    except TriggerRefused as exc:
        return _answer(exc)
    return json_response(200, msgspec.json.encode({"paymentsServiceId": psid, "drops": pending}))


def add_trigger_routes(app: web.Application, prefix: str) -> None:
    """Add the trigger routes under ``prefix`` (``/_sandbox``)."""
    r = app.router
    r.add_post(prefix + "/payments/{psid}/settle", _settle, name="control-settle")
    r.add_post(prefix + "/cancellations/{psid}/resolve", _resolve, name="control-resolve")
    r.add_post(prefix + "/notifications/{psid}/send", _send, name="control-notify-send")
    r.add_post(prefix + "/notifications/{psid}/drop", _drop, name="control-notify-drop")
