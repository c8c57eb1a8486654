"""Suite-wide fixtures: a clean environment for every test."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

# A real PostgreSQL started by the suite (see pg_fixtures.py), for the tests that ask.
from pg_fixtures import pg_dsn, postgres_server  # noqa: F401

from payments_async import Credentials

_ENV_TO_CLEAR = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "PAYMENTS_CLIENT_ID",
    "PAYMENTS_CLIENT_SECRET",
    "PAYMENTS_KEY_ID",
    "PAYMENTS_ISSUER",
    "PAYMENTS_PRIVATE_KEY_FILE",
    "PAYMENTS_PROXY",
)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy, CA bundle or credentials from the developer's shell leaks into a test."""
    for name in _ENV_TO_CLEAR:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def rsa_private_key() -> RSAPrivateKey:
    """One 2048-bit key for the whole run: generating keys is slow."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="session")
def rsa_credentials(rsa_private_key: RSAPrivateKey) -> Credentials:
    """Signed-mode credentials for a client that no server knows (mocked transports)."""
    return Credentials(
        "test-client",
        "test-secret-value",
        key_id="test-kid",
        issuer="test-issuer",
        private_key=rsa_private_key,
    )
