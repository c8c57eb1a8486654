"""SQLite persistence: a restarted sandbox keeps clients, payments and cancellations."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from payments_async.sandbox import SandboxConfig
from payments_async.testing import ManualClock, sandbox_server
from tests.factories import cancellation, credit_transfer
from tests.support.sandbox import (
    PROCESSING_DELAY,
    SETTLEMENT_DELAY,
    RawClient,
    cancellation_status,
    client_for,
    tx_status,
)

pytest_plugins = ["tests.support.sandbox_fixtures"]


async def test_restart_keeps_state(
    tmp_path: Path, http: aiohttp.ClientSession, clock: ManualClock
) -> None:
    config = SandboxConfig(
        clock=clock,
        processing_delay=PROCESSING_DELAY,
        settlement_delay=SETTLEMENT_DELAY,
        persist_path=tmp_path / "sandbox.db",
    )
    pay = credit_transfer()
    async with sandbox_server(config) as first:
        c = client_for(http, first)
        pay_id = (await c.submit_payment(pay)).data["paymentsServiceId"]
        cxl = cancellation(pay.end_to_end_id)
        cxl_id = (await c.submit_cancellation(cxl)).data["paymentsServiceId"]
        old_token = c.token

    async with sandbox_server(config, register_key=False) as second:
        again = RawClient(http, second.url, c.client_id, c.secret, c.signer, token=old_token)
        # Access tokens do not survive a restart; the registered client and key do.
        stale = await again.payment_status(pay_id)
        assert (stale.status, stale.codes) == (401, ["TOKEN_INVALID"])
        again.token = None
        assert tx_status(await again.payment_status(pay_id)) == "PEND"
        clock.advance(SETTLEMENT_DELAY)
        assert cancellation_status(await again.cancellation_outcome(cxl_id)) == ("ACCC", "ACCR")
        clock.advance(PROCESSING_DELAY * 2)
        assert tx_status(await again.payment_status(pay_id)) == "RJCT"  # stopped (DS02)
        # Idempotency survives too: the same messages answer 200 with the same ids.
        replay = await again.submit_payment(pay)
        assert (replay.status, replay.data["paymentsServiceId"]) == (200, pay_id)
        replay_cxl = await again.submit_cancellation(cxl)
        assert (replay_cxl.status, replay_cxl.data["paymentsServiceId"]) == (200, cxl_id)
        stats = second.server.stats()
    assert (stats["payments"], stats["cancellations"]) == (1, 1)
    assert stats["payments_stored"] == 0  # counters are per run; stored rows are not


async def test_in_memory_by_default(http: aiohttp.ClientSession, clock: ManualClock) -> None:
    async with sandbox_server(SandboxConfig(clock=clock)) as first:
        c = client_for(http, first)
        pay_id = (await c.submit_payment(credit_transfer())).data["paymentsServiceId"]
    async with sandbox_server(SandboxConfig(clock=clock)) as second:
        c2 = client_for(http, second)
        assert (await c2.payment_status(pay_id)).status == 404


async def test_a_used_sca_token_stays_used_after_a_restart(
    tmp_path: Path, http: aiohttp.ClientSession, clock: ManualClock
) -> None:
    from payments_async._constants import PACS008_PATH
    from payments_async.iso20022 import encode

    config = SandboxConfig(clock=clock, persist_path=tmp_path / "sandbox.db")
    body = encode(credit_transfer())
    async with sandbox_server(config) as first:
        c = client_for(http, first)
        token = c.sca(body)
        sent = await c.post(PACS008_PATH, body, headers={"sca-token": token})
        assert sent.status == 201
        used_assertion = c.assertion()
        assert (await c.fetch_token(used_assertion)).status == 200

    async with sandbox_server(config, register_key=False) as second:
        again = RawClient(http, second.url, c.client_id, c.secret, c.signer)
        replayed = await again.post(PACS008_PATH, body, headers={"sca-token": token})
        assert (replayed.status, replayed.codes) == (401, ["SCA_TOKEN_REPLAYED"])
        reused = await again.fetch_token(used_assertion)
        assert (reused.status, reused.codes) == (401, ["ASSERTION_REPLAYED"])
        fresh = await again.post(PACS008_PATH, body)  # a new token: the idempotent resend
        assert fresh.status == 200
