"""Pure, framework-neutral core of the receiver: authenticate and parse one notification.

Everything here works from the method, the headers and the body bytes, so the receiver can
be mounted in aiohttp (``_app``), an ASGI framework (``examples/receiver_starlette.py``) or
anything else. Nothing here performs I/O, except that a user's bearer verifier is awaited.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, Protocol
from urllib.parse import urlsplit

import msgspec

from .. import ServiceProfile
from .._checks import check_payments_service_id
from .._errors import NotificationRejected, ValidationError
from ..iso20022 import (
    Camt029,
    Pacs002,
    decode_camt029,
    decode_pacs002,
    summarize_resolution,
    summarize_status_report,
)
from ._auth import BasicAuth, BearerAuth, JwtBearerVerifier
from ._defaults import NOTIFY_MAX_BODY_BYTES

__all__ = [
    "Authenticator",
    "BasicAuth",
    "BearerAuth",
    "JwtBearerVerifier",
    "Notification",
    "NotificationKind",
    "NotificationRejected",
    "authenticate",
    "parse",
]


class NotificationKind(enum.Enum):
    """What a notification is about."""

    PAYMENT = "payment"  # a credit transfer's status changed (pacs.002)
    CANCELLATION = "cancellation"  # a cancellation's outcome changed (camt.029)


@dataclass(frozen=True, slots=True)
class Notification:
    """One parsed notification: a hint that ``payments_service_id`` changed status.

    The receiver never acts on it directly: it confirms the status with the client's own
    signed GET first.

    Attributes:
        payments_service_id: the id whose status changed.
        kind: a payment (pacs.002) or a cancellation (camt.029).
        payload: ``"short"`` (the notice with URIs) or ``"full"`` (the status report).
        original_message: URI of the pacs.008/camt.056 (short notices), checked to be
            under ``base_url``.
        status_report_message: URI of the pacs.002/camt.029 (short notices), checked to
            be under ``base_url`` and to name ``payments_service_id``.
        reported_status: the status code a full report carries (a hint only).
    """

    payments_service_id: str
    kind: NotificationKind
    payload: Literal["short", "full"]
    original_message: str | None = None
    status_report_message: str | None = None
    reported_status: str | None = None


# --- authentication -----------------------------------------------------------------------


class Authenticator(Protocol):
    """Checks the ``Authorization`` header of a notification; True lets it in."""

    async def check(self, authorization: str | None) -> bool:
        """Whether ``authorization`` (the raw header value, or None) is acceptable."""
        ...


async def authenticate(headers: Mapping[str, str], authenticator: Authenticator) -> None:
    """Check a notification's credentials before anything else is looked at.

    Args:
        headers: the request headers (any mapping; names matched case-insensitively).
        authenticator: ``BasicAuth``, ``BearerAuth`` or your own ``Authenticator``.

    Raises:
        NotificationRejected: status 401, when the credentials are missing or wrong.
    """
    if not await authenticator.check(_header(headers, "Authorization")):
        raise NotificationRejected("missing or wrong credentials", status=401)


# --- parsing --------------------------------------------------------------------------------


class _ShortNotice(msgspec.Struct, rename="camel"):
    payments_service_id: str
    original_message: str | None = None
    status_report_message: str | None = None


_TOP: Final = msgspec.json.Decoder(dict[str, msgspec.Raw])
_SHORT: Final = msgspec.json.Decoder(_ShortNotice)
_ID_FIELD: Final = msgspec.json.Decoder(str)
_PACS002_ROOT: Final = "fitofipmtstsrpt"  # casefolded: fitoFIPmtStsRpt and fIToFIPmtStsRpt
_CAMT029_ROOT: Final = "rsltnofinvstgtn"
_SPEC: Final = ServiceProfile()


def _status_paths(profile: ServiceProfile) -> dict[str, NotificationKind]:
    return {
        profile.pacs002_path: NotificationKind.PAYMENT,
        profile.camt029_path: NotificationKind.CANCELLATION,
    }


def _original_paths(profile: ServiceProfile) -> dict[str, NotificationKind]:
    return {
        profile.pacs008_path: NotificationKind.PAYMENT,
        profile.camt056_path: NotificationKind.CANCELLATION,
    }


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is not None:
        return value
    lowered = name.lower()
    for key, item in headers.items():
        if key.lower() == lowered:
            return item
    return None


def _reject(status: int, message: str) -> NotificationRejected:
    return NotificationRejected(message, status=status)


def parse(
    method: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    base_url: str,
    max_body_bytes: int = NOTIFY_MAX_BODY_BYTES,
    profile: ServiceProfile | None = None,
) -> Notification:
    """Parse one notification: a short notice or a full pacs.002 / camt.029 report.

    Short notice: ``{"paymentsServiceId", "originalMessage", "statusReportMessage"}``;
    each URI must be under ``base_url`` and name the service's path for its kind (the
    ``profile``'s paths), and the status report URI must end with the notice's id. Full
    report: a pacs.002 (root ``fitoFIPmtStsRpt`` in any case) or a camt.029
    (``rsltnOfInvstgtn``) with the id in a top-level ``paymentsServiceId`` beside the root.
    Unknown fields are ignored.

    Args:
        method: the HTTP method (only POST is a notification).
        headers: the request headers.
        body: the raw body bytes.
        base_url: the service's base address; URIs elsewhere are refused, never fetched.
        max_body_bytes: larger bodies are refused with 413.
        profile: the service edition whose paths a short notice's URIs must name (the
            client's ``client.profile``); the specification's when None.

    Returns:
        The notification.

    Raises:
        NotificationRejected: with the 4xx status to answer.
    """
    if method.upper() != "POST":
        raise _reject(405, "notifications are POSTed")
    if len(body) > max_body_bytes:
        raise _reject(413, f"body larger than {max_body_bytes} bytes")
    ctype = (_header(headers, "Content-Type") or "").split(";")[0].strip().lower()
    if ctype != "application/json" and not ctype.endswith("+json"):
        raise _reject(415, "Content-Type must be application/json")
    try:
        return _parse_json(body, base_url, profile or _SPEC)
    except RecursionError:
        # msgspec's bound on nesting (a few hundred levels): no notification nests so deep.
        raise _reject(400, "body is nested too deeply") from None


def _parse_json(body: bytes, base_url: str, profile: ServiceProfile) -> Notification:
    try:
        top = _TOP.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        raise _reject(400, "body is not a JSON object") from None
    folded = {key.casefold(): key for key in top}
    if _PACS002_ROOT in folded or _CAMT029_ROOT in folded:
        return _parse_full(top, body, pacs002=_PACS002_ROOT in folded)
    if "paymentsServiceId" in top:
        return _parse_short(body, base_url, profile)
    raise _reject(422, "neither a short notice nor a pacs.002/camt.029 status report")


def _check_id(value: str) -> str:
    try:
        return check_payments_service_id(value)
    except ValidationError:
        raise _reject(422, "paymentsServiceId must be 1-128 of [A-Za-z0-9_-]") from None


def _parse_short(body: bytes, base_url: str, profile: ServiceProfile) -> Notification:
    try:
        notice = _SHORT.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise _reject(422, f"malformed short notice: {exc}") from None
    except UnicodeDecodeError:
        raise _reject(422, "malformed short notice: a string is not valid UTF-8") from None
    psid = _check_id(notice.payments_service_id)
    kinds: set[NotificationKind] = set()
    if notice.status_report_message is not None:
        path = _path_under(notice.status_report_message, base_url, "statusReportMessage")
        prefix, _, tail = path.rpartition("/")
        kind = _status_paths(profile).get(prefix)
        if kind is None or tail != psid:
            raise _reject(
                422,
                "statusReportMessage must be the pacs.002/camt.029 URI of this paymentsServiceId",
            )
        kinds.add(kind)
    if notice.original_message is not None:
        path = _path_under(notice.original_message, base_url, "originalMessage")
        originals = _original_paths(profile).items()
        kind = next((k for p, k in originals if path.startswith(p + "/")), None)
        if kind is None:
            raise _reject(422, "originalMessage must be a pacs.008/camt.056 URI of the service")
        kinds.add(kind)
    if len(kinds) != 1:
        raise _reject(
            422, "a short notice needs statusReportMessage or originalMessage of one kind"
        )
    return Notification(
        payments_service_id=psid,
        kind=kinds.pop(),
        payload="short",
        original_message=notice.original_message,
        status_report_message=notice.status_report_message,
    )


def _path_under(uri: str, base_url: str, field: str) -> str:
    """The path of ``uri`` relative to ``base_url``; refused when it points anywhere else."""
    base = urlsplit(base_url)
    try:
        target = urlsplit(uri)
        target_port = target.port
        base_port = base.port
    except ValueError:
        raise _reject(422, f"{field} is not a valid URI") from None
    if target.scheme or target.netloc:
        default = {"http": 80, "https": 443}
        same_origin = (
            target.scheme.lower() == base.scheme.lower()
            and (target.hostname or "") == (base.hostname or "")
            and (target_port or default.get(target.scheme.lower()))
            == (base_port or default.get(base.scheme.lower()))
            and target.username is None
            and target.password is None
        )
        if not same_origin:
            raise _reject(422, f"{field} is not under the configured base_url")
    base_path = base.path.rstrip("/")
    path = target.path
    if target.query or target.fragment or not path.startswith(base_path + "/") or "/.." in path:
        raise _reject(422, f"{field} is not under the configured base_url")
    return path[len(base_path) :]


def _parse_full(top: Mapping[str, msgspec.Raw], body: bytes, *, pacs002: bool) -> Notification:
    raw_id = top.get("paymentsServiceId")
    if raw_id is None:
        raise _reject(422, "a full status report needs a top-level paymentsServiceId")
    try:
        psid = _check_id(_ID_FIELD.decode(raw_id))
    except (msgspec.ValidationError, UnicodeDecodeError):
        raise _reject(422, "paymentsServiceId must be a string") from None
    try:
        if pacs002:
            report: Pacs002 | Camt029 = decode_pacs002(body)
        else:
            report = decode_camt029(body)
    except ValidationError as exc:
        raise _reject(422, f"malformed status report: {exc.message}") from None
    if isinstance(report, Pacs002):
        status = summarize_status_report(report).status
        kind = NotificationKind.PAYMENT
    else:
        status = summarize_resolution(report).status
        kind = NotificationKind.CANCELLATION
    return Notification(payments_service_id=psid, kind=kind, payload="full", reported_status=status)
