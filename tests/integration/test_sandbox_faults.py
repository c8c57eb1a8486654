"""Fault injection over real HTTP: each kind, the control endpoint, counters that add up."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from payments_async._constants import PACS008_PATH
from payments_async.iso20022 import encode
from payments_async.sandbox import FaultConfig, SandboxConfig
from payments_async.sandbox._faults import FaultInjector
from payments_async.testing import SandboxHandle, sandbox_server
from tests.factories import credit_transfer
from tests.support.sandbox import RawClient, predefined_client

pytest_plugins = ["tests.support.sandbox_fixtures"]


async def test_faults_are_off_by_default(client: RawClient, sandbox: SandboxHandle) -> None:
    for _ in range(20):
        assert (await client.submit_payment(credit_transfer())).status == 201
    assert sandbox.server.stats()["faults_total"] == 0
    assert not sandbox.server.config.faults.enabled


@pytest.mark.parametrize(
    ("faults", "status"),
    [
        (FaultConfig(error_500=1.0), 500),
        (FaultConfig(error_503=1.0), 503),
        (FaultConfig(rate_limit_429=1.0, retry_after=7), 429),
    ],
)
async def test_error_faults_answer_without_storing(
    http: aiohttp.ClientSession, faults: FaultConfig, status: int
) -> None:
    async with sandbox_server(SandboxConfig(faults=faults)) as sb:
        c = predefined_client(http, sb)
        reply = await c.submit_payment(credit_transfer())
        stats = sb.server.stats()
    assert reply.status == status
    assert reply.codes  # the JSON error envelope
    if status == 429:
        assert reply.headers["Retry-After"] == "7"
    assert stats["payments_stored"] == 0
    assert sum(stats["faults"].values()) == 1
    assert stats["token_requests"] == 1  # the token route is spared by default


async def test_502_is_a_gateway_html_page(http: aiohttp.ClientSession) -> None:
    async with sandbox_server(SandboxConfig(faults=FaultConfig(error_502=1.0))) as sb:
        reply = await predefined_client(http, sb).submit_payment(credit_transfer())
    assert reply.status == 502
    assert reply.headers["Content-Type"].startswith("text/html")
    assert reply.json is None
    assert b"Bad Gateway" in reply.body


async def test_drop_before_closes_the_connection_and_stores_nothing(
    http: aiohttp.ClientSession,
) -> None:
    async with sandbox_server(SandboxConfig(faults=FaultConfig(drop_before=1.0))) as sb:
        c = predefined_client(http, sb)
        await c.ensure_token()
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await c.submit_payment(credit_transfer())
        stats = sb.server.stats()
    assert stats["faults"]["drop_before"] == 1
    assert stats["payments_stored"] == 0


async def test_commit_then_drop_stores_and_a_resubmission_gets_200(
    http: aiohttp.ClientSession,
) -> None:
    async with sandbox_server(SandboxConfig(faults=FaultConfig(commit_then_drop=1.0))) as sb:
        c = predefined_client(http, sb)
        msg = credit_transfer()
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await c.submit_payment(msg)
        assert sb.server.stats()["payments_stored"] == 1
        off = await c.request("POST", "/_sandbox/faults", data=b"{}")
        assert off.status == 200
        assert off.json["commit_then_drop"] == 0.0
        again = await c.submit_payment(msg)
        stats = sb.server.stats()
    assert again.status == 200
    assert (stats["payments_stored"], stats["replays_answered"]) == (1, 1)


async def test_latency_beyond_the_client_timeout_still_stores(
    http: aiohttp.ClientSession,
) -> None:
    faults = FaultConfig(latency=1.0, latency_seconds=0.4)
    async with sandbox_server(SandboxConfig(faults=faults)) as sb:
        c = predefined_client(http, sb)
        await c.ensure_token()
        body = encode(credit_transfer())
        headers = await c.api_headers(body=body)
        with pytest.raises(asyncio.TimeoutError):
            async with http.post(
                sb.url + PACS008_PATH,
                data=body,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=0.1),
            ):
                pass  # pragma: no cover
        assert sb.server.stats()["payments_stored"] == 0
        for _ in range(50):
            if sb.server.stats()["payments_stored"]:
                break
            await asyncio.sleep(0.02)
        stats = sb.server.stats()
    assert stats["payments_stored"] == 1
    assert stats["faults"]["latency"] == 1


async def test_token_route_faults_have_their_own_switch(http: aiohttp.ClientSession) -> None:
    faults = FaultConfig(error_503=1.0, apply_to_token=True)
    async with sandbox_server(SandboxConfig(faults=faults)) as sb:
        reply = await predefined_client(http, sb).fetch_token()
    assert reply.status == 503


async def test_control_endpoint_sets_reads_and_validates_faults(
    client: RawClient, sandbox: SandboxHandle
) -> None:
    set_reply = await client.request(
        "POST", "/_sandbox/faults", data=b'{"error_503": 0.5, "seed": 3}'
    )
    assert set_reply.status == 200
    got = await client.request("GET", "/_sandbox/faults")
    assert got.json["error_503"] == 0.5
    assert got.json["seed"] == 3
    assert sandbox.server.state.faults.config == FaultConfig(error_503=0.5, seed=3)
    for bad in (
        b'{"error_999": 1}',
        b'{"error_500": 2}',
        b'{"error_500": 0.6, "error_503": 0.6}',
        b"[1]",
        b'{"apply_to_token": 1}',
    ):
        reply = await client.request("POST", "/_sandbox/faults", data=bad)
        assert (reply.status, reply.codes) == (400, ["INVALID_REQUEST"]), bad


def test_same_seed_same_faults() -> None:
    cfg = FaultConfig(error_500=0.2, error_503=0.2, drop_before=0.1, latency=0.3, seed=42)
    a, b = FaultInjector(cfg), FaultInjector(cfg)
    seq_a = [a.draw() for _ in range(200)]
    assert seq_a == [b.draw() for _ in range(200)]
    c = FaultInjector(
        FaultConfig(error_500=0.2, error_503=0.2, drop_before=0.1, latency=0.3, seed=43)
    )
    assert seq_a != [c.draw() for _ in range(200)]
    kinds = {d.kind for d in seq_a}
    assert kinds == {None, "error_500", "error_503", "drop_before"}


async def test_fault_counters_add_up_and_nothing_is_lost_or_duplicated(
    http: aiohttp.ClientSession,
) -> None:
    faults = FaultConfig(
        error_500=0.1,
        error_502=0.05,
        error_503=0.1,
        rate_limit_429=0.05,
        drop_before=0.1,
        commit_then_drop=0.1,
        seed=11,
    )
    n = 40
    async with sandbox_server(SandboxConfig(faults=faults)) as sb:
        c = predefined_client(http, sb)
        await c.ensure_token()
        attempts = 0
        seen: dict[int, int] = {}
        ids = set()
        for _ in range(n):
            msg = credit_transfer()
            while True:  # resubmit the same message until the sandbox answers 2xx
                attempts += 1
                try:
                    reply = await c.submit_payment(msg)
                except aiohttp.ServerDisconnectedError:
                    seen[0] = seen.get(0, 0) + 1
                    continue
                seen[reply.status] = seen.get(reply.status, 0) + 1
                if reply.status in (200, 201):
                    ids.add(reply.data["paymentsServiceId"])
                    break
        stats = sb.server.stats()
        listing = sb.server.state.messages()
    assert len(ids) == n
    assert stats["payments_stored"] == n == len(listing["payments"])
    assert stats["requests"]["pacs008"] == attempts
    f = stats["faults"]
    assert f["error_500"] == seen.get(500, 0)
    assert f["error_502"] == seen.get(502, 0)
    assert f["error_503"] == seen.get(503, 0)
    assert f["rate_limit_429"] == seen.get(429, 0)
    assert f["drop_before"] + f["commit_then_drop"] == seen.get(0, 0)
    assert stats["faults_total"] == attempts - seen.get(200, 0) - seen.get(201, 0)
    # Every request that reached the handler either stored a payment or was answered as
    # a replay of a stored one: nothing stored twice, nothing lost.
    handled = seen.get(200, 0) + seen.get(201, 0) + f["commit_then_drop"]
    assert stats["payments_stored"] + stats["replays_answered"] == handled
    assert f["commit_then_drop"] > 0
    assert seen.get(200, 0) > 0
