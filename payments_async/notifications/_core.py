"""Pure, framework-neutral core of the receiver: authenticate and parse one notification.

Everything here works from the method, the headers and the body bytes, so the receiver can
be mounted in aiohttp (``_app``), an ASGI framework (``examples/receiver_starlette.py``) or
anything else. Nothing here performs I/O, except that a user's bearer verifier is awaited.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hmac
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal, Protocol
from urllib.parse import urlsplit

import msgspec

from .. import ServiceProfile
from .._checks import check_payments_service_id
from .._constants import JWT_LEEWAY
from .._errors import ConfigurationError, NotificationRejected, ValidationError
from ..iso20022 import (
    Camt029,
    Pacs002,
    decode_camt029,
    decode_pacs002,
    summarize_resolution,
    summarize_status_report,
)
from ._defaults import NOTIFY_JWT_ALGORITHMS, NOTIFY_MAX_BODY_BYTES

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


class BasicAuth:
    """HTTP Basic credentials the service must present (compared in constant time).

    Args:
        username: the expected user name.
        password: the expected password (never shown in a repr or an error).
    """

    __slots__ = ("_expected",)

    def __init__(self, username: str, password: str) -> None:
        if not username or not password or ":" in username:
            raise ConfigurationError(
                "BasicAuth needs a non-empty username without ':' and a password"
            )
        self._expected = f"{username}:{password}".encode()

    def __repr__(self) -> str:
        return "BasicAuth(username=..., password=***)"

    async def check(self, authorization: str | None) -> bool:
        """True when the header is ``Basic base64(username:password)`` with our values."""
        if authorization is None:
            return False
        scheme, _, value = authorization.strip().partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            presented = base64.b64decode(value.strip(), validate=True)
        except (binascii.Error, ValueError):
            return False
        return hmac.compare_digest(presented, self._expected)


BearerVerifier = Callable[[str], Awaitable[bool]]


class BearerAuth:
    """OAuth 2.0 bearer tokens checked by a verifier you supply (an async callable).

    Args:
        verify: ``async (token) -> bool``; an exception it raises counts as a refusal.
    """

    __slots__ = ("_verify",)

    def __init__(self, verify: BearerVerifier) -> None:
        if not callable(verify):
            raise ConfigurationError("BearerAuth needs an async callable verify(token) -> bool")
        self._verify = verify

    def __repr__(self) -> str:
        return f"BearerAuth(verify={self._verify!r})"

    async def check(self, authorization: str | None) -> bool:
        """True when the header is ``Bearer <token>`` and the verifier accepts the token."""
        if authorization is None:
            return False
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return False
        try:
            return (await self._verify(token)) is True
        except Exception:
            return False


class JwtBearerVerifier:
    """A bearer verifier for JWT access tokens (joserfc): algorithms pinned, iss/aud checked.

    Use it as ``BearerAuth(JwtBearerVerifier(pem, issuer=..., audience=...))``. A token
    passes when its ``alg`` is one of ``algorithms`` (RS256 and ES256 by default; ``none``
    and HMAC are never accepted), its signature verifies with one of ``public_keys``, its
    ``iss`` and ``aud`` match, and ``exp`` (required) and ``nbf`` hold within ``leeway``.

    Args:
        public_keys: one PEM public key (RSA or EC P-256) or several.
        issuer: the required ``iss``.
        audience: the required ``aud`` (a string, or one item of a list ``aud``).
        algorithms: the accepted algorithms.
        leeway: clock skew tolerated on ``exp``/``nbf``, in seconds.

    Raises:
        ConfigurationError: a key cannot be read, or an algorithm is not RS256/ES256.
    """

    def __init__(
        self,
        public_keys: str | bytes | Sequence[str | bytes],
        *,
        issuer: str,
        audience: str,
        algorithms: Iterable[str] = NOTIFY_JWT_ALGORITHMS,
        leeway: float = JWT_LEEWAY,
    ) -> None:
        from joserfc.errors import JoseError
        from joserfc.jwk import ECKey, RSAKey

        algs = tuple(algorithms)
        if not algs or not set(algs) <= set(NOTIFY_JWT_ALGORITHMS):
            raise ConfigurationError(f"algorithms must be among {', '.join(NOTIFY_JWT_ALGORITHMS)}")
        if not issuer or not audience:
            raise ConfigurationError("JwtBearerVerifier needs an issuer and an audience")
        pems = [public_keys] if isinstance(public_keys, str | bytes) else list(public_keys)
        keys: list[RSAKey | ECKey] = []
        for pem in pems:
            try:
                keys.append(RSAKey.import_key(pem))
            except (JoseError, ValueError, TypeError):
                try:
                    keys.append(ECKey.import_key(pem))
                except (JoseError, ValueError, TypeError) as exc:
                    raise ConfigurationError("a public key is not an RSA or EC PEM key") from exc
        if not keys:
            raise ConfigurationError("JwtBearerVerifier needs at least one public key")
        self._keys = tuple(keys)
        self._issuer = issuer
        self._audience = audience
        self._algorithms = algs
        self._leeway = int(leeway)

    def __repr__(self) -> str:
        return (
            f"JwtBearerVerifier(issuer={self._issuer!r}, audience={self._audience!r}, "
            f"algorithms={self._algorithms!r})"
        )

    async def __call__(self, token: str) -> bool:
        """True when ``token`` passes every check (see the class docstring)."""
        return self.verify(token)

    def verify(self, token: str) -> bool:
        """The same check, synchronously (it is pure CPU work)."""
        from joserfc import jwt
        from joserfc.errors import JoseError

        if len(token) > _MAX_TOKEN_CHARS or token.count(".") != 2:
            return False
        decoded = None
        for key in self._keys:
            # joserfc refuses an alg that does not fit the key type (no RSA key as HMAC).
            try:
                decoded = jwt.decode(token, key, algorithms=list(self._algorithms))
                break
            except (JoseError, ValueError, TypeError, KeyError):
                continue
        if decoded is None:
            return False
        try:
            registry = jwt.JWTClaimsRegistry(
                leeway=self._leeway,
                iss={"essential": True, "value": self._issuer},
                aud={"essential": True, "value": self._audience},
                exp={"essential": True},
            )
            registry.validate(decoded.claims)
        except (JoseError, ValueError, TypeError, KeyError):
            return False
        return True


_MAX_TOKEN_CHARS: Final = 16 * 1024


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
