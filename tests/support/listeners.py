"""`payments-async listen` as real processes, fed by the test playing the service.

`Listeners` starts ``listen --json`` on an inbox (a SQLite file or a ``postgresql://``
address), restarts it when a fault killed it, and keeps every line each process printed.
`deliver` POSTs a stream of short notices to whichever process is current and redelivers
what was not answered 202, as the service does. The counter of a fault-matrix cell is the
``"first": true`` final lines: the callbacks' deliveries.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import msgspec

from payments_async._constants import PACS002_PATH
from payments_async.notifications import InboxStatus, SqliteInbox, open_inbox
from tests.support.sandbox import basic

USER = "svc"
PASSWORD = "pw-0123456789-notify"
POST_TIMEOUT = 3.0  # seconds the service waits for a receiver's answer before redelivering


@dataclass
class Listeners:
    """One ``listen`` at a time on ``inbox``, against the sandbox at ``base_url``; ``args``
    are added to each ``listen`` (e.g. ``--stalled-after``)."""

    base_url: str
    inbox: str
    cwd: Path
    args: tuple[str, ...] = ()
    procs: list[asyncio.subprocess.Process] = field(default_factory=list)
    lines: list[tuple[int, dict[str, object]]] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    url: str = ""
    _readers: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def current(self) -> asyncio.subprocess.Process:
        return self.procs[-1]

    async def start(self) -> None:
        """Start a ``listen`` and wait until it says where it listens."""
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "payments_async",
            "--sandbox",
            "--base-url",
            self.base_url,
            "--json",
            "listen",
            "--port",
            "0",
            "--user",
            USER,
            "--inbox",
            self.inbox,
            *self.args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "PAYMENTS_NOTIFY_PASSWORD": PASSWORD},
            cwd=self.cwd,
        )
        assert proc.stdout is not None
        assert proc.stderr is not None
        self.stderr.append("")
        index = len(self.procs)
        self.procs.append(proc)
        ready = await asyncio.wait_for(proc.stdout.readline(), 60)
        if "listening" not in (said := json.loads(ready or b"{}")):
            # it exited (`--json`: its error on stdout); both are kept with the others'
            self.lines += [(index, said)] if said else []
            self.stderr[index] = (await proc.stderr.read()).decode()
            raise AssertionError(f"listen did not start: {said} {self.stderr[index]}")
        self.url = said["listening"]
        self._readers.append(asyncio.create_task(self._read_out(index, proc.stdout)))
        self._readers.append(asyncio.create_task(self._read_err(index, proc.stderr)))

    async def _read_out(self, index: int, stream: asyncio.StreamReader) -> None:
        async for line in stream:
            self.lines.append((index, json.loads(line)))

    async def _read_err(self, index: int, stream: asyncio.StreamReader) -> None:
        async for line in stream:
            self.stderr[index] += line.decode()

    def delivered(self) -> Counter[str]:
        """``id status`` -> how many times a callback was handed that final status."""
        return Counter(
            f"{r['payments_service_id']} {r['confirmed_status']}"
            for _, r in self.lines
            if r.get("final") and r.get("first")
        )

    async def status(self) -> dict[str, object]:
        """``listen --status --json`` on the inbox (beside a running listen, or none)."""
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "payments_async",
            "--json",
            "listen",
            "--status",
            "--inbox",
            self.inbox,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=self.cwd,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, err.decode()
        status: dict[str, object] = json.loads(out)
        return status

    async def until_delivered(self, expected: dict[str, str], seconds: float = 60) -> None:
        """Until every ``id status`` of ``expected`` was handed to a callback."""
        want = {f"{p} {s}" for p, s in expected.items()}
        deadline = asyncio.get_running_loop().time() + seconds
        while not want <= set(self.delivered()):
            if asyncio.get_running_loop().time() >= deadline:
                (self.cwd / "lines.json").write_text(json.dumps(self.lines))
            assert asyncio.get_running_loop().time() < deadline, (
                f"not delivered: {sorted(want - set(self.delivered()))[:5]}; stderr: {self.stderr}"
            )
            await asyncio.sleep(0.1)

    async def kill(self) -> None:
        """SIGKILL the current process and read all it printed before it died."""
        proc = self.current
        proc.kill()
        await proc.wait()
        await asyncio.gather(*self._readers[-2:])  # its stdout's and stderr's, at EOF

    async def until_idle(self, seconds: float = 60) -> None:
        """Until the inbox holds no item waiting or being processed (its ``depth``)."""
        deadline = asyncio.get_running_loop().time() + seconds
        while (depth := (await self._inbox_status()).depth) > 0:
            assert asyncio.get_running_loop().time() < deadline, f"{depth} items still waiting"
            await asyncio.sleep(0.1)

    async def _inbox_status(self) -> InboxStatus:
        if not self.inbox.startswith("postgresql://"):
            return await SqliteInbox(self.inbox).status()  # beside the listener holding it
        inbox = open_inbox(self.inbox)
        await inbox.open()
        try:
            return await inbox.status()
        finally:
            await inbox.aclose()

    async def stop(self) -> None:
        """SIGTERM the current process (exit 130) and collect what it printed."""
        proc = self.current
        if proc.returncode is None:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 60)
        await asyncio.gather(*self._readers)

    async def kill_all(self) -> None:
        for proc in self.procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        for task in self._readers:
            task.cancel()


async def deliver(listeners: Listeners, base_url: str, stream: list[str], lanes: int = 4) -> int:
    """POST a short notice for each id of ``stream`` to the current listener, redelivering
    (after a moment) whatever was not answered 202; returns how many were redelivered."""
    pending: asyncio.Queue[str] = asyncio.Queue()
    for psid in stream:
        pending.put_nowait(psid)
    redelivered = 0
    headers = {"Content-Type": "application/json", "Authorization": basic(USER, PASSWORD)}
    timeout = aiohttp.ClientTimeout(total=POST_TIMEOUT)

    async def lane(http: aiohttp.ClientSession) -> None:
        nonlocal redelivered
        while not pending.empty():
            psid = pending.get_nowait()
            body = msgspec.json.encode(
                {
                    "paymentsServiceId": psid,
                    "statusReportMessage": f"{base_url}{PACS002_PATH}/{psid}",
                }
            )
            try:
                async with http.post(listeners.url, data=body, headers=headers) as resp:
                    ok = resp.status == 202
            except (aiohttp.ClientError, TimeoutError):
                ok = False
            if not ok:
                redelivered += 1
                pending.put_nowait(psid)
                await asyncio.sleep(0.2)

    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
        await asyncio.gather(*(lane(http) for _ in range(lanes)))
    return redelivered
