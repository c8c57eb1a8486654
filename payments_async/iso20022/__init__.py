"""ISO 20022 messages of the service as msgspec Structs: pacs.008, pacs.002, camt.056, camt.029."""

from ._common import (
    ErrorEnvelope,
    ErrorItem,
    SubmissionResult,
    TokenResponse,
    decode_error_envelope,
    decode_submission,
    decode_token_response,
    encode,
)

__all__ = [
    "ErrorEnvelope",
    "ErrorItem",
    "SubmissionResult",
    "TokenResponse",
    "decode_error_envelope",
    "decode_submission",
    "decode_token_response",
    "encode",
]
