"""Service envelopes around the ISO messages: submission result, token response, errors."""

from __future__ import annotations

import math
from typing import TypeVar

import msgspec

from .._errors import Problem, ServiceErrorDetail, ValidationError

__all__ = [
    "ErrorEnvelope",
    "ErrorItem",
    "InboundStruct",
    "OutboundStruct",
    "SubmissionResult",
    "TokenResponse",
    "decode_error_envelope",
    "decode_submission",
    "decode_token_response",
    "decode_with",
    "encode",
]


class OutboundStruct(
    msgspec.Struct, rename="camel", forbid_unknown_fields=True, omit_defaults=True
):
    """Base of messages we send: strict, lowerCamel ISO tags, defaults left out."""


class InboundStruct(msgspec.Struct, rename="camel", omit_defaults=True):
    """Base of messages we receive: unknown fields the service adds are ignored."""


T = TypeVar("T")

_ENCODER = msgspec.json.Encoder(decimal_format="number")


def encode(msg: object) -> bytes:
    """Encode a message to JSON bytes; ``Decimal`` goes out as a number with its digits."""
    return _ENCODER.encode(msg)


def decode_with(
    decoder: msgspec.json.Decoder[T], data: bytes | str, what: str, *, root: str | None = None
) -> T:
    """Decode with a prebuilt decoder; msgspec's errors become our ``ValidationError``.

    ``root`` names the key the decoded value sat under, so error paths read
    ``$.<root>.…`` when only that part of a document is decoded.
    """
    try:
        return decoder.decode(data)
    except msgspec.ValidationError as exc:
        path, _, msg = _split_msgspec_error(str(exc))
        if root is not None:
            path = f"$.{root}{path[1:]}"
        raise ValidationError([Problem(path, msg)], message=f"invalid {what}") from exc
    except msgspec.DecodeError as exc:
        raise ValidationError([Problem("$", str(exc))], message=f"malformed {what}") from exc
    except UnicodeDecodeError as exc:
        # msgspec checks the UTF-8 of some strings only when it builds them.
        problem = Problem("$", "JSON is malformed: a string is not valid UTF-8")
        raise ValidationError([problem], message=f"malformed {what}") from exc


def _split_msgspec_error(text: str) -> tuple[str, str, str]:
    # msgspec says "Expected `str`, got `int` - at `$.grpHdr.msgId`"
    marker = " - at `"
    if marker in text and text.endswith("`"):
        msg, _, rest = text.partition(marker)
        return rest[:-1], "", msg
    return "$", "", text


class TokenResponse(InboundStruct, rename=None):
    """The access-token response. ``expires_in`` arrives as an integer, a fractional number
    or a quoted number; it is kept in seconds as a float."""

    access_token: str
    expires_in: float
    token_type: str = "bearer"
    scope: str | None = None

    def __repr__(self) -> str:  # the token is a secret
        return f"TokenResponse(token_type={self.token_type!r}, expires_in={self.expires_in})"


class _RawTokenResponse(InboundStruct, rename=None):
    access_token: str
    expires_in: int | float | str
    token_type: str = "bearer"
    scope: str | None = None


_TOKEN_DECODER = msgspec.json.Decoder(_RawTokenResponse)


def decode_token_response(data: bytes) -> TokenResponse:
    """Decode a token response; ``expires_in`` may be an int, a float or a numeric string."""
    raw = decode_with(_TOKEN_DECODER, data, "token response")
    expires: float
    if isinstance(raw.expires_in, str):
        text = raw.expires_in
        try:
            expires = float(text.strip())
        except ValueError:
            raise ValidationError(
                [Problem("$.expires_in", f"not a number: {text[:20]!r}")],
                message="invalid token response",
            ) from None
    else:
        try:
            expires = float(raw.expires_in)
        except OverflowError:  # JSON integers have no bound
            expires = math.inf
    if not math.isfinite(expires):
        raise ValidationError(
            [Problem("$.expires_in", "must be a finite number")], message="invalid token response"
        )
    if expires <= 0:
        raise ValidationError(
            [Problem("$.expires_in", "must be positive")], message="invalid token response"
        )
    return TokenResponse(
        access_token=raw.access_token,
        expires_in=expires,
        token_type=raw.token_type,
        scope=raw.scope,
    )


class SubmissionResult(InboundStruct):
    """What a POST of pacs.008 or camt.056 returns (spec: Cancellation submission result).

    ``payment_id`` echoes ``grpHdr.msgId`` (pacs.008) or ``assgnmt.id`` (camt.056); the
    service spells it ``paymentId`` or ``paymentsId``: both decode here.
    """

    payments_service_id: str
    payment_id: str | None = None
    status: str | None = None
    creation_date_time: str | None = None


class _RawSubmission(InboundStruct):
    payments_service_id: str | None = None
    payment_id: str | None = None
    payments_id: str | None = None
    status: str | None = None
    creation_date_time: str | None = None


class _SubmissionEnvelope(_RawSubmission):
    data: _RawSubmission | None = None


_SUBMISSION_DECODER = msgspec.json.Decoder(_SubmissionEnvelope)


def decode_submission(data: bytes) -> SubmissionResult:
    """Decode a submission result, wrapped in ``data`` or bare."""
    try:
        env = _SUBMISSION_DECODER.decode(data)
    except (msgspec.MsgspecError, UnicodeDecodeError):  # decode_with says what is wrong
        env = decode_with(_SUBMISSION_DECODER, data, "submission result")
    raw: _RawSubmission = env.data if env.data is not None else env
    if not raw.payments_service_id:
        path = "$.data.paymentsServiceId" if env.data is not None else "$.paymentsServiceId"
        raise ValidationError([Problem(path, "missing")], message="invalid submission result")
    return SubmissionResult(
        payments_service_id=raw.payments_service_id,
        payment_id=raw.payment_id if raw.payment_id is not None else raw.payments_id,
        status=raw.status,
        creation_date_time=raw.creation_date_time,
    )


class ErrorItem(InboundStruct):
    """One entry of the error envelope."""

    code: str | None = None
    message: str | None = None
    level: str | None = None
    description: str | None = None


class ErrorEnvelope(InboundStruct):
    """The service's error body ``{"errors": [{code, message, level, description}]}``."""

    errors: list[ErrorItem] = msgspec.field(default_factory=list)

    def details(self) -> tuple[ServiceErrorDetail, ...]:
        """The entries as the details our errors carry."""
        return tuple(
            ServiceErrorDetail(e.code, e.message, e.level, e.description) for e in self.errors
        )


_ERROR_DECODER = msgspec.json.Decoder(ErrorEnvelope)


def decode_error_envelope(data: bytes) -> ErrorEnvelope | None:
    """Decode an error body; None when it is not the JSON envelope (HTML, text, empty)."""
    if not data:
        return None
    try:
        return _ERROR_DECODER.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        return None
