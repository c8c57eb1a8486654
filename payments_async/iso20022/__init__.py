"""ISO 20022 messages of the service as msgspec Structs (pacs.008, pacs.002, camt.056,
camt.029, pacs.028), their SEPA rules, and the TARGET2 calendar of recall deadlines."""

from ._addresses import EPC_ADDRESS_CUTOVER, Address
from ._calendar import (
    RECALL_WINDOWS,
    RecallWindow,
    add_banking_days,
    is_banking_day,
    recall_deadline,
    target2_today,
)
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
from ._parties import check_lei
from ._recall import recall_window_problems
from ._sepa_text import Transliteration, outside_sepa_set, transliterate
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
from .pacs008 import (
    CreditTransfer,
    GenericOrganisationIdentification,
    OrganisationIdentificationSchemeName,
    Pacs008,
    Party,
    PartyIdentification,
    PartyOrganisationIdentification,
    decode_pacs008,
)
from .pacs028 import (
    RECALL_MESSAGE_NAME,
    Pacs028,
    StatusRequest,
    build_status_request,
    decode_pacs028,
)

__all__ = [
    "EPC_ADDRESS_CUTOVER",
    "RECALL_MESSAGE_NAME",
    "RECALL_WINDOWS",
    "REJECTION_REASONS",
    "Address",
    "Camt029",
    "Camt056",
    "CancellationRequest",
    "CancellationResolution",
    "CreditTransfer",
    "ErrorEnvelope",
    "ErrorItem",
    "GenericOrganisationIdentification",
    "OrganisationIdentificationSchemeName",
    "Outcome",
    "Pacs002",
    "Pacs008",
    "Pacs028",
    "Party",
    "PartyIdentification",
    "PartyOrganisationIdentification",
    "PaymentStatus",
    "RecallWindow",
    "RejectionReason",
    "Resolution",
    "StatusReport",
    "StatusRequest",
    "SubmissionResult",
    "TokenResponse",
    "Transliteration",
    "add_banking_days",
    "build_cancellation",
    "build_credit_transfer",
    "build_status_request",
    "check_lei",
    "classify_cancellation_status",
    "classify_payment_status",
    "decode_camt029",
    "decode_camt056",
    "decode_error_envelope",
    "decode_pacs002",
    "decode_pacs008",
    "decode_pacs028",
    "decode_submission",
    "decode_token_response",
    "encode",
    "encode_validated",
    "find_problems",
    "is_banking_day",
    "outside_sepa_set",
    "recall_deadline",
    "recall_window_problems",
    "return_request_needed",
    "summarize_resolution",
    "summarize_status_report",
    "target2_today",
    "transliterate",
    "validate",
]
