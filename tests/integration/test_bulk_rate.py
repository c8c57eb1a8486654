"""``bulk-cancel --rate``: a local run's, and a queued run's kept by three worker processes
together (real PostgreSQL). Rates are read from the sandbox's own request log.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

from payments_async._constants import SANDBOX_CLIENT_ID
from payments_async.bulk import queue_status
from payments_async.bulk._queue import _FETCHERS, JOB_ROWS
from payments_async.cli import cli
from payments_async.sandbox import SandboxConfig
from tests.support.cli import ThreadedSandbox, bulk_rows, threaded_sandbox, write_csv
from tests.support.requests_log import max_in_window, recording_requests

ROOT = Path(__file__).resolve().parents[2]
RATE = 20
# The queued run's rows: one job of `JOB_ROWS` per worker process, each worker allowed one
# job at a time (--rows), so the run needs all three at once; with the outcome reads,
# twice as many requests as rows are kept to RATE (about 7.5 s of sending).
PER_WORKER = JOB_ROWS
ROWS = 3 * PER_WORKER
CAMT056 = "/payments/camt056/v08"


def _cli(sb: ThreadedSandbox, *args: str) -> list[str]:
    return [sys.executable, "-m", "payments_async", "--sandbox", "--base-url", sb.url, *args]


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def _busy_rate(entries: list[tuple[float, str, str, object]]) -> float:
    """Requests per second until the last row was sent: while rows were waiting to go,
    more was asked than the rate allows, so this is the rate that was kept."""
    posts = sorted(t for t, method, path, _ in entries if (method, path) == ("POST", CAMT056))
    busy = sorted(
        t for t, _, path, _ in entries if path.startswith("/payments/") and t <= posts[-1]
    )
    return (len(busy) - 1) / (busy[-1] - busy[0])


def test_a_local_run_keeps_its_rate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = SandboxConfig(processing_delay=3600, settlement_delay=0.1)
    with threaded_sandbox(config) as sb, recording_requests() as log:
        src = write_csv(tmp_path / "local.csv", bulk_rows(60, prefix="RATE-L"))
        pre = ["--sandbox", "--base-url", sb.url]
        result = CliRunner().invoke(cli, [*pre, "bulk-cancel", str(src), "--rate", str(RATE)])
        assert result.exit_code == 1, result.output  # done; unknown payments are rejected
    assert sum(1 for _, m, p, _ in log.entries if (m, p) == ("POST", CAMT056)) == 60
    assert _busy_rate(log.entries) == pytest.approx(RATE, rel=0.1)
    assert max_in_window(log.times(), 1.0) <= RATE * 1.2


@pytest.mark.parametrize("rate", ["0", "-1", "nan", "inf", "fast"])
def test_a_rate_that_is_not_a_positive_number_is_a_usage_error(tmp_path: Path, rate: str) -> None:
    src = write_csv(tmp_path / "x.csv", bulk_rows(1))
    result = CliRunner().invoke(cli, ["--sandbox", "bulk-cancel", str(src), "--rate", rate])
    assert result.exit_code == 2
    assert "--rate" in result.stderr


def _workers_holding_rows(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        rec = conn.execute(
            "SELECT COUNT(DISTINCT worker_id) FROM procrastinate_jobs WHERE status = 'doing'"
        ).fetchone()
    return int(rec[0]) if rec is not None else 0


@pytest.mark.alone  # the sandbox counts arrivals per second: another test's CPU bunches them
def test_three_workers_keep_the_runs_rate_together(pg_dsn: str, tmp_path: Path) -> None:
    config = SandboxConfig(processing_delay=3600, settlement_delay=0.1)
    with threaded_sandbox(config) as sb:
        src = write_csv(tmp_path / "rate.csv", bulk_rows(ROWS, prefix="RATE"))
        with recording_requests() as log:
            # The workers start as the run is queued, as they would already be running: the
            # run's rate is stored before its first job, so no job is taken without it.
            workers = [
                subprocess.Popen(
                    _cli(
                        sb,
                        "worker",
                        "--queue",
                        pg_dsn,
                        "--concurrency",
                        "16",
                        "--rows",
                        str(PER_WORKER),
                    ),
                    cwd=ROOT,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                for _ in range(3)
            ]
            holders = 0  # the most fetch loops seen holding rows of the run at once
            try:
                queued = _run(
                    [
                        *_cli(sb, "--json", "bulk-cancel", str(src), "--queue", pg_dsn),
                        *("--no-wait", "--rate", str(RATE)),
                    ]
                )
                assert queued.returncode == 0, queued.stderr
                run_id = json.loads(queued.stdout)["run_id"]
                with psycopg.connect(pg_dsn) as conn:
                    stored = conn.execute(
                        "SELECT per_second FROM payments_bulk_rates WHERE run_id = %s", (run_id,)
                    ).fetchone()
                assert stored == (RATE,)
                deadline = time.monotonic() + 120
                while not (st := queue_status(pg_dsn, run_id)).settled:
                    assert time.monotonic() < deadline, st
                    assert all(w.poll() is None for w in workers)
                    holders = max(holders, _workers_holding_rows(pg_dsn))
                    time.sleep(0.3)
            finally:
                for w in workers:
                    w.send_signal(signal.SIGTERM)
                errors = [w.communicate(timeout=60)[1] for w in workers]
        for err in errors:
            assert "Traceback" not in err, err
        # Each process is one procrastinate worker per fetch loop, one loop per job of
        # `JOB_ROWS` rows it may hold (--rows): more loops than two processes have held
        # rows at once, so all three shared the run's rate.
        assert holders > 2 * min(_FETCHERS, -(-PER_WORKER // JOB_ROWS))
        assert st.done == ROWS
        stored_ids = Counter(
            c.original_end_to_end_id for c in sb.cancellations() if c.client_id == SANDBOX_CLIENT_ID
        )
        assert len(stored_ids) == ROWS
        assert max(stored_ids.values()) == 1

    times = log.times()  # every request to an operation: sends and outcome reads
    assert sum(1 for _, m, p, _ in log.entries if (m, p) == ("POST", CAMT056)) == ROWS
    assert _busy_rate(log.entries) == pytest.approx(RATE, rel=0.1)
    # And about the rate in any second of the run (slack: the log's times are taken as
    # each answer leaves, less the time the sandbox measured).
    assert max_in_window(times, 1.0) <= RATE * 1.2


async def test_a_rate_given_later_to_a_queued_run_is_obeyed_by_a_running_worker(
    pg_dsn: str,
) -> None:
    from payments_async import RateLimit
    from payments_async.bulk._rate import RunRates, ensure_rate_table, store_run_rate

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        ensure_rate_table(conn, 1)
    rates = RunRates(pg_dsn)
    try:
        assert await rates.limiter("R-LATER") is None  # queued without a rate
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            store_run_rate(conn, "R-LATER", RateLimit(per_second=2, burst=1))
        limiter = await rates.limiter("R-LATER")
        assert limiter is not None
        assert await limiter.acquire(5.0)
        start = time.monotonic()
        assert await limiter.acquire(5.0)
        assert time.monotonic() - start >= 0.4  # the second slot is half a second on
        assert await rates.limiter("R-LATER") is limiter
    finally:
        await rates.aclose()
