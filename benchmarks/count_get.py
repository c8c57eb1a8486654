"""Instructions per read, counted: ours vs bare aiohttp + msgspec, and what ours adds.

Issue 39's GET line (client CPU ours / bare <= 1.10) is measured in CPU time; where the
rounds straddle the line, the count decides. This script counts instead of timing: it runs
itself under valgrind's callgrind, against ``_rawserver.py`` (its own process, not
counted), and each ``os.getppid()`` it calls closes one counted part
(``--dump-before=getppid``), so one process yields:

* **reads** (camt.029 and pacs.002, one caller): ``ours``
  (``PaymentsClient.get_cancellation_outcome`` / ``get_credit_transfer_status``) and
  ``bare`` (``aiohttp`` GET, ``await resp.read()``, a status check, a typed msgspec
  decoder built once), instructions per read and their ratio;
* **parts**: the steps of our read that the bare one does not take, each alone in a loop,
  instructions per step (the loop's own cost subtracted). A part alone can cost more or
  less than inside a read (caches, a timer heap of another size): they say where the
  difference lies, not exactly how much each part costs inside a read.

Counts are user-space instructions (system calls' kernel work is not counted) with
``PYTHONHASHSEED=0``; they move by well under 1 % between runs. The run takes minutes
(callgrind runs Python ~50x slower). ``--quick`` counts a few reads (the smoke of the
script, not a figure).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

NAME = "count_get"
CHILD_FLAG = "--child"
GET_TARGET = 1.10
_SUMMARY = re.compile(r"^summary:\s*(\d+)", re.MULTILINE)


def _mark() -> None:
    """Close the counted part (callgrind dumps its counters before each ``getppid``)."""
    os.getppid()


async def _child(url: str, n: int, camt: bytes) -> list[str]:
    """Run every part between two marks, in order; return the parts' names."""
    import aiohttp
    import msgspec
    from _harness import BENCH_CLIENT_ID, BENCH_CLIENT_SECRET, BENCH_ISS, BENCH_KID
    from bench_get import bare_headers
    from multidict import CIMultiDict

    from payments_async import Credentials, PaymentsClient
    from payments_async._checks import check_payments_service_id
    from payments_async._config import Timeout
    from payments_async._constants import CAMT029_PATH, CLIENT_ID_HEADER, PACS002_PATH
    from payments_async._retry import RetryPolicy
    from payments_async.iso20022 import Camt029, Pacs002, camt029
    from payments_async.testing import generate_test_keypair

    names: list[str] = []
    ids = [f"PS-{i:06d}" for i in range(200)]

    async def part(
        name: str, op: Callable[[int], Awaitable[Any]], count: int, *, turn: bool = False
    ) -> None:
        # turn: let the loop run once after each step, as it does between reads (a timer
        # step's cancelled handles then leave the loop's heap as they do in a read).
        for i in range(50):  # warm: connections, caches, the access token
            await op(i)
        names.append(name)
        _mark()
        for i in range(count):
            await op(i)
            if turn:
                await asyncio.sleep(0)
        _mark()

    key, _ = generate_test_keypair()
    creds = Credentials(
        BENCH_CLIENT_ID, BENCH_CLIENT_SECRET, key_id=BENCH_KID, issuer=BENCH_ISS, private_key=key
    )
    ours = PaymentsClient(creds, base_url=url)
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=100))
    try:
        headers = await bare_headers(session, url)
        for route, path, message, ours_get in (
            ("camt029", CAMT029_PATH, Camt029, ours.get_cancellation_outcome),
            ("pacs002", PACS002_PATH, Pacs002, ours.get_credit_transfer_status),
        ):
            decode = msgspec.json.Decoder(message).decode
            base = url + path + "/"

            async def op_ours(i: int, get: Any = ours_get) -> None:
                await get(ids[i % 200])

            async def op_bare(i: int, base: str = base, decode: Any = decode) -> None:
                async with session.get(base + ids[i % 200], headers=headers) as r:
                    body = await r.read()
                    if r.status != 200:
                        raise RuntimeError(f"bare GET answered {r.status}")
                decode(body)

            await part(f"read/{route}/ours", op_ours, n)
            await part(f"read/{route}/bare", op_bare, n)
    finally:
        await ours.aclose()
        await session.close()

    # The parts, each alone: what our read does that the bare one does not.
    loop = asyncio.get_running_loop()
    base_headers = CIMultiDict({CLIENT_ID_HEADER: "c", "Accept": "x", "User-Agent": "y"})
    semaphore = asyncio.Semaphore(100)
    policy = RetryPolicy()
    rng = random.Random(0)
    nothing = contextlib.nullcontext()
    timeouts = Timeout()

    async def leaf(i: int = 0) -> int:
        return i

    async def layer(i: int) -> int:
        return await leaf(i)

    async def request_id(i: int) -> None:
        uuid.uuid4().hex  # noqa: B018 - what the step costs

    async def check_id(i: int) -> None:
        check_payments_service_id(ids[i % 200])

    async def call_timeout(i: int) -> None:
        time.monotonic() + timeouts.total
        with nothing:
            pass

    async def request_headers(i: int) -> None:
        h = base_headers.copy()
        h["X-Request-ID"] = "r"
        h["Authorization"] = "Bearer t"

    async def slot(i: int) -> None:
        if not semaphore.locked():  # as the transport takes a free slot
            await semaphore.acquire()
            semaphore.release()

    async def timer(i: int) -> None:
        async with asyncio.timeout_at(loop.time() + 30):  # noqa: ASYNC100 - its cost alone
            pass

    async def retry_loop(i: int) -> None:
        await policy.run(
            functools.partial(leaf, i),
            rng=rng,
            on_retry=functools.partial(print),
            deadline=time.monotonic() + 30,
        )

    async def decode_wrapped(i: int) -> None:
        camt029.decode_camt029(camt)

    plain = msgspec.json.Decoder(Camt029).decode

    async def decode_plain(i: int) -> None:
        plain(camt)

    for name, op in (
        ("loop (subtracted)", leaf),
        ("one more coroutine layer", layer),
        ("request id: uuid4().hex", request_id),
        ("payments service id check", check_id),
        ("deadline + operation scope (no instrument)", call_timeout),
        ("request headers: copy + 2", request_headers),
        ("connection slot: asyncio.Semaphore", slot),
        ("exchange timer: asyncio.timeout_at", timer),
        ("retry loop: RetryPolicy.run", retry_loop),
        ("decode_camt029 (typed errors)", decode_wrapped),
        ("msgspec decode alone", decode_plain),
    ):
        await part(f"part/{name}", op, n, turn=True)
    return names


