"""Signed POST throughput: PaymentsClient against a hand-written signed client, first.

Issue 14. The question is what the library costs over what a strong engineer would write
by hand. The server is ``_rawserver.py`` (a minimal asyncio server that answers like the
service, checks each SCA token's ``hd`` and refuses a reused one), a separate process
pinned to core 0; this process, the client, pins itself to core 1. Variants:

* ``hand`` (the baseline): one ``aiohttp.ClientSession``, the key loaded once, the message
  (built beforehand) encoded with msgspec, ``hd`` with hashlib + base64, the SCA JWT built
  by hand (header segment once, claims with msgspec, one RSA signature), ``data=bytes``,
  the answer decoded with msgspec. A fresh SCA token per request, as the service demands.
* ``ours-prebuilt``: ``PaymentsClient.request_cancellation`` of messages built beforehand.
* ``ours-builder``: ``build_cancellation(...)`` inside the loop, then the client, as users
  write it.
* ``peer``: httpx + PyJWT + pydantic (``_peer.py``), fewer requests per round (it is slow).

Every concurrency level runs ``rounds`` rounds; each round runs every variant once, in a
balanced order (each variant right after each other one equally often). Ratios are taken
within a round and their median over the rounds is reported. The raw RSA signature's CPU
cost is measured in every round too, so the CPU per POST is set beside a signature of the
same run. ``--profile`` samples ``ours-builder`` at
c=64 with py-spy (when installed) and writes where the client's CPU goes.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
from _harness import (
    ASSIGNEE_BIC,
    ASSIGNER_BIC,
    BENCH_ISS,
    BENCH_KID,
    CREDITOR_AGENT_BIC,
    CREDITOR_IBAN,
    RawServerProcess,
    closed_loop,
    format_table,
    interleaved_rounds,
    machine_info,
    median,
    median_ratio,
    median_rows,
    parse_args,
    pin_client,
    raw_server_process,
    write_result,
)
from _peer import PeerClient, build_camt056
from cryptography.hazmat.primitives.asymmetric.padding import PKCS1v15
from cryptography.hazmat.primitives.hashes import SHA256

from payments_async import Credentials, PaymentsClient
from payments_async._jwt import JwtSigner
from payments_async.iso20022 import build_cancellation, decode_submission, encode, validate
from payments_async.loop import run as run_loop
from payments_async.testing import generate_test_keypair

NAME = "post"
AMOUNT = Decimal("1234.10")
CLIENT_ID = "bench-client"
CLIENT_SECRET = "bench-secret"
LEVELS = (1, 16, 64)


def new_cancellation(i: int) -> Any:
    return build_cancellation(
        original_end_to_end_id=f"E2E{i:08d}",
        amount=AMOUNT,
        creditor_agent_bic=CREDITOR_AGENT_BIC,
        creditor_iban=CREDITOR_IBAN,
        assigner_bic=ASSIGNER_BIC,
        assignee_bic=ASSIGNEE_BIC,
        assignment_id=f"ASG{uuid.uuid4().hex}"[:35],
    )


def new_peer_cancellation(i: int) -> Any:
    return build_camt056(
        assignment_id=f"ASG{uuid.uuid4().hex}"[:35],
        original_end_to_end_id=f"E2E{i:08d}",
        amount=AMOUNT,
        creditor_agent_bic=CREDITOR_AGENT_BIC,
        creditor_iban=CREDITOR_IBAN,
        assigner_bic=ASSIGNER_BIC,
        assignee_bic=ASSIGNEE_BIC,
    )


# --- the hand-written baseline ---------------------------------------------------------------


def _b64url(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


class _Submitted(msgspec.Struct, rename="camel"):
    payments_service_id: str
    status: str | None = None


class _Envelope(msgspec.Struct):
    data: _Submitted


class HandWritten:
    """The signed client a strong engineer writes by hand for this one service."""

    def __init__(self, base_url: str, key: Any) -> None:
        self.base_url = base_url
        self.key = key  # loaded once
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=100))
        self.header_segment = (
            _b64url(msgspec.json.encode({"typ": "JWT", "alg": "RS256", "kid": BENCH_KID})) + b"."
        )
        self.pad, self.sha = PKCS1v15(), SHA256()
        self.decoder = msgspec.json.Decoder(_Envelope)
        self.headers: dict[str, str] = {}

    def _jwt(self, claims: dict[str, Any]) -> str:
        signing_input = self.header_segment + _b64url(msgspec.json.encode(claims))
        return (
            signing_input + b"." + _b64url(self.key.sign(signing_input, self.pad, self.sha))
        ).decode()

    async def start(self) -> None:
        now = int(time.time())
        assertion = self._jwt(
            {
                "iss": BENCH_ISS,
                "sub": CLIENT_ID,
                "iat": now,
                "exp": now + 300,
                "jti": os.urandom(16).hex(),
            }
        )
        async with self.session.post(
            self.base_url + "/oauth/token",
            data={
                "grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
                "assertion": assertion,
                "scope": "makePayments",
            },
            auth=aiohttp.BasicAuth(CLIENT_ID, CLIENT_SECRET),
        ) as r:
            token = (await r.json())["access_token"]
        self.headers = {
            "Authorization": f"Bearer {token}",
            "X-Service-Client-Id": CLIENT_ID,
            "Accept": "application/json",
            "Content-Type": "application/json",
        }

    async def request_cancellation(self, msg: Any) -> _Submitted:
        body = encode(msg)
        now = int(time.time())
        sca = self._jwt(
            {
                "iss": BENCH_ISS,
                "iat": now,
                "nbf": now,
                "exp": now + 180,
                "jti": os.urandom(16).hex(),
                "alg": "SHA256",
                "hd": base64.b64encode(hashlib.sha256(body).digest()).decode(),
                "nonce": os.urandom(16).hex(),
                "payment_id": msg.message_id,
            }
        )
        headers = {**self.headers, "sca-token": sca}
        async with self.session.post(
            self.base_url + "/payments/camt056/v08", data=body, headers=headers
        ) as r:
            data = await r.read()
            if r.status not in (200, 201):
                raise RuntimeError(f"POST answered {r.status}: {data[:200]!r}")
        return self.decoder.decode(data).data

    async def aclose(self) -> None:
        await self.session.close()


# --- micro measurements ------------------------------------------------------------------------


def cpu_per_call(fn: Any, min_seconds: float, min_calls: int = 20) -> float:
    """CPU microseconds per call of ``fn()`` (process time; median of 5 batches)."""
    fn()
    batch = min_calls
    while True:
        t0 = time.process_time()
        for _ in range(batch):
            fn()
        if time.process_time() - t0 >= min_seconds / 5 or batch >= 1_000_000:
            break
        batch *= 2
    samples = []
    for _ in range(5):
        t0 = time.process_time()
        for _ in range(batch):
            fn()
        samples.append((time.process_time() - t0) / batch * 1e6)
    return round(sorted(samples)[2], 2)


def raw_signature_us(key: Any, min_seconds: float) -> float:
    """CPU µs of one raw RSA-2048 PKCS#1 v1.5 signature over an SCA-token-sized input."""
    signing_input, pad, sha = b"x" * 420, PKCS1v15(), SHA256()
    return cpu_per_call(lambda: key.sign(signing_input, pad, sha), min_seconds)


