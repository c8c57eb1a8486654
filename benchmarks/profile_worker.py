"""Where a row's wall time goes in one bulk worker: an instrumented worker run.

Queues N rows (``bulk-cancel --queue --no-wait``, a separate process) against a sandbox
with the same settings as ``bench_bulk.py`` (zero processing and settlement delay), then
runs ONE worker in this process (``payments-async worker --once``, through the CLI's own
code) with timers around each step of a row: procrastinate's fetch and finish queries,
the journal reads and commits, the POST, the wait for the outcome. Prints, per step, the
calls, total and mean wall time, and the share of the rows' summed wall time; plus how
many rows were in flight on average (Little's law: rows/s x mean row time).

Usage: ``.venv/bin/python benchmarks/profile_worker.py [--rows 2000] [--worker-args ...]``.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import sandbox_process
from bench_bulk import Postgres, cli_path, write_credentials, write_input

from payments_async.testing import generate_test_keypair

TOTALS: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])


def _timed(name: str, fn: Any) -> Any:
    async def wrapper(*a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await fn(*a, **k)
        finally:
            rec = TOTALS[name]
            rec[0] += 1
            rec[1] += time.perf_counter() - t0

    return wrapper


def instrument() -> None:
    from procrastinate import manager

    from payments_async import PaymentsClient
    from payments_async.bulk import _queue

    jm = manager.JobManager
    jm.fetch_job = _timed("procrastinate fetch_job", jm.fetch_job)  # type: ignore[method-assign]
    jm.finish_job = _timed("procrastinate finish_job", jm.finish_job)  # type: ignore[method-assign]
    jm.retry_job = _timed("procrastinate retry_job", jm.retry_job)  # type: ignore[method-assign]
    for name in ("_read_row", "_execute", "_record", "_record_many"):
        if hasattr(_queue, name):
            setattr(_queue, name, _timed(f"journal {name}", getattr(_queue, name)))
    if hasattr(_queue, "_advance"):  # rows taken in jobs of several rows
        _queue._advance = _timed("row (process_row)", _queue._advance)
        _queue.process_rows = _timed("job (process_rows)", _queue.process_rows)
    elif hasattr(_queue, "process_row"):
        _queue.process_row = _timed("row (process_row)", _queue.process_row)
    PaymentsClient.request_cancellation = _timed(  # type: ignore[method-assign]
        "POST camt.056", PaymentsClient.request_cancellation
    )
    PaymentsClient.wait_for_cancellation_outcome = _timed(  # type: ignore[method-assign]
        "wait for outcome", PaymentsClient.wait_for_cancellation_outcome
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=2000)
    p.add_argument("--cprofile", action="store_true", help="also print the worker's profile")
    p.add_argument("--worker-args", nargs=argparse.REMAINDER, default=[])
    args = p.parse_args()
    cmd = cli_path()
    assert cmd is not None, "the payments-async CLI is not installed"
    key, pem = generate_test_keypair()
    with tempfile.TemporaryDirectory(prefix="profile-worker-") as tmp, Postgres() as pg:
        work = Path(tmp)
        creds = write_credentials(work, key)
        rows_file = work / "rows.csv"
        write_input(rows_file, args.rows)
        with sandbox_process("--settlement-delay", "0", "--processing-delay", "0") as sb:
            sb.register(pem)
            dsn = pg.new_database()
            base = ["--base-url", sb.url, "--credentials", str(creds)]
            q = subprocess.run(
                [*cmd, *base, "--json", "bulk-cancel", str(rows_file), "--queue", dsn, "--no-wait"],
                capture_output=True,
                text=True,
                check=False,
            )
            assert q.returncode == 0, q.stderr
            instrument()
            from payments_async.cli import main as cli_main

            prof = cProfile.Profile() if args.cprofile else None
            sb0, pg0 = sb.cpu_seconds(), pg.cpu_seconds()
            c0 = time.process_time()
            t0 = time.perf_counter()
            try:
                if prof is not None:
                    prof.enable()
                cli_main([*base, "worker", "--queue", dsn, "--once", *args.worker_args])
            except SystemExit as exc:
                if exc.code not in (0, None):
                    raise
            finally:
                if prof is not None:
                    prof.disable()
            wall = time.perf_counter() - t0
            cpu = time.process_time() - c0
            sb_cpu, pg_cpu = sb.cpu_seconds() - sb0, pg.cpu_seconds() - pg0
    row_total = TOTALS.get("row (process_row)", [0, 0.0])[1] or 1.0
    print(f"{args.rows} rows in {wall:.1f} s = {args.rows / wall:.1f} rows/s")
    print(
        f"worker CPU {cpu:.1f} s = {cpu / args.rows * 1e6:.0f} us/row ({cpu / wall:.0%} of a core)"
    )
    print(
        f"sandbox CPU {sb_cpu:.1f} s, PostgreSQL CPU {pg_cpu:.1f} s ({pg_cpu / wall:.0%} of a core)"
    )
    print(f"mean rows in flight (sum of row wall time / wall): {row_total / wall:.1f}")
    print(f"{'step':32} {'calls':>7} {'total s':>9} {'mean ms':>9} {'% of rows':>9}")
    for name, (calls, total) in sorted(TOTALS.items(), key=lambda kv: -kv[1][1]):
        print(
            f"{name:32} {calls:7d} {total:9.1f} {total / max(1, calls) * 1e3:9.2f} "
            f"{total / row_total * 100:9.1f}"
        )
    if prof is not None:
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
