"""Run every benchmark (``make bench``), print their tables, write JSON and the chart.

Each script runs in its own process (fresh memory for the RSS numbers, no state carried
over) and writes ``<out>/<name>.json``; this runner then writes ``<out>/latest.json`` (all
of them, with the machine and the load average) and ``<out>/throughput.png``.

    .venv/bin/python benchmarks/run_all.py            # full run (several minutes)
    .venv/bin/python benchmarks/run_all.py --quick    # tiny counts, seconds
    .venv/bin/python benchmarks/run_all.py --only post,get,polling
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import RESULTS_DIR, format_table, machine_info  # noqa: E402

# name -> script; the order is the order of the run.
SCRIPTS = {
    "codec": "bench_codec.py",
    "post": "bench_post.py",
    "get": "bench_get.py",
    "loop": "bench_loop.py",
    "polling": "bench_polling.py",
    "bulk": "bench_bulk.py",
    "signing": "bench_signing.py",
    "notifications": "bench_notifications.py",
    "sync": "bench_sync.py",
}
TIMEOUT_S = {"quick": 180, "full": 1800}


def run_script(name: str, out: Path, quick: bool) -> dict[str, Any]:
    script = HERE / SCRIPTS[name]
    cmd = [sys.executable, str(script)]
    if quick:
        cmd.append("--quick")
    if name == "codec":
        cmd += ["--out", str(out / "codec.json")]  # bench_codec takes a file path
    else:
        cmd += ["--out", str(out)]
    if name in ("post", "get") and not quick:
        cmd.append("--profile")
    print(f"\n=== {name}: {' '.join(cmd[1:])}", flush=True)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd,
            timeout=TIMEOUT_S["quick" if quick else "full"],
            check=False,
            cwd=HERE.parent,
        )
        code = proc.returncode
    except subprocess.TimeoutExpired:  # subprocess.run kills the child on timeout
        code = -1
    return {"exit_code": code, "seconds": round(time.perf_counter() - t0, 1)}


def load(out: Path, name: str) -> dict[str, Any] | None:
    path = out / f"{name}.json"
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data


def draw_chart(post: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = post["medians"]
    levels = sorted({r["concurrency"] for r in rows})
    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=110)
    styles = {
        "hand": ("^-", "tab:gray", "hand-written signed aiohttp client (baseline)"),
        "ours-prebuilt": ("o-", "tab:blue", "ours, messages built beforehand"),
        "ours-builder": ("o--", "tab:cyan", "ours, builder in the loop"),
        "peer": ("s-", "tab:red", "peer (httpx + PyJWT + pydantic)"),
    }
    for variant, (style, color, label) in styles.items():
        pts = [(r["concurrency"], r["rps"]) for r in rows if r["variant"] == variant]
        if pts:
            xs, ys = zip(*sorted(pts), strict=True)
            ax.plot(xs, ys, style, color=color, label=label)
    sig = post.get("signature_us")
    if sig:
        limit = 1e6 / sig
        ax.axhline(limit, color="black", linestyle="-.", linewidth=1)
        ax.text(
            levels[0], limit * 1.02, f"RS256 signing alone, one core ({limit:,.0f}/s)", fontsize=8
        )
    ax.set_xscale("log", base=2)
    ax.set_xticks(levels)
    ax.set_xticklabels([str(c) for c in levels])
    ax.set_xlabel("concurrency (requests in flight)")
    ax.set_ylabel("camt.056 POSTs per second (median round)")
    m = post.get("machine", {})
    ax.set_title(
        f"Signed camt.056 POSTs, client on one core ({m.get('nproc')} cores, load "
        f"{m.get('loadavg', ['?'])[0]})",
        fontsize=10,
    )
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def summary_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One line per target: the measured value, the target, met or not."""
    out: list[dict[str, Any]] = []

    def add(what: str, value: Any, target: str, met: bool | None) -> None:
        out.append({"target": what, "measured": value, "wanted": target, "met": met})

    post = results.get("post")
    if post:
        for c in ("16", "64"):
            r = post["ratios"][c]
            for kind in ("prebuilt", "builder"):
                v = r[f"ours_{kind}_over_hand_rps"]
                add(
                    f"POST c={c}: ours ({kind}) / hand-written (req/s)",
                    v,
                    ">= 0.90",
                    v is not None and v >= 0.9,
                )
        v = post["ratios"]["64"]["ours_prebuilt_over_peer_rps"]
        add("POST c=64: ours (prebuilt) / peer", v, "measured", None)
    loop = results.get("loop")
    if loop and loop.get("ratios"):
        for r in loop["ratios"]:
            add(
                f"POST c={r['concurrency']}: {r['variant']} on uvloop / asyncio (req/s)",
                r["uvloop_over_asyncio_rps"],
                "measured",
                None,
            )
    get = results.get("get")
    if get:
        w = get["worst_ours_cpu_over_bare_cpu"]
        add(
            "GET: our CPU per read / bare aiohttp+msgspec (worst)",
            w,
            "<= 1.10",
            w is not None and w <= 1.10,
        )
    pol = results.get("polling")
    if pol:
        p = pol["result"]
        add(
            f"Polling: RSS growth, {p['waiters']:,} waiters (MB)",
            p["rss_growth_mb"],
            "< 35",
            p["rss_growth_mb"] < 35,
        )
        a = p.get("attribution")
        if a:
            late, settling = a["poll_lateness_s"]["max"], a["client_service_s"]["max"]
            add("Polling: latest poll past its schedule (s)", late, "<= 1.0", late <= 1.0)
            add(
                "Polling: final after sending the settling poll (max, s)",
                settling,
                "<= 1.0",
                settling <= 1.0,
            )
        add(
            "Polling: last final after the last settlement (s; policy- and GET-rate-bound)",
            p["all_final_after_last_settlement_s"],
            "measured",
            None,
        )
        add(
            "Polling: requests over the poll schedule (max per waiter)",
            p["max_requests_over_schedule"],
            "<= 0",
            p["max_requests_over_schedule"] <= 0,
        )
        add("Polling: waiters that failed", sum(p["errors"].values()), "0", not p["errors"])
    bulk = results.get("bulk")
    if bulk and bulk.get("summary"):
        s = bulk["summary"]
        add(
            "Bulk: journal overhead (% of run time)",
            s["journal_overhead_pct"],
            "<= 25",
            s["journal_overhead_pct"] <= 25,
        )
        if "input_peak_rss_mb" in s and not bulk.get("quick"):
            add(
                f"Bulk: check and journal {s['input_rows']:,} rows, peak RSS MB",
                s["input_peak_rss_mb"],
                "<= 150",
                s["input_peak_rss_mb"] <= 150,
            )
    sync = results.get("sync")
    if sync:
        w = sync["worst_sync_cpu_over_async_cpu"]
        add(
            "Sync client: CPU per call / async client's (worst of POST, GET at c=1, 8)",
            w,
            "<= 1.10",
            w is not None and w <= 1.10,
        )
    notif = results.get("notifications")
    if notif:
        # with --rounds, the worst round counts
        ns = [r for r in notif["rows"] if r["mode"] == "notifications"]
        p99 = max(r["lag_p99_ms"] for r in ns)
        gets = max(r["gets_per_waiter"] for r in ns)
        add("Notifications: settlement -> outcome p99 (ms)", p99, "<= 100", p99 <= 100)
        add("Notifications: GETs per waiter", gets, "<= 1.2", gets <= 1.2)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny counts (seconds)")
    p.add_argument("--out", type=Path, default=RESULTS_DIR)
    p.add_argument("--only", help=f"comma-separated subset of: {','.join(SCRIPTS)}")
    args = p.parse_args(argv)
    names = list(SCRIPTS) if not args.only else [n.strip() for n in args.only.split(",")]
    unknown = [n for n in names if n not in SCRIPTS]
    if unknown:
        p.error(f"unknown benchmark(s): {', '.join(unknown)}")
    args.out.mkdir(parents=True, exist_ok=True)
    machine = machine_info()
    print(
        f"machine: {machine['nproc']} x {machine['cpu_model']}, Python {machine['python']}, "
        f"load average {machine['loadavg']}"
    )
    runs: dict[str, Any] = {}
    results: dict[str, Any] = {}
    for name in names:
        if not (HERE / SCRIPTS[name]).exists():
            runs[name] = {"exit_code": None, "skipped": f"{SCRIPTS[name]} not found"}
            continue
        runs[name] = run_script(name, args.out, args.quick)
        data = load(args.out, name)
        if data is not None:
            if name in ("post", "get", "loop", "sync"):
                data.pop("rows", None)  # every round's row is kept in <name>.json only
            results[name] = data
    machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    combined = {
        "command": " ".join(
            [Path(sys.executable).name, "benchmarks/run_all.py", *(argv or sys.argv[1:])]
        ),
        "quick": args.quick,
        "machine": machine,
        "runs": runs,
        "targets": summary_rows(results),
        "results": results,
    }
    (args.out / "latest.json").write_text(json.dumps(combined, indent=2, default=str) + "\n")
    if "post" in results:
        draw_chart(results["post"], args.out / "throughput.png")
    print()
    print(
        format_table(
            [{"benchmark": k, **v} for k, v in runs.items()],
            ["benchmark", "exit_code", "seconds", "skipped"],
            title="Runs",
        )
    )
    print()
    print(
        format_table(combined["targets"], ["target", "measured", "wanted", "met"], title="Targets")
    )
    print(f"\nload average at start {machine['loadavg']}, at end {machine['loadavg_end']}")
    print(
        f"wrote {args.out / 'latest.json'}"
        + (f" and {args.out / 'throughput.png'}" if "post" in results else "")
    )
    failed = [k for k, v in runs.items() if v.get("exit_code") not in (0, None)]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
