"""SyncPaymentsClient against PaymentsClient: CPU per signed POST and per GET, and the rate.

Issue 38. The sync client hands each call to its own loop thread and blocks the caller
until it is done; this measures what that hop costs a caller beside the async client
awaited on the caller's own loop. The server is ``_rawserver.py`` (a separate process
pinned to core 0; it refuses a reused SCA token); this process, the client with all its
threads, is pinned to core 1. Variants, each at c=1 and c=8:

* ``async-post`` / ``async-get``: ``PaymentsClient.request_cancellation`` (messages built
  before the clocks) / ``get_cancellation_outcome``, ``c`` tasks on one ``asyncio`` loop.
* ``sync-post`` / ``sync-get``: the same calls through one ``SyncPaymentsClient`` from
  ``c`` caller threads (the aggregate rate from 8 threads is the c=8 row). Each run has a
  ``SyncPaymentsClient`` of its own, warmed before the clocks and closed after, so that no
  idle loop thread is in the process while the async variants run.

Before them, ``hop_cpu_us``: the CPU of handing a coroutine that does nothing to a loop
thread and waiting for it (``LoopThread.run``), what the sync client adds to each call, and
``stdlib_hop_cpu_us``: the same through ``asyncio.run_coroutine_threadsafe(...).result()``,
interleaved with it.

Every round runs every variant once, in a balanced order (each right after each other one
equally often); the ratios sync / async are taken within each round and their median over
the rounds reported. CPU is the process's (``time.process_time``: every thread, the loop
thread and the callers included).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _harness import (
    BENCH_CLIENT_ID,
    BENCH_CLIENT_SECRET,
    BENCH_ISS,
    BENCH_KID,
    LoopResult,
    balanced_orders,
    closed_loop,
    format_table,
    machine_info,
    median_ratio,
    median_rows,
    parse_args,
    pin_client,
    raw_server_process,
    write_result,
)
from bench_post import new_cancellation

from payments_async import Credentials, PaymentsClient, SyncPaymentsClient
from payments_async._portal import LoopThread
from payments_async.testing import generate_test_keypair

NAME = "sync"
LEVELS = (1, 8)
CPU_TARGET = 1.10  # sync CPU per call over async, the budget


def threaded_loop(op: Callable[[int], object], n: int, concurrency: int) -> LoopResult:
    """``closed_loop`` for blocking calls: ``op(i)`` for i in range(n) from ``concurrency``
    caller threads, started before the clocks and released together."""
    counter = iter(range(n))
    lock = threading.Lock()
    latencies: list[float] = []
    errors = 0
    first_error: str | None = None
    go = threading.Barrier(concurrency + 1)

    def caller() -> None:
        nonlocal errors, first_error
        go.wait()
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            t0 = time.perf_counter()
            try:
                op(i)
            except Exception as exc:
                with lock:
                    errors += 1
                    if first_error is None:
                        first_error = f"{type(exc).__name__}: {exc}"[:300]
            latencies.append(time.perf_counter() - t0)

    threads = [threading.Thread(target=caller) for _ in range(concurrency)]
    for t in threads:
        t.start()
    gc.collect()
    c0 = time.process_time()
    w0 = time.perf_counter()
    go.wait()
    for t in threads:
        t.join()
    wall = time.perf_counter() - w0
    cpu = time.process_time() - c0
    return LoopResult(n, concurrency, wall, cpu, latencies, errors, first_error=first_error)


def hop_cpu_us(n: int) -> dict[str, float]:
    """CPU per hand-over of a coroutine that does nothing to a loop thread and back: what
    the sync client adds to every call, without the call; beside it the standard library's
    hand-over (``asyncio.run_coroutine_threadsafe(...).result()``) to the same loop,
    interleaved (medians of three runs each)."""

    async def nothing() -> None:
        return None

    thread = LoopThread("bench-hop")
    try:
        loop = thread.run(_running_loop())

        def ours() -> None:
            thread.run(nothing())

        def stdlib() -> None:
            asyncio.run_coroutine_threadsafe(nothing(), loop).result()

        runs: dict[str, list[float]] = {"ours": [], "stdlib": []}
        for _ in range(n // 10):
            ours()
            stdlib()
        for i in range(6):
            name, hop = (("ours", ours), ("stdlib", stdlib))[i % 2]
            c0 = time.process_time()
            for _ in range(n):
                hop()
            runs[name].append((time.process_time() - c0) / n * 1e6)
    finally:
        thread.stop()
    return {name: round(sorted(values)[1], 1) for name, values in runs.items()}


async def _running_loop() -> asyncio.AbstractEventLoop:
    return asyncio.get_running_loop()


def run(
    url: str, key: Any, counts: dict[int, int], rounds: int, warmup: int
) -> list[dict[str, Any]]:
    creds = Credentials(
        BENCH_CLIENT_ID, BENCH_CLIENT_SECRET, key_id=BENCH_KID, issuer=BENCH_ISS, private_key=key
    )
    ids = [f"PS-{i:06d}" for i in range(200)]
    pool: list[Any] = []  # messages built outside the clocks; list.pop is atomic
    rows: list[dict[str, Any]] = []
    with asyncio.Runner() as runner:
        async_client = runner.run(_open(creds, url))
        try:

            async def async_post(i: int) -> None:
                await async_client.request_cancellation(pool.pop())

            async def async_get(i: int) -> None:
                await async_client.get_cancellation_outcome(ids[i % 200])

            def sync_variant(op: str) -> Callable[[int, int], LoopResult]:
                # A client of its own per run, warmed before the clocks (its token, its
                # connections) and closed after: no idle loop thread during the async runs.
                def timed(n: int, c: int) -> LoopResult:
                    with SyncPaymentsClient(creds, base_url=url) as client:

                        def get(i: int) -> None:
                            client.get_cancellation_outcome(ids[i % 200])

                        def post(i: int) -> None:
                            client.request_cancellation(pool.pop())

                        threaded_loop(get, max(warmup, c), c)
                        return threaded_loop(post if op == "post" else get, n, c)

                return timed

            variants: list[tuple[str, Callable[[int, int], LoopResult]]] = [
                ("async-post", lambda n, c: runner.run(closed_loop(async_post, n, c))),
                ("sync-post", sync_variant("post")),
                ("async-get", lambda n, c: runner.run(closed_loop(async_get, n, c))),
                ("sync-get", sync_variant("get")),
            ]
            orders = balanced_orders(len(variants))
            for c in LEVELS:
                n = counts[c]
                for _name, timed in variants:  # connections, the token, caches
                    pool[:] = [new_cancellation(i) for i in range(warmup)]
                    timed(warmup, min(c, warmup))
                for r in range(rounds):
                    for name, timed in [variants[i] for i in orders[r % len(orders)]]:
                        pool[:] = [new_cancellation(i) for i in range(n)] if "post" in name else []
                        row = {"variant": name, "round": r, **timed(n, c).summary()}
                        rows.append(row)
                        print(
                            f"  c={c:<2d} round {r} {name:11s} {row['rps']:>9} req/s  "
                            f"cpu {row['cpu_us_per_req']} µs/req  errors {row['errors']}",
                            flush=True,
                        )
        finally:
            runner.run(async_client.aclose())
    return rows


async def _open(creds: Credentials, url: str) -> PaymentsClient:
    return PaymentsClient(creds, base_url=url)


def main(argv: list[str] | None = None) -> int:
    def options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--rounds", type=int, help="rounds per concurrency level")

    args = parse_args(__doc__.splitlines()[0], argv, extra=options)
    if args.smoke:  # each level's threads all busy once; two rounds to interleave
        counts, rounds, warmup = {1: 4, 8: 8}, 2, 2
    elif args.quick:
        counts, rounds, warmup = {1: 30, 8: 60}, 2, 10
    else:
        counts, rounds, warmup = {1: 300, 8: 800}, 8, 60
    rounds = args.rounds or rounds
    client_cpu = pin_client()
    info = machine_info()
    key, _pem = generate_test_keypair()
    hops = hop_cpu_us(50 if args.smoke else 500 if args.quick else 10_000)
    print(
        f"the hop alone: {hops['ours']} µs CPU per call "
        f"(the standard library's: {hops['stdlib']} µs)",
        flush=True,
    )
    with raw_server_process(loop="uvloop") as server:
        print(f"raw server {server.url} (core {server.cpu}); client core {client_cpu}", flush=True)
        rows = run(server.url, key, counts, rounds, warmup)
        refused = server.stats().get("refused")
    info["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    medians = median_rows(rows)
    ratios: dict[str, Any] = {}
    for c in LEVELS:
        for op in ("post", "get"):
            ratios[f"{op}/c{c}"] = {
                "sync_cpu_over_async_cpu": median_ratio(
                    rows, f"sync-{op}", f"async-{op}", "cpu_us_per_req", c
                ),
                "sync_rps_over_async_rps": median_ratio(
                    rows, f"sync-{op}", f"async-{op}", "rps", c
                ),
            }
    worst = max(
        (r["sync_cpu_over_async_cpu"] for r in ratios.values() if r["sync_cpu_over_async_cpu"]),
        default=None,
    )
    result = {
        "benchmark": NAME,
        "quick": args.quick,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": info,
        "method": {
            "server": "benchmarks/_rawserver.py (uvloop), its own process",
            "server_cpu": server.cpu,
            "client_cpu": client_cpu,
            "client_loop": "asyncio (both clients)",
            "rounds": rounds,
            "requests_per_round": counts,
        },
        "rows": rows,
        "medians": medians,
        "ratios": ratios,
        "worst_sync_cpu_over_async_cpu": worst,
        "hop_cpu_us": hops["ours"],
        "stdlib_hop_cpu_us": hops["stdlib"],
        "server_refused": refused,
        "targets": {
            f"sync_cpu_over_async_cpu <= {CPU_TARGET} (worst case)": worst is not None
            and worst <= CPU_TARGET
        },
    }
    path = write_result(args.out, NAME, result)
    print()
    print(
        format_table(
            sorted(medians, key=lambda m: (m["concurrency"], m["variant"])),
            [
                "variant",
                "concurrency",
                "rounds",
                "rps",
                "p50_ms",
                "p99_ms",
                "cpu_us_per_req",
                "errors",
            ],
            title="medians over rounds",
        )
    )
    print()
    print(
        format_table(
            [{"case": k, **v} for k, v in ratios.items()],
            ["case", "sync_cpu_over_async_cpu", "sync_rps_over_async_rps"],
            title="sync / async, median of per-round ratios",
        )
    )
    print(f"\nload average at start {info['loadavg']}, at end {info['loadavg_end']}")
    print(f"server refused {refused} requests; wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
