"""The sandbox refuses a recall past its window, on its own date, as the SCT rulebook does."""

from __future__ import annotations

import json
from contextlib import AbstractAsyncContextManager
from datetime import UTC, date, datetime, time, timedelta

import aiohttp

from payments_async._constants import CAMT056_PATH
from payments_async.iso20022 import encode
from payments_async.sandbox import SandboxConfig
from payments_async.testing import ManualClock, SandboxHandle, sandbox_server
from tests.factories import cancellation
from tests.support.sandbox import predefined_client

pytest_plugins = ["tests.support.sandbox_fixtures"]

SETTLED = date(2026, 3, 27)  # a Friday; Good Friday and Easter Monday fall in the window
DEADLINE = date(2026, 4, 14)  # the 10th TARGET2 banking day after it
PATH = "$.fitoFIPmtCxlReq.undrlyg[0].txInf[0].orgnlTxRef.intrBkSttlmDt"


def _body(reason: str) -> bytes:
    """A camt.056 naming the original settlement date, checked by the sandbox only."""
    wire = json.loads(encode(cancellation("E2E-WINDOW", reason=reason)))
    wire["fitoFIPmtCxlReq"]["undrlyg"][0]["txInf"][0]["orgnlTxRef"]["intrBkSttlmDt"] = (
        SETTLED.isoformat()
    )
    return json.dumps(wire).encode()


def _sandbox_on(day: date) -> AbstractAsyncContextManager[SandboxHandle]:
    noon = datetime.combine(day, time(12), tzinfo=UTC).timestamp()
    return sandbox_server(SandboxConfig(clock=ManualClock(noon)))


async def test_a_recall_on_its_deadline_is_taken(http: aiohttp.ClientSession) -> None:
    async with _sandbox_on(DEADLINE) as sandbox:
        client = predefined_client(http, sandbox)  # predefined tokens: no real-time JWTs
        reply = await client.post(CAMT056_PATH, _body("DUPL"))
        assert reply.status == 201, reply.json


async def test_a_recall_one_day_late_is_refused_naming_its_deadline(
    http: aiohttp.ClientSession,
) -> None:
    async with _sandbox_on(DEADLINE + timedelta(days=1)) as sandbox:
        client = predefined_client(http, sandbox)
        reply = await client.post(CAMT056_PATH, _body("TECH"))
        assert reply.status == 400, reply.json
        (error,) = reply.json["errors"]
        assert (error["code"], error["description"]) == ("BODY_INVALID", PATH)
        expected = "a TECH recall of a payment settled on 2026-03-27 had to be sent by 2026-04-14"
        assert expected in error["message"]
        assert "EPC125-05 SCT rulebook 2025: Recall" in error["message"]
        # a 13-month window is still open that day
        reply = await client.post(CAMT056_PATH, _body("FRAD"))
        assert reply.status == 201, reply.json
        assert sandbox.server.stats()["cancellations_stored"] == 1
