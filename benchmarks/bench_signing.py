"""Signed POST throughput by signer: in-process key vs thread pool vs PKCS#11 (SoftHSM2).

Issue 13, item 1. One run, one sandbox process on 127.0.0.1, one registered client with
three keys (one kid per signer), camt.056 submissions through ``PaymentsClient``:

* ``key``: ``KeySigner`` (the default): RSA on the event loop, no hop.
* ``threads``: ``ThreadPoolSigner`` with ``min(4, nproc)`` workers.
* ``pkcs11``: ``Pkcs11Signer`` on a SoftHSM2 token created in a temporary directory (the
  row is omitted, with the reason, when SoftHSM2 or python-pkcs11 is missing).

Variants are interleaved in rounds at each concurrency; each row is the median round.
Also measured: each signer's raw signing rate (no HTTP), and whether the installed
``cryptography`` releases the GIL while signing (two threads vs one).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

from _harness import (
    ASSIGNEE_BIC,
    ASSIGNER_BIC,
    BENCH_CLIENT_ID,
    BENCH_CLIENT_SECRET,
    BENCH_ISS,
    CREDITOR_AGENT_BIC,
    CREDITOR_IBAN,
    SandboxProcess,
    closed_loop,
    format_table,
    machine_info,
    parse_args,
    sandbox_process,
    write_result,
)
from cryptography.hazmat.primitives.asymmetric.padding import PKCS1v15
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from cryptography.hazmat.primitives.hashes import SHA256

from payments_async import (
    Credentials,
    KeySigner,
    PaymentsClient,
    Pkcs11Signer,
    Signer,
    ThreadPoolSigner,
)
from payments_async._keys import public_key_pem
from payments_async.iso20022 import build_cancellation
from payments_async.testing import generate_test_keypair

NAME = "signing"
SOFTHSM_LIBRARIES = (
    "/usr/lib/softhsm/libsofthsm2.so",
    "/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so",
    "/usr/lib/aarch64-linux-gnu/softhsm/libsofthsm2.so",
)
SOFTHSM_INSTALL = "apt-get update && apt-get install -y softhsm2"
HSM_PIN = "bench-pin-1234"
HSM_TOKEN = "bench-token"
HSM_KEY = "bench-key"


@contextlib.contextmanager
def softhsm_signer(kid: str) -> Iterator[Pkcs11Signer | str]:
    """A Pkcs11Signer on a fresh SoftHSM2 token, or the reason there is none."""
    try:
        import pkcs11
        from pkcs11 import Attribute, KeyType
    except ImportError:
        yield "python-pkcs11 not installed: pip install 'payments-async[pkcs11]'"
        return
    library = next((p for p in SOFTHSM_LIBRARIES if Path(p).exists()), None)
    if library is None or shutil.which("softhsm2-util") is None:
        yield f"SoftHSM2 not installed: {SOFTHSM_INSTALL}"
        return
    with tempfile.TemporaryDirectory(prefix="bench-softhsm-") as tmp:
        tokens = Path(tmp) / "tokens"
        tokens.mkdir()
        conf = Path(tmp) / "softhsm2.conf"
        conf.write_text(f"directories.tokendir = {tokens}\nobjectstore.backend = file\n")
        os.environ["SOFTHSM2_CONF"] = str(conf)  # read when the module is first loaded
        subprocess.run(
            [
                *("softhsm2-util", "--init-token", "--free", "--label", HSM_TOKEN),
                *("--pin", HSM_PIN, "--so-pin", HSM_PIN),
            ],
            check=True,
            capture_output=True,
        )
        token = pkcs11.lib(library).get_token(token_label=HSM_TOKEN)
        with token.open(rw=True, user_pin=HSM_PIN) as session:
            session.generate_keypair(
                KeyType.RSA,
                2048,
                label=HSM_KEY,
                store=True,
                private_template={Attribute.SENSITIVE: True, Attribute.EXTRACTABLE: False},
            )
        with Pkcs11Signer(
            library, token_label=HSM_TOKEN, key_label=HSM_KEY, pin=HSM_PIN, key_id=kid
        ) as signer:
            yield signer


def cancellation(i: int) -> Any:
    return build_cancellation(
        original_end_to_end_id=f"E2E-{i}-{os.urandom(6).hex()}",
        amount=Decimal("1234.10"),
        creditor_agent_bic=CREDITOR_AGENT_BIC,
        creditor_iban=CREDITOR_IBAN,
        assigner_bic=ASSIGNER_BIC,
        assignee_bic=ASSIGNEE_BIC,
        reason="DUPL",
    )


def gil_check(key: RSAPrivateKey, n: int) -> dict[str, Any]:
    """Is the GIL released while signing? Two threads' rate vs one, and a Python thread's
    speed beside a signing thread (near 1.0: released; near 0.5: held)."""
    data, pad, sha = b"x" * 300, PKCS1v15(), SHA256()

    def run(threads: int) -> float:
        per = n // threads

        def work() -> None:
            for _ in range(per):
                key.sign(data, pad, sha)

        pool = [threading.Thread(target=work) for _ in range(threads)]
        t0 = time.perf_counter()
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        return per * threads / (time.perf_counter() - t0)

    def spinner_rate(signing: bool) -> float:
        # A pure-Python loop in a second thread: while the first signs, it runs at full
        # speed only if signing does not hold the GIL. Alone vs beside signing, so the
        # machine's load affects both alike.
        stop = threading.Event()
        count = [0]

        def spin() -> None:
            c = 0
            while not stop.is_set():
                c += 1
            count[0] = c

        t = threading.Thread(target=spin)
        t.start()
        t0 = time.perf_counter()
        if signing:
            for _ in range(n // 4):
                key.sign(data, pad, sha)
        else:
            time.sleep(n / 4 / 3000)
        elapsed = time.perf_counter() - t0
        stop.set()
        t.join()
        return count[0] / elapsed

    run(1)
    one = max(run(1) for _ in range(3))
    two = max(run(2) for _ in range(3))
    shares = [spinner_rate(True) / spinner_rate(False) for _ in range(3)]
    return {
        "one_thread_per_s": round(one, 1),
        "two_threads_per_s": round(two, 1),
        "two_over_one": round(two / one, 2),
        "python_thread_share_while_signing": round(statistics.median(shares), 2),
    }


async def raw_rate(signer: Signer, n: int, concurrency: int) -> float:
    """Signatures per second through the signer alone (no JWT, no HTTP)."""
    data = b"header.payload" * 20

    async def one() -> None:
        result = signer.sign(data)
        if not isinstance(result, bytes):
            await result

    async def worker(count: int) -> None:
        for _ in range(count):
            await one()

    await worker(5)
    t0 = time.perf_counter()
    await asyncio.gather(*(worker(n // concurrency) for _ in range(concurrency)))
    return round((n // concurrency) * concurrency / (time.perf_counter() - t0), 1)


async def run_rows(
    sb: SandboxProcess,
    signers: dict[str, Signer],
    counts: dict[int, int],
    rounds: int,
    warmup: int,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    clients = {
        name: PaymentsClient(
            Credentials(BENCH_CLIENT_ID, BENCH_CLIENT_SECRET, issuer=BENCH_ISS, signer=signer),
            base_url=sb.url,
        )
        for name, signer in signers.items()
    }
    raw: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    try:
        for name, signer in signers.items():
            raw[name] = {
                f"c{c}": await raw_rate(signer, max(20, counts[c] // 2), c) for c in counts
            }
        ops: dict[str, Callable[[int], Awaitable[object]]] = {
            name: (lambda i, c=client: c.request_cancellation(cancellation(i)))
            for name, client in clients.items()
        }
        for c, n in counts.items():
            per_variant: dict[str, list[dict[str, Any]]] = {name: [] for name in ops}
            for op in ops.values():
                await closed_loop(op, warmup, min(c, warmup))
            for _ in range(rounds):
                for name, op in ops.items():
                    res = await closed_loop(op, n, c, server=sb)
                    per_variant[name].append(res.summary())
            for name, results in per_variant.items():
                median = sorted(results, key=lambda r: r["rps"])[len(results) // 2]
                rows.append(
                    {
                        "signer": name,
                        **median,
                        "rps_rounds": [r["rps"] for r in results],
                        "cores": os.cpu_count(),
                    }
                )
                print(
                    f"  {name:8s} c={c:<3d} {median['rps']:>9} req/s  "
                    f"cpu {median['cpu_us_per_req']} µs/req  errors {median['errors']}",
                    flush=True,
                )
    finally:
        for client in clients.values():
            await client.aclose()
    return rows, raw


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__.splitlines()[0], argv)
    if args.quick:
        counts, rounds, warmup, gil_n = {1: 20, 16: 40}, 1, 5, 100
    else:
        counts, rounds, warmup, gil_n = {1: 400, 16: 1500}, 3, 100, 2000
    info = machine_info()
    key, pem = generate_test_keypair()
    print("GIL check ...", flush=True)
    gil = gil_check(key, gil_n)
    gil["cryptography"] = info["versions"]["cryptography"]
    print(f"  {gil}", flush=True)
    threads = ThreadPoolSigner(key, key_id="bench-threads")
    signers: dict[str, Signer] = {"key": KeySigner(key, key_id="bench-key"), "threads": threads}
    skipped: dict[str, str] = {}
    try:
        with softhsm_signer("bench-hsm") as hsm, sandbox_process() as sb:
            if isinstance(hsm, str):
                skipped["pkcs11"] = hsm
                print(f"  pkcs11 row omitted: {hsm}", flush=True)
            else:
                signers["pkcs11"] = hsm
            for kid, signer in signers.items():
                public = pem if kid != "pkcs11" else public_key_pem(hsm.public_key())  # type: ignore[union-attr]
                sb.post(
                    "/_sandbox/clients",
                    {
                        "client_id": BENCH_CLIENT_ID,
                        "client_secret": BENCH_CLIENT_SECRET,
                        "public_key_pem": public.decode("ascii"),
                        "kid": signer.key_id,
                        "iss": BENCH_ISS,
                    },
                )
            print(f"sandbox {sb.url} (pid {sb.proc.pid})", flush=True)
            rows, raw = asyncio.run(run_rows(sb, signers, counts, rounds, warmup))
    finally:
        threads.close()
    info["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    result = {
        "benchmark": NAME,
        "quick": args.quick,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": info,
        "cores": os.cpu_count(),
        "gil": gil,
        "raw_signatures_per_s": raw,
        "rows": rows,
        "skipped": skipped,
        "threads_workers": min(4, os.cpu_count() or 1),
    }
    print()
    print(
        format_table(
            rows,
            [
                *("signer", "cores", "concurrency", "n", "errors", "rps", "p50_ms", "p99_ms"),
                *("cpu_us_per_req", "client_cpu_util"),
            ],
            title=f"Signed POST (camt.056) by signer, median of {rounds} interleaved round(s), "
            f"{os.cpu_count()} cores",
        )
    )
    print()
    print(
        format_table(
            [{"signer": name, **rates} for name, rates in raw.items()],
            ["signer", *(f"c{c}" for c in counts)],
            title="Raw signatures/s through each signer (no JWT, no HTTP)",
        )
    )
    print(
        f"\ncryptography {gil['cryptography']}: 1 thread {gil['one_thread_per_s']:,.0f}/s, "
        f"2 threads {gil['two_threads_per_s']:,.0f}/s (x{gil['two_over_one']}); a Python "
        f"thread beside a signing one runs at {gil['python_thread_share_while_signing']:.0%} "
        "of its speed alone (near 100%: the GIL is released while signing)"
    )
    for name, reason in skipped.items():
        print(f"{name}: omitted ({reason})")
    path = write_result(args.out, NAME, result)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
