"""Bulk cancellation: journal on/off and SQLite vs PostgreSQL, 500k-row input memory, workers.

The sandbox runs as a separate process with a zero
settlement delay (each row's first poll finds its outcome, so the runs measure the
client's own work); the CLI runs as another process, signing with a key registered with
the sandbox, exactly as a user would type it. Parts:

- journal on / off / PostgreSQL: ``bulk-cancel`` of 10,000 rows, the modes alternated
  (twice each in a full run) so that load drifting on the machine hits all alike; the
  overhead uses the best run of each mode. PostgreSQL is a real server started from the
  ``pgserver`` wheel on a Unix socket, on this same machine.
- input memory: check and journal a 500,000-row CSV in a child process, which reports its
  own peak RSS (``ru_maxrss``), CPU and wall time; in a full run also the old path
  (``read_input`` + ``plan_rows``: every row in memory) for comparison.
- run memory: plan 500,000 rows into a SQLite journal in one child process, then finish
  them with ``bulk_cancel`` (the run phase: runner, journal, results file, report) in
  another, which reports its own peak RSS. That child's client is an in-process stand-in
  whose ``request_cancellation`` and ``wait_for_cancellation_outcome`` answer at once, so
  the figure is the runner's and the journal's alone, not the network's (the real path is
  covered by the sandbox runs above and the tests). ``--root-before DIR`` measures another
  checkout's ``payments_async`` (e.g. ``git archive main``) the same way, for comparison.
- workers: 10,000 rows queued with ``bulk-cancel --queue``, then 1, 2 and 4
  ``payments-async worker --once`` processes against one sandbox; rows/s from the first
  worker's start to the last row final, the workers' CPU per row against the
  single-process runner's (PostgreSQL and SQLite journals, run before and after the
  workers unless the stores part ran), and the sandbox's CPU share. On a 2-core machine
  the sandbox and the workers compete for the same cores: say so when reading the table.

Rows cancel payments the sandbox does not know, so every row ends rejected (NOOR) and the
CLI exits 1 ("all rows final, some rejected"): that is the expected code.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _harness import (
    ASSIGNEE_BIC,
    ASSIGNER_BIC,
    BENCH_CLIENT_ID,
    BENCH_CLIENT_SECRET,
    BENCH_ISS,
    BENCH_KID,
    CREDITOR_AGENT_BIC,
    CREDITOR_IBAN,
    format_table,
    machine_info,
    parse_args,
    sandbox_process,
    write_result,
)
from cryptography.hazmat.primitives import serialization

from payments_async.testing import generate_test_keypair

NAME = "bulk"
CONCURRENCY = 32  # the CLI's default --concurrency
OK_EXIT_CODES = (0, 1)  # 1: every row final, some (here: all) rejected


def write_input(path: Path, rows: int) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            [
                "original_end_to_end_id",
                "amount",
                "creditor_agent_bic",
                "creditor_iban",
                "reason",
                "assigner_bic",
                "assignee_bic",
            ]
        )
        for i in range(rows):
            w.writerow(
                [
                    f"E2E-BULK-{i:08d}",
                    "100.00",
                    CREDITOR_AGENT_BIC,
                    CREDITOR_IBAN,
                    "DUPL",
                    ASSIGNER_BIC,
                    ASSIGNEE_BIC,
                ]
            )


def write_credentials(work: Path, key: Any) -> Path:
    """The benchmark client's key and credentials file in ``work``; returns the file."""
    key_file = work / "key.pem"
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    creds = work / "credentials.json"
    creds.write_text(
        json.dumps(
            {
                "client_id": BENCH_CLIENT_ID,
                "client_secret": BENCH_CLIENT_SECRET,
                "key_id": BENCH_KID,
                "issuer": BENCH_ISS,
                "private_key_file": str(key_file),
            }
        )
    )
    return creds


def cli_path() -> list[str] | None:
    """The ``payments-async`` command, or None when the CLI is not available."""
    exe = Path(sys.executable).with_name("payments-async")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("payments-async")
    return [found] if found else None


