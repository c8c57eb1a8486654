"""Thousands of slow-header connections against `payments-async listen` (a real process).

The attackers run in a process of their own (``tests/support/slowloris.py``): each sends a
request line and one header, then a header byte a second, never finishing, and comes back
a second after the server closes it. Meanwhile the bank's notifications keep arriving and
must each be answered within 1 s, and the receiver's stderr must stay short (no traceback
per socket).
"""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import statistics
import sys
import time
from typing import Any

import aiohttp
import msgspec
import pytest

from payments_async import Credentials, PaymentsClient
from payments_async._constants import PACS002_PATH, PACS008_PATH
from payments_async.sandbox import SandboxConfig, SandboxServer
from tests.factories import credit_transfer
from tests.support.reliability import record

# alone: its 1 s bound is on latency under the load it makes itself (make test runs it
# with no other test beside it).
pytestmark = [pytest.mark.slow, pytest.mark.alone]

WANTED = 3000  # the slow connections asked for
USER, PASSWORD = "svc", "pw-0123456789"
# The receiver's --header-timeout (its default is 10 s): shorter, so that every attacker
# is closed by it and comes back several times within a short attack.
HEADER_TIMEOUT = 2.0
# Three header timeouts: each attacker is closed and opened again at least once while the
# notifications arrive (3,000 closes and reconnects among them, not only held sockets).
ATTACK_SECONDS = 3 * HEADER_TIMEOUT


def _attackers() -> int:
    """3,000, or what the open-file limit leaves room for in this process."""
    try:
        import resource
    except ImportError:  # pragma: no cover
        return 500
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return WANTED
    return max(100, min(WANTED, soft - 300))


@pytest.mark.parametrize(
    "fd_limit",
    [None, 1024],
    ids=["machine-open-file-limit", "open-file-limit-1024"],
)
async def test_slow_header_connections_do_not_starve_notifications(fd_limit: int | None) -> None:
    """With the machine's open-file limit, and with 1,024 (the receiver then holds 896
    connections: the slow ones beyond that take each other's slots, never a caller's)."""
    n = _attackers()
    config = SandboxConfig(processing_delay=0.05, settlement_delay=0.05)
    async with SandboxServer(config) as sb:
        proc = await _spawn(
            "payments_async",
            "--sandbox",
            "--base-url",
            sb.url,
            "--json",
            "listen",
            "--port",
            "0",
            "--user",
            USER,
            "--header-timeout",
            str(HEADER_TIMEOUT),
            env={"PAYMENTS_NOTIFY_PASSWORD": PASSWORD},
            fd_limit=fd_limit,
        )
        attack: asyncio.subprocess.Process | None = None
        try:
            assert proc.stdout is not None
            assert proc.stderr is not None
            first = msgspec.json.decode(await asyncio.wait_for(proc.stdout.readline(), 30))
            url = first["listening"]
            stdout_task = asyncio.create_task(proc.stdout.read())
            stderr_task = asyncio.create_task(proc.stderr.read())
            port = url.split(":")[2].split("/")[0]
            async with PaymentsClient(Credentials.sandbox(), base_url=sb.url) as client:
                ids = [
                    (await client.submit_credit_transfer(credit_transfer())).payments_service_id
                    for _ in range(24)
                ]
            attack = await _spawn(
                "tests.support.slowloris", "127.0.0.1", port, str(n), str(ATTACK_SECONDS + 3)
            )
            assert attack.stdout is not None
            ready = await asyncio.wait_for(attack.stdout.readline(), 40)
            assert ready.strip() == b"ready", ready
            started = time.monotonic()

            auth = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
            latencies: list[float] = []
            statuses: list[int] = []
            gap = ATTACK_SECONDS / len(ids)
            for psid in ids:
                body = {
                    "paymentsServiceId": psid,
                    "originalMessage": f"{sb.url}{PACS008_PATH}/{psid}",
                    "statusReportMessage": f"{sb.url}{PACS002_PATH}/{psid}",
                }
                t0 = time.monotonic()
                try:
                    async with (
                        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http,
                        http.post(url, json=body, headers={"Authorization": auth}) as resp,
                    ):
                        statuses.append(resp.status)
                except (aiohttp.ClientError, TimeoutError):
                    statuses.append(0)
                latencies.append(time.monotonic() - t0)
                print(f"[slow-connections] {t0 - started:6.2f}s {latencies[-1]:.3f}s")
                await asyncio.sleep(gap)
            attacked_for = time.monotonic() - started
            counts = msgspec.json.decode(await asyncio.wait_for(attack.stdout.read(), 60))
        finally:
            for p in (attack, proc):
                if p is not None and p.returncode is None:
                    p.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 30)
        await stdout_task
        stderr = (await stderr_task).decode(errors="replace")

    lines = stderr.splitlines()
    record(
        f"slow connections against listen (open files: {fd_limit or 'machine'})",
        attackers=n,
        receiver_fd_limit=fd_limit or "machine",
        opened_in_s=counts["opened_in"],
        attack_s=round(attacked_for, 1),
        attacker_connections=int(counts["connections"]),
        closed_by_server=int(counts["closed_by_server"]),
        notifications=len(latencies),
        p50_ms=round(statistics.median(latencies) * 1000, 1),
        max_ms=round(max(latencies) * 1000, 1),
        stderr_lines=len(lines),
    )
    assert counts["connections"] >= n  # every attacker got a socket at least once
    assert statuses == [202] * len(ids), statuses
    assert max(latencies) < 1.0, [round(x, 3) for x in latencies]
    assert len(lines) < 100, "\n".join(lines[:20])
    assert "Traceback" not in stderr
    assert counts["closed_by_server"] >= n  # the slow ones were closed, not held forever


async def _spawn(
    module: str, *args: str, env: dict[str, str] | None = None, fd_limit: int | None = None
) -> Any:
    def limit_files() -> None:  # in the child, before it runs Python
        import resource

        if fd_limit is not None:
            _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit, hard))

    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        module,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
        preexec_fn=limit_files,
    )