def step_costs(key: Any, min_seconds: float) -> dict[str, float]:
    """CPU µs of each step of the POST pipeline, measured alone."""
    signer = JwtSigner(key, key_id=BENCH_KID, issuer=BENCH_ISS)
    msg = new_cancellation(0)
    body = encode(msg)
    sub = b'{"data":{"paymentsServiceId":"PS-1","paymentId":"A","status":"PENDING"}}'
    return {
        "build_cancellation_us": cpu_per_call(lambda: new_cancellation(1), min_seconds),
        "validate_us": cpu_per_call(lambda: validate(msg), min_seconds),
        "encode_us": cpu_per_call(lambda: encode(msg), min_seconds),
        "sha256_body_us": cpu_per_call(lambda: hashlib.sha256(body).digest(), min_seconds),
        "sign_sca_token_us": cpu_per_call(lambda: signer.sign_sca_token(body), min_seconds),
        "decode_submission_us": cpu_per_call(lambda: decode_submission(sub), min_seconds),
    }


# --- profiling with py-spy -----------------------------------------------------------------------

# Where a sample's leaf frame (self time) lives, first match wins.
_CATEGORIES = (
    # py-spy shows Python frames only: the RSA signature (C) is charged to KeySigner.sign.
    ("rsa_signature", ("payments_async/signing/",)),
    ("jwt", ("payments_async/_jwt.py", "payments_async/_credentials.py", "hashlib", "base64")),
    ("validate", ("iso20022/_validate.py",)),
    ("builders", ("iso20022/builders.py", "datetime")),
    ("iso20022_other", ("iso20022/",)),
    ("tokens", ("payments_async/_tokens.py",)),
    ("retry", ("payments_async/_retry.py",)),
    ("client_pipeline", ("payments_async/_client.py", "payments_async/_pipeline.py")),
    ("transport", ("payments_async/_transport.py",)),
    ("aiohttp_yarl_multidict", ("aiohttp/", "yarl/", "multidict/", "propcache/")),
    ("asyncio_and_sockets", ("asyncio/", "selectors.py", "socket.py", "uvloop")),
    ("benchmark_harness", ("benchmarks/",)),
)
# Frames whose inclusive share is reported (a sample counts once per function it passes).
_INCLUSIVE = (
    ("build_cancellation", "build_cancellation ("),
    ("validate (find_problems)", "find_problems ("),
    ("encode_validated", "encode_validated ("),
    ("PaymentsClient._submit", "_submit (payments_async/_client.py"),
    ("RetryPolicy.run", "run (payments_async/_retry.py"),
    ("Pipeline._attempt", "_attempt (payments_async/_pipeline.py"),
    ("sign_sca_token", "sign_sca_token ("),
    # Transport.request hands back the _exchange coroutine: it is not a frame of its own.
    ("Transport._exchange", "_exchange (payments_async/_transport.py"),
    ("aiohttp ClientSession._request", "_request (aiohttp/client.py"),
    ("decode_submission", "decode_submission ("),
)


