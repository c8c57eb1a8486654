"""payments-async: asyncio client for the Payments Initiation and Cancellation Service.

Submit ISO 20022 pacs.008 credit transfers, read their pacs.002 status, request SEPA
cancellations with camt.056 and wait for the camt.029 outcome, with background token
refresh, SCA tokens signed over the exact request bytes, and retries that never
duplicate a payment.
"""

import typing as _typing

if _typing.TYPE_CHECKING:  # the names below are imported on first use (see __getattr__)
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

# Each public name is imported from its module on first use, so that a program that needs
# only part of the package (``payments-async --help``) does not load aiohttp or msgspec.
_LAZY: dict[str, str] = {
    "ApiError": "._errors",
    "AuthenticationError": "._errors",
    "Camt029": ".iso20022",
    "Camt056": ".iso20022",
    "CancellationOutcome": "._client",
    "ConfigurationError": "._errors",
    "Credentials": "._credentials",
    "Hooks": "._hooks",
    "InvalidResponseError": "._errors",
    "KeySigner": ".signing",
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
    "RateLimitedError": "._errors",
    "RequestEvent": "._hooks",
    "RetryBudget": "._retry",
    "RetryPolicy": "._retry",
    "ServerError": "._errors",
    "ServiceErrorDetail": "._errors",
    "Signer": ".signing",
    "SigningError": "._errors",
    "Submission": "._client",
    "Telemetry": "._telemetry",
    "ThreadPoolSigner": ".signing",
    "TransportError": "._errors",
    "ValidationError": "._errors",
    "build_cancellation": ".iso20022",
    "build_credit_transfer": ".iso20022",
    "generate_key_pair": "._keys",
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
