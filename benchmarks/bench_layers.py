"""Where our overhead over the baselines lives, layer by layer (issue 14 diagnostics).

``bench_post.py`` and ``bench_get.py`` compare the whole client with a hand-written one;
this script cuts the difference into layers, every variant against the same raw server
(``_rawserver.py``, core 0; this process on core 1), interleaved in balanced rounds, the
ratio to the baseline taken within each round and its median reported:

GET (camt.029 by id):

* ``bare``: the baseline of ``bench_get.py`` (aiohttp with a default session, a URL
  string, a typed msgspec decode);
* ``bare-our-session``: the same code on the session our transport builds (no cookie
  jar, no aiohttp timers of its own, unbounded connector): what the session settings do;
* ``transport``: ``Transport.request`` with the client's headers, then the decode: our
  transport (limiter, one timer, kept URLs, bounded body, error mapping) without the client;
* ``client``: ``PaymentsClient.get_cancellation_outcome``.

POST (camt.056, messages built beforehand):

* ``hand``: the hand-written client of ``bench_post.py``;
* ``hand-our-session``: its code on our transport's session;
* ``transport``: ``encode_validated``, the client's signer, the client's headers,
  ``Transport.request``, ``decode_submission``;
* ``client``: ``PaymentsClient.request_cancellation``.

It reaches into the client's private parts on purpose (the transport, the signer, the
prebuilt headers): it measures them. Not in ``run_all.py``.

``--no-rsa`` (a diagnostic) swaps the RSA signature for a SHA-256 stand-in in every POST
variant alike, the hand-written client included: the raw server does not verify
signatures, so the requests stay valid, and the one cost all variants share (58-65 % of a
POST's CPU) no longer hides the layers' differences in its run-to-run noise.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path
from typing import Any

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
    raw_server_process,
    write_result,
)
from bench_post import CLIENT_ID, CLIENT_SECRET, HandWritten, new_cancellation

from payments_async import Credentials, PaymentsClient
from payments_async._constants import CAMT029_PATH, CAMT056_PATH, REQUEST_ID_HEADER, SCA_HEADER
from payments_async._instrument import Exchange
from payments_async._loop import run as run_loop
from payments_async.iso20022 import Camt029, decode_submission, encode_validated
from payments_async.iso20022.camt029 import decode_camt029
from payments_async.testing import generate_test_keypair

NAME = "layers"


def _stand_in(data: bytes) -> bytes:
    """256 bytes, unique per signing input (the raw server refuses a reused token)."""
    return hashlib.sha256(data).digest() * 8


class _StandInKey:
    """Duck-types ``RSAPrivateKey.sign`` for the hand-written client (``--no-rsa``)."""

    def sign(self, data: bytes, pad: Any, algorithm: Any) -> bytes:
        return _stand_in(data)


class _StandInSigner:
    """A :class:`~payments_async.signing.Signer` for our client (``--no-rsa``)."""

    key_id = BENCH_KID

    def sign(self, data: bytes) -> bytes:
        return _stand_in(data)


async def run(
    url: str,
    key: Any,
    n: dict[str, int],
    c: int,
    rounds: int,
    warmup: int,
    server: Any,
    no_rsa: bool = False,
) -> list[dict[str, Any]]:
    if no_rsa:
        creds = Credentials(CLIENT_ID, CLIENT_SECRET, issuer=BENCH_ISS, signer=_StandInSigner())
    else:
        creds = Credentials(
            CLIENT_ID, CLIENT_SECRET, key_id=BENCH_KID, issuer=BENCH_ISS, private_key=key
        )
    ours = PaymentsClient(creds, base_url=url)
    hand = HandWritten(url, _StandInKey() if no_rsa else key)
    rows: list[dict[str, Any]] = []
    try:
        await hand.start()
        await ours.access_token_lifetime()
        transport = ours._transport
        session = transport._get_session()
        signer = ours._signer
        token = hand.headers["Authorization"]

        # --- GET ---------------------------------------------------------------------------
        ids = [f"PS-{i:06d}" for i in range(200)]
        base = url + CAMT029_PATH + "/"
        decode = msgspec.json.Decoder(Camt029).decode
        get_headers = {k: v for k, v in hand.headers.items() if k != "Content-Type"}
        our_get = {**ours._base_headers, "Authorization": token, REQUEST_ID_HEADER: "0" * 32}

        async def bare(i: int, s: Any = hand.session) -> None:
            async with s.get(base + ids[i % 200], headers=get_headers) as r:
                body = await r.read()
                if r.status != 200:
                    raise RuntimeError(f"GET answered {r.status}")
            decode(body)

        async def bare_our_session(i: int) -> None:
            await bare(i, session)

        async def get_transport(i: int) -> None:
            path = f"{CAMT029_PATH}/{ids[i % 200]}"
            exchange = Exchange("GET", path, "0" * 32, 1)
            resp = await transport.request(exchange, dict(our_get), timeout=45.0)
            decode_camt029(resp.body)

        async def get_client(i: int) -> None:
            await ours.get_cancellation_outcome(ids[i % 200])

        get_variants = [
            ("bare", bare, n["get"]),
            ("bare-our-session", bare_our_session, n["get"]),
            ("transport", get_transport, n["get"]),
            ("client", get_client, n["get"]),
        ]
        for row in await interleaved_rounds(get_variants, c, rounds, warmup, server=server):
            rows.append({"route": "get", **row})

        # --- POST --------------------------------------------------------------------------
        pool: list[Any] = []

        async def before_round(r: int) -> None:
            pool[:] = [new_cancellation(i) for i in range(4 * n["post"] + warmup)]

        async def hand_post(i: int) -> None:
            await hand.request_cancellation(pool.pop())

        # The hand-written client itself, its session swapped for our transport's.
        hand_on_ours = HandWritten(url, hand.key)
        await hand_on_ours.session.close()
        hand_on_ours.session = session
        hand_on_ours.headers = hand.headers

        async def hand_our_session(i: int) -> None:
            await hand_on_ours.request_cancellation(pool.pop())

        our_post = {**ours._post_headers, "Authorization": token, REQUEST_ID_HEADER: "0" * 32}

        async def post_transport(i: int) -> None:
            msg = pool.pop()
            body, digest = encode_validated(msg)
            sca = signer.sign_sca_token(body, payment_id=msg.message_id, digest=digest)
            headers = {**our_post, SCA_HEADER: sca.value}  # type: ignore[union-attr]
            exchange = Exchange("POST", CAMT056_PATH, "0" * 32, 1)
            resp = await transport.request(exchange, headers, body=body, timeout=45.0)
            decode_submission(resp.body)

        async def post_client(i: int) -> None:
            await ours.request_cancellation(pool.pop())

        post_variants = [
            ("hand", hand_post, n["post"]),
            ("hand-our-session", hand_our_session, n["post"]),
            ("transport", post_transport, n["post"]),
            ("client", post_client, n["post"]),
        ]
        await before_round(-1)
        got = await interleaved_rounds(
            post_variants, c, rounds, warmup, server=server, before_round=before_round
        )
        rows += [{"route": "post", **row} for row in got]
    finally:
        await ours.aclose()
        await hand.aclose()
    return rows


def _options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rounds", type=int, help="rounds (default 9)")
    p.add_argument("--concurrency", type=int, default=16, help="requests in flight (16)")
    p.add_argument(
        "--no-rsa",
        action="store_true",
        help="diagnostic: a SHA-256 stand-in for the RSA signature in every POST variant",
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__.splitlines()[0], argv, extra=_options)
    if args.quick:
        n, rounds, warmup = {"get": 60, "post": 40}, 2, 10
    else:
        n, rounds, warmup = {"get": 3000, "post": 1500}, 9, 100
    rounds = args.rounds or rounds
    c = args.concurrency
    client_cpu = pin_client()
    info = machine_info()
    key, _pem = generate_test_keypair()
    with raw_server_process(loop="uvloop") as server:
        print(f"raw server {server.url} (core {server.cpu}); client core {client_cpu}", flush=True)
        rows = run_loop(run(server.url, key, n, c, rounds, warmup, server, args.no_rsa))
    info["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    medians: list[dict[str, Any]] = []
    ratios: list[dict[str, Any]] = []
    for route, baseline in (("get", "bare"), ("post", "hand")):
        mine = [r for r in rows if r["route"] == route]
        medians += [{"route": route, **m} for m in median_rows(mine)]
        for variant in dict.fromkeys(r["variant"] for r in mine):
            ratios.append(
                {
                    "route": route,
                    "variant": variant,
                    f"cpu_over_{baseline}": median_ratio(
                        mine, variant, baseline, "cpu_us_per_req", c
                    ),
                }
            )
    result = {
        "benchmark": NAME,
        "quick": args.quick,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": info,
        "method": {
            "concurrency": c,
            "rounds": rounds,
            "requests_per_round": n,
            "no_rsa": args.no_rsa,
        },
        "rows": rows,
        "medians": medians,
        "ratios": ratios,
    }
    print()
    print(
        format_table(
            medians,
            ["route", "variant", "rounds", "n", "errors", "rps", "cpu_us_per_req"],
            title=f"Layers at c={c}, medians over {rounds} rounds; client CPU of this process",
        )
    )
    print()
    print(
        format_table(
            [
                {"route": r["route"], "variant": r["variant"], "cpu_ratio": v}
                for r in ratios
                for k, v in r.items()
                if k.startswith("cpu_over_")
            ],
            ["route", "variant", "cpu_ratio"],
            title="CPU per request over the baseline (bare GET / hand-written POST), "
            "median of per-round ratios",
        )
    )
    path = write_result(args.out, NAME, result)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
