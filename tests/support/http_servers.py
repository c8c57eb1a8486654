"""A small fake server over real HTTP on 127.0.0.1, for a situation the sandbox cannot produce."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Serve = Callable[[dict[tuple[str, str], Handler]], Awaitable[str]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """Start a small fake server over real HTTP on 127.0.0.1 (a free port) from
    ``{(method, path): handler}``; returns its base URL. Stopped after the test."""
    runners: list[web.AppRunner] = []

    async def start(routes: dict[tuple[str, str], Handler]) -> str:
        app = web.Application()
        for (method, path), handler in routes.items():
            app.router.add_route(method, path, handler)
        runner = web.AppRunner(app, shutdown_timeout=0.1, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        return f"http://127.0.0.1:{runner.addresses[0][1]}"

    yield start
    for runner in runners:
        await runner.cleanup()
