"""The waiters of two library trees side by side: ``bench_polling``'s run, interleaved A/B.

One 10,000-waiter figure moves by seconds from run to run with the same code (where the
settlements fall in the poll schedule, how many GETs a second the shared machine serves),
so a figure of one tree cannot be set against a figure of another taken at another time.
This script runs ``bench_polling.run`` (the same waiters, policy, trace and attribution)
for each tree in turn, old, new, old, new, ..., each run against a fresh sandbox of THIS
checkout in a separate process, and the client in a subprocess whose ``PYTHONPATH``
puts the chosen tree's ``payments_async`` first (it checks that it imported that one).
The client uses only what both trees offer: ``PaymentsClient(Credentials.sandbox(),
base_url=..., poll=PollPolicy(), hooks=...)``, the defaults otherwise.

Every run starts its waiters ``--phase`` seconds before its last settlement (7/8 of the
settlement delay: 17.5 s, where a default run's stores put it). Without this the time the
10,000 POSTs took, which differs between trees, would decide where the settlements fall
in the poll schedule, and with it whether the last waiter waits for an 8.5-second interval.

It prints and writes every run (the load average before it, from ``uptime``), the
medians per tree and the new/old ratio of each median.

    python benchmarks/bench_polling_ab.py --old /path/to/old/checkout --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from _harness import ROOT, format_table, machine_info, parse_args, sandbox_process, write_result

NAME = "polling-ab"
HERE = Path(__file__).resolve()


@dataclass
class AttachedSandbox:
    """A sandbox another process started, seen from the client's process."""

    url: str
    pid: int
    ps: psutil.Process = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.ps = psutil.Process(self.pid)

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.url + "/_sandbox/stats", timeout=30) as resp:
            return json.loads(resp.read())  # type: ignore[no-any-return]

    def cpu_seconds(self) -> float:
        t = self.ps.cpu_times()
        return t.user + t.system


def client_main(args: argparse.Namespace) -> int:
    """The client side of one run: the tree's package, ``bench_polling.run``, JSON out."""
    import bench_polling

    import payments_async

    package = Path(payments_async.__file__).resolve().parent
    wanted = (Path(args.tree) / "payments_async").resolve()
    if package != wanted:
        print(f"imported {package}, wanted {wanted}", file=sys.stderr)
        return 3  # not argparse's 2
    sb = AttachedSandbox(args.url, args.pid)
    r = asyncio.run(
        bench_polling.run(
            sb, args.waiters, args.delay, args.delay + 60, last_settlement_at=args.phase
        )
    )
    r["package"] = str(package)
    Path(args.json).write_text(json.dumps(r, default=str))
    return 0


def _git_head(tree: Path) -> str:
    proc = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stdout.strip() or "unknown"


def _uptime() -> str:
    proc = subprocess.run(["uptime"], capture_output=True, text=True, check=False)
    return proc.stdout.strip()


def one_run(tree: Path, waiters: int, delay: float, phase: float) -> dict[str, Any]:
    """Start a sandbox of this checkout, run the client of ``tree`` against it."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    with (
        sandbox_process("--settlement-delay", str(delay)) as sb,
        tempfile.TemporaryDirectory() as tmp,
    ):
        out = Path(tmp) / "run.json"
        cmd = [sys.executable, str(HERE), "--client", "--tree", str(tree), "--url", sb.url]
        cmd += ["--pid", str(sb.proc.pid), "--waiters", str(waiters), "--delay", str(delay)]
        cmd += ["--phase", str(phase), "--json", str(out)]
        proc = subprocess.run(cmd, env=env, cwd=ROOT, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"the client of {tree} failed ({proc.returncode})")
        return json.loads(out.read_text())  # type: ignore[no-any-return]


def summary(r: dict[str, Any]) -> dict[str, Any]:
    """The figures compared, from one run's result."""
    a = r["attribution"]
    return {
        "last_settlement_into_waiting_s": r["last_settlement_into_waiting_s"],
        "last_final_after_last_settlement_s": r["all_final_after_last_settlement_s"],
        "lag_p50_s": r["lag_p50_s"],
        "lag_p99_s": r["lag_p99_s"],
        "schedule_wait_p50_s": a["schedule_wait_s"]["p50"],
        "schedule_wait_max_s": a["schedule_wait_s"]["max"],
        "burst_p50_s": a["client_service_s"]["p50"],
        "burst_p99_s": a["client_service_s"]["p99"],
        "burst_max_s": a["client_service_s"]["max"],
        "poll_lateness_p99_s": a["poll_lateness_s"]["p99"],
        "poll_lateness_max_s": a["poll_lateness_s"]["max"],
        "cpu_us_per_poll": r["cpu_us_per_poll"],
        "client_cpu_share": a["client_cpu_share"],
        "gets_per_s": a["get_rate_per_s"],
        "gets_per_waiter": r["requests_per_waiter_mean"],
        "rss_growth_mb": r["rss_growth_mb"],
    }


