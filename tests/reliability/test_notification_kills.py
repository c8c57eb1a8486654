"""A receiver SIGKILLed right after its 202s: every final status reaches the callback once.

The receiver is a real process (``tests/support/receiver_proc.py``) with a durable inbox.
This test plays the service: it POSTs a stream of short notices with duplicates, shuffled,
and redelivers whatever was not answered 2xx. The receiver kills itself right after
writing a 202, before that notification's callback can run, at random points; the test
starts it again each time. At the end the callback file (appended with fsync) must hold
every id exactly once, with the status the service has: 0 lost, 0 twice.

The default run kills each store's receiver a few times in about 200 notifications: each
restart costs a process start (seconds on a loaded 2-core machine), and a few real kills
prove the property (0 lost, 0 twice). ``make soak`` runs the issue's scale, about 2,000
notifications (1,000 ids) and 100 kills per store. ``PAYMENTS_KILL_IDS`` and
``PAYMENTS_KILL_KILLS`` change the default run's scale.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import msgspec
import pytest

from payments_async import Credentials, PaymentsClient
from payments_async._constants import PACS002_PATH
from payments_async.iso20022 import summarize_status_report
from payments_async.notifications import SqliteInbox
from payments_async.sandbox import SandboxConfig, SandboxServer
from tests.factories import credit_transfer
from tests.support.receiver_proc import HOOK_PASSWORD, HOOK_USER
from tests.support.reliability import record
from tests.support.sandbox import basic

pytestmark = pytest.mark.slow

IDS = int(os.environ.get("PAYMENTS_KILL_IDS", "100"))
KILLS = int(os.environ.get("PAYMENTS_KILL_KILLS", "5"))
SOAK_IDS = 1000  # about 2,000 notifications with the duplicates
SOAK_KILLS = 100
SCALES = [
    pytest.param(IDS, KILLS, id="default"),
    pytest.param(SOAK_IDS, SOAK_KILLS, id="soak", marks=pytest.mark.soak),
]
LEASE = 2.0  # seconds a killed PostgreSQL receiver's items stay held


@dataclass
class Receivers:
    """Receiver processes behind one "load balancer", each restarted when it dies."""

    base_url: str
    inbox: str
    callbacks: Path
    slots: int
    rng: random.Random
    kills_left: int
    mean_gap: int
    procs: list[asyncio.subprocess.Process | None] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)
    starts: int = 0
    locks: list[asyncio.Lock] = field(default_factory=list)
    drains: list[asyncio.Future[bytes]] = field(default_factory=list)

    async def start_all(self) -> None:
        self.procs = [None] * self.slots
        self.urls = [""] * self.slots
        self.locks = [asyncio.Lock() for _ in range(self.slots)]
        for slot in range(self.slots):
            await self._spawn(slot)

    async def _spawn(self, slot: int) -> None:
        kill_after = 0
        if self.kills_left > 0:
            self.kills_left -= 1
            kill_after = self.rng.randint(1, 2 * self.mean_gap)
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.support.receiver_proc",
            self.base_url,
            self.inbox,
            str(self.callbacks),
            str(kill_after),
            str(LEASE),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert proc.stdout is not None
        assert proc.stderr is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        if not line:  # it exited before saying its address: show why
            err = await asyncio.wait_for(proc.stderr.read(), 30)
            await proc.wait()
            pytest.fail(
                f"receiver {self.starts + 1} exited ({proc.returncode}) before starting:\n"
                + err.decode(errors="replace")[-3000:]
            )
        # Its stderr is drained from now on, never left to fill the pipe and block it.
        self.drains.append(asyncio.ensure_future(proc.stderr.read()))
        self.procs[slot], self.urls[slot] = proc, json.loads(line)["url"]
        self.starts += 1

    async def revive(self, slot: int) -> None:
        """Start the slot's process again if it died (the caller's POST failed)."""
        async with self.locks[slot]:
            proc = self.procs[slot]
            assert proc is not None
            try:
                await asyncio.wait_for(proc.wait(), 2)
            except TimeoutError:
                return  # alive: the failure was something else; the POST is retried
            await self._spawn(slot)

    async def stop(self) -> None:
        for proc in self.procs:
            if proc is not None and proc.returncode is None:
                proc.kill()
                await proc.wait()
        await asyncio.gather(*self.drains)


async def _final_payments(base_url: str, n: int) -> dict[str, str]:
    """``n`` payments the sandbox has settled: id -> final status."""
    async with PaymentsClient(Credentials.sandbox(), base_url=base_url) as client:
        gate = asyncio.Semaphore(16)

        async def submit() -> str:
            async with gate:
                return (await client.submit_credit_transfer(credit_transfer())).payments_service_id

        ids = await asyncio.gather(*(submit() for _ in range(n)))
        await asyncio.sleep(0.5)

        async def final(psid: str) -> str:
            async with gate:
                status = summarize_status_report(await client.get_credit_transfer_status(psid))
            assert status.is_final
            return status.status

        return dict(zip(ids, await asyncio.gather(*(final(i) for i in ids)), strict=True))


async def _run(tmp_path: Path, inbox: str, *, slots: int, seed: int, ids: int, kills: int) -> None:
    rng = random.Random(seed)
    config = SandboxConfig(processing_delay=0.1, settlement_delay=0.1)
    async with SandboxServer(config) as sb:
        expected = await _final_payments(sb.url, ids)
        stream = [psid for psid in expected for _ in range(rng.choice((1, 1, 2, 3)))]
        rng.shuffle(stream)
        callbacks = tmp_path / "callbacks.txt"
        # Kill points drawn from their own generator (the lanes below draw concurrently),
        # spread so that every planned kill happens before the stream ends.
        gap = max(1, int(0.7 * len(stream) / (kills + slots)))
        receivers = Receivers(sb.url, inbox, callbacks, slots, random.Random(seed), kills, gap)
        headers = {
            "Content-Type": "application/json",
            "Authorization": basic(HOOK_USER, HOOK_PASSWORD),
        }
        pending: asyncio.Queue[str] = asyncio.Queue()
        for psid in stream:
            pending.put_nowait(psid)
        redelivered = 0

        async def service(http: aiohttp.ClientSession, lane: int) -> None:
            nonlocal redelivered
            while not pending.empty():
                psid = pending.get_nowait()
                slot = (lane + rng.randrange(slots)) % slots
                body = msgspec.json.encode(
                    {
                        "paymentsServiceId": psid,
                        "statusReportMessage": f"{sb.url}{PACS002_PATH}/{psid}",
                    }
                )
                try:
                    async with http.post(receivers.urls[slot], data=body, headers=headers) as resp:
                        ok = resp.status == 202
                except aiohttp.ClientError:
                    ok = False
                if not ok:  # the service redelivers what was not acknowledged
                    redelivered += 1
                    pending.put_nowait(psid)
                    await receivers.revive(slot)

        await receivers.start_all()
        try:
            connector = aiohttp.TCPConnector(force_close=True)
            async with aiohttp.ClientSession(connector=connector) as http:
                await asyncio.gather(*(service(http, lane) for lane in range(4)))
            deadline = asyncio.get_running_loop().time() + 60
            while asyncio.get_running_loop().time() < deadline:
                lines = callbacks.read_text().splitlines() if callbacks.exists() else []
                if len(set(lines)) >= len(expected):
                    break
                await asyncio.sleep(0.2)
            await asyncio.sleep(1.0)  # a second call, were there one, would show by now
        finally:
            await receivers.stop()
    delivered = Counter(callbacks.read_text().splitlines())
    twice = [line for line, n in delivered.items() if n > 1]
    lost = [p for p, status in expected.items() if f"{p} {status}" not in delivered]
    killed = receivers.starts - slots
    record(
        f"notification kills ({'postgres' if slots > 1 else 'sqlite'})",
        notifications=len(stream),
        ids=len(expected),
        kills=killed,
        redelivered=redelivered,
        lost=len(lost),
        twice=len(twice),
    )
    assert not lost, lost[:5]
    assert not twice, twice[:5]
    assert sum(delivered.values()) == len(expected)
    # A kill waits for a moment outside the excluded instant, and the last drawn point may
    # fall after the stream's end: nearly all planned kills happen.
    assert killed >= max(1, kills * 3 // 4)


@pytest.mark.parametrize(("ids", "kills"), SCALES)
async def test_sqlite_inbox_every_final_status_reaches_the_callback_once_across_kills(
    tmp_path: Path, ids: int, kills: int
) -> None:
    inbox = tmp_path / "inbox.db"
    await _run(tmp_path, str(inbox), slots=1, seed=28, ids=ids, kills=kills)
    left = SqliteInbox(inbox)
    await left.open()
    try:
        status = await left.status()
    finally:
        await left.aclose()
    assert (status.depth, status.failed, status.delivered) == (0, 0, ids)


@pytest.mark.parametrize(("ids", "kills"), SCALES)
async def test_postgres_inbox_two_receivers_every_final_status_once_across_kills(
    tmp_path: Path, pg_dsn: str, ids: int, kills: int
) -> None:
    await _run(tmp_path, pg_dsn, slots=2, seed=29, ids=ids, kills=kills)
