"""Item 2: ``payments-async bulk-cancel`` killed with SIGKILL at a random point, then
resumed with the same command: every row ends with exactly one stored cancellation (the
sandbox's state) and one final outcome (the results file)."""

from __future__ import annotations

import asyncio
import csv
import random
import signal
import sys
from collections import Counter
from pathlib import Path

import pytest

from payments_async import Credentials, PaymentsClient
from payments_async._constants import SANDBOX_CLIENT_ID
from payments_async.sandbox import SandboxConfig
from payments_async.testing import SandboxHandle, sandbox_server
from tests.factories import (
    AMOUNT,
    ASSIGNEE_BIC,
    ASSIGNER_BIC,
    CREDITOR_AGENT_BIC,
    CREDITOR_IBAN,
    credit_transfer,
)
from tests.support.reliability import fast_retry, record

COLUMNS = (
    "original_end_to_end_id",
    "amount",
    "currency",
    "creditor_agent_bic",
    "creditor_iban",
    "reason",
    "assigner_bic",
    "assignee_bic",
)


async def _make_payments(sb: SandboxHandle, n: int) -> list[str]:
    """n payments of the predefined client (the one ``--sandbox`` uses); their e2e ids."""
    e2e: list[str] = []
    async with PaymentsClient(Credentials.sandbox(), base_url=sb.url, **fast_retry()) as c:
        sem = asyncio.Semaphore(32)

        async def one() -> None:
            msg = credit_transfer()
            async with sem:
                await c.submit_credit_transfer(msg)
            e2e.append(msg.fito_fi_cstmr_cdt_trf.cdt_trf_tx_inf[0].pmt_id.end_to_end_id)

        await asyncio.gather(*(one() for _ in range(n)))
    return e2e


def _write_input(path: Path, e2e_ids: list[str]) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(COLUMNS)
        for e2e in e2e_ids:
            w.writerow(
                (
                    e2e,
                    str(AMOUNT),
                    "EUR",
                    CREDITOR_AGENT_BIC,
                    CREDITOR_IBAN,
                    "DUPL",
                    ASSIGNER_BIC,
                    ASSIGNEE_BIC,
                )
            )


def _command(sb: SandboxHandle, input_path: Path, results: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "payments_async",
        "--sandbox",
        "--base-url",
        sb.url,
        "bulk-cancel",
        str(input_path),
        "--results",
        str(results),
        "--concurrency",
        "8",
        "--timeout",
        "60",
    ]


def _progress(sb: SandboxHandle) -> int:
    """Requests the bulk run has made so far (submissions and outcome reads)."""
    requests = sb.server.stats()["requests"]
    return int(requests.get("camt056", 0) + requests.get("camt029", 0))


async def _kill_at(cmd: list[str], sb: SandboxHandle, threshold: int) -> tuple[int, bool]:
    """Start the command; SIGKILL it once the sandbox has seen ``threshold`` requests."""
    proc = await asyncio.create_subprocess_exec(
        *cmd, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )
    killed = False
    try:
        async with asyncio.timeout(120):
            while proc.returncode is None:
                if _progress(sb) >= threshold:
                    proc.send_signal(signal.SIGKILL)
                    killed = True
                    break
                await asyncio.sleep(0.002)
            await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return _progress(sb), killed


async def _run_to_end(cmd: list[str]) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        *cmd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        async with asyncio.timeout(180):
            out, _ = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, out.decode(errors="replace")


async def _crash_and_resume(tmp: Path, rows: int, rng: random.Random, run: int) -> None:
    config = SandboxConfig(processing_delay=3600, settlement_delay=0.2)
    async with sandbox_server(config, register_key=False) as sb:
        e2e_ids = await _make_payments(sb, rows)
        input_path = tmp / f"rows-{run}.csv"
        results = tmp / f"rows-{run}.results.csv"
        _write_input(input_path, e2e_ids)
        cmd = _command(sb, input_path, results)
        # A random point anywhere in the run: while submitting or while waiting.
        threshold = rng.randint(1, rows * 2)
        stored_before = sb.server.stats()["cancellations_stored"]
        at, killed = await _kill_at(cmd, sb, threshold)
        stored_at_kill = sb.server.stats()["cancellations_stored"] - stored_before
        code, output = await _run_to_end(cmd)
        assert code in (0, 1), output

        # The sandbox's own state: exactly one cancellation per row.
        per_e2e = Counter(
            c.original_end_to_end_id
            for c in sb.server.state.cancellations.values()
            if c.client_id == SANDBOX_CLIENT_ID
        )
        missing = [e for e in e2e_ids if per_e2e[e] == 0]
        doubled = [e for e in e2e_ids if per_e2e[e] > 1]
        stats = sb.server.stats()
        # The results file: one final outcome per row, naming the stored cancellation.
        with results.open(newline="", encoding="utf-8") as fh:
            lines = list(csv.DictReader(fh))
        outcomes = Counter(line["outcome"] for line in lines)
        stored_ids = {
            c.assignment_id: c.payments_service_id for c in sb.server.state.cancellations.values()
        }
        mismatched = [
            line["line"]
            for line in lines
            if stored_ids.get(line["assignment_id"]) != line["payments_service_id"]
        ]
        record(
            f"crash and resume run {run}",
            rows=rows,
            killed=killed,
            killed_after_requests=at,
            stored_at_kill=stored_at_kill,
            resume_exit=code,
            cancellations_stored=stats["cancellations_stored"],
            replays_answered=stats["replays_answered"],
            outcomes=dict(outcomes),
            missing=len(missing),
            duplicated=len(doubled),
        )
        assert killed, "the run finished before the kill point"
        assert not missing, missing[:5]
        assert not doubled, doubled[:5]
        assert stats["cancellations_stored"] == rows
        assert stats["replays_changed_body"] == 0
        assert len(lines) == rows
        assert sorted(line["original_end_to_end_id"] for line in lines) == sorted(e2e_ids)
        assert set(outcomes) <= {"accepted", "rejected"}, outcomes
        assert not mismatched, mismatched[:5]


async def test_bulk_cancel_killed_once_then_resumed(tmp_path: Path) -> None:
    await _crash_and_resume(tmp_path, rows=40, rng=random.Random(8), run=1)


@pytest.mark.soak
async def test_bulk_cancel_killed_at_five_random_points(tmp_path: Path) -> None:
    rng = random.Random(2024)
    for run in range(1, 6):
        await _crash_and_resume(tmp_path, rows=300, rng=rng, run=run)