def py_spy_available() -> str | None:
    """The py-spy executable beside this interpreter or on PATH, if any."""
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


def summarize_collapsed(text: str) -> dict[str, Any]:
    """Self-time shares by category and inclusive shares of key frames from py-spy's raw output."""
    by_cat: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    leaves: collections.Counter[str] = collections.Counter()
    total = 0
    for line in text.splitlines():
        stack, _, count_s = line.rpartition(" ")
        if not stack or not count_s.isdigit():
            continue
        count = int(count_s)
        frames = stack.split(";")
        leaf = frames[-1]
        total += count
        leaves[leaf] += count
        for cat, needles in _CATEGORIES:
            if any(n in leaf for n in needles):
                by_cat[cat] += count
                break
        else:
            by_cat["other"] += count
        for label, needle in _INCLUSIVE:
            if any(needle in f for f in frames):
                inclusive[label] += count
    if not total:
        return {"samples": 0}
    return {
        "samples": total,
        "self_share": {k: round(v / total, 3) for k, v in by_cat.most_common()},
        "inclusive_share": {k: round(inclusive[k] / total, 3) for k, _ in _INCLUSIVE},
        "top_self": [
            {"share": round(v / total, 3), "frame": k.replace(str(sys.prefix), "")}
            for k, v in leaves.most_common(20)
        ],
    }


