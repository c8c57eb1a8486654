"""Outbound proxies through a real proxy.py process: HTTP, HTTPS via CONNECT, env, CLI."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import pickle
import socket
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from payments_async import PaymentsClient, RetryPolicy, Timeout, TransportError
from payments_async._instrument import Exchange
from payments_async._proxy import Proxy
from payments_async._transport import Transport
from payments_async.cli import cli
from payments_async.testing import sandbox_server
from tests.factories import credit_transfer
from tests.support.cli import threaded_sandbox
from tests.support.proxy import (
    PROXY_PASSWORD,
    PROXY_USER,
    ForwardProxy,
    TlsSandbox,
    start_proxy,
    stop_proxy,
)

pytest_plugins = ["tests.support.proxy_fixtures"]

WRONG_PASSWORD = "Wr0ng-Pr0xy-Pa55"
FAST = RetryPolicy(attempts=2, wait_initial=0.01, wait_max=0.05)


def _secret_forms(password: str) -> list[str]:
    basic = base64.b64encode(f"{PROXY_USER}:{password}".encode()).decode()
    return [password, basic]


def _assert_no_secret(text: str, password: str = PROXY_PASSWORD) -> None:
    for secret in _secret_forms(password):
        assert secret not in text


async def _wait_for_log(
    proxy: ForwardProxy, seen: int, predicate: Callable[[str], bool]
) -> list[str]:
    """The access-log lines after the first ``seen``, once one matches (proxy.py logs late)."""
    deadline = time.monotonic() + 10
    while True:
        lines = proxy.access_log()[seen:]
        if any(predicate(line) for line in lines) or time.monotonic() > deadline:
            return lines
        await asyncio.sleep(0.05)


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_http_service_through_the_proxy_with_credentials(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    proc, proxy = start_proxy(tmp_path)  # our own: this test stops it
    try:
        async with sandbox_server() as sb:
            assert sb.credentials is not None
            port = sb.server.port
            async with PaymentsClient(
                sb.credentials, base_url=sb.url, proxy=proxy.url_with_credentials, retry=FAST
            ) as client:
                _assert_no_secret(repr(client))
                assert await client.access_token_lifetime() > 0
            # proxy.py writes a connection's first request line when the connection ends.
            route = f"POST 127.0.0.1:{port}/oauth/token - 200"
            lines = await _wait_for_log(proxy, 0, lambda line: route in line)
            assert any(route in line for line in lines), lines
            async with PaymentsClient(
                sb.credentials, base_url=sb.url, proxy=proxy.url_with_credentials, retry=FAST
            ) as client:
                sub = await client.submit_credit_transfer(credit_transfer())
                await client.get_credit_transfer_status(sub.payments_service_id)
                # Every exchange rode the connection through the proxy: with the proxy
                # gone, the client is cut off from the service.
                stop_proxy(proc)
                with pytest.raises(TransportError, match="proxy"):
                    await client.get_credit_transfer_status(sub.payments_service_id)
    finally:
        stop_proxy(proc)
    assert sub.created
    _assert_no_secret(caplog.text)


async def test_https_service_through_a_connect_tunnel(
    forward_proxy: ForwardProxy, tls_sandbox: TlsSandbox, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    seen = len(forward_proxy.access_log())
    async with PaymentsClient(
        tls_sandbox.credentials,
        base_url=tls_sandbox.url,
        ssl_context=tls_sandbox.client_ssl,
        proxy=forward_proxy.url_with_credentials,
    ) as client:
        sub = await client.submit_credit_transfer(credit_transfer())
        status = await client.get_credit_transfer_status(sub.payments_service_id)
    assert sub.created
    assert status is not None
    tunnel = f"CONNECT localhost:{tls_sandbox.port}"
    lines = await _wait_for_log(forward_proxy, seen, lambda line: tunnel in line)
    assert any(tunnel in line for line in lines), lines
    # Inside the tunnel the proxy sees no request line, only the tunnel.
    assert not any("/payments/" in line for line in lines)
    _assert_no_secret(caplog.text)


async def test_the_service_certificate_is_still_checked_through_the_tunnel(
    forward_proxy: ForwardProxy, tls_sandbox: TlsSandbox
) -> None:
    async with PaymentsClient(
        tls_sandbox.credentials,
        base_url=tls_sandbox.url,
        proxy=forward_proxy.url_with_credentials,
        retry=FAST,
    ) as client:
        seen = len(forward_proxy.access_log())
        with pytest.raises(TransportError, match="TLS failed"):
            await client.access_token_lifetime()
    # The proxy logs the tunnel once it has closed both ends: only then may the sandbox
    # stop, or the half-open TLS connection on its side outlives its event loop.
    tunnel = f"CONNECT localhost:{tls_sandbox.port}"
    lines = await _wait_for_log(forward_proxy, seen, lambda line: tunnel in line)
    assert any(tunnel in line for line in lines), lines
    await asyncio.sleep(0.2)  # the sandbox's loop reads the end of that connection


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https-connect"])
async def test_wrong_proxy_password_is_a_clear_error_that_never_shows_it(
    forward_proxy: ForwardProxy,
    tls_sandbox: TlsSandbox,
    caplog: pytest.LogCaptureFixture,
    tls: bool,
) -> None:
    caplog.set_level(logging.DEBUG)
    proxy = f"http://{PROXY_USER}:{WRONG_PASSWORD}@127.0.0.1:{forward_proxy.port}"
    async with sandbox_server() as sb:
        assert sb.credentials is not None
        creds, url = (tls_sandbox.credentials, tls_sandbox.url) if tls else (sb.credentials, sb.url)
        async with PaymentsClient(
            creds, base_url=url, ssl_context=tls_sandbox.client_ssl, proxy=proxy, retry=FAST
        ) as client:
            started = time.monotonic()
            with pytest.raises(TransportError) as info:
                await client.access_token_lifetime()
            elapsed = time.monotonic() - started
    err = info.value
    assert err.status == 407
    assert err.retryable is False
    assert elapsed < 5  # refused credentials are not retried for the fetch deadline
    assert f"the proxy http://127.0.0.1:{forward_proxy.port} refused our credentials" in str(err)
    assert err.__cause__ is None
    everything = "\n".join(
        [
            str(err),
            repr(err),
            "".join(traceback.format_exception(err)),
            repr(pickle.loads(pickle.dumps(err))),
            caplog.text,
        ]
    )
    _assert_no_secret(everything, WRONG_PASSWORD)


async def test_unreachable_proxy_is_named_without_its_credentials() -> None:
    port = _dead_port()
    proxy = Proxy.parse(f"http://{PROXY_USER}:{PROXY_PASSWORD}@127.0.0.1:{port}")
    transport = Transport("https://localhost:1", proxy=proxy)
    try:
        with pytest.raises(TransportError) as info:
            await transport.request(Exchange("GET", "/x", "r", 1), {}, timeout=5)
    finally:
        await transport.aclose()
    err = info.value
    assert str(err).startswith(f"GET /x: cannot connect to the proxy http://127.0.0.1:{port}:")
    assert err.request_sent is False
    _assert_no_secret(str(err) + repr(err) + "".join(traceback.format_exception(err)))


async def test_trust_env_uses_https_proxy_and_honours_no_proxy(
    forward_proxy: ForwardProxy, tls_sandbox: TlsSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    def client(trust_env: bool, timeout: Timeout | None = None) -> PaymentsClient:
        return PaymentsClient(
            tls_sandbox.credentials,
            base_url=tls_sandbox.url,
            ssl_context=tls_sandbox.client_ssl,
            trust_env=trust_env,
            retry=FAST,
            timeout=timeout,
        )

    tunnel = f"CONNECT localhost:{tls_sandbox.port}"
    monkeypatch.setenv("HTTPS_PROXY", forward_proxy.url_with_credentials)
    seen = len(forward_proxy.access_log())
    async with client(trust_env=True) as c:
        assert await c.access_token_lifetime() > 0
    lines = await _wait_for_log(forward_proxy, seen, lambda line: tunnel in line)
    assert any(tunnel in line for line in lines), lines

    # A proxy that is not there: trusted, the client fails; NO_PROXY or not trusting the
    # environment, it never tries it.
    # (The token fetch retries a refused connection until its own deadline: a second here,
    # not the default's thirty.)
    dead = _dead_port()
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{dead}")
    async with client(trust_env=True, timeout=Timeout(token=1.0)) as c:
        with pytest.raises(TransportError, match=f"cannot connect to the proxy .*:{dead}"):
            await c.get_credit_transfer_status("abc")
    async with client(trust_env=False) as c:
        assert await c.access_token_lifetime() > 0
    monkeypatch.setenv("NO_PROXY", "example.org, localhost")
    async with client(trust_env=True) as c:
        assert await c.access_token_lifetime() > 0


def _cli_via_proxy(
    proxy: ForwardProxy, args: list[str], env: dict[str, str] | None = None
) -> tuple[Result, list[str]]:
    """Run the CLI against a threaded sandbox; return its result and the proxy's new lines.

    The sandbox is stopped only after the proxy has closed its side of the tunnel (it logs
    a connection when it ends) and the sandbox has no connection left, so no socket of
    the stopped sandbox's loop is left to the garbage collector.
    """
    seen = len(proxy.access_log())
    with threaded_sandbox() as sb:
        result = CliRunner().invoke(
            cli, ["--base-url", sb.url, "--sandbox", *args], env=env, catch_exceptions=False
        )
        route = f"127.0.0.1:{sb.server.port}/oauth/token"
        lines = asyncio.run(_wait_for_log(proxy, seen, lambda line: route in line))
        deadline = time.monotonic() + 10
        while sb.call(_open_connections, sb.server) and time.monotonic() < deadline:
            time.sleep(0.05)
    return result, [line for line in lines if route in line]


def _open_connections(server: Any) -> int:
    return int(server._server.open_connections)


def test_cli_proxy_option(forward_proxy: ForwardProxy, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    result, lines = _cli_via_proxy(
        forward_proxy, ["-v", "--proxy", forward_proxy.url_with_credentials, "token"]
    )
    assert result.exit_code == 0, result.output
    assert lines
    _assert_no_secret(result.output + caplog.text)


def test_cli_proxy_from_the_environment_variable(forward_proxy: ForwardProxy) -> None:
    result, lines = _cli_via_proxy(
        forward_proxy, ["token"], env={"PAYMENTS_PROXY": forward_proxy.url_with_credentials}
    )
    assert result.exit_code == 0, result.output
    assert lines


def test_cli_wrong_proxy_password_is_one_line_without_it(forward_proxy: ForwardProxy) -> None:
    proxy = f"http://{PROXY_USER}:{WRONG_PASSWORD}@127.0.0.1:{forward_proxy.port}"
    with threaded_sandbox() as sb:
        result = CliRunner().invoke(
            cli, ["--base-url", sb.url, "--sandbox", "--proxy", proxy, "token"]
        )
    assert result.exit_code == 3
    [line] = result.output.strip().splitlines()
    assert line.startswith("error: POST /oauth/token -> 407: the proxy http://127.0.0.1:")
    assert "refused our credentials" in line
    _assert_no_secret(result.output, WRONG_PASSWORD)


def test_cli_never_bypasses_the_proxy_to_explain_a_failure(forward_proxy: ForwardProxy) -> None:
    # A bare listener stands in for the service and counts connections: with a wrong
    # password the proxy answers 407 itself, so any connection here went around it.
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                accepted.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    proxy = f"http://{PROXY_USER}:{WRONG_PASSWORD}@127.0.0.1:{forward_proxy.port}"
    service = f"http://127.0.0.1:{listener.getsockname()[1]}"
    try:
        result = CliRunner().invoke(
            cli, ["--base-url", service, "--sandbox", "--proxy", proxy, "token"]
        )
    finally:
        stop.set()
        thread.join(5)
        listener.close()
        for conn in accepted:
            conn.close()
    assert result.exit_code == 3
    assert "refused our credentials" in result.output
    assert accepted == []


def test_cli_bad_proxy_url_is_a_usage_error() -> None:
    result = CliRunner().invoke(
        cli,
        [
            *("--base-url", "https://api.bank.example", "--sandbox"),
            *("--proxy", "socks5://u:pw@h:1", "token"),
        ],
    )
    assert result.exit_code == 2
    [line] = result.output.strip().splitlines()
    assert "scheme 'socks5' is not supported" in line
    assert "pw@" not in line


def test_cli_trust_env_uses_the_standard_variables(forward_proxy: ForwardProxy) -> None:
    with threaded_sandbox() as sb:  # not trusted: the variable is not read
        ignored = CliRunner().invoke(
            cli,
            ["--base-url", sb.url, "--sandbox", "token"],
            env={"HTTP_PROXY": "http://127.0.0.1:9"},
        )
    assert ignored.exit_code == 0, ignored.output
    result, lines = _cli_via_proxy(
        forward_proxy,
        ["--trust-env", "token"],
        env={"HTTP_PROXY": forward_proxy.url_with_credentials},
    )
    assert result.exit_code == 0, result.output
    assert lines
