"""The sandbox as a process, and payments_async.testing as users use it."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import socket
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from payments_async._constants import SANDBOX_ASSERTION, SANDBOX_CLIENT_ID, SANDBOX_SCA_TOKEN
from payments_async.sandbox import SandboxConfig, SandboxServer
from payments_async.testing import sandbox_server
from tests.factories import credit_transfer
from tests.support.sandbox import predefined_client

pytest_plugins = ["tests.support.sandbox_fixtures"]

ROOT = Path(__file__).resolve().parents[2]


@contextlib.asynccontextmanager
async def _program() -> AsyncIterator[tuple[str, str]]:
    """``python -m payments_async.sandbox`` on a free port: (its URL, its banner).

    Stopped with SIGTERM on exit, which it must answer with status 0.
    """
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "payments_async.sandbox",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--log-level",
        "WARNING",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        banner = []
        while True:
            line = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode()
            assert line, "the sandbox exited before printing its banner"
            banner.append(line)
            if line.startswith("Press Ctrl+C"):
                break
        text = "".join(banner)
        yield text.split("listening on ", 1)[1].split()[0], text
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 10)
    assert proc.returncode == 0


async def test_python_m_sandbox_prints_url_and_credentials_and_serves() -> None:
    async with _program() as (url, text):
        assert url.startswith("http://127.0.0.1:")
        for value in (SANDBOX_CLIENT_ID, SANDBOX_ASSERTION, SANDBOX_SCA_TOKEN):
            assert value in text
        async with aiohttp.ClientSession() as http, http.get(url + "/_sandbox/stats") as r:
            assert r.status == 200
            assert (await r.json())["payments"] == 0


def test_non_loopback_host_is_refused() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "payments_async.sandbox", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 2
    assert "loopback" in done.stderr


async def test_sandbox_server_binds_loopback_and_really_stops() -> None:
    async with sandbox_server() as sb:
        assert sb.url.startswith("http://127.0.0.1:")
        port = sb.server.port
        assert sb.credentials is not None
        assert sb.private_key is not None
        assert sb.public_key_pem is not None
        assert sb.public_key_pem.startswith(b"-----BEGIN PUBLIC KEY-----")
    with socket.socket() as s, pytest.raises(ConnectionRefusedError):
        s.connect(("127.0.0.1", port))


def test_sandbox_server_refuses_public_address() -> None:
    from payments_async import ConfigurationError

    with pytest.raises(ConfigurationError, match="loopback"):
        SandboxServer(SandboxConfig(host="0.0.0.0"))


async def test_predefined_mode_end_to_end(http: aiohttp.ClientSession) -> None:
    async with sandbox_server(register_key=False) as sb:
        assert sb.credentials is None
        reply = await predefined_client(http, sb).submit_payment(credit_transfer())
    assert reply.status == 201


def test_the_pytest_fixture_works_for_users(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
        "filterwarnings = error\n"
    )
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["payments_async.testing"]\n')
    (tmp_path / "test_user.py").write_text(
        textwrap.dedent(
            """
            import aiohttp

            async def test_uses_fixture(payments_sandbox):
                assert payments_sandbox.credentials is not None
                url = payments_sandbox.url + "/_sandbox/stats"
                async with aiohttp.ClientSession() as s, s.get(url) as r:
                    assert r.status == 200
            """
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


async def test_the_sandbox_leaves_the_collector_alone() -> None:
    async with SandboxServer(SandboxConfig(port=0)):
        assert gc.get_freeze_count() == 0
    assert gc.get_freeze_count() == 0
