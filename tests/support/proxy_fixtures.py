"""Fixtures of the proxy tests (``pytest_plugins = ["tests.support.proxy_fixtures"]``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from aiohttp import web

from payments_async import Credentials
from payments_async.sandbox import SandboxConfig
from payments_async.sandbox._app import STATE_KEY, create_app
from payments_async.testing import generate_test_keypair
from tests.support.proxy import ForwardProxy, TlsSandbox, make_tls, start_proxy, stop_proxy


@pytest.fixture(scope="module")
def forward_proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ForwardProxy]:
    """proxy.py on a free loopback port with Basic auth, stopped after the module."""
    proc, proxy = start_proxy(tmp_path_factory.mktemp("proxy"))
    try:
        yield proxy
    finally:
        stop_proxy(proc)


@pytest_asyncio.fixture
async def tls_sandbox(tmp_path: Path) -> AsyncIterator[TlsSandbox]:
    """The sandbox application on ``https://localhost:<port>`` (self-signed certificate)."""
    tls = make_tls(tmp_path)
    app = create_app(SandboxConfig())
    key, pem = generate_test_keypair()
    app[STATE_KEY].register_client("tls-client", "tls-secret", pem, kid="tls-kid", iss="tls-iss")
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls.server)
    await site.start()
    port = int(runner.addresses[0][1])
    try:
        yield TlsSandbox(
            url=f"https://localhost:{port}",
            port=port,
            credentials=Credentials(
                "tls-client", "tls-secret", key_id="tls-kid", issuer="tls-iss", private_key=key
            ),
            client_ssl=tls.client,
            app=app,
        )
    finally:
        await runner.cleanup()
