"""The public surface is a contract: exactly these names, sorted, each importable."""

import payments_async

INTENDED = {
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
    "Pkcs11Signer",
    "PermissionDeniedError",
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
}


def _ruff_order(name: str) -> tuple[int, str]:
    """The order ruff keeps ``__all__`` in (RUF022): constants, then classes, then the rest."""
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def test_all_is_exactly_the_sorted_intended_names() -> None:
    assert payments_async.__all__ == sorted(INTENDED, key=_ruff_order)
    assert _ruff_order("TOKEN_PATH") < _ruff_order("ApiError") < _ruff_order("build_cancellation")


def test_every_public_name_resolves_and_is_documented() -> None:
    for name in payments_async.__all__:
        obj = getattr(payments_async, name)
        assert obj.__doc__, f"{name} has no docstring"


def test_every_error_derives_from_the_root() -> None:
    for name in payments_async.__all__:
        obj = getattr(payments_async, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, payments_async.PaymentsError), name


def test_no_private_module_leaks_into_the_namespace() -> None:
    public = {n for n in vars(payments_async) if not n.startswith("_")}
    # subpackages users import explicitly are allowed beside __all__
    assert public - set(payments_async.__all__) <= {
        "iso20022",
        "loop",
        "sandbox",
        "testing",
        "bulk",
        "cli",
        "signing",
        "notifications",
        "sync",
    }


def test_every_module_imports_with_an_aiohttp_older_than_its_newest_names() -> None:
    """``pyproject`` allows aiohttp >= 3.9; ``DecompressSizeError`` exists from 3.13.3 on.

    A fresh process removes it before importing every module (an import of it by name
    once broke the sandbox, the receiver and ``payments_async.testing`` there).
    """
    import subprocess
    import sys

    script = (
        "import importlib, pkgutil, aiohttp.http_exceptions as h\n"
        "del h.DecompressSizeError\n"
        "import payments_async\n"
        "for m in pkgutil.walk_packages(payments_async.__path__, 'payments_async.'):\n"
        "    importlib.import_module(m.name)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
