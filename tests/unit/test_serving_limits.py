"""Connection bounds of ``payments_async._serving``: header and idle timeouts, the cap.

Raw sockets on 127.0.0.1 play the slow callers; aiohttp plays the legitimate one.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from payments_async._serving import AppServer, ServerLimits

LOG = logging.getLogger("tests.serving")
REQUEST = b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n"


def _answer(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def test_aiohttp_still_has_the_internals_the_bounds_use() -> None:
    source = inspect.getsource(web.RequestHandler)
    for name in ("_request_count", "_messages", "_current_request", "def force_close"):
        assert name in source, name
    assert "self._connections" in inspect.getsource(web.Server)


@pytest.fixture
async def started() -> AsyncIterator[list[AppServer]]:
    servers: list[AppServer] = []
    yield servers
    for server in servers:
        await server.stop()


async def _serve(
    servers: list[AppServer], limits: ServerLimits, release: asyncio.Event | None = None
) -> AppServer:
    async def ok(_: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def slow(_: web.Request) -> web.Response:
        assert release is not None
        await release.wait()
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_get("/ok", ok)
    app.router.add_get("/slow", slow)
    server = AppServer(
        app, host="127.0.0.1", port=0, answer=_answer, log=LOG, limits=limits, shutdown_timeout=0.1
    )
    await server.start()
    servers.append(server)
    return server


async def _closed_within(reader: asyncio.StreamReader, seconds: float) -> float:
    """Seconds until the server closed the connection (EOF or reset), at most ``seconds``."""
    start = time.monotonic()
    try:
        data = await asyncio.wait_for(reader.read(), seconds)
    except ConnectionResetError:
        data = b""
    assert data == b"", data[:80]
    return time.monotonic() - start


async def test_headers_not_sent_in_time_close_the_connection(started: list[AppServer]) -> None:
    server = await _serve(started, ServerLimits(header_timeout=0.3, idle_timeout=5))
    silent_r, silent_w = await asyncio.open_connection("127.0.0.1", server.port)
    slow_r, slow_w = await asyncio.open_connection("127.0.0.1", server.port)
    start = time.monotonic()
    slow_w.write(b"GET /ok HTTP/1.1\r\nHost: x\r\n")  # headers never finished
    for reader in (silent_r, slow_r):
        await _closed_within(reader, 3)
        assert 0.2 < time.monotonic() - start < 2
    for writer in (silent_w, slow_w):
        writer.close()
    # A caller whose headers arrive in time is answered, however long the handler takes.
    async with aiohttp.ClientSession() as http, http.get(server.url + "/ok") as resp:
        assert resp.status == 200


async def test_a_kept_alive_connection_is_closed_when_idle(started: list[AppServer]) -> None:
    server = await _serve(started, ServerLimits(header_timeout=5, idle_timeout=0.3))
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(REQUEST)
    assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
    await reader.readexactly(len(b'{"ok": true}'))
    writer.write(b"GET /ok HTTP/1.1\r\n")  # the next request trickles, and stops
    assert await _closed_within(reader, 3) < 2
    writer.close()


async def test_over_the_cap_a_waiting_connection_makes_room(
    started: list[AppServer], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tests.serving")
    server = await _serve(started, ServerLimits(max_connections=5, header_timeout=30))
    held = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(5)]
    await asyncio.sleep(0.05)
    assert server.open_connections == 5
    async with aiohttp.ClientSession() as http:
        for _ in range(3):
            async with http.get(server.url + "/ok") as resp:
                assert resp.status == 200
    assert server.evicted_connections >= 1
    assert server.refused_connections == 0
    assert await _closed_within(held[0][0], 2) < 1  # the oldest silent one went first
    for _, writer in held:
        writer.close()
    warnings = [r for r in caplog.records if "connection limit (5)" in r.getMessage()]
    assert len(warnings) == 1  # once, not per connection


async def test_over_the_cap_with_every_slot_busy_new_connections_are_closed(
    started: list[AppServer],
) -> None:
    release = asyncio.Event()
    server = await _serve(started, ServerLimits(max_connections=2), release)
    async with aiohttp.ClientSession() as http:
        busy = [asyncio.create_task(http.get(server.url + "/slow")) for _ in range(2)]
        await asyncio.sleep(0.2)
        for _ in range(20):
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(REQUEST)
            assert await _closed_within(reader, 2) < 1
            writer.close()
        assert server.refused_connections == 20
        release.set()
        for task in busy:
            resp = await task
            assert resp.status == 200  # the requests in progress were never cut
            resp.release()


async def test_the_cap_fits_the_open_file_limit() -> None:
    resource = pytest.importorskip("resource")
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    limits = ServerLimits(max_connections=10**9)
    if soft == resource.RLIM_INFINITY:
        assert limits.effective_max_connections() == 10**9
    else:
        assert limits.effective_max_connections() == max(1, soft - 128)
    assert ServerLimits(max_connections=3).effective_max_connections() == 3


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_connections": 0},
        {"max_connections": 1.5},
        {"max_connections": True},
        {"header_timeout": 0},
        {"header_timeout": float("inf")},
        {"idle_timeout": float("nan")},
        {"idle_timeout": -1},
    ],
)
def test_limits_are_checked(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - each names its field
        ServerLimits(**kwargs)  # type: ignore[arg-type]


async def test_out_of_file_descriptors_at_accept_is_one_quiet_line(
    started: list[AppServer], caplog: pytest.LogCaptureFixture
) -> None:
    await _serve(started, ServerLimits())
    caplog.set_level(logging.ERROR, logger="asyncio")
    asyncio_log = logging.getLogger("asyncio")
    for _ in range(50):  # what asyncio logs each time accept() fails with EMFILE
        try:
            raise OSError(24, "Too many open files")
        except OSError:
            asyncio_log.error(
                "socket.accept() out of system resource\nsocket: <socket>", exc_info=True
            )
    records = [r for r in caplog.records if r.name == "asyncio"]
    assert len(records) == 1
    assert records[0].exc_info is None
    assert "out of file descriptors" in records[0].getMessage()
    await started.pop().stop()
    asyncio_log.error("socket.accept() out of system resource")  # filter gone with the server
    assert len([r for r in caplog.records if r.name == "asyncio"]) == 2
