"""ISO 20022 messages of the service as msgspec Structs: pacs.008, pacs.002, camt.056, camt.029."""

from ._addresses import EPC_ADDRESS_CUTOVER, Address
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
from ._validate import encode_validated, find_problems, validate
from .builders import build_cancellation, build_credit_transfer
from .camt029 import Camt029, Resolution, decode_camt029
from .camt056 import Camt056, CancellationRequest, decode_camt056
from .codes import (
    REJECTION_REASONS,
    CancellationResolution,
    Outcome,
    PaymentStatus,
    RejectionReason,
    classify_cancellation_status,
    classify_payment_status,
    return_request_needed,
    summarize_resolution,
    summarize_status_report,
)
from .pacs002 import Pacs002, StatusReport, decode_pacs002
from .pacs008 import CreditTransfer, Pacs008, decode_pacs008

__all__ = [
    "EPC_ADDRESS_CUTOVER",
    "REJECTION_REASONS",
    "Address",
    "Camt029",
    "Camt056",
    "CancellationRequest",
    "CancellationResolution",
    "CreditTransfer",
    "ErrorEnvelope",
    "ErrorItem",
    "Outcome",
    "Pacs002",
    "Pacs008",
    "PaymentStatus",
    "RejectionReason",
    "Resolution",
    "StatusReport",
    "SubmissionResult",
    "TokenResponse",
    "build_cancellation",
    "build_credit_transfer",
    "classify_cancellation_status",
    "classify_payment_status",
    "decode_camt029",
    "decode_camt056",
    "decode_error_envelope",
    "decode_pacs002",
    "decode_pacs008",
    "decode_submission",
    "decode_token_response",
    "encode",
    "encode_validated",
    "find_problems",
    "return_request_needed",
    "summarize_resolution",
    "summarize_status_report",
    "validate",
]
