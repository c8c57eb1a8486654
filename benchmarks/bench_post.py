"""Signed POST throughput: camt.056 submissions, ours vs the peer baseline vs the limits.

Issue 7, item 1. The sandbox runs as a separate process on 127.0.0.1; this process is the
client and only its own CPU time counts as client CPU. In one run, at concurrency 1, 16
and 64, for a fixed number of requests:

* ``ours``: ``PaymentsClient.request_cancellation`` of a message built per request with a
  unique ``assgnmt.id`` (``build_cancellation``), signed with a registered key.
* ``peer``: the same flow written the usual way (httpx + PyJWT + pydantic v2, ``json=``;
  see ``_peer.py``).
* ``bare``: aiohttp posting pre-encoded bodies of the same shape, no signing, no decode:
  the sandbox's predefined client sends its predefined ``sca-token``, which the sandbox
  accepts without verifying anything (so the server's work is lighter too).
* ``ours+pool`` (c=16/64): our pipeline with the library's ``ThreadPoolSigner``, which
  computes the RSA signature in a thread pool (see also ``bench_signing.py``).

Also measured: the RS256 signing rate alone (one core, and in 1..nproc threads), and the
CPU cost of each step of our pipeline. ``--profile`` adds a cProfile of ``ours`` at c=64.
"""

from __future__ import annotations

import asyncio
import cProfile
import io
import os
import pstats
import sys
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import aiohttp
import jwt
from _harness import (
    ASSIGNEE_BIC,
    ASSIGNER_BIC,
    BENCH_CLIENT_ID,
    BENCH_CLIENT_SECRET,
    BENCH_ISS,
    BENCH_KID,
    CONCURRENCY_LEVELS,
    CREDITOR_AGENT_BIC,
    CREDITOR_IBAN,
    SandboxProcess,
    closed_loop,
    format_table,
    machine_info,
    parse_args,
    ratio,
    sandbox_process,
    write_result,
)
from _peer import PeerClient, build_camt056
from cryptography.hazmat.primitives.asymmetric.padding import PKCS1v15
from cryptography.hazmat.primitives.hashes import SHA256

from payments_async import Credentials, PaymentsClient, ThreadPoolSigner
from payments_async._constants import (
    CAMT056_PATH,
    CLIENT_ID_HEADER,
    SANDBOX_CLIENT_ID,
    SANDBOX_SCA_TOKEN,
    SCA_HEADER,
)
from payments_async._jwt import JwtSigner
from payments_async.iso20022 import build_cancellation, decode_submission, encode, validate
from payments_async.testing import generate_test_keypair

NAME = "post"
AMOUNT = Decimal("1234.10")


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


# --- micro measurements: CPU per call, this process ------------------------------------------


def cpu_per_call(fn: Any, min_seconds: float, min_calls: int = 20) -> float:
    """CPU microseconds per call of ``fn()`` (process time; median of 5 batches)."""
    fn()
    batch = min_calls
    while True:  # size the batch to about min_seconds / 5
        t0 = time.process_time()
        for _ in range(batch):
            fn()
        dt = time.process_time() - t0
        if dt >= min_seconds / 5 or batch >= 1_000_000:
            break
        batch *= 2
    samples = []
    for _ in range(5):
        t0 = time.process_time()
        for _ in range(batch):
            fn()
        samples.append((time.process_time() - t0) / batch * 1e6)
    samples.sort()
    return round(samples[2], 2)


def signing_limits(key: Any, min_seconds: float) -> dict[str, Any]:
    """The RS256 physical limit: raw RSA-2048 PKCS#1 v1.5 signatures, one core and threads."""
    signing_input = b"x" * 420  # the size of our SCA token's header.claims segment
    pad, sha = PKCS1v15(), SHA256()

    def raw() -> None:
        key.sign(signing_input, pad, sha)

    sign_cpu_us = cpu_per_call(raw, min_seconds)
    # Wall-clock rate on one thread (sensitive to other load on the machine).
    n = max(20, int(min_seconds / (sign_cpu_us / 1e6)))
    t0 = time.perf_counter()
    for _ in range(n):
        raw()
    one_thread_rate = n / (time.perf_counter() - t0)

    threads: dict[str, float] = {}
    for k in sorted({1, 2, os.cpu_count() or 1}):
        per_thread = n
        barrier = threading.Barrier(k + 1)

        def work(count: int = per_thread, b: threading.Barrier = barrier) -> None:
            b.wait()
            for _ in range(count):
                raw()

        pool = [threading.Thread(target=work) for _ in range(k)]
        for t in pool:
            t.start()
        barrier.wait()
        t0 = time.perf_counter()
        for t in pool:
            t.join()
        threads[str(k)] = round(k * per_thread / (time.perf_counter() - t0), 1)
    return {
        "sign_cpu_us": sign_cpu_us,
        "limit_rps_one_core": round(1e6 / sign_cpu_us, 1),
        "one_thread_wall_rps": round(one_thread_rate, 1),
        "threads_wall_rps": threads,
        "threads_speedup": round(threads[max(threads, key=int)] / threads["1"], 2),
    }


