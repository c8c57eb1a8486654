"""payments-async: asyncio client for the Payments Initiation and Cancellation Service.

Submit ISO 20022 pacs.008 credit transfers, read their pacs.002 status, request SEPA
cancellations with camt.056 and wait for the camt.029 outcome, with background token
refresh, SCA tokens signed over the exact request bytes, and retries that never
duplicate a payment.
"""

from ._checks import check_payments_service_id
from ._client import PaymentsClient
from ._config import Limits, Timeout
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
from ._instrument import Hooks, RequestEvent
from ._keys import generate_key_pair
from ._models import CancellationOutcome, Submission
from ._polling import PollPolicy
from ._retry import RetryBudget, RetryPolicy
from ._telemetry import Telemetry
from ._version import __version__ as __version__
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
    "Limits",
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
    "Timeout",
    "TransportError",
    "ValidationError",
    "build_cancellation",
    "build_credit_transfer",
    "check_payments_service_id",
    "generate_key_pair",
]
