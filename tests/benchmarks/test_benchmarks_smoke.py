"""Smoke test of the benchmarks: each script runs with ``--smoke`` and writes its JSON.

The numbers are not checked (a shared machine makes them noise at these counts); what is
checked is that every script still runs against the current library, prints its table
and writes JSON with the keys the runner, the chart and the README rely on. ``--smoke``
is the fewest counts that still run every part of a script (every concurrency level's
connections busy, two interleaved rounds); ``run_all.py --quick`` is run once, for its
labels; the real runs are ``make bench``.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow  # each runs benchmark scripts in subprocesses

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
# A guard against a hung script, not a bound: a few seconds of CPU each with --smoke, but on
# a loaded machine a script's wall time is its CPU time times the load (bench_bulk's
# processes, about 15 CPU-seconds, passed 90 s of wall time at a load of 13 on 2 cores).
TIMEOUT = 300


def run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run a benchmark script with ``--smoke``."""
    return run_argv([sys.executable, str(BENCH / script), "--smoke", *args])


def run_argv(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` from the repository's root in its own process group.

    On timeout the whole group is killed (the script's sandboxes, PostgreSQL servers and
    other children with it, which ``subprocess.run`` would leave running) and the test
    fails with what the script had printed.
    """
    with subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,  # its own process group, for killpg
    ) as proc:
        try:
            out, err = proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            pytest.fail(f"{argv[1]} ran past {TIMEOUT}s; its group was killed:\n{err[-3000:]}")
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


@pytest.fixture(scope="module")
def post_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bench-post")
    proc = run("bench_post.py", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Signed POST" in proc.stdout
    assert "Ratios" in proc.stdout
    return out


def test_post_leads_with_the_hand_written_baseline(post_out: Path) -> None:
    data = load(post_out / "post.json")
    assert {"machine", "method", "signature_us", "rows", "medians", "ratios", "targets"} <= set(
        data
    )
    variants = {(r["variant"], r["concurrency"]) for r in data["medians"]}
    for c in (1, 16, 64):
        assert {("hand", c), ("ours-prebuilt", c), ("ours-builder", c), ("peer", c)} <= variants
    assert {r["round"] for r in data["rows"]} == {0, 1}  # --smoke: two interleaved rounds
    for row in data["rows"]:
        assert row["errors"] == 0, row
        assert {"rps", "p50_ms", "p99_ms", "cpu_us_per_req"} <= set(row)
    assert data["signature_us"] > 0
    assert data["server_stats"]["refused"] == 0  # every SCA token fresh, every hd right
    assert {"ours_prebuilt_over_hand_rps", "ours_builder_over_hand_rps"} <= set(
        data["ratios"]["64"]
    )


def test_runner_draws_the_chart_and_summarizes_targets(post_out: Path) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import run_all
    finally:
        sys.path.remove(str(BENCH))
    post = load(post_out / "post.json")
    png = post_out / "throughput.png"
    run_all.draw_chart(post, png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    targets = run_all.summary_rows({"post": post})
    assert any("hand-written" in t["target"] for t in targets)


def test_get(tmp_path: Path) -> None:
    proc = run("bench_get.py", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "GET reads" in proc.stdout
    data = load(tmp_path / "get.json")
    assert {"rows", "medians", "ratios", "worst_ours_cpu_over_bare_cpu", "targets_met"} <= set(data)
    assert {r["variant"] for r in data["rows"]} == {"ours", "bare", "peer"}
    assert all(r["errors"] == 0 for r in data["rows"])


def test_loop_compares_uvloop_with_asyncio_in_one_run(tmp_path: Path) -> None:
    proc = run("bench_loop.py", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = load(tmp_path / "loop.json")
    if "skipped" in data:
        pytest.skip(data["skipped"])
    assert {(r["loop"], r["round"]) for r in data["rows"]} == {
        (loop, r) for loop in ("asyncio", "uvloop") for r in (0, 1)
    }
    assert all(r["errors"] == 0 for r in data["rows"])
    assert {r["variant"] for r in data["ratios"]} == {"hand", "ours-prebuilt"}


def test_polling(tmp_path: Path) -> None:
    proc = run("bench_polling.py", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Polling at scale" in proc.stdout
    r = load(tmp_path / "polling.json")["result"]
    assert r["errors"] == {}
    assert r["gets"] == r["gets_seen_by_sandbox"]
    assert {"rss_growth_mb", "cpu_us_per_poll", "requests_per_waiter_mean", "lag_max_s"} <= set(r)
    # every poll (attempt 1 of a read) was traced, and each waiter's lag is split
    a = r["attribution"]
    assert a["polls_traced"] == r["gets"] - r["retries"]
    assert sum(a["final_poll_number"].values()) == r["waiters"]


def test_polling_ab_alternates_the_trees_and_imports_each_one(tmp_path: Path) -> None:
    # This checkout as both trees: what is checked is the alternation, that each client
    # imported the tree it was given, and the medians and ratios of the same keys.
    proc = run("bench_polling_ab.py", "--old", str(ROOT), "--runs", "2", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "old tree vs new tree" in proc.stdout
    data = load(tmp_path / "polling-ab.json")
    assert [(x["round"], x["tree"]) for x in data["runs"]] == [
        (1, "old"),
        (1, "new"),
        (2, "old"),
        (2, "new"),
    ]
    for x in data["runs"]:
        assert x["uptime_before"]
        assert x["result"]["package"] == str(ROOT / "payments_async")
        assert x["result"]["errors"] == {}
        assert x["result"]["gets"] == x["result"]["gets_seen_by_sandbox"]
    keys = set(data["medians"]["old"])
    assert {"last_final_after_last_settlement_s", "burst_p99_s", "rss_growth_mb"} <= keys
    assert set(data["medians"]["new"]) == set(data["new_over_old"]) == keys


def test_polling_ab_client_refuses_a_package_from_another_tree(tmp_path: Path) -> None:
    # PYTHONPATH is unset here, so the client imports this checkout, not the tree named.
    proc = run_argv(
        [sys.executable, str(BENCH / "bench_polling_ab.py"), "--client", "--tree", str(tmp_path)]
    )
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert f"imported {ROOT / 'payments_async'}, wanted {tmp_path / 'payments_async'}" in (
        proc.stderr
    )


def test_notifications(tmp_path: Path) -> None:
    proc = run("bench_notifications.py", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "notifications vs polling" in proc.stdout
    rows = {r["mode"]: r for r in load(tmp_path / "notifications.json")["rows"]}
    assert set(rows) == {"polling", "notifications", "notifications-sqlite"}
    for row in rows.values():
        assert row["errors"] == {}
        assert row["gets"] == row["gets_seen_by_sandbox"]
        assert {"lag_p50_ms", "lag_p99_ms", "gets_per_waiter"} <= set(row)
    # the receiver confirmed every notification with exactly one GET each, in memory and
    # with the durable inbox (whose commits are shared by bursts)
    for mode in ("notifications", "notifications-sqlite"):
        assert rows[mode]["receiver_confirm_reads"] == rows[mode]["waiters"]
        # every outcome reached the callback once, and every submission was tracked
        assert rows[mode]["callbacks"] == rows[mode]["waiters"]
        assert rows[mode]["receiver_tracked"] == rows[mode]["waiters"]
        assert rows[mode]["callback_p99_ms"] >= rows[mode]["callback_p50_ms"] > 0
    # the ingest rows: every notification answered 202 and processed
    ingest = {r["mode"]: r for r in load(tmp_path / "notifications.json")["ingest"]}
    assert set(ingest) == {"ingest-memory", "ingest-sqlite"}
    for got in ingest.values():
        assert got["answers"] == {"202": got["notifications"]}
        assert got["callbacks"] == got["notifications"] > 0
        assert got["processed_per_s"] > 0
    durable = rows["notifications-sqlite"]
    assert durable["receiver_inbox"] == "SqliteInbox"
    assert durable["receiver_inbox_commits"] > 0
    # the sandbox process's collector pauses, recorded by benchmarks/_sandbox_gc.py
    gc_stats = rows["notifications"]["sandbox_gc"]
    assert set(gc_stats) == {"gen0", "gen1", "gen2"}
    assert rows["notifications"]["sandbox_tracked_objects"] > 0


def test_bulk(tmp_path: Path) -> None:
    # Ten rows show every part runs; --quick's 100 took minutes on a loaded machine (and
    # --smoke checks and plans 500 rows, not 5,000, in the memory parts).
    proc = run("bench_bulk.py", "--rows", "10", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = load(tmp_path / "bulk.json")
    if "skipped" in data:
        pytest.skip(data["skipped"])
    assert "bulk-cancel of" in proc.stdout
    assert {"journal_overhead_pct", "rows_per_s_on", "rows_per_s_off"} <= set(data["summary"])
    assert all(r["rows"] == data["rows"] for r in data["runs"])
    assert {r["store"] for r in data["runs"]} == {"on", "off", "pg"}  # SQLite, none, PostgreSQL
    (memory,) = data["input_memory"]
    assert memory["valid"] == memory["rows"]
    assert memory["peak_rss_mb"] > 0
    assert [w["workers"] for w in data["workers"]] == [1]
    assert all(w["final"] == w["rows"] == data["rows"] for w in data["workers"])


def test_codec(tmp_path: Path) -> None:
    if not (BENCH / "bench_codec.py").exists():
        pytest.skip("bench_codec.py not present")
    # bench_codec.py has its own options: --quick is its smallest size
    out = tmp_path / "codec.json"
    proc = run_argv([sys.executable, str(BENCH / "bench_codec.py"), "--quick", "--out", str(out)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = load(tmp_path / "codec.json")
    assert {"benchmark", "rows", "builders"} <= set(data)
    assert {b["message"] for b in data["builders"]} == {"camt.056", "pacs.008"}
    assert all(b["us_per_msg"] > 0 for b in data["builders"])


def test_run_all_writes_latest(tmp_path: Path) -> None:
    proc = run_argv(
        [
            sys.executable,
            str(BENCH / "run_all.py"),
            "--quick",
            *("--only", "codec,polling"),
            *("--out", str(tmp_path)),
        ]
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Targets" in proc.stdout
    latest = load(tmp_path / "latest.json")
    assert {"machine", "runs", "targets", "results"} <= set(latest)
    assert "polling" in latest["results"]
    # The quick run's labels say what it ran, not what a full run would have.
    waiters = latest["results"]["polling"]["result"]["waiters"]
    assert waiters < 10_000
    assert f"Polling: RSS growth, {waiters:,} waiters (MB)" in proc.stdout
    assert "10k waiters" not in proc.stdout


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
def test_interleaved_rounds_put_each_variant_behind_each_other_equally_often(n: int) -> None:
    # A plain rotation kept each variant behind the same neighbour round after round, so
    # what one variant left behind (connections, garbage) always fell on the same next one.
    sys.path.insert(0, str(BENCH))
    try:
        from _harness import balanced_orders, interleaved_rounds
    finally:
        sys.path.remove(str(BENCH))
    orders = balanced_orders(n)
    assert len(orders) == (n if n % 2 == 0 else 2 * n)
    assert all(sorted(order) == list(range(n)) for order in orders)
    behind = Counter((o[i], o[i + 1]) for o in orders for i in range(n - 1))
    assert len(behind) == n * (n - 1)  # every ordered pair of variants...
    assert len(set(behind.values())) == 1  # ...as often as every other
    places = Counter((v, i) for o in orders for i, v in enumerate(o))
    assert len(places) == n * n  # every variant in every place...
    assert len(set(places.values())) == 1  # ...as often

    async def op(i: int) -> None:
        pass

    def variant(name: str) -> Any:
        return (name, op, 1)

    names = [f"v{i}" for i in range(n)]
    # Each run of a round starts with a full collection; in a test process holding every
    # earlier test's objects that walked them all, about 50 times. Frozen, they are skipped.
    gc.freeze()
    try:
        rows = asyncio.run(
            interleaved_rounds(
                [variant(name) for name in names], 1, len(orders), 0, log=lambda line: None
            )
        )
    finally:
        gc.unfreeze()
    assert [row["variant"] for row in rows] == [names[i] for o in orders for i in o]