def _extra_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--old", type=Path, help="checkout of the old tree (has payments_async/)")
    p.add_argument("--new", type=Path, default=ROOT, help="the new tree (default: this one)")
    p.add_argument("--runs", type=int, default=3, help="runs per tree")
    p.add_argument("--waiters", type=int, help="override the number of waiters")
    p.add_argument(
        "--phase",
        type=float,
        help="seconds from the waiters' start to the last settlement, the same in every run "
        "(default: 7/8 of the settlement delay, 17.5 s)",
    )
    # the client side of one run (started by this script)
    p.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--tree", help=argparse.SUPPRESS)
    p.add_argument("--url", help=argparse.SUPPRESS)
    p.add_argument("--pid", type=int, help=argparse.SUPPRESS)
    p.add_argument("--delay", type=float, help=argparse.SUPPRESS)
    p.add_argument("--json", help=argparse.SUPPRESS)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__.splitlines()[0], argv, extra=_extra_options)
    if args.client:
        return client_main(args)
    if args.old is None:
        print("--old is required: a checkout of the tree to compare against", file=sys.stderr)
        return 2
    waiters, delay = (20, 1.0) if args.smoke else (200, 2.0) if args.quick else (10_000, 20.0)
    if args.waiters:
        waiters = args.waiters
    # where a default run's stores (about 2.5 s of 10,000 POSTs) put the last settlement
    phase = args.phase if args.phase is not None else delay * 0.875
    if not 0 < phase < delay:
        print(f"--phase must be between 0 and {delay} s", file=sys.stderr)
        return 2
    trees = {"old": args.old.resolve(), "new": args.new.resolve()}
    heads = {label: _git_head(tree) for label, tree in trees.items()}
    info = machine_info()
    runs: list[dict[str, Any]] = []
    for k in range(args.runs):
        for label in ("old", "new"):
            before = _uptime()
            print(f"run {k + 1}/{args.runs} {label} ({heads[label]}): {before}", flush=True)
            r = one_run(trees[label], waiters, delay, phase)
            load_end = [round(x, 2) for x in os.getloadavg()]
            runs.append(
                {
                    "tree": label,
                    "round": k + 1,
                    "uptime_before": before,
                    "loadavg_end": load_end,
                    **summary(r),
                    "errors": r["errors"],
                    "result": r,
                }
            )
    medians: dict[str, dict[str, float]] = {}
    for label in ("old", "new"):
        mine = [x for x in runs if x["tree"] == label]
        medians[label] = {
            key: round(statistics.median(x[key] for x in mine), 3)
            for key in summary(runs[0]["result"])
        }
    ratios = {
        key: (round(medians["new"][key] / old, 3) if old else None)
        for key, old in medians["old"].items()
    }
    keys = list(medians["old"])
    rows = [{"run": f"{x['round']} {x['tree']}", **{k: x[k] for k in keys}} for x in runs]
    rows += [{"run": f"median {label}", **medians[label]} for label in ("old", "new")]
    rows.append({"run": "new / old", **ratios})
    print(format_table(rows, ["run", *keys], title="Waiters: old tree vs new tree"))
    result = {
        "benchmark": NAME,
        "quick": args.quick,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": info,
        "waiters": waiters,
        "settlement_delay_s": delay,
        "last_settlement_at_s": phase,
        "trees": {label: {"path": str(t), "head": heads[label]} for label, t in trees.items()},
        "runs": runs,
        "medians": medians,
        "new_over_old": ratios,
    }
    path = write_result(args.out, NAME, result)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