def step_costs(key: Any, min_seconds: float) -> dict[str, float]:
    """CPU µs of each step of our POST pipeline and of the peer's, measured alone."""
    signer = JwtSigner(key, key_id=BENCH_KID, issuer=BENCH_ISS)
    msg = new_cancellation(0)
    body = encode(msg)
    sub = (
        b'{"data":{"paymentsServiceId":"cxl-0","paymentId":"ASG1","status":"PENDING",'
        b'"creationDateTime":"2024-08-01T08:00:00.000"}}'
    )
    peer_msg = new_peer_cancellation(0)
    claims = {"iss": "i", "iat": 1, "nbf": 1, "exp": 2, "jti": "j", "hd": "h", "nonce": "n"}
    return {
        "build_cancellation_us": cpu_per_call(lambda: new_cancellation(1), min_seconds),
        "validate_us": cpu_per_call(lambda: validate(msg), min_seconds),
        "encode_us": cpu_per_call(lambda: encode(msg), min_seconds),
        "sign_sca_token_us": cpu_per_call(lambda: signer.sign_sca_token(body), min_seconds),
        "decode_submission_us": cpu_per_call(lambda: decode_submission(sub), min_seconds),
        "uuid4_hex_us": cpu_per_call(lambda: uuid.uuid4().hex, min_seconds),
        "peer_build_pydantic_us": cpu_per_call(lambda: new_peer_cancellation(1), min_seconds),
        "peer_model_dump_us": cpu_per_call(
            lambda: peer_msg.model_dump(mode="json", by_alias=True, exclude_none=True),
            min_seconds,
        ),
        "pyjwt_encode_us": cpu_per_call(
            lambda: jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k"}),
            min_seconds,
        ),
    }


def retry_wrapper_cost(n: int) -> dict[str, float]:
    """CPU µs per call that the tenacity retry wrapper adds around one successful attempt."""
    import random

    from payments_async._retry import RetryPolicy

    policy = RetryPolicy()

    async def attempt() -> int:
        return 1

    async def measure() -> dict[str, float]:
        rng = random.Random()
        for _ in range(50):
            await policy.retrying(rng=rng)(attempt)
        c0 = time.process_time()
        for _ in range(n):
            await attempt()
        bare = time.process_time() - c0
        c0 = time.process_time()
        for _ in range(n):
            await policy.retrying(rng=rng, before_sleep=lambda s: None)(attempt)
        wrapped = time.process_time() - c0
        c0 = time.process_time()
        for _ in range(n):
            policy.with_timeout(10.0)
        replace_cost = time.process_time() - c0
        return {
            "tenacity_retry_wrapper_us": round((wrapped - bare) / n * 1e6, 2),
            "retry_policy_with_timeout_us": round(replace_cost / n * 1e6, 2),
        }

    return asyncio.run(measure())


# --- the run ---------------------------------------------------------------------------------