MODES = {"on": "journal on (SQLite)", "off": "journal off", "pg": "journal in PostgreSQL"}


def run_once(
    cmd: list[str],
    url: str,
    creds: Path,
    work: Path,
    rows: Path,
    mode: str,
    tag: str,
    dsn: str | None = None,
) -> dict[str, Any]:
    results = work / f"results-{tag}.csv"
    args = [
        *cmd,
        "--base-url",
        url,
        "--credentials",
        str(creds),
        "--json",
        "bulk-cancel",
        str(rows),
        "--concurrency",
        str(CONCURRENCY),
        "--results",
        str(results),
    ]
    if mode == "on":
        args += ["--journal", str(work / f"journal-{tag}.sqlite")]
    elif mode == "pg":
        assert dsn is not None
        args += ["--journal", dsn]
    else:
        args += ["--no-journal"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True, timeout=1800, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out: dict[str, Any] = {
        "journal": mode != "off",
        "store": mode,
        "mode": MODES[mode],
        "exit_code": proc.returncode,
        "process_wall_s": round(wall, 3),
        "process_cpu_s": round(cpu, 3),
    }
    try:
        summary = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        summary = None
    if proc.returncode not in OK_EXIT_CODES or summary is None:
        out["error"] = (proc.stderr or proc.stdout)[-1500:]
        return out
    out.update(
        {
            "rows": summary.get("rows"),
            "finished": summary.get("this_run", {}).get("finished"),
            "rejected": summary.get("rejected"),
            "accepted": summary.get("accepted"),
            "refused": summary.get("refused"),
            "elapsed_s": summary.get("elapsed_s"),
            "rows_per_s": summary.get("rows_per_s"),
        }
    )
    out["cpu_us_per_row"] = round(cpu / max(1, out["rows"] or 1) * 1e6, 1)
    return out


# --- PostgreSQL from the pgserver wheel --------------------------------------------------------


class Postgres:
    """A PostgreSQL server in a temporary directory (Unix socket only), stopped on exit."""

    def __enter__(self) -> Postgres:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pgserver

            self.dir = Path(tempfile.mkdtemp(prefix="pa-bench-pg-"))
            self.server = pgserver.get_server(self.dir, cleanup_mode="delete")
        self._n = 0
        return self

    def cpu_seconds(self) -> float:
        """CPU of the server: the postmaster, its live backends and those already gone."""
        import psutil

        main = psutil.Process(self.server.get_pid())
        t = main.cpu_times()
        total = t.user + t.system + t.children_user + t.children_system
        for child in main.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                c = child.cpu_times()
                total += c.user + c.system
        return float(total)

    def new_database(self) -> str:
        import psycopg

        self._n += 1
        name = f"bench_{os.getpid()}_{self._n}"
        with psycopg.connect(self.server.get_uri(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return str(self.server.get_uri(name))

    def __exit__(self, *exc: object) -> None:
        self.server.cleanup()
        shutil.rmtree(self.dir, ignore_errors=True)


def postgres_or_none() -> Postgres | None:
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR is not set
            import pgserver  # noqa: F401
        import procrastinate  # noqa: F401
        import psycopg  # noqa: F401
    except ImportError:
        return None
    return Postgres()


# --- input memory: check and journal a large file ----------------------------------------------

_MEMORY_CHILD = r"""
import json, resource, sys, time
from pathlib import Path
path, journal, how = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
t0 = time.perf_counter()
from payments_async.bulk import SqliteJournal
from payments_async.bulk._input import check_input, read_input
from payments_async.bulk._plan import new_run_id, plan_input, plan_rows
if how == "stream":
    checked = check_input(path)
    j = SqliteJournal.open(journal, input_sha256=checked.sha256, new_run_id=new_run_id())
    j.plan(plan_input(checked, j.run_id))
    valid = checked.valid
else:
    bulk = read_input(path)
    j = SqliteJournal.open(journal, input_sha256=bulk.sha256, new_run_id=new_run_id())
    j.plan(plan_rows(bulk, j.run_id))
    valid = len(bulk.rows)
j.close()
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"valid": valid, "wall_s": time.perf_counter() - t0,
                  "cpu_s": ru.ru_utime + ru.ru_stime, "peak_rss_mb": ru.ru_maxrss / 1024}))
"""


def _input_and_journal(work: Path, n_rows: int, name: str) -> tuple[Path, Path]:
    """The ``n_rows`` input (written once) and a journal path with no file behind it."""
    src = work / f"input-{n_rows}.csv"
    if not src.exists():
        write_input(src, n_rows)
    journal = work / f"{name}.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{journal}{suffix}").unlink(missing_ok=True)
    return src, journal


def _child_figures(data: dict[str, Any], n_rows: int) -> dict[str, Any]:
    """A child's own peak RSS, wall and CPU time, rounded for the table."""
    return {
        "peak_rss_mb": round(data["peak_rss_mb"], 1),
        "wall_s": round(data["wall_s"], 1),
        "cpu_s": round(data["cpu_s"], 1),
        "cpu_us_per_row": round(data["cpu_s"] / n_rows * 1e6, 1),
    }


def measure_input_memory(work: Path, n_rows: int, how: str) -> dict[str, Any]:
    src, journal = _input_and_journal(work, n_rows, f"memory-{how}")
    proc = subprocess.run(
        [sys.executable, "-c", _MEMORY_CHILD, str(src), str(journal), how],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    label = "streaming (check_input + plan_input)" if how == "stream" else "old: read_input"
    out: dict[str, Any] = {"path": label, "rows": n_rows, "file_mb": src.stat().st_size / 1e6}
    if proc.returncode != 0:
        out["error"] = proc.stderr[-1500:]
        return out
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    out.update(
        {
            "valid": data["valid"],
            **_child_figures(data, n_rows),
            "file_mb": round(out["file_mb"], 1),
        }
    )
    return out


# --- run memory: finish a planned 500k-row journal -------------------------------------------

_PLAN_CHILD = r"""
import json, sys
from pathlib import Path
from payments_async.bulk import SqliteJournal
from payments_async.bulk._input import check_input
from payments_async.bulk._plan import new_run_id, plan_input
checked = check_input(sys.argv[1])
j = SqliteJournal.open(Path(sys.argv[2]), input_sha256=checked.sha256, new_run_id=new_run_id())
j.plan(plan_input(checked, j.run_id))
j.close()
print(json.dumps({"valid": checked.valid}))
"""

_RUN_CHILD = r"""
import asyncio, json, resource, sys, time, types
import payments_async
from payments_async import Outcome
from payments_async import Submission
from payments_async.bulk import bulk_cancel

REJECTED = types.SimpleNamespace(
    outcome=Outcome.REJECTED, status="RJCR", tx_statuses=(), reason_codes=("NOOR",),
    reason_texts=(), return_request_needed=False,
)


class InstantClient:
    # Benchmark only: answers at once, so the run measures the runner and the journal.
    def __init__(self):
        self.n = 0

    async def request_cancellation(self, msg):
        self.n += 1
        # the same child runs against an earlier checkout (--root-before): give the fields
        # the Submission of that checkout has
        fields = dict(
            payments_service_id=f"CXL-{self.n}", message_id=msg.message_id, echoed_id=None,
            status="PENDING", creation_date_time=None, created=True, attempts=1,
            request_id="r", http_status=201,
        )
        return Submission(**{k: v for k, v in fields.items() if k in Submission.__struct_fields__})

    async def wait_for_cancellation_outcome(self, payments_service_id, *, timeout):
        await asyncio.sleep(0)
        return REJECTED


src, journal, results = sys.argv[1:4]
t0 = time.perf_counter()
report = asyncio.run(bulk_cancel(InstantClient(), src, results_path=results, journal_path=journal))
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({
    "package": str(payments_async.__file__), "wall_s": time.perf_counter() - t0,
    "cpu_s": ru.ru_utime + ru.ru_stime, "peak_rss_mb": ru.ru_maxrss / 1024,
    "finished": report.counts.done, "rejected": report.totals.get("rejected"),
}))
"""


def measure_run_memory(work: Path, n_rows: int, label: str, root: Path | None) -> dict[str, Any]:
    """Plan ``n_rows`` in one child, finish them with ``bulk_cancel`` in another.

    ``root``: import ``payments_async`` from this source tree instead of the installed one.
    """
    src, journal = _input_and_journal(work, n_rows, f"run-memory-{label}")
    env = dict(os.environ)
    if root is not None:
        env["PYTHONPATH"] = str(root)
    out: dict[str, Any] = {"code": label, "rows": n_rows}
    for script, args in (
        (_PLAN_CHILD, [str(src), str(journal)]),
        (_RUN_CHILD, [str(src), str(journal), str(work / f"run-memory-{label}.csv")]),
    ):
        proc = subprocess.run(
            [sys.executable, "-c", script, *args],
            capture_output=True,
            text=True,
            timeout=3600,
            check=False,
            env=env,
            cwd=work,  # not the checkout: "-c" puts the working directory first on sys.path
        )
        if proc.returncode != 0:
            out["error"] = proc.stderr[-1500:]
            return out
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    out.update(
        {
            "package": data["package"],
            "finished": data["finished"],
            "rejected": data["rejected"],
            **_child_figures(data, n_rows),
        }
    )
    return out


# --- distributed: N worker processes over one queue --------------------------------------------


def run_workers(
    cmd: list[str],
    sb: Any,
    creds: Path,
    work: Path,
    rows: Path,
    n_workers: int,
    pg: Postgres,
) -> dict[str, Any]:
    dsn = pg.new_database()
    base = [*cmd, "--base-url", sb.url, "--credentials", str(creds)]
    queued = subprocess.run(
        [*base, "--json", "bulk-cancel", str(rows), "--queue", dsn, "--no-wait"],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    out: dict[str, Any] = {"workers": n_workers, "cores": os.cpu_count()}
    if queued.returncode != 0:
        out["error"] = queued.stderr[-1500:]
        return out
    n = json.loads(queued.stdout)["enqueued"]
    per_worker = CONCURRENCY
    sb_cpu0 = sb.cpu_seconds()
    pg_cpu0 = pg.cpu_seconds()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            [*base, "worker", "--queue", dsn, "--concurrency", str(per_worker), "--once"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(n_workers)
    ]
    errors = [p.communicate(timeout=1800)[1] for p in procs]
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    sb_cpu = sb.cpu_seconds() - sb_cpu0
    pg_cpu = pg.cpu_seconds() - pg_cpu0
    workers_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    status = subprocess.run(
        [*base, "--json", "bulk-status", "--queue", dsn],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    st = json.loads(status.stdout) if status.stdout.strip() else {}
    # A worker's own start and stop (imports, key, connections), measured on the drained
    # queue: paid once per process, whatever the rows.
    idle0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([*base, "worker", "--queue", dsn, "--once"], capture_output=True, check=False)
    idle1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    startup = (idle1.ru_utime - idle0.ru_utime) + (idle1.ru_stime - idle0.ru_stime)
    out.update(
        {
            "rows": n,
            "final": st.get("states", {}).get("final"),
            "wall_s": round(wall, 2),
            "rows_per_s": round(n / wall, 1),
            "workers_cpu_s": round(workers_cpu, 1),
            "workers_cpu_us_per_row": round(workers_cpu / max(1, n) * 1e6, 1),
            "worker_startup_cpu_s": round(startup, 2),
            "workers_cpu_us_per_row_net": round(
                (workers_cpu - n_workers * startup) / max(1, n) * 1e6, 1
            ),
            "sandbox_cpu_s": round(sb_cpu, 1),
            "sandbox_cpu_share_pct": round(sb_cpu / (wall * (os.cpu_count() or 1)) * 100, 1),
            "postgres_cpu_s": round(pg_cpu, 1),
            "postgres_cpu_share_pct": round(pg_cpu / (wall * (os.cpu_count() or 1)) * 100, 1),
            # what the machine gave us: the three parties' CPU over the wall time of all cores
            "our_share_of_machine_pct": round(
                (workers_cpu + sb_cpu + pg_cpu) / (wall * (os.cpu_count() or 1)) * 100, 1
            ),
            "exit_codes": [p.returncode for p in procs],
        }
    )
    if any(p.returncode != 0 for p in procs):
        out["error"] = next(e for p, e in zip(procs, errors, strict=True) if p.returncode)[-800:]
    return out


def _single(
    cmd: list[str], url: str, creds: Path, work: Path, rows: Path, mode: str, pg: Postgres
) -> dict[str, Any]:
    dsn = pg.new_database() if mode == "pg" else None
    r = run_once(cmd, url, creds, work, rows, mode, f"{mode}-beside-{time.monotonic_ns()}", dsn)
    print(
        f"  single process, {MODES[mode]}: {r.get('rows_per_s')} rows/s, "
        f"{r.get('cpu_us_per_row')} us CPU/row" + (f"  ERROR {r['error']}" if "error" in r else ""),
        flush=True,
    )
    return r


def _against_single(workers: list[dict[str, Any]], runs: list[dict[str, Any]]) -> None:
    """Each worker row's CPU per row over the single-process runner's (PostgreSQL journal,
    mean of its runs), and the rows/s one core of worker CPU allows."""
    single = [r["cpu_us_per_row"] for r in runs if r.get("store") == "pg" and "error" not in r]
    for w in workers:
        per_row = w.get("workers_cpu_us_per_row")
        if per_row:
            w["rows_per_s_per_worker_core"] = round(1e6 / per_row, 1)
            if single:
                w["vs_single_process_cpu"] = round(per_row / (sum(single) / len(single)), 2)


def _options(p: Any) -> None:
    p.add_argument("--rows", type=int, help="rows per bulk-cancel and worker run")
    p.add_argument("--parts", default="stores,workers,memory,run", help="which parts to run")
    p.add_argument(
        "--root-before",
        type=Path,
        help="run memory: also measure the payments_async of this source tree (e.g. main's)",
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__.splitlines()[0], argv, _options)
    quick = args.quick
    parts = set(args.parts.split(","))
    n_rows, repeats = (100, 1) if quick else (10_000, 2)
    n_rows = args.rows or n_rows
    n_memory = 500 if args.smoke else 5_000 if quick else 500_000
    worker_counts = (1,) if quick else (1, 2, 4)
    info = machine_info()
    cmd = cli_path()
    result: dict[str, Any] = {
        "benchmark": NAME,
        "quick": quick,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": info,
        "rows": n_rows,
        "concurrency": CONCURRENCY,
    }
    if cmd is None:
        result["skipped"] = "the payments-async CLI is not installed"
        print(result["skipped"])
        write_result(args.out, NAME, result)
        return 0
    key, pem = generate_test_keypair()
    runs: list[dict[str, Any]] = []
    memory: list[dict[str, Any]] = []
    run_memory: list[dict[str, Any]] = []
    workers: list[dict[str, Any]] = []
    pg = postgres_or_none()
    with tempfile.TemporaryDirectory(prefix="bench-bulk-") as tmp, pg or contextlib.nullcontext():
        work = Path(tmp)
        creds = write_credentials(work, key)
        rows_file = work / "rows.csv"
        write_input(rows_file, n_rows)
        modes = ("on", "off", "pg") if pg is not None else ("on", "off")
        with sandbox_process("--settlement-delay", "0", "--processing-delay", "0") as sb:
            sb.register(pem)
            print(f"sandbox {sb.url} (pid {sb.proc.pid}); {n_rows} rows", flush=True)
            for rep in range(repeats if "stores" in parts else 0):
                for mode in modes:
                    tag = f"{mode}-{rep}"
                    dsn = pg.new_database() if mode == "pg" and pg is not None else None
                    r = run_once(cmd, sb.url, creds, work, rows_file, mode, tag, dsn)
                    runs.append(r)
                    print(
                        f"  {MODES[mode]} #{rep + 1}: "
                        f"{r.get('elapsed_s')} s, {r.get('rows_per_s')} rows/s, "
                        f"exit {r['exit_code']}"
                        + (f"  ERROR {r['error']}" if "error" in r else ""),
                        flush=True,
                    )
            if pg is not None and "workers" in parts:
                # The single-process runner beside the workers, in the same run, before and
                # after them (load drifts on a shared machine), unless "stores" ran it.
                beside = () if "stores" in parts else ("pg", "on")
                runs += [_single(cmd, sb.url, creds, work, rows_file, m, pg) for m in beside]
                for n_workers in worker_counts:
                    w = run_workers(cmd, sb, creds, work, rows_file, n_workers, pg)
                    workers.append(w)
                    print(
                        f"  {n_workers} worker(s): {w.get('rows_per_s')} rows/s, "
                        f"{w.get('workers_cpu_us_per_row')} us CPU/row, sandbox CPU "
                        f"{w.get('sandbox_cpu_share_pct')} % of the machine"
                        + (f"  ERROR {w['error']}" if "error" in w else ""),
                        flush=True,
                    )
                runs += [_single(cmd, sb.url, creds, work, rows_file, m, pg) for m in beside]
                _against_single(workers, runs)
        hows = () if "memory" not in parts else ("stream",) if quick else ("stream", "old")
        for how in hows:
            m = measure_input_memory(work, n_memory, how)
            memory.append(m)
            print(
                f"  input {n_memory} rows, {m['path']}: peak RSS {m.get('peak_rss_mb')} MB, "
                f"{m.get('wall_s')} s" + (f"  ERROR {m['error']}" if "error" in m else ""),
                flush=True,
            )
        codes: list[tuple[str, Path | None]] = [("this checkout", None)]
        if args.root_before is not None:
            codes.insert(0, ("before: " + str(args.root_before), args.root_before))
        for label, root in codes if "run" in parts else ():
            r = measure_run_memory(work, n_memory, "before" if root else "this", root)
            r["code"] = label
            run_memory.append(r)
            print(
                f"  run {n_memory} planned rows, {label}: peak RSS {r.get('peak_rss_mb')} MB, "
                f"{r.get('wall_s')} s" + (f"  ERROR {r['error']}" if "error" in r else ""),
                flush=True,
            )
    info["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    ok = [r for r in runs if "error" not in r]
    summary: dict[str, Any] = {}
    best = {
        mode: min((r["elapsed_s"] for r in ok if r["store"] == mode), default=None)
        for mode in ("on", "off", "pg")
    }
    on, off, pgb = best["on"], best["off"], best["pg"]
    if on and off:
        on_all = [r["elapsed_s"] for r in ok if r["store"] == "on"]
        off_all = [r["elapsed_s"] for r in ok if r["store"] == "off"]
        cpu_on = min(r["process_cpu_s"] for r in ok if r["store"] == "on")
        cpu_off = min(r["process_cpu_s"] for r in ok if r["store"] == "off")
        summary = {
            "best_elapsed_on_s": on,
            "best_elapsed_off_s": off,
            "rows_per_s_on": round(n_rows / on, 1),
            "rows_per_s_off": round(n_rows / off, 1),
            # the journal's share of the journaled run's time
            "journal_overhead_pct": round((on - off) / on * 100, 1),
            "journal_slowdown_pct": round((on - off) / off * 100, 1),
            "mean_elapsed_on_s": round(sum(on_all) / len(on_all), 3),
            "mean_elapsed_off_s": round(sum(off_all) / len(off_all), 3),
            "journal_overhead_pct_of_means": round(
                (sum(on_all) / len(on_all) - sum(off_all) / len(off_all))
                / (sum(on_all) / len(on_all))
                * 100,
                1,
            ),
            # CPU of the CLI process (startup included): robust to other load on the machine
            "journal_cpu_overhead_pct": round((cpu_on - cpu_off) / cpu_on * 100, 1),
        }
        result["targets_met"] = {
            "journal_overhead_pct <= 25": summary["journal_overhead_pct"] <= 25
        }
        if pgb:
            cpu_pg = min(r["process_cpu_s"] for r in ok if r["store"] == "pg")
            summary.update(
                {
                    "best_elapsed_pg_s": pgb,
                    "rows_per_s_pg": round(n_rows / pgb, 1),
                    "pg_journal_overhead_pct": round((pgb - off) / pgb * 100, 1),
                    "pg_vs_sqlite_elapsed_pct": round((pgb - on) / on * 100, 1),
                    "pg_vs_sqlite_cli_cpu_pct": round((cpu_pg - cpu_on) / cpu_on * 100, 1),
                }
            )
    streamed = next((m for m in memory if m["path"].startswith("streaming")), None)
    if streamed and "peak_rss_mb" in streamed:
        summary["input_rows"] = n_memory
        summary["input_peak_rss_mb"] = streamed["peak_rss_mb"]
        summary["input_wall_s"] = streamed["wall_s"]
        if not quick:
            result.setdefault("targets_met", {})["input_peak_rss_mb <= 150"] = (
                streamed["peak_rss_mb"] <= 150
            )
    this_run = next((r for r in run_memory if r["code"] == "this checkout"), None)
    if this_run and "peak_rss_mb" in this_run:
        summary["run_rows"] = n_memory
        summary["run_peak_rss_mb"] = this_run["peak_rss_mb"]
        if not quick:
            result.setdefault("targets_met", {})["run_peak_rss_mb <= 150"] = (
                this_run["peak_rss_mb"] <= 150
            )
    result["runs"] = runs
    result["input_memory"] = memory
    result["run_memory"] = run_memory
    result["workers"] = workers
    result["summary"] = summary
    print()
    print(
        format_table(
            runs,
            [
                "mode",
                "exit_code",
                "rows",
                "rejected",
                "refused",
                "elapsed_s",
                "rows_per_s",
                "process_wall_s",
                "process_cpu_s",
                "cpu_us_per_row",
            ],
            title=f"bulk-cancel of {n_rows} rows, --concurrency {CONCURRENCY} (CLI process)",
        )
    )
    print(
        format_table(
            memory,
            ["path", "rows", "file_mb", "peak_rss_mb", "wall_s", "cpu_s", "cpu_us_per_row"],
            title="check and journal a large input (child process, its own ru_maxrss)",
        )
    )
    if run_memory:
        print(
            format_table(
                run_memory,
                ["code", "rows", "finished", "peak_rss_mb", "wall_s", "cpu_s", "cpu_us_per_row"],
                title=(
                    "finish a planned journal with bulk_cancel (child process, its own "
                    "ru_maxrss; an in-process client that answers at once, no network)"
                ),
            )
        )
    if workers:
        print(
            format_table(
                workers,
                [
                    "workers",
                    "cores",
                    "rows",
                    "final",
                    "wall_s",
                    "rows_per_s",
                    "workers_cpu_us_per_row",
                    "vs_single_process_cpu",
                    "worker_startup_cpu_s",
                    "workers_cpu_us_per_row_net",
                    "rows_per_s_per_worker_core",
                    "sandbox_cpu_s",
                    "sandbox_cpu_share_pct",
                    "postgres_cpu_s",
                    "postgres_cpu_share_pct",
                    "our_share_of_machine_pct",
                ],
                title=(
                    f"worker processes (--concurrency {CONCURRENCY} each) over one queue and "
                    f"one sandbox on {os.cpu_count()} cores (shared by sandbox, PostgreSQL and "
                    "workers)"
                ),
            )
        )
    print("Summary:", summary)
    path = write_result(args.out, NAME, result)
    print(f"wrote {path}")
    failed = [x for x in (*runs, *memory, *run_memory, *workers) if "error" in x]
    return 0 if ok and not failed else 1


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


if __name__ == "__main__":
    sys.exit(main())
