"""GET reads (camt.029 outcome, pacs.002 status): ours vs bare aiohttp + msgspec vs the peer.

Issue 14. The server is ``_rawserver.py`` (a separate process pinned to core 0, answering
a final camt.029 / pacs.002 for any id); this process, the client, is pinned to core 1.
Per route and concurrency, ``rounds`` rounds, each running every variant once, in a
balanced order (each variant right after each other one equally often):

* ``ours``: ``PaymentsClient.get_cancellation_outcome`` / ``get_credit_transfer_status``.
* ``bare``: ``aiohttp`` GET with the service's headers, ``await resp.read()``, a status
  check and a typed ``msgspec.json.Decoder`` (built once) of the same message struct: the
  floor for a read.
* ``peer``: httpx + ``resp.json()`` + pydantic ``model_validate`` (``_peer.py``).

The CPU ratio ours / bare is taken within each round; the median over rounds is reported,
with the lowest and highest of the rounds beside it (whether the rounds resolve a
difference from the target).
``--profile`` samples ``ours`` (camt.029, c=16) with py-spy.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
from _harness import (
    BENCH_ISS,
    BENCH_KID,
    format_table,
    interleaved_rounds,
    machine_info,
    median_ratio,
    median_rows,
    parse_args,
    pin_client,
    ratio,
    raw_server_process,
    write_result,
)
from _peer import PeerClient
from bench_post import CLIENT_ID, CLIENT_SECRET, profile_ours

from payments_async import Credentials, PaymentsClient
from payments_async._constants import CAMT029_PATH, CLIENT_ID_HEADER, PACS002_PATH
from payments_async.iso20022 import Camt029, Pacs002
from payments_async.loop import run as run_loop
from payments_async.testing import generate_test_keypair

NAME = "get"
ROUTES = ("camt029", "pacs002")
LEVELS = (1, 16, 64)
GET_TARGET = 1.10


async def bare_headers(session: aiohttp.ClientSession, url: str) -> dict[str, str]:
    """The headers of the bare read: a token from the raw server, the client id, Accept."""
    async with session.post(
        url + "/oauth/token",
        data={"grant_type": "x", "assertion": "x", "scope": "makePayments"},
        auth=aiohttp.BasicAuth(CLIENT_ID, CLIENT_SECRET),
    ) as r:
        token = (await r.json())["access_token"]
    return {
        "Authorization": f"Bearer {token}",
        CLIENT_ID_HEADER: CLIENT_ID,
        "Accept": "application/json",
    }


async def run(
    url: str,
    key: Any,
    counts: dict[int, int],
    rounds: int,
    warmup: int,
    profile: bool,
    server: Any,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    creds = Credentials(
        CLIENT_ID, CLIENT_SECRET, key_id=BENCH_KID, issuer=BENCH_ISS, private_key=key
    )
    ours = PaymentsClient(creds, base_url=url)
    peer = PeerClient(
        url,
        client_id=CLIENT_ID,
        client_secret=CLIENT_SECRET,
        kid=BENCH_KID,
        issuer=BENCH_ISS,
        private_key=key,
    )
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=100))
    rows: list[dict[str, Any]] = []
    extra: dict[str, Any] = {}
    try:
        headers = await bare_headers(session, url)
        decoders = {
            "camt029": msgspec.json.Decoder(Camt029),
            "pacs002": msgspec.json.Decoder(Pacs002),
        }
        paths = {"camt029": CAMT029_PATH, "pacs002": PACS002_PATH}
        ids = [f"PS-{i:06d}" for i in range(200)]

        def variants(route: str, n: int) -> list[tuple[str, Any, int]]:
            dec = decoders[route].decode
            base = url + paths[route] + "/"
            ours_get = (
                ours.get_cancellation_outcome
                if route == "camt029"
                else ours.get_credit_transfer_status
            )
            peer_get = (
                peer.get_cancellation_outcome
                if route == "camt029"
                else peer.get_credit_transfer_status
            )

            async def op_ours(i: int) -> None:
                await ours_get(ids[i % 200])

            async def op_bare(i: int) -> None:
                async with session.get(base + ids[i % 200], headers=headers) as r:
                    body = await r.read()
                    if r.status != 200:
                        raise RuntimeError(f"bare GET answered {r.status}")
                dec(body)

            async def op_peer(i: int) -> None:
                await peer_get(ids[i % 200])

            return [("ours", op_ours, n), ("bare", op_bare, n), ("peer", op_peer, max(20, n // 5))]

        for route in ROUTES:
            for c in LEVELS:
                got = await interleaved_rounds(
                    variants(route, counts[c]), c, rounds, warmup, server
                )
                rows += [{"route": route, **row} for row in got]
        if profile:
            print("profiling ours (camt029, c=16) with py-spy ...", flush=True)
            op = variants("camt029", 0)[0][1]
            extra["profile_ours_camt029_c16"] = await profile_ours(op, counts[16] * 3, 16)
    finally:
        await ours.aclose()
        await peer.aclose()
        await session.close()
    return rows, extra


def round_range(rows: list[dict[str, Any]], concurrency: int) -> list[float] | None:
    """The lowest and highest per-round CPU ratio ours / bare at ``concurrency``."""
    by = {(r["variant"], r["round"]): r for r in rows if r["concurrency"] == concurrency}
    vals = []
    for (variant, rnd), row in by.items():
        if variant == "ours" and ("bare", rnd) in by:
            v = ratio(row["cpu_us_per_req"], by[("bare", rnd)]["cpu_us_per_req"])
            if v is not None:
                vals.append(v)
    return [min(vals), max(vals)] if vals else None


def _span(case: dict[str, Any]) -> str | None:
    span = case["ours_cpu_over_bare_cpu_rounds"]
    return None if span is None else f"{span[0]:.3f}-{span[1]:.3f}"


def _options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rounds", type=int, help="rounds per case")
    p.add_argument(
        "--loop",
        choices=("asyncio", "uvloop"),
        default="asyncio",
        help="the client's event loop (the JSON is then <name>-uvloop.json)",
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(
        __doc__.splitlines()[0],
        argv,
        extra=_options,
    )
    if args.smoke:  # each level's connections all busy once; two rounds to interleave
        counts, warmup, rounds = {1: 4, 16: 16, 64: 64}, 2, 2
    elif args.quick:
        counts, warmup, rounds = {1: 30, 16: 60, 64: 80}, 10, 2
    else:
        counts, warmup, rounds = {1: 300, 16: 1000, 64: 1000}, 100, 7
    rounds = args.rounds or rounds
    client_cpu = pin_client()
    info = machine_info()
    key, _pem = generate_test_keypair()
    with raw_server_process(loop="uvloop") as server:
        print(f"raw server {server.url} (core {server.cpu}); client core {client_cpu}", flush=True)
        rows, extra = run_loop(
            run(server.url, key, counts, rounds, warmup, args.profile, server), kind=args.loop
        )
    info["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    medians: list[dict[str, Any]] = []
    ratios: dict[str, Any] = {}
    for route in ROUTES:
        mine = [r for r in rows if r["route"] == route]
        medians += [{"route": route, **m} for m in median_rows(mine)]
        for c in LEVELS:
            ratios[f"{route}/c{c}"] = {
                "ours_cpu_over_bare_cpu": median_ratio(mine, "ours", "bare", "cpu_us_per_req", c),
                "ours_cpu_over_bare_cpu_rounds": round_range(mine, c),
                "ours_over_bare_rps": median_ratio(mine, "ours", "bare", "rps", c),
                "peer_cpu_over_bare_cpu": median_ratio(mine, "peer", "bare", "cpu_us_per_req", c),
                "ours_over_peer_rps": median_ratio(mine, "ours", "peer", "rps", c),
            }
    worst = max(
        (r["ours_cpu_over_bare_cpu"] for r in ratios.values() if r["ours_cpu_over_bare_cpu"]),
        default=None,
    )
    targets = {
        f"ours_cpu_over_bare_cpu <= {GET_TARGET} (worst case)": worst is not None
        and worst <= GET_TARGET
    }
    result = {
        "benchmark": NAME,
        "quick": args.quick,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": info,
        "method": {
            "client_loop": args.loop,
            "server": "benchmarks/_rawserver.py (uvloop), its own process",
            "server_cpu": server.cpu,
            "client_cpu": client_cpu,
            "rounds": rounds,
            "requests_per_round": counts,
        },
        "rows": rows,
        "medians": medians,
        "ratios": ratios,
        "worst_ours_cpu_over_bare_cpu": worst,
        "targets_met": targets,
        **extra,
    }
    print()
    print(
        format_table(
            medians,
            [
                "route",
                "variant",
                "concurrency",
                "rounds",
                "n",
                "errors",
                "rps",
                "p50_ms",
                "p99_ms",
                "cpu_us_per_req",
            ],
            title=f"GET reads, medians over {rounds} rounds; client CPU is this process only",
        )
    )
    print()
    print(
        format_table(
            [
                {"case": k, **v, "ours_cpu_over_bare_cpu_rounds": _span(v)}
                for k, v in ratios.items()
            ],
            ["case", *next(iter(ratios.values())).keys()],
            title="Ratios (median over rounds of the per-round ratio; CPU: lowest-highest round)",
        )
    )
    print("Targets:", targets)
    if "profile_ours_camt029_c16" in extra:
        p = extra["profile_ours_camt029_c16"]
        print(
            "Profile:",
            {k: p.get(k) for k in ("samples", "self_share", "inclusive_share", "skipped")},
        )
    path = write_result(args.out, NAME if args.loop == "asyncio" else f"{NAME}-uvloop", result)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