async def run_variants(
    sb: SandboxProcess, key: Any, counts: dict[int, int], warmup: int, do_profile: bool
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    creds = Credentials(
        BENCH_CLIENT_ID, BENCH_CLIENT_SECRET, key_id=BENCH_KID, issuer=BENCH_ISS, private_key=key
    )
    rows: list[dict[str, Any]] = []
    extra: dict[str, Any] = {}
    ncpu = os.cpu_count() or 1
    pool_signer = ThreadPoolSigner(key, key_id=BENCH_KID, max_workers=max(2, ncpu))
    creds_pool = Credentials(
        BENCH_CLIENT_ID, BENCH_CLIENT_SECRET, issuer=BENCH_ISS, signer=pool_signer
    )
    ours = PaymentsClient(creds, base_url=sb.url)
    ours_pool = PaymentsClient(creds_pool, base_url=sb.url)
    peer = PeerClient(
        sb.url,
        client_id=BENCH_CLIENT_ID,
        client_secret=BENCH_CLIENT_SECRET,
        kid=BENCH_KID,
        issuer=BENCH_ISS,
        private_key=key,
    )
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=100))
    try:
        # The bare variant: the predefined client's token, obtained once.
        async with session.post(
            sb.url + "/oauth/token",
            data={
                "grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
                "assertion": "sandbox-predefined-assertion-v1",
                "scope": "makePayments",
            },
            auth=aiohttp.BasicAuth(SANDBOX_CLIENT_ID, "sandbox-secret"),
            headers={"Accept": "application/json"},
        ) as r:
            bare_token = (await r.json())["access_token"]
        bare_headers = {
            "Authorization": f"Bearer {bare_token}",
            CLIENT_ID_HEADER: SANDBOX_CLIENT_ID,
            "Accept": "application/json",
            "Content-Type": "application/json",
            SCA_HEADER: SANDBOX_SCA_TOKEN,
        }
        bare_url = sb.url + CAMT056_PATH
        bare_bodies: Iterator[bytes] = iter(())
        prebuilt: Iterator[Any] = iter(())

        async def op_ours(i: int) -> None:
            await ours.request_cancellation(new_cancellation(i))

        async def op_prebuilt(i: int) -> None:
            await ours.request_cancellation(next(prebuilt))

        async def op_peer(i: int) -> None:
            await peer.request_cancellation(new_peer_cancellation(i))

        async def op_bare(i: int) -> None:
            async with session.post(bare_url, data=next(bare_bodies), headers=bare_headers) as r:
                await r.read()
                if r.status != 201:
                    raise RuntimeError(f"bare POST answered {r.status}")

        async def op_pool(i: int) -> None:
            await ours_pool.request_cancellation(new_cancellation(i))

        variants = [
            ("ours", op_ours),
            ("ours-prebuilt", op_prebuilt),
            ("peer", op_peer),
            ("bare", op_bare),
        ]
        for c in CONCURRENCY_LEVELS:
            n = counts[c]
            # Fresh messages for every request, built before the clocks start.
            bare_bodies = iter([encode(new_cancellation(i)) for i in range(n + warmup)])
            prebuilt = iter([new_cancellation(i) for i in range(n + warmup)])
            plan = [*variants, ("ours+pool", op_pool)] if c > 1 else variants
            for name, op in plan:
                await closed_loop(op, warmup, min(c, warmup))  # connections, token, caches
                res = await closed_loop(op, n, c, server=sb)
                row = {"variant": name, **res.summary()}
                rows.append(row)
                print(
                    f"  {name:13s} c={c:<3d} {row['rps']:>9} req/s  "
                    f"cpu {row['cpu_us_per_req']} µs/req  errors {row['errors']}",
                    flush=True,
                )

        if do_profile:
            n = counts[64]
            # CPU time, not wall time: on a shared machine wall time charges whatever was
            # running when this process was descheduled to the function that was running.
            prof = cProfile.Profile(time.process_time)
            c0 = time.process_time()
            prof.enable()
            await closed_loop(op_ours, n, 64, collect=False)
            prof.disable()
            extra["profile"] = profile_breakdown(prof, n, time.process_time() - c0)
    finally:
        try:
            await ours.aclose()
            await ours_pool.aclose()
            await peer.aclose()
            await session.close()
        finally:
            pool_signer.close()
    return rows, extra


# Where self time goes, by the file (or builtin) a function lives in.
_CATEGORIES = (
    ("rsa_sign", ("method 'sign' of",)),
    ("jwt_other", ("payments_async/_jwt.py", "hashlib", "base64", "uuid")),
    ("validate", ("iso20022/_validate.py",)),
    ("builders", ("iso20022/builders.py", "datetime")),
    ("iso20022_other", ("iso20022/",)),
    ("msgspec", ("msgspec",)),
    ("tokens", ("payments_async/_tokens.py",)),
    ("retry_tenacity", ("tenacity/", "payments_async/_retry.py")),
    ("client_pipeline", ("payments_async/_client.py", "payments_async/_credentials.py")),
    ("transport", ("payments_async/_transport.py",)),
    ("logging", ("logging/",)),
    ("aiohttp_yarl_multidict", ("aiohttp/", "yarl/", "multidict/", "propcache/")),
    ("asyncio", ("asyncio/", "selectors.py", "method 'poll'", "socket", "method 'send")),
)


