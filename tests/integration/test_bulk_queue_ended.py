"""A job of rows whose end is lost with the database session that was writing it (a restart
or a dropped connection at that moment) while its worker lives on: the run must still
settle, its job put back and ended again, instead of reading its rows "queued" (and a
watching ``bulk-cancel --queue`` or ``bulk-status --watch`` never ending) for as long as
that worker runs."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import psycopg

from payments_async.sandbox import SandboxConfig
from tests.integration.test_bulk_queue import _cli, _run, _stored, _worker
from tests.support.cli import bulk_rows, threaded_sandbox, write_csv

ROWS = 5  # one job


def _job(dsn: str) -> tuple[int, str, int | None]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT id, status, worker_id FROM procrastinate_jobs").fetchone()
    assert row is not None
    return int(row[0]), str(row[1]), row[2]


def _end_session_writing_the_end(dsn: str, admin: str, deadline: float) -> None:
    """End the database session that is writing a job's end (waiting for our row lock)."""
    name = psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]
    with psycopg.connect(admin, autocommit=True) as conn:
        while True:
            ended = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s"
                " AND wait_event_type = 'Lock' AND query LIKE %s",
                (name, "%finish_job%"),
            ).fetchall()
            if ended:
                return
            assert time.monotonic() < deadline, "the job's end was never written"
            time.sleep(0.02)


def test_a_job_whose_end_was_lost_under_a_live_worker_is_ended_again(
    pg_dsn: str, postgres_server: object, tmp_path: Path
) -> None:
    admin: str = postgres_server.get_uri()  # type: ignore[attr-defined]
    with threaded_sandbox(SandboxConfig(processing_delay=3600, settlement_delay=0.5)) as sb:
        src = write_csv(tmp_path / "e.csv", bulk_rows(ROWS, prefix="E2E-ENDED"))
        queued = _run(_cli(sb, "bulk-cancel", str(src), "--queue", pg_dsn, "--no-wait"))
        assert queued.returncode == 0, queued.stderr
        # Heartbeat 0.5 s, --stalled-after 3: the worker's heartbeat is never stale.
        worker = _worker(sb, pg_dsn)
        try:
            deadline = time.monotonic() + 60
            while (job := _job(pg_dsn))[1] != "doing":
                assert worker.poll() is None, worker.communicate()
                assert time.monotonic() < deadline, "the worker never took the job"
                time.sleep(0.02)
            job_id, _, worker_id = job
            # Hold the job's row so that its end waits, then lose the session writing it,
            # as a database restart or a dropped connection does at that moment.
            with psycopg.connect(pg_dsn) as lock:
                lock.execute("SELECT 1 FROM procrastinate_jobs WHERE id = %s FOR UPDATE", (job_id,))
                _end_session_writing_the_end(pg_dsn, admin, deadline)
                lock.rollback()
            deadline = time.monotonic() + 30
            while True:
                assert worker.poll() is None, worker.communicate()
                status = _run(_cli(sb, "--json", "bulk-status", "--queue", pg_dsn))
                if json.loads(status.stdout)["queued"] == 0:
                    break  # what a watching command waits for
                assert time.monotonic() < deadline, (
                    f"job {_job(pg_dsn)} still held by its live worker {worker_id}"
                )
                time.sleep(0.3)
        finally:
            worker.send_signal(signal.SIGINT)
            err = worker.communicate(timeout=30)[1]
        st = json.loads(status.stdout)
        assert status.returncode == 1, st  # every row final: no such payments, rejected
        assert st["outcomes"] == {"rejected": ROWS}
        assert _job(pg_dsn)[1] == "succeeded"
        stored = _stored(sb)
        assert len(stored) == ROWS
        assert max(stored.values()) == 1
        assert worker.returncode == 130, err
        assert "Traceback" not in err, err
