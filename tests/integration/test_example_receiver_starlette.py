"""examples/receiver_starlette.py served by uvicorn and fed by the sandbox, end to end."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path
from types import ModuleType

import aiohttp
import pytest

from payments_async import CancellationOutcome, Credentials, PaymentsClient
from payments_async._constants import SANDBOX_CLIENT_ID
from payments_async.notifications import BasicAuth
from payments_async.sandbox import SandboxConfig, SandboxServer
from payments_async.sandbox._notify import NotificationTarget
from tests.factories import cancellation_for, credit_transfer

uvicorn = pytest.importorskip("uvicorn")  # the test extra installs it; skipped only without
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "receiver_starlette.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("receiver_starlette", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_the_starlette_example_receives_confirms_and_refuses() -> None:
    example = _load()
    outcomes: list[CancellationOutcome] = []

    async def on_outcome(outcome: CancellationOutcome) -> None:
        outcomes.append(outcome)

    config = SandboxConfig(processing_delay=0.5, settlement_delay=0.2)
    async with SandboxServer(config) as sb:
        app = example.create_app(
            Credentials.sandbox(),
            base_url=sb.url,
            auth=BasicAuth("bank", "pw-0123456789"),
            on_cancellation_outcome=on_outcome,
        )
        server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
        )
        task = asyncio.create_task(server.serve())
        try:
            for _ in range(200):
                if server.started:
                    break
                await asyncio.sleep(0.02)
            assert server.started
            port = server.servers[0].sockets[0].getsockname()[1]
            url = f"http://127.0.0.1:{port}/notifications"
            async with (
                aiohttp.ClientSession() as http,
                http.post(url, data=b"{}", headers={"Content-Type": "application/json"}) as r,
            ):
                assert r.status == 401
            sb.notifier.subscribe(
                SANDBOX_CLIENT_ID,
                NotificationTarget(url=url, username="bank", password="pw-0123456789"),
            )
            async with PaymentsClient(Credentials.sandbox(), base_url=sb.url) as client:
                pay = credit_transfer()
                await client.submit_credit_transfer(pay)
                cxl = await client.request_cancellation(cancellation_for(pay))
            waiter = app.state.client.wait_for_cancellation_outcome(cxl.payments_service_id)
            outcome = await asyncio.wait_for(waiter, 10)
            assert outcome.accepted
            for _ in range(100):
                if outcomes:
                    break
                await asyncio.sleep(0.02)
            assert [o.payments_service_id for o in outcomes] == [cxl.payments_service_id]
            assert app.state.receiver.stats.rejected[401] == 1
        finally:
            server.should_exit = True
            await asyncio.wait_for(task, 10)
