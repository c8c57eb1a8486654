"""Two workers and a queued run while the queue's database goes away for 5 s: no worker
exits, no traceback, every row stored once, and the run finishes by itself."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from payments_async.sandbox import SandboxConfig
from tests.integration.test_bulk_queue import _cli, _run, _stored, _worker
from tests.support.cli import bulk_rows, threaded_sandbox, write_csv
from tests.support.postgres import cut_off, restore

ROWS = 400


def test_workers_ride_out_a_database_outage(
    pg_dsn: str, postgres_server: object, tmp_path: Path
) -> None:
    admin: str = postgres_server.get_uri()  # type: ignore[attr-defined]
    with threaded_sandbox(SandboxConfig(processing_delay=3600, settlement_delay=1.5)) as sb:
        src = write_csv(tmp_path / "w.csv", bulk_rows(ROWS, prefix="E2E-WOUT"))
        queued = _run(_cli(sb, "bulk-cancel", str(src), "--queue", pg_dsn, "--no-wait"))
        assert queued.returncode == 0, queued.stderr
        workers = [_worker(sb, pg_dsn) for _ in range(2)]
        try:
            deadline = time.monotonic() + 60
            while sb.stats()["cancellations_stored"] < ROWS // 4:
                assert time.monotonic() < deadline, "the workers never got going"
                time.sleep(0.05)
            cut_off(pg_dsn, admin)
            time.sleep(5)
            restore(pg_dsn, admin)
            deadline = time.monotonic() + 60
            while True:
                for w in workers:
                    if w.poll() is not None:
                        raise AssertionError(f"a worker exited: {w.communicate()[1]}")
                status = _run(_cli(sb, "--json", "bulk-status", "--queue", pg_dsn))
                if status.returncode != 3:
                    break
                assert time.monotonic() < deadline, status.stdout
                time.sleep(0.5)
        finally:
            for w in workers:
                w.send_signal(signal.SIGINT)
            errs = [w.communicate(timeout=30)[1] for w in workers]
        st = json.loads(status.stdout)
        assert status.returncode == 1, st  # every row final: no such payments, rejected
        assert st["outcomes"] == {"rejected": ROWS}
        stored = _stored(sb)
        assert len(stored) == ROWS
        assert max(stored.values()) == 1
        for w, err in zip(workers, errs, strict=True):
            assert w.returncode == 130, err  # stopped by us, not by the outage
            assert "Traceback" not in err, err
            assert "never retrieved" not in err
            assert len(err.splitlines()) < 20, err
            assert err.count("cannot be reached") <= 2, err
