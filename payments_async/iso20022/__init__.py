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
from .camt029 import Camt029, Resolution, decode_camt029
from .camt056 import Camt056, CancellationRequest, decode_camt056
from .pacs002 import Pacs002, StatusReport, decode_pacs002
from .pacs008 import CreditTransfer, Pacs008, decode_pacs008

__all__ = [
    "Camt029",
    "Camt056",
    "CancellationRequest",
    "CreditTransfer",
    "ErrorEnvelope",
    "ErrorItem",
    "Pacs002",
    "Pacs008",
    "Resolution",
    "StatusReport",
    "SubmissionResult",
    "TokenResponse",
    "decode_camt029",
    "decode_camt056",
    "decode_error_envelope",
    "decode_pacs002",
    "decode_pacs008",
    "decode_submission",
    "decode_token_response",
    "encode",
]
