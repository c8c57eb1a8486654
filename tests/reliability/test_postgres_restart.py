"""PostgreSQL stopped, then started again, under two queue workers and a ``bulk-cancel``
with a PostgreSQL journal: every row stored once, no worker exits, no traceback, and both
runs finish by themselves.

The default outage lasts 6 s: long enough for the reconnections' growing pause to reach
its cap (2 s) and be refused there; the ``soak`` case stops the server for 20 s, two thirds
of a journal's outage window (``JOURNAL_OUTAGE_WINDOW``).

The server is stopped with ``pg_ctl stop -m fast`` (sessions ended, connections refused
until it is started again), as a restart of the database is met in production; a
SIGSTOPped server instead holds a read forever, which is a hung host, not a restart.
"""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from payments_async.sandbox import SandboxConfig
from tests.integration.test_bulk_queue import _cli, _run, _stored, _worker
from tests.support.cli import bulk_rows, threaded_sandbox, write_csv

pytestmark = pytest.mark.slow

ROWS = 300
DOWN_FOR = [
    pytest.param(6.0, id="6s"),
    pytest.param(20.0, id="20s", marks=pytest.mark.soak),
]


def _stop(server: Any) -> None:
    from pgserver._commands import pg_ctl

    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user)


def _start(server: Any) -> None:
    server.ensure_postgres_running()


@pytest.fixture
def journal_dsn(postgres_server: Any) -> Iterator[str]:
    """A second database on the same server, for the local run's journal (``bulk-status
    --queue`` shows the latest run of its database: the queued one here)."""
    name = f"j_{secrets.token_hex(6)}"
    admin = postgres_server.get_uri()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield postgres_server.get_uri(name)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _by_run(sb: Any) -> dict[str, int]:
    """Cancellations stored by the sandbox for the queued run and for the local run."""
    stored = _stored(sb)
    return {p: sum(k.startswith(p) for k in stored) for p in ("E2E-RSQ", "E2E-RSL")}


@pytest.mark.parametrize("down_for", DOWN_FOR)
def test_workers_and_a_journal_ride_out_a_postgres_restart(
    down_for: float, pg_dsn: str, journal_dsn: str, postgres_server: Any, tmp_path: Path
) -> None:
    with threaded_sandbox(SandboxConfig(processing_delay=3600, settlement_delay=1.5)) as sb:
        queued_src = write_csv(tmp_path / "w.csv", bulk_rows(ROWS, prefix="E2E-RSQ"))
        local_src = write_csv(tmp_path / "l.csv", bulk_rows(ROWS, prefix="E2E-RSL"))
        queued = _run(_cli(sb, "bulk-cancel", str(queued_src), "--queue", pg_dsn, "--no-wait"))
        assert queued.returncode == 0, queued.stderr
        workers = [_worker(sb, pg_dsn) for _ in range(2)]
        local = subprocess.Popen(
            _cli(
                sb,
                "--json",
                "bulk-cancel",
                str(local_src),
                "--journal",
                journal_dsn,
                "--concurrency",
                "8",
                "--timeout",
                "90",
            ),
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        stopped = False
        try:
            deadline = time.monotonic() + 60
            while min(_by_run(sb).values()) < ROWS // 4:  # both runs are sending
                assert time.monotonic() < deadline, "the runs never got going"
                time.sleep(0.05)
            _stop(postgres_server)
            stopped = True
            time.sleep(down_for)
            _start(postgres_server)
            stopped = False
            deadline = time.monotonic() + 60
            while True:
                for w in workers:
                    assert w.poll() is None, ("a worker exited", w.communicate()[1][-3000:])
                status = _run(_cli(sb, "--json", "bulk-status", "--queue", pg_dsn))
                if status.returncode != 3:
                    break
                assert time.monotonic() < deadline, status.stdout
                time.sleep(0.5)
            out, err = local.communicate(timeout=60)
        finally:
            if stopped:
                _start(postgres_server)
            for w in workers:
                w.send_signal(signal.SIGINT)
            worker_errs = [w.communicate(timeout=30)[1] for w in workers]
            if local.poll() is None:
                local.kill()
                local.communicate()
        st = json.loads(status.stdout)
        assert status.returncode == 1, st  # every row final: no such payments, rejected
        assert st["outcomes"] == {"rejected": ROWS}
        assert local.returncode == 1, (err, out)  # finished by itself, every row rejected
        assert json.loads(out or "{}").get("rejected") == ROWS, err
        assert "Traceback" not in err, err
        stored = _stored(sb)
        by_run = _by_run(sb)
        assert by_run == {"E2E-RSQ": ROWS, "E2E-RSL": ROWS}, (by_run, sb.stats(), st, out)
        assert max(stored.values()) == 1  # each stored exactly once
        for w, werr in zip(workers, worker_errs, strict=True):
            assert w.returncode == 130, werr  # stopped by us, not by the outage
            assert "Traceback" not in werr, werr
            assert "never retrieved" not in werr, werr
            # One outage policy: one line when the database goes, one when it is back,
            # nothing else (no psycopg or procrastinate noise). A worker whose every
            # query waited through the outage, or met it only once the database was
            # back, rightly says nothing.
            lines = werr.splitlines()
            gone = sum("cannot be reached" in line for line in lines)
            back = sum("is back after" in line for line in lines)
            assert gone <= 1, werr
            assert back == gone, werr
            assert lines[0].startswith("worker ready"), werr
            assert len(lines) == 1 + gone + back, werr
