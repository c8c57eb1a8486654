"""Helpers for users' tests: a sandbox on a free loopback port, key pairs, a manual clock.

```python
from payments_async.testing import sandbox_server

async def test_pay() -> None:
    async with sandbox_server() as sb:
        async with PaymentsClient(sb.credentials, base_url=sb.url) as client:
            ...
```

With pytest, ``pytest_plugins = ["payments_async.testing"]`` in a ``conftest.py`` gives
the ``payments_sandbox`` fixture (override ``payments_sandbox_config`` to configure it),
and for synchronous tests ``payments_sync_client``: a ``SyncPaymentsClient`` on a sandbox
that runs on a thread of its own (``payments_sync_sandbox``):

```python
def test_pay(payments_sync_client: SyncPaymentsClient) -> None:
    submission = payments_sync_client.submit_credit_transfer(transfer)
```

pytest and pytest-asyncio are needed only for the fixtures: importing this module without
them works.
"""

from __future__ import annotations

import contextlib
import functools
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field

from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

from ._constants import MIN_RSA_BITS
from ._credentials import Credentials
from ._keys import generate_private_key, public_key_pem
from ._portal import LoopStopped, LoopThread
from .sandbox import SandboxConfig, SandboxServer
from .sync import SyncPaymentsClient

__all__ = [
    "ManualClock",
    "SandboxHandle",
    "generate_test_keypair",
    "sandbox_in_thread",
    "sandbox_server",
]

TEST_KEY_ID = "test-kid"
TEST_ISSUER = "test-issuer"


def generate_test_keypair(bits: int = MIN_RSA_BITS) -> tuple[RSAPrivateKey, bytes]:
    """A fresh RSA key pair for tests: the private key and its public PEM.

    Generating an RSA key is slow; reuse one across tests where you can
    (`sandbox_server` does).

    Args:
        bits: modulus size; at least 2048.

    Raises:
        ConfigurationError: ``bits`` below 2048.
    """
    key = generate_private_key(bits)
    return key, public_key_pem(key)


@functools.cache
def _shared_test_key() -> RSAPrivateKey:
    return generate_private_key(MIN_RSA_BITS)