def profile_breakdown(prof: cProfile.Profile, n: int, cpu_s: float) -> dict[str, Any]:
    stats = pstats.Stats(prof)
    by_cat: dict[str, float] = defaultdict(float)
    top: list[tuple[float, str]] = []
    for (filename, line, fname), (_cc, _nc, tt, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        where = f"{filename}:{line}({fname})"
        for cat, needles in _CATEGORIES:
            if any(s in where for s in needles):
                by_cat[cat] += tt
                break
        else:
            by_cat["other"] += tt
        top.append((tt, where))
    total = sum(by_cat.values())
    top.sort(reverse=True)
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(40)
    return {
        "requests": n,
        "cpu_us_per_req_under_profiler": round(cpu_s / n * 1e6, 1),
        "self_time_share": {
            k: round(v / total, 3) for k, v in sorted(by_cat.items(), key=lambda kv: -kv[1])
        },
        "self_us_per_req_under_profiler": {
            k: round(v / n * 1e6, 1) for k, v in sorted(by_cat.items(), key=lambda kv: -kv[1])
        },
        "top_self": [
            {"us_per_req": round(tt / n * 1e6, 1), "where": w.replace(str(sys.prefix), "")}
            for tt, w in top[:25]
        ],
        "cumulative_text": buf.getvalue()[:20000],
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__.splitlines()[0], argv)
    do_profile = args.profile
    if args.quick:
        counts, warmup, micro_s = {1: 30, 16: 60, 64: 80}, 10, 0.05
    else:
        counts, warmup, micro_s = {1: 1000, 16: 3000, 64: 4000}, 200, 1.0
    info = machine_info()
    key, pem = generate_test_keypair()
    print("signing limit and step costs ...", flush=True)
    limits = signing_limits(key, micro_s)
    steps = step_costs(key, micro_s)
    steps.update(retry_wrapper_cost(200 if args.quick else 5000))
    with sandbox_process() as sb:
        sb.register(pem)
        print(f"sandbox {sb.url} (pid {sb.proc.pid})", flush=True)
        rows, extra = asyncio.run(run_variants(sb, key, counts, warmup, do_profile))
        stats = sb.stats()
    info["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]

    by = {(r["variant"], r["concurrency"]): r for r in rows}
    one_sig = limits["sign_cpu_us"]
    limit_rps = limits["limit_rps_one_core"]
    ratios: dict[str, Any] = {}
    for c in CONCURRENCY_LEVELS:
        o, p, b = by[("ours", c)], by[("peer", c)], by[("bare", c)]
        r = {
            "ours_over_peer_rps": ratio(o["rps"], p["rps"]),
            "ours_over_signing_limit_rps": ratio(o["rps"], limit_rps),
            "ours_cpu_over_one_signature": ratio(o["cpu_us_per_req"], one_sig),
            "peer_cpu_over_one_signature": ratio(p["cpu_us_per_req"], one_sig),
            "ours_over_bare_rps": ratio(o["rps"], b["rps"]),
        }
        if ("ours+pool", c) in by:
            r["pool_over_ours_rps"] = ratio(by[("ours+pool", c)]["rps"], o["rps"])
            r["pool_over_signing_limit_rps"] = ratio(by[("ours+pool", c)]["rps"], limit_rps)
        ratios[str(c)] = r
    c64 = ratios["64"]
    targets = {
        "ours_over_peer_rps >= 2.5": c64["ours_over_peer_rps"] is not None
        and c64["ours_over_peer_rps"] >= 2.5,
        "ours_over_signing_limit_rps >= 0.70": c64["ours_over_signing_limit_rps"] is not None
        and c64["ours_over_signing_limit_rps"] >= 0.70,
        "ours_cpu_over_one_signature <= 1.4": c64["ours_cpu_over_one_signature"] is not None
        and c64["ours_cpu_over_one_signature"] <= 1.4,
    }
    result = {
        "benchmark": NAME,
        "quick": args.quick,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": info,
        "signing": limits,
        "step_costs_us": steps,
        "rows": rows,
        "ratios": ratios,
        "targets_met_at_c64": targets,
        "sandbox_stats": {k: stats.get(k) for k in ("requests", "responses", "cancellations")},
        **extra,
    }
    print()
    print(
        format_table(
            rows,
            [
                "variant",
                "concurrency",
                "n",
                "errors",
                "rps",
                "p50_ms",
                "p99_ms",
                "cpu_us_per_req",
                "client_cpu_util",
                "server_cpu_us_per_req",
                "server_cpu_util",
            ],
            title="Signed POST (camt.056): client CPU is this process only (the sandbox is "
            "a separate process)",
        )
    )
    print()
    print(
        f"RS256 signature alone: {one_sig} µs CPU -> limit {limit_rps:,.0f}/s per core "
        f"(wall, 1 thread: {limits['one_thread_wall_rps']:,.0f}/s; threads: "
        f"{limits['threads_wall_rps']}, speedup x{limits['threads_speedup']})"
    )
    print(
        format_table(
            [{"c": c, **r} for c, r in ratios.items()], ["c", *ratios["64"].keys()], title="Ratios"
        )
    )
    print("Step costs (µs CPU, measured alone):", steps)
    print("Targets at c=64:", targets)
    if "profile" in extra:
        print("Profile (self time share):", extra["profile"]["self_time_share"])
    path = write_result(args.out, NAME, result)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