async def profile_ours(op: Any, n: int, concurrency: int = 64, rate: int = 500) -> dict[str, Any]:
    """Sample this process with py-spy while ``op`` runs ``n`` times."""
    exe = py_spy_available()
    if exe is None:
        return {"skipped": "py-spy is not installed (pip install py-spy)"}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "profile.txt"
        cmd = [exe, "record", "--pid", str(os.getpid()), "--rate", str(rate), "--format"]
        cmd += ["raw", "--output", str(out), "--nonblocking"]
        # Starting py-spy does not wait for it; the loop is idle when it is waited for.
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # noqa: ASYNC220
        try:
            await asyncio.sleep(1.0)  # py-spy attaches
            c0 = time.process_time()
            await closed_loop(op, n, concurrency, collect=False)
            cpu = time.process_time() - c0
        finally:
            proc.send_signal(2)  # SIGINT: py-spy writes its output and exits
            _, err = proc.communicate(timeout=60)
        if not out.exists():
            return {"skipped": f"py-spy wrote nothing: {err.decode(errors='replace')[-500:]}"}
        summary = summarize_collapsed(out.read_text())
    summary["requests"] = n
    summary["concurrency"] = concurrency
    summary["cpu_us_per_req_while_sampled"] = round(cpu / n * 1e6, 1)
    summary["command"] = " ".join(Path(c).name if i == 0 else c for i, c in enumerate(cmd))
    return summary


# --- the run -----------------------------------------------------------------------------------