class ManualClock:
    """A clock tests move by hand; pass it as ``SandboxConfig(clock=...)``.

    It starts at the current wall-clock time (JWTs signed with real time stay valid) and
    only moves when told to.

    Args:
        start: initial time in epoch seconds; ``time.time()`` if None.
    """

    def __init__(self, start: float | None = None) -> None:
        self.now = time.time() if start is None else start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds``."""
        self.now += seconds


@dataclass(frozen=True, slots=True)
class SandboxHandle:
    """A running sandbox and ready-made credentials for it.

    Attributes:
        url: base URL (``http://127.0.0.1:<port>``).
        server: the server (``server.state`` for counters, ``server.stats()``).
        credentials: a freshly registered client signing with ``private_key``; None when
            ``register_key=False``.
        private_key: the client's RSA private key (None when ``register_key=False``).
        public_key_pem: its public PEM, as registered.
        sandbox_credentials: the predefined client in predefined-token mode (no keys).
    """

    url: str
    server: SandboxServer
    credentials: Credentials | None = field(repr=False)
    private_key: RSAPrivateKey | None = field(repr=False)
    public_key_pem: bytes | None = field(repr=False)
    sandbox_credentials: Credentials = field(repr=False)

    def register_key(
        self,
        private_key: RSAPrivateKey | None = None,
        *,
        key_id: str,
        issuer: str,
    ) -> Credentials:
        """Register another key for the handle's client, as during a key rotation.

        Both keys then work; each access token is bound to the kid of the assertion it
        was issued for, so sign the SCA tokens sent with it with the same key.

        Args:
            private_key: the new key; a fresh 2048-bit key if None.
            key_id: its kid (must differ from the first key's to keep both).
            issuer: its iss.

        Returns:
            Credentials of the same client signing with the new key.

        Raises:
            RuntimeError: the handle has no registered client (``register_key=False``).
        """
        if self.credentials is None:
            raise RuntimeError("this sandbox has no registered client (register_key=False)")
        key = private_key if private_key is not None else generate_private_key(MIN_RSA_BITS)
        creds = self.credentials
        self.server.register_client(
            creds.client_id, creds.client_secret, public_key_pem(key), kid=key_id, iss=issuer
        )
        return Credentials(
            creds.client_id, creds.client_secret, key_id=key_id, issuer=issuer, private_key=key
        )


@asynccontextmanager
async def sandbox_server(
    config: SandboxConfig | None = None,
    *,
    register_key: bool = True,
    private_key: RSAPrivateKey | None = None,
    client_id: str | None = None,
    client_secret: str | None = None,
    key_id: str = TEST_KEY_ID,
    issuer: str = TEST_ISSUER,
) -> AsyncIterator[SandboxHandle]:
    """Start a sandbox on a free loopback port, register a client, yield, then stop it.

    Args:
        config: sandbox settings; ``SandboxConfig()`` if None (port 0 is used unless set).
        register_key: register a client with a key pair and give its ``credentials``.
        private_key: the client's key; a per-process 2048-bit test key if None (generated
            once, so many sandboxes cost one key generation).
        client_id: the registered client id; a fresh ``test-client-<hex>`` if None.
        client_secret: its secret; a random one if None.
        key_id: the registered kid.
        issuer: the registered iss.

    Yields:
        The handle with URL, server, credentials and key pair.
    """
    server = SandboxServer(config)
    creds: Credentials | None = None
    pem: bytes | None = None
    key: RSAPrivateKey | None = None
    if register_key:
        key = private_key if private_key is not None else _shared_test_key()
        pem = public_key_pem(key)
        cid = client_id or f"test-client-{uuid.uuid4().hex[:12]}"
        secret = client_secret or uuid.uuid4().hex
        server.register_client(cid, secret, pem, kid=key_id, iss=issuer)
        creds = Credentials(cid, secret, key_id=key_id, issuer=issuer, private_key=key)
    async with server:
        yield SandboxHandle(
            url=server.url,
            server=server,
            credentials=creds,
            private_key=key,
            public_key_pem=pem,
            sandbox_credentials=Credentials.sandbox(),
        )


@contextmanager
def sandbox_in_thread(config: SandboxConfig | None = None) -> Iterator[SandboxHandle]:
    """``sandbox_server(config)`` for synchronous code: the sandbox runs on a thread of its
    own and serves until the block ends, whatever the calling thread does meanwhile (a
    ``SyncPaymentsClient``'s blocking calls).

    Yields:
        The handle with URL, server, credentials and key pair.
    """
    thread = LoopThread("payments-async-sandbox")
    try:
        server = sandbox_server(config)
        handle = thread.run(server.__aenter__())
        try:
            yield handle
        finally:
            with contextlib.suppress(LoopStopped):  # in a forked child: the parent's sandbox
                thread.run(server.__aexit__(None, None, None))
    finally:
        thread.stop()


try:  # the fixtures exist only where pytest-asyncio is installed (test environments)
    import pytest
    import pytest_asyncio
except ImportError:  # pragma: no cover - exercised only without the test extras
    pass
else:

    @pytest.fixture
    def payments_sandbox_config() -> SandboxConfig | None:
        """The config of ``payments_sandbox``; override this fixture to change it."""
        return None

    @pytest_asyncio.fixture
    async def payments_sandbox(
        payments_sandbox_config: SandboxConfig | None,
    ) -> AsyncIterator[SandboxHandle]:
        """A sandbox on a free loopback port with a registered client, stopped after."""
        async with sandbox_server(payments_sandbox_config) as handle:
            yield handle

    @pytest.fixture
    def payments_sync_sandbox(
        payments_sandbox_config: SandboxConfig | None,
    ) -> Iterator[SandboxHandle]:
        """A sandbox on a thread of its own, for synchronous tests; stopped after."""
        with sandbox_in_thread(payments_sandbox_config) as handle:
            yield handle

    @pytest.fixture
    def payments_sync_client(payments_sync_sandbox: SandboxHandle) -> Iterator[SyncPaymentsClient]:
        """A ``SyncPaymentsClient`` with the registered client's credentials on
        ``payments_sync_sandbox``; closed after."""
        assert payments_sync_sandbox.credentials is not None
        with SyncPaymentsClient(
            payments_sync_sandbox.credentials, base_url=payments_sync_sandbox.url
        ) as client:
            yield client
