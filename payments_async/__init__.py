"""payments-async: asyncio client for the Payments Initiation and Cancellation Service.

Submit ISO 20022 pacs.008 credit transfers, read their pacs.002 status, request SEPA
cancellations with camt.056 and wait for the camt.029 outcome, with background token
refresh, SCA tokens signed over the exact request bytes, and retries that never
duplicate a payment.
"""

import typing as _typing

from ._version import __version__ as __version__

if _typing.TYPE_CHECKING:  # the names below are imported on first use (see __getattr__)
    from ._checks import check_key_id_and_issuer, check_payments_service_id
    from ._client import PaymentsClient
    from ._config import Limits, Timeout
    from ._constants import DEFAULT_KEYGEN_BITS, MIN_RSA_BITS, POLL_TIMEOUT, TOKEN_PATH
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
    from ._models import Answered, CancellationOutcome, RawResponse, Submission
    from ._polling import PollPolicy
    from ._profile import ServiceProfile
    from ._rate import RateLimit, RateLimiter, limit_rate
    from ._retry import RetryBudget, RetryPolicy
    from ._telemetry import Telemetry
    from ._urls import redact_url
    from .iso20022 import (
        EPC_ADDRESS_CUTOVER,
        Address,
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
    from .sync import SyncPaymentsClient

__all__ = [
    "DEFAULT_KEYGEN_BITS",
    "EPC_ADDRESS_CUTOVER",
    "MIN_RSA_BITS",
    "POLL_TIMEOUT",
    "TOKEN_PATH",
    "Address",
    "Answered",
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
    "RateLimit",
    "RateLimitedError",
    "RateLimiter",
    "RawResponse",
    "RequestEvent",
    "RetryBudget",
    "RetryPolicy",
    "ServerError",
    "ServiceErrorDetail",
    "ServiceProfile",
    "Signer",
    "SigningError",
    "Submission",
    "SyncPaymentsClient",
    "Telemetry",
    "ThreadPoolSigner",
    "Timeout",
    "TransportError",
    "ValidationError",
    "build_cancellation",
    "build_credit_transfer",
    "check_key_id_and_issuer",
    "check_payments_service_id",
    "generate_key_pair",
    "limit_rate",
    "redact_url",
]

# Each public name is imported from its module on first use, so that a program that needs
# only part of the package (``payments-async --help``) does not load aiohttp or msgspec.
_LAZY: dict[str, str] = {
    "DEFAULT_KEYGEN_BITS": "._constants",
    "EPC_ADDRESS_CUTOVER": ".iso20022",
    "MIN_RSA_BITS": "._constants",
    "POLL_TIMEOUT": "._constants",
    "TOKEN_PATH": "._constants",
    "Address": ".iso20022",
    "Answered": "._models",
    "ApiError": "._errors",
    "AuthenticationError": "._errors",
    "Camt029": ".iso20022",
    "Camt056": ".iso20022",
    "CancellationOutcome": "._models",
    "ConfigurationError": "._errors",
    "Credentials": "._credentials",
    "Hooks": "._instrument",
    "InvalidResponseError": "._errors",
    "KeySigner": ".signing",
    "Limits": "._config",
    "NotFoundError": "._errors",
    "Outcome": ".iso20022",
    "OutcomeUnknownError": "._errors",
    "Pacs002": ".iso20022",
    "Pacs008": ".iso20022",
    "PaymentStatus": ".iso20022",
    "PaymentsClient": "._client",
    "PaymentsError": "._errors",
    "PermissionDeniedError": "._errors",
    "Pkcs11Signer": ".signing",
    "PollPolicy": "._polling",
    "PollTimeoutError": "._errors",
    "Problem": "._errors",
    "RateLimit": "._rate",
    "RateLimitedError": "._errors",
    "RateLimiter": "._rate",
    "RawResponse": "._models",
    "RequestEvent": "._instrument",
    "RetryBudget": "._retry",
    "RetryPolicy": "._retry",
    "ServerError": "._errors",
    "ServiceErrorDetail": "._errors",
    "ServiceProfile": "._profile",
    "Signer": ".signing",
    "SigningError": "._errors",
    "Submission": "._models",
    "SyncPaymentsClient": ".sync",
    "Telemetry": "._telemetry",
    "ThreadPoolSigner": ".signing",
    "Timeout": "._config",
    "TransportError": "._errors",
    "ValidationError": "._errors",
    "build_cancellation": ".iso20022",
    "build_credit_transfer": ".iso20022",
    "check_key_id_and_issuer": "._checks",
    "check_payments_service_id": "._checks",
    "generate_key_pair": "._keys",
    "limit_rate": "._rate",
    "redact_url": "._urls",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
