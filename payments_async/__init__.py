"""payments-async: asyncio client for the Payments Initiation and Cancellation Service.

Submit ISO 20022 pacs.008 credit transfers, read their pacs.002 status, request SEPA
cancellations with camt.056 and wait for the camt.029 outcome, with background token
refresh, SCA tokens signed over the exact request bytes, and retries that never
duplicate a payment.
"""

from ._client import CancellationOutcome, PaymentsClient, Submission
from ._credentials import Credentials
from ._errors import (
    ApiError,
    AuthenticationError,
    ConfigurationError,
    InvalidResponseError,
    NotFoundError,
    OutcomeUnknownError,
    PaymentsError,
    PermissionDeniedError,
    PollTimeoutError,
    Problem,
    RateLimitedError,
    ServerError,
    ServiceErrorDetail,
    SigningError,
    TransportError,
    ValidationError,
)
from ._hooks import Hooks, RequestEvent
from ._keys import generate_key_pair
from ._polling import PollPolicy
from ._retry import RetryBudget, RetryPolicy
from ._telemetry import Telemetry
from .iso20022 import (
    Camt029,
    Camt056,
    Outcome,
    Pacs002,
    Pacs008,
    PaymentStatus,
    build_cancellation,
    build_credit_transfer,
)
from .signing import KeySigner, Pkcs11Signer, Signer, ThreadPoolSigner

__version__ = "0.1.0.dev0"

__all__ = [
    "ApiError",
    "AuthenticationError",
    "Camt029",
    "Camt056",
    "CancellationOutcome",
    "ConfigurationError",
    "Credentials",
    "Hooks",
    "InvalidResponseError",
    "KeySigner",
    "NotFoundError",
    "Outcome",
    "OutcomeUnknownError",
    "Pacs002",
    "Pacs008",
    "PaymentStatus",
    "PaymentsClient",
    "PaymentsError",
    "PermissionDeniedError",
    "Pkcs11Signer",
    "PollPolicy",
    "PollTimeoutError",
    "Problem",
    "RateLimitedError",
    "RequestEvent",
    "RetryBudget",
    "RetryPolicy",
    "ServerError",
    "ServiceErrorDetail",
    "Signer",
    "SigningError",
    "Submission",
    "Telemetry",
    "ThreadPoolSigner",
    "TransportError",
    "ValidationError",
    "build_cancellation",
    "build_credit_transfer",
    "generate_key_pair",
]