async def run(
    server: RawServerProcess,
    key: Any,
    counts: dict[int, int],
    rounds: int,
    warmup: int,
    sig_seconds: float,
    do_profile: bool,
) -> dict[str, Any]:
    creds = Credentials(
        CLIENT_ID, CLIENT_SECRET, key_id=BENCH_KID, issuer=BENCH_ISS, private_key=key
    )
    hand = HandWritten(server.url, key)
    ours = PaymentsClient(creds, base_url=server.url)
    peer = PeerClient(
        server.url,
        client_id=CLIENT_ID,
        client_secret=CLIENT_SECRET,
        kid=BENCH_KID,
        issuer=BENCH_ISS,
        private_key=key,
    )
    rows: list[dict[str, Any]] = []
    signature_us: list[float] = []
    out: dict[str, Any] = {}
    pool: list[Any] = []  # messages built outside the clocks, for the prebuilt variants
    try:
        await hand.start()
        for c in LEVELS:
            n = counts[c]

            async def before_round(r: int, n: int = n) -> None:
                # Messages for the prebuilt variants, built outside the clocks; and the
                # signature's cost in this round.
                pool[:] = [new_cancellation(i) for i in range(2 * n)]
                signature_us.append(raw_signature_us(key, sig_seconds))

            def take() -> Any:
                return pool.pop()

            async def op_hand(i: int) -> None:
                await hand.request_cancellation(take())

            async def op_prebuilt(i: int) -> None:
                await ours.request_cancellation(take())

            async def op_builder(i: int) -> None:
                await ours.request_cancellation(new_cancellation(i))

            async def op_peer(i: int) -> None:
                await peer.request_cancellation(new_peer_cancellation(i))

            pool[:] = [new_cancellation(i) for i in range(4 * warmup)]
            variants = [
                ("hand", op_hand, n),
                ("ours-prebuilt", op_prebuilt, n),
                ("ours-builder", op_builder, n),
                ("peer", op_peer, max(20, n // 5)),
            ]
            rows += await interleaved_rounds(
                variants, c, rounds, warmup, server=server, before_round=before_round
            )
        if do_profile:
            print("profiling ours-builder at c=64 with py-spy ...", flush=True)

            async def op_profiled(i: int) -> None:
                await ours.request_cancellation(new_cancellation(i))

            out["profile"] = await profile_ours(op_profiled, counts[64] * 2)
    finally:
        await ours.aclose()
        await hand.aclose()
        await peer.aclose()
    out["rows"] = rows
    out["signature_us_per_round"] = signature_us
    return out


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
        counts, rounds, warmup, micro_s = {1: 4, 16: 16, 64: 64}, 2, 2, 0.01
    elif args.quick:
        counts, rounds, warmup, micro_s = {1: 30, 16: 60, 64: 80}, 2, 10, 0.05
    else:
        counts, rounds, warmup, micro_s = {1: 200, 16: 800, 64: 1000}, 9, 100, 0.5
    rounds = args.rounds or rounds
    client_cpu = pin_client()
    info = machine_info()
    key, _pem = generate_test_keypair()
    steps = step_costs(key, micro_s)
    with raw_server_process(loop="uvloop") as server:
        print(
            f"raw server {server.url} (pid {server.proc.pid}, core {server.cpu}); client core "
            f"{client_cpu}",
            flush=True,
        )
        data = run_loop(
            run(server, key, counts, rounds, warmup, micro_s / 5, args.profile), kind=args.loop
        )
        server_stats = server.stats()
    info["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    rows = data["rows"]
    sig_us = median(data["signature_us_per_round"])
    table = median_rows(rows)
    ratios: dict[str, dict[str, Any]] = {}
    for c in LEVELS:
        ratios[str(c)] = {
            "ours_prebuilt_over_hand_rps": median_ratio(rows, "ours-prebuilt", "hand", "rps", c),
            "ours_builder_over_hand_rps": median_ratio(rows, "ours-builder", "hand", "rps", c),
            "ours_prebuilt_over_hand_cpu": median_ratio(
                rows, "ours-prebuilt", "hand", "cpu_us_per_req", c
            ),
            "ours_builder_over_hand_cpu": median_ratio(
                rows, "ours-builder", "hand", "cpu_us_per_req", c
            ),
            "ours_prebuilt_over_peer_rps": median_ratio(rows, "ours-prebuilt", "peer", "rps", c),
            "hand_cpu_over_signature": round(
                next(
                    r["cpu_us_per_req"]
                    for r in table
                    if r["variant"] == "hand" and r["concurrency"] == c
                )
                / sig_us,
                3,
            )
            if sig_us
            else None,
            "ours_prebuilt_cpu_over_signature": round(
                next(
                    r["cpu_us_per_req"]
                    for r in table
                    if r["variant"] == "ours-prebuilt" and r["concurrency"] == c
                )
                / sig_us,
                3,
            )
            if sig_us
            else None,
        }
    targets = {}
    for c in ("16", "64"):
        r = ratios[c]
        targets[f"c={c} ours-prebuilt / hand rps >= 0.90"] = (
            r["ours_prebuilt_over_hand_rps"] or 0
        ) >= 0.9
        targets[f"c={c} ours-builder / hand rps >= 0.90"] = (
            r["ours_builder_over_hand_rps"] or 0
        ) >= 0.9
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
        "signature_us": sig_us,
        "step_costs_us": steps,
        "rows": rows,
        "medians": table,
        "ratios": ratios,
        "targets": targets,
        "server_stats": server_stats,
        **{k: v for k, v in data.items() if k not in ("rows",)},
    }
    print()
    print(
        format_table(
            table,
            [
                "variant",
                "concurrency",
                "rounds",
                "n",
                "errors",
                "rps",
                "p50_ms",
                "p99_ms",
                "cpu_us_per_req",
                "server_cpu_us_per_req",
            ],
            title=f"Signed POST (camt.056), medians over {rounds} rounds; client CPU is this "
            "process only",
        )
    )
    print()
    print(f"raw RSA-2048 signature in this run: {sig_us} µs CPU (median of the rounds)")
    print(
        format_table(
            [{"c": c, **r} for c, r in ratios.items()],
            ["c", *ratios["64"].keys()],
            title="Ratios (median over rounds of the per-round ratio)",
        )
    )
    print("Step costs (µs CPU, measured alone):", steps)
    print("Targets:", targets)
    print("Server:", server_stats)
    if "profile" in data:
        p = data["profile"]
        print(
            "Profile:",
            {k: p.get(k) for k in ("samples", "self_share", "inclusive_share", "skipped")},
        )
    path = write_result(args.out, NAME if args.loop == "asyncio" else f"{NAME}-uvloop", result)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