def _parts(out_file: Path, names: list[str], n: int) -> dict[str, float]:
    """Instructions per call of each named part, from callgrind's numbered dump files."""
    totals = []
    index = 1
    while (path := Path(f"{out_file}.{index}")).exists():
        found = _SUMMARY.search(path.read_text(errors="replace"))
        totals.append(int(found.group(1)) if found else 0)
        index += 1
    # Dump k closes the part that ends at the k-th mark: the counted loops are the even
    # ones (1-based: 2, 4, ...), the odd ones are the warm-ups between them.
    counted = totals[1::2]
    return {name: counted[i] / n for i, name in enumerate(names) if i < len(counted)}


def main(argv: list[str] | None = None) -> int:
    args_list = sys.argv[1:] if argv is None else argv
    if args_list and args_list[0] == CHILD_FLAG:
        url, n, names_file = args_list[1], int(args_list[2]), Path(args_list[3])
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        fixtures = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
        names = asyncio.run(_child(url, n, (fixtures / "camt029_resolution.json").read_bytes()))
        names_file.write_text(json.dumps(names))
        return 0

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _harness import format_table, machine_info, parse_args, raw_server_process, write_result

    def options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--reads", type=int, help="counted reads (and steps) per part")

    args = parse_args(__doc__.splitlines()[0], argv, extra=options)
    n = args.reads or (20 if args.quick else 1000)
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        print("valgrind is not installed: nothing counted", file=sys.stderr)
        return 2
    info = machine_info()
    with tempfile.TemporaryDirectory() as tmp, raw_server_process(loop="uvloop") as server:
        out_file = Path(tmp) / "cg.out"
        names_file = Path(tmp) / "names.json"
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        cmd = [
            valgrind,
            "--tool=callgrind",
            "--dump-before=getppid",
            f"--callgrind-out-file={out_file}",
            sys.executable,
            str(Path(__file__).resolve()),
            CHILD_FLAG,
            server.url,
            str(n),
            str(names_file),
        ]
        print(f"counting {n} reads per part under callgrind (minutes) ...", flush=True)
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        names = json.loads(names_file.read_text())
        per_call = _parts(out_file, names, n)

    reads = {k.split("/", 1)[1]: v for k, v in per_call.items() if k.startswith("read/")}
    loop_cost = per_call.get("part/loop (subtracted)", 0.0)
    parts = {
        k.split("/", 1)[1]: round(v - loop_cost)
        for k, v in per_call.items()
        if k.startswith("part/") and k != "part/loop (subtracted)"
    }
    ratios = {
        route: round(reads[f"{route}/ours"] / reads[f"{route}/bare"], 3)
        for route in ("camt029", "pacs002")
        if f"{route}/ours" in reads and f"{route}/bare" in reads
    }
    rows = [
        {
            "route": route,
            "ours_instr": round(reads.get(f"{route}/ours", 0)),
            "bare_instr": round(reads.get(f"{route}/bare", 0)),
            "ours_minus_bare": round(reads.get(f"{route}/ours", 0) - reads.get(f"{route}/bare", 0)),
            "ours_over_bare": ratios.get(route),
        }
        for route in ("camt029", "pacs002")
    ]
    print()
    print(format_table(rows, list(rows[0]), "instructions per read, one caller"))
    print()
    print(
        format_table(
            [{"part": k, "instr_per_call": v} for k, v in parts.items()],
            ["part", "instr_per_call"],
            "the parts, each alone (loop subtracted)",
        )
    )
    worst = max(ratios.values(), default=None)
    result = {
        "benchmark": NAME,
        "quick": args.quick,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": info,
        "method": {
            "counter": "valgrind --tool=callgrind, user-space instructions, PYTHONHASHSEED=0",
            "server": "benchmarks/_rawserver.py (uvloop), its own process, not counted",
            "reads_per_part": n,
        },
        "reads": rows,
        "parts_instr_per_call": parts,
        "targets_met": {
            f"ours / bare instructions <= {GET_TARGET}": worst is not None and worst <= GET_TARGET
        },
    }
    path = write_result(args.out, NAME, result)
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
