"""Instructions per request, counted by valgrind: our client against the baselines, no noise.

Timings on this shared two-core machine move by several per cent from run to run (the
same RSA signature measured 228-273 µs CPU in one day): as much as the differences issue
14 is about. An instruction count does not move. Each variant runs, in a process of its
own, under ``valgrind --tool=cachegrind --cache-sim=no`` (instruction counting only)
twice: with ``N1`` and with ``N2`` requests at concurrency 16 (``--concurrency`` sets
another), against the raw server (``_rawserver.py``, run natively). The difference of the
two counts divided by ``N2 - N1`` is the count per request: start-up, imports, the token
and the warm-up cancel out. Messages for the prebuilt variants are built before the
counted part, the same number in both runs, so that building them is not counted either.

POST (camt.056):

* ``hand``: the hand-written client of ``bench_post.py`` (the baseline);
* ``hand-our-session``: its code on the session our transport builds;
* ``ours-prebuilt``: ``PaymentsClient.request_cancellation`` of a message built before;
* ``ours-builder``: ``build_cancellation`` inside the loop, then the client; its
  baseline does the same build before the hand-written client (``hand-builder``);
* ``ours-prebuilt-no-limiter`` and ``ours-builder-no-limiter`` (diagnostic): the same
  with the transport's ``asyncio.Semaphore`` (the in-flight limit, with the deadline
  held while a request queues) replaced by C callables that never wait: the difference
  to ``ours-prebuilt`` / ``ours-builder`` is what the standard semaphore costs.

GET by id, the two routes of ``bench_get.py``: camt.029, ``bare`` (the baseline of
``bench_get.py``: aiohttp, a status check, a typed ``msgspec`` decoder built once) and
``ours`` (``PaymentsClient.get_cancellation_outcome``); pacs.002, ``bare-pacs002`` and
``ours-pacs002`` (``PaymentsClient.get_credit_transfer_status``).

By default every POST variant alike signs with a SHA-256 stand-in instead of the RSA key
(the raw server does not verify signatures): the signature is the same work in all of
them, and without it the count shows what each client adds. ``--rsa`` keeps the real
signature. An instruction is not a nanosecond (cache misses and system calls are not in
the count): this complements the timings of ``bench_post.py`` and ``bench_get.py``, it
does not replace them. Needs valgrind (Debian: ``apt-get install valgrind``).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import itertools
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

HERE = Path(__file__).resolve().parent
NAME = "instructions"
CONCURRENCY = 16
WARMUP = 200
POST_VARIANTS = (
    "hand",
    "hand-our-session",
    "ours-prebuilt",
    "ours-prebuilt-no-limiter",
    "hand-builder",
    "ours-builder",
    "ours-builder-no-limiter",
)
GET_VARIANTS = ("bare", "ours", "bare-pacs002", "ours-pacs002")
RATIOS = (  # (ours, its baseline)
    ("hand-our-session", "hand"),
    ("ours-prebuilt", "hand"),
    ("ours-builder", "hand-builder"),
    ("ours-prebuilt-no-limiter", "hand"),
    ("ours-builder-no-limiter", "hand-builder"),
    ("ours", "bare"),
    ("ours-pacs002", "bare-pacs002"),
)


# --- the measured process ------------------------------------------------------------------


def child(url: str, variant: str, n: int, pool_size: int, rsa: bool, concurrency: int) -> None:
    """Run ``n`` requests of ``variant`` after the warm-up (this is what valgrind counts)."""
    import msgspec
    from _harness import BENCH_ISS, BENCH_KID, closed_loop
    from bench_layers import _StandInKey, _StandInSigner
    from bench_post import CLIENT_ID, CLIENT_SECRET, HandWritten, new_cancellation

    from payments_async import Credentials, PaymentsClient
    from payments_async._constants import CAMT029_PATH, PACS002_PATH
    from payments_async.iso20022 import Camt029, Pacs002
    from payments_async.testing import generate_test_keypair

    async def main() -> None:
        key = generate_test_keypair()[0] if rsa else None
        if key is not None:
            creds = Credentials(
                CLIENT_ID, CLIENT_SECRET, key_id=BENCH_KID, issuer=BENCH_ISS, private_key=key
            )
        else:
            creds = Credentials(CLIENT_ID, CLIENT_SECRET, issuer=BENCH_ISS, signer=_StandInSigner())
        ours = PaymentsClient(creds, base_url=url)
        hand = HandWritten(url, key if key is not None else _StandInKey())
        try:
            await hand.start()
            await ours.access_token_lifetime()
            if variant == "hand-our-session":
                await hand.session.close()
                hand.session = ours._transport._get_session()  # measured: our session
            if variant.endswith("-no-limiter"):
                # Diagnostic: a limiter that costs (almost) nothing: locked() is bool(),
                # acquire() hands out a future already done, release() is int().
                done = asyncio.get_running_loop().create_future()
                done.set_result(True)
                ours._transport._semaphore = SimpleNamespace(  # type: ignore[assignment]
                    locked=bool,
                    acquire=functools.partial(next, itertools.repeat(done)),
                    release=int,
                )
            # Built before the counted part, as many in the N1 run as in the N2 run.
            pool = [new_cancellation(i) for i in range(pool_size)]
            ids = [f"PS-{i:06d}" for i in range(200)]
            get_headers = {k: v for k, v in hand.headers.items() if k != "Content-Type"}

            def bare_get(path: str, message: type[Any]) -> Any:
                base = url + path + "/"
                decode = msgspec.json.Decoder(message).decode

                async def bare(i: int) -> None:
                    async with hand.session.get(base + ids[i % 200], headers=get_headers) as r:
                        body = await r.read()
                        if r.status != 200:
                            raise RuntimeError(f"GET answered {r.status}")
                    decode(body)

                return bare

            ops: dict[str, Any] = {
                "hand": lambda i: hand.request_cancellation(pool.pop()),
                "hand-our-session": lambda i: hand.request_cancellation(pool.pop()),
                "ours-prebuilt": lambda i: ours.request_cancellation(pool.pop()),
                "hand-builder": lambda i: hand.request_cancellation(new_cancellation(i)),
                "ours-builder": lambda i: ours.request_cancellation(new_cancellation(i)),
                "ours-prebuilt-no-limiter": lambda i: ours.request_cancellation(pool.pop()),
                "ours-builder-no-limiter": lambda i: ours.request_cancellation(new_cancellation(i)),
                "bare": bare_get(CAMT029_PATH, Camt029),
                "ours": lambda i: ours.get_cancellation_outcome(ids[i % 200]),
                "bare-pacs002": bare_get(PACS002_PATH, Pacs002),
                "ours-pacs002": lambda i: ours.get_credit_transfer_status(ids[i % 200]),
            }
            op = ops[variant]
            await closed_loop(op, WARMUP, concurrency)
            res = await closed_loop(op, n, concurrency)
            if res.errors:
                raise SystemExit(f"{variant}: {res.errors} errors, first: {res.first_error}")
        finally:
            await ours.aclose()
            await hand.aclose()

    asyncio.run(main())


# --- the driver ----------------------------------------------------------------------------


def count(url: str, variant: str, n: int, pool_size: int, rsa: bool, concurrency: int) -> int:
    """Instructions valgrind counted for one child process."""
    cmd = [
        "valgrind",
        "--tool=cachegrind",
        "--cache-sim=no",
        "--cachegrind-out-file=/dev/null",
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        url,
        variant,
        str(n),
        str(pool_size),
        "rsa" if rsa else "stand-in",
        str(concurrency),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE, check=False)
    found = re.search(r"I\s+refs:\s+([\d,]+)", proc.stderr)
    if proc.returncode or found is None:
        raise RuntimeError(f"{variant} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return int(found.group(1).replace(",", ""))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        url, variant, n, pool_size, mode, concurrency = argv[1:7]
        child(url, variant, int(n), int(pool_size), mode == "rsa", int(concurrency))
        return 0
    from _harness import format_table, machine_info, parse_args, raw_server_process, write_result

    def options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--rsa", action="store_true", help="keep the real RSA signature")
        p.add_argument("--only", help="comma-separated variants (default: all)")
        p.add_argument(
            "--concurrency",
            type=int,
            default=CONCURRENCY,
            help="requests in flight (default 16; another writes instructions-cN.json)",
        )

    args = parse_args(__doc__.splitlines()[0], argv, extra=options)
    if args.concurrency < 1:
        print("--concurrency must be at least 1", file=sys.stderr)
        return 2
    name = NAME if args.concurrency == CONCURRENCY else f"{NAME}-c{args.concurrency}"
    if shutil.which("valgrind") is None:
        why = "valgrind is not installed (Debian: apt-get install valgrind)"
        print(f"skipped: {why}")
        write_result(args.out, name, {"benchmark": NAME, "skipped": why, "rows": [], "ratios": []})
        return 0
    n1, n2 = (50, 150) if args.quick else (300, 1300)
    variants = [*POST_VARIANTS, *GET_VARIANTS]
    if args.only:
        variants = [v for v in variants if v in args.only.split(",")]
    info = machine_info()
    rows: list[dict[str, Any]] = []
    with raw_server_process(loop="uvloop") as server:
        print(f"raw server {server.url}; valgrind, {n1} and {n2} requests per variant", flush=True)
        for variant in variants:
            pool = n2 + WARMUP
            first = count(server.url, variant, n1, pool, args.rsa, args.concurrency)
            second = count(server.url, variant, n2, pool, args.rsa, args.concurrency)
            per = (second - first) / (n2 - n1)
            route = "get" if variant in GET_VARIANTS else "post"
            rows.append({"route": route, "variant": variant, "instructions_per_request": per})
            print(f"  {route} {variant:17s} {per:>12,.0f} instructions/request", flush=True)
    by = {r["variant"]: r["instructions_per_request"] for r in rows}
    ratios = [
        {"variant": a, "over": b, "ratio": round(by[a] / by[b], 4)}
        for a, b in RATIOS
        if a in by and b in by
    ]
    signature = "RSA-2048 (real)" if args.rsa else "SHA-256 stand-in (every POST variant alike)"
    print()
    print(
        format_table(
            [{**r, "instructions_per_request": round(r["instructions_per_request"])} for r in rows],
            ["route", "variant", "instructions_per_request"],
            title=f"Instructions per request (valgrind), c={args.concurrency}; "
            f"signature: {signature}",
        )
    )
    print()
    print(format_table(ratios, ["variant", "over", "ratio"], title="Ratios of the counts"))
    result = {
        "benchmark": NAME,
        "quick": args.quick,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": info,
        "method": {
            "concurrency": args.concurrency,
            "requests": [n1, n2],
            "warmup": WARMUP,
            "signature": signature,
            "tool": "valgrind --tool=cachegrind --cache-sim=no",
        },
        "rows": rows,
        "ratios": ratios,
    }
    path = write_result(args.out, name, result)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
