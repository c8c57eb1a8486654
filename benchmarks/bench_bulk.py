"""Bulk cancellation: ``payments-async bulk-cancel`` of 10,000 rows, journal on vs off.

Issue 7, item 4. The sandbox runs as a separate process with a zero settlement delay
(each row's first poll finds its outcome, so the run measures the client's own work);
the CLI runs as another process, signing with a key registered with the sandbox, exactly
as a user would type it. The runs alternate journal on / off (twice each in a full run)
so that load drifting on the machine hits both alike; the overhead uses the best run of
each mode. Rows cancel payments the sandbox does not know, so every row ends rejected
(NOOR) and the CLI exits 1 ("all rows final, some rejected"): that is the expected code.
"""

from __future__ import annotations

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


def cli_path() -> list[str] | None:
    """The ``payments-async`` command, or None when the CLI is not available."""
    exe = Path(sys.executable).with_name("payments-async")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("payments-async")
    return [found] if found else None


def run_once(
    cmd: list[str], url: str, creds: Path, work: Path, rows: Path, journal: bool, tag: str
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
    args += ["--journal", str(work / f"journal-{tag}.sqlite")] if journal else ["--no-journal"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True, timeout=1800, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out: dict[str, Any] = {
        "journal": journal,
        "mode": "journal on" if journal else "journal off",
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
            "failed": summary.get("failed"),
            "elapsed_s": summary.get("elapsed_s"),
            "rows_per_s": summary.get("rows_per_s"),
        }
    )
    out["cpu_us_per_row"] = round(cpu / max(1, out["rows"] or 1) * 1e6, 1)
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__.splitlines()[0], argv)
    n_rows, repeats = (100, 1) if args.quick else (10_000, 2)
    info = machine_info()
    cmd = cli_path()
    result: dict[str, Any] = {
        "benchmark": NAME,
        "quick": args.quick,
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
    with tempfile.TemporaryDirectory(prefix="bench-bulk-") as tmp:
        work = Path(tmp)
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
        rows_file = work / "rows.csv"
        write_input(rows_file, n_rows)
        with sandbox_process("--settlement-delay", "0", "--processing-delay", "0") as sb:
            sb.register(pem)
            print(f"sandbox {sb.url} (pid {sb.proc.pid}); {n_rows} rows", flush=True)
            for rep in range(repeats):
                for journal in (True, False):
                    tag = f"{'on' if journal else 'off'}-{rep}"
                    r = run_once(cmd, sb.url, creds, work, rows_file, journal, tag)
                    runs.append(r)
                    print(
                        f"  journal {'on ' if journal else 'off'} #{rep + 1}: "
                        f"{r.get('elapsed_s')} s, {r.get('rows_per_s')} rows/s, "
                        f"exit {r['exit_code']}"
                        + (f"  ERROR {r['error']}" if "error" in r else ""),
                        flush=True,
                    )
    info["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    ok = [r for r in runs if "error" not in r]
    on = [r["elapsed_s"] for r in ok if r["journal"]]
    off = [r["elapsed_s"] for r in ok if not r["journal"]]
    summary: dict[str, Any] = {}
    if on and off:
        best_on, best_off = min(on), min(off)
        cpu_on = min(r["process_cpu_s"] for r in ok if r["journal"])
        cpu_off = min(r["process_cpu_s"] for r in ok if not r["journal"])
        summary = {
            "best_elapsed_on_s": best_on,
            "best_elapsed_off_s": best_off,
            "rows_per_s_on": round(n_rows / best_on, 1),
            "rows_per_s_off": round(n_rows / best_off, 1),
            # the journal's share of the journaled run's time
            "journal_overhead_pct": round((best_on - best_off) / best_on * 100, 1),
            "journal_slowdown_pct": round((best_on - best_off) / best_off * 100, 1),
            "mean_elapsed_on_s": round(sum(on) / len(on), 3),
            "mean_elapsed_off_s": round(sum(off) / len(off), 3),
            "journal_overhead_pct_of_means": round(
                (sum(on) / len(on) - sum(off) / len(off)) / (sum(on) / len(on)) * 100, 1
            ),
            # CPU of the CLI process (startup included): robust to other load on the machine
            "journal_cpu_overhead_pct": round((cpu_on - cpu_off) / cpu_on * 100, 1),
        }
        result["targets_met"] = {
            "journal_overhead_pct <= 25": summary["journal_overhead_pct"] <= 25
        }
    result["runs"] = runs
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
                "failed",
                "elapsed_s",
                "rows_per_s",
                "process_wall_s",
                "process_cpu_s",
                "cpu_us_per_row",
            ],
            title=f"bulk-cancel of {n_rows} rows, --concurrency {CONCURRENCY} (CLI process)",
        )
    )
    print("Summary:", summary)
    path = write_result(args.out, NAME, result)
    print(f"wrote {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
