"""Item 8: opening and closing the client many times leaves no socket, file descriptor,
task or warning behind (the suite runs with filterwarnings=error as well)."""

from __future__ import annotations

import asyncio
import gc
import warnings
from typing import Any

import aiohttp
import psutil  # type: ignore[import-untyped]
import pytest

from payments_async import PaymentsClient
from payments_async.sandbox import SandboxConfig
from payments_async.testing import SandboxHandle, sandbox_server
from tests.factories import credit_transfer
from tests.support.reliability import fast_retry, record


def _client_sockets(port: int) -> int:
    """Our process's TCP connections to the sandbox's port (the client side)."""
    conns = psutil.Process().net_connections(kind="tcp")
    return sum(1 for c in conns if c.raddr and c.raddr.port == port)


def _all_sockets(port: int) -> int:
    conns = psutil.Process().net_connections(kind="tcp")
    return sum(
        1
        for c in conns
        if (c.raddr and c.raddr.port == port) or (c.laddr and c.laddr.port == port and c.raddr)
    )


async def _settle(port: int) -> None:
    """Give the server a moment to close its side of connections the client closed."""
    for _ in range(100):
        if _all_sockets(port) == 0:
            return
        await asyncio.sleep(0.02)


async def _cycles(sb: SandboxHandle, n: int) -> dict[str, Any]:
    assert sb.credentials is not None
    port = sb.server.port
    loop = asyncio.get_running_loop()
    loop_errors: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, ctx: loop_errors.append(ctx))
    proc = psutil.Process()
    await _settle(port)
    gc.collect()
    fds_before = proc.num_fds()
    tasks_before = asyncio.all_tasks()
    peak = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(n):
            async with PaymentsClient(sb.credentials, base_url=sb.url, **fast_retry()) as c:
                if i % 2:
                    await c.submit_credit_transfer(credit_transfer())
                else:
                    await c.access_token_lifetime()
                peak = max(peak, _client_sockets(port))
        await _settle(port)
        gc.collect()
        await asyncio.sleep(0)
    leftover_tasks = {t for t in asyncio.all_tasks() - tasks_before if not t.done()}
    leftover_tasks.discard(asyncio.current_task())
    loop.set_exception_handler(None)
    figures = {
        "cycles": n,
        "peak_client_sockets": peak,
        "client_sockets_after": _client_sockets(port),
        "all_sockets_after": _all_sockets(port),
        "fds_before": fds_before,
        "fds_after": proc.num_fds(),
        "tasks_left": len(leftover_tasks),
        "warnings": len(caught),
        "loop_errors": len(loop_errors),
    }
    assert _client_sockets(port) == 0
    assert _all_sockets(port) == 0
    assert proc.num_fds() <= fds_before, figures
    assert not leftover_tasks, leftover_tasks
    assert not caught, [str(w.message) for w in caught]
    assert not loop_errors, loop_errors
    assert peak >= 1  # the cycles really opened connections
    return figures


async def test_open_close_cycles_leave_nothing_behind() -> None:
    async with sandbox_server(SandboxConfig()) as sb:
        record("resource hygiene (default)", **await _cycles(sb, 100))


@pytest.mark.soak
async def test_open_close_cycles_leave_nothing_behind_soak() -> None:
    async with sandbox_server(SandboxConfig()) as sb:
        record("resource hygiene (soak)", **await _cycles(sb, 1000))


async def test_a_borrowed_session_is_left_open_and_clean() -> None:
    async with sandbox_server(SandboxConfig()) as sb, aiohttp.ClientSession() as session:
        assert sb.credentials is not None
        for _ in range(20):
            async with PaymentsClient(
                sb.credentials, base_url=sb.url, session=session, **fast_retry()
            ) as c:
                await c.access_token_lifetime()
        assert not session.closed  # the client never closes what it borrowed


def _running_client_tasks(before: set[asyncio.Task[object]]) -> set[asyncio.Task[object]]:
    """Tasks started since ``before`` and still running, the sandbox's own connection
    handlers left out: one whose client has just gone ends when the server processes the
    close, a loop turn or two later, and it is the server's, not the client's."""
    return {
        task
        for task in asyncio.all_tasks() - before
        if not task.done()
        and getattr(task.get_coro(), "__qualname__", "") != "RequestHandler.start"
    }


async def test_closing_twice_or_without_any_request_is_clean() -> None:
    async with sandbox_server(SandboxConfig()) as sb:
        assert sb.credentials is not None
        tasks_before = asyncio.all_tasks()
        client = PaymentsClient(sb.credentials, base_url=sb.url)
        await client.aclose()
        await client.aclose()
        used = PaymentsClient(sb.credentials, base_url=sb.url)
        await used.access_token_lifetime()
        await used.aclose()
        await used.aclose()
        await asyncio.sleep(0)
        assert _running_client_tasks(tasks_before) == set()


async def test_cancelled_operation_leaves_no_task() -> None:
    """An operation cancelled mid-flight (caller timeout) and a close right after: the
    token fetch and the background refresher are cancelled and awaited."""
    config = SandboxConfig()
    async with sandbox_server(config) as sb:
        assert sb.credentials is not None
        sb.server.state.fail_token_endpoint(60, 503)  # the token fetch keeps retrying
        tasks_before = asyncio.all_tasks()
        async with PaymentsClient(sb.credentials, base_url=sb.url, **fast_retry()) as c:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.3):
                    await c.submit_credit_transfer(credit_transfer())
        await asyncio.sleep(0)
        assert _running_client_tasks(tasks_before) == set()
        assert sb.server.stats()["payments_stored"] == 0
