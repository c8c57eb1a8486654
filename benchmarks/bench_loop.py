"""uvloop vs asyncio's own loop for the client: signed POSTs, loops interleaved per round.

Issue 14. The CLI, its bulk runs and the sandbox run on uvloop when the ``speed`` extra is
installed; this measures what that buys a client. One process (pinned to core 1; the raw
server of ``_rawserver.py`` on core 0): every round runs, on each loop in turn (order
rotated), the hand-written signed client and ``PaymentsClient`` with messages built
beforehand, each with fresh sessions on that loop. Reported: per variant and concurrency,
the median over rounds of the per-round ratio uvloop / asyncio (req/s and CPU per request).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _harness import (
    BENCH_ISS,
    BENCH_KID,
    closed_loop,
    format_table,
    machine_info,
    median,
    parse_args,
    pin_client,
    ratio,
    raw_server_process,
    write_result,
)
from bench_post import CLIENT_ID, CLIENT_SECRET, HandWritten, new_cancellation

from payments_async import Credentials, PaymentsClient
from payments_async.loop import loop_factory
from payments_async.testing import generate_test_keypair

NAME = "loop"
LEVELS = (16, 64)
LOOPS = ("asyncio", "uvloop")


async def one_round(url: str, key: Any, c: int, n: int, warmup: int) -> dict[str, dict[str, Any]]:
    """Both variants once on the running loop, with fresh clients bound to it."""
    creds = Credentials(
        CLIENT_ID, CLIENT_SECRET, key_id=BENCH_KID, issuer=BENCH_ISS, private_key=key
    )
    hand = HandWritten(url, key)
    ours = PaymentsClient(creds, base_url=url)
    pool = [new_cancellation(i) for i in range(2 * (n + warmup))]
    out: dict[str, dict[str, Any]] = {}
    try:
        await hand.start()

        async def op_hand(i: int) -> None:
            await hand.request_cancellation(pool.pop())

        async def op_ours(i: int) -> None:
            await ours.request_cancellation(pool.pop())

        for name, op in (("hand", op_hand), ("ours-prebuilt", op_ours)):
            await closed_loop(op, warmup, min(c, warmup))
            out[name] = (await closed_loop(op, n, c)).summary()
    finally:
        await ours.aclose()
        await hand.aclose()
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__.splitlines()[0], argv)
    counts, rounds, warmup = (
        ({16: 16, 64: 64}, 2, 2)
        if args.smoke
        else ({16: 60, 64: 80}, 2, 10)
        if args.quick
        else ({16: 800, 64: 1000}, 7, 100)
    )
    if not all(loop_factory(k) is not None or k == "asyncio" for k in LOOPS):
        result = {"benchmark": NAME, "skipped": "uvloop is not installed (the speed extra)"}
        write_result(args.out, NAME, result)
        print(result["skipped"])
        return 0
    client_cpu = pin_client()
    info = machine_info()
    key, _pem = generate_test_keypair()
    rows: list[dict[str, Any]] = []
    with raw_server_process(loop="uvloop") as server:
        print(f"raw server {server.url} (core {server.cpu}); client core {client_cpu}", flush=True)
        for c in LEVELS:
            for r in range(rounds):
                order = LOOPS if r % 2 == 0 else LOOPS[::-1]
                for kind in order:
                    factory: Callable[[], asyncio.AbstractEventLoop] | None = loop_factory(kind)
                    with asyncio.Runner(loop_factory=factory) as runner:
                        got = runner.run(one_round(server.url, key, c, counts[c], warmup))
                    for variant, summary in got.items():
                        rows.append({"loop": kind, "variant": variant, "round": r, **summary})
                        print(
                            f"  c={c:<3d} round {r} {kind:7s} {variant:13s} "
                            f"{summary['rps']:>9} req/s  cpu {summary['cpu_us_per_req']} µs/req",
                            flush=True,
                        )
    info["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    table = []
    for c in LEVELS:
        for variant in ("hand", "ours-prebuilt"):
            by = {
                (x["loop"], x["round"]): x
                for x in rows
                if x["concurrency"] == c and x["variant"] == variant
            }
            rps = [
                ratio(by[("uvloop", r)]["rps"], by[("asyncio", r)]["rps"], 6) for r in range(rounds)
            ]
            cpu = [
                ratio(by[("uvloop", r)]["cpu_us_per_req"], by[("asyncio", r)]["cpu_us_per_req"], 6)
                for r in range(rounds)
            ]
            m_rps = median([v for v in rps if v is not None])
            m_cpu = median([v for v in cpu if v is not None])
            table.append(
                {
                    "variant": variant,
                    "concurrency": c,
                    "asyncio_rps": median([by[("asyncio", r)]["rps"] for r in range(rounds)]),
                    "uvloop_rps": median([by[("uvloop", r)]["rps"] for r in range(rounds)]),
                    "uvloop_over_asyncio_rps": None if m_rps is None else round(m_rps, 3),
                    "uvloop_over_asyncio_cpu": None if m_cpu is None else round(m_cpu, 3),
                }
            )
    result = {
        "benchmark": NAME,
        "quick": args.quick,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": info,
        "rounds": rounds,
        "rows": rows,
        "ratios": table,
    }
    print()
    print(
        format_table(
            table,
            [
                "variant",
                "concurrency",
                "asyncio_rps",
                "uvloop_rps",
                "uvloop_over_asyncio_rps",
                "uvloop_over_asyncio_cpu",
            ],
            title=f"Client event loop: uvloop / asyncio (medians of per-round ratios, {rounds} "
            "rounds)",
        )
    )
    path = write_result(args.out, NAME, result)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
