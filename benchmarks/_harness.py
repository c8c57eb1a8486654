"""Shared plumbing of the benchmarks: the sandbox process, timing loops, tables, JSON.

Nothing here is library code: it starts ``python -m payments_async.sandbox`` as a separate
process (so its CPU never counts as the client's), runs closed-loop request generators,
and writes results. Every process started here is stopped in a ``finally``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "benchmarks" / "results"
LOOPBACK = "127.0.0.1"
CONCURRENCY_LEVELS = (1, 16, 64)

# The registered benchmark client (signed mode). The sandbox's predefined client is used
# only where the issue asks for a request without signing.
BENCH_CLIENT_ID = "bench-client"
BENCH_CLIENT_SECRET = "bench-secret"
BENCH_KID = "bench-kid"
BENCH_ISS = "bench-issuer"

# Valid identifiers for the messages (BICs and an IBAN the validator accepts).
CREDITOR_AGENT_BIC = "BNPAFRPP"
CREDITOR_IBAN = "FR1420041010050500013M02606"
ASSIGNER_BIC = "COBADEFFXXX"
ASSIGNEE_BIC = "BNPAFRPP"


def parse_args(
    description: str,
    argv: Sequence[str] | None = None,
    extra: Callable[[argparse.ArgumentParser], None] | None = None,
) -> argparse.Namespace:
    """The options every benchmark script accepts: ``--quick``, ``--smoke`` and ``--out DIR``.

    ``--smoke`` implies ``--quick``: a script reads ``args.smoke`` only where it has counts
    smaller still than its quick ones.
    """
    p = argparse.ArgumentParser(description=description)
    if extra is not None:
        extra(p)
    p.add_argument("--quick", action="store_true", help="tiny counts (seconds)")
    p.add_argument(
        "--smoke",
        action="store_true",
        help="the fewest counts that still run every part and write every row: the test "
        "suite's smoke test, whose figures mean nothing (implies --quick)",
    )
    p.add_argument("--out", type=Path, default=RESULTS_DIR, help="directory for the JSON")
    p.add_argument("--profile", action="store_true", help="also run cProfile (bench_post)")
    args = p.parse_args(argv)
    args.quick = args.quick or args.smoke
    return args


# --- the sandbox as a separate process ----------------------------------------------------


@dataclass
class SandboxProcess:
    """``python -m payments_async.sandbox`` on a free loopback port, in its own process."""

    url: str
    proc: subprocess.Popen[str]
    ps: psutil.Process = field(repr=False)
    gc_url: str | None = None

    def cpu_seconds(self) -> float:
        """User + system CPU the sandbox process has used so far."""
        t = self.ps.cpu_times()
        return t.user + t.system

    def get(self, path: str) -> Any:
        """GET a control route (``/_sandbox/...``) and decode its JSON."""
        with urllib.request.urlopen(self.url + path, timeout=30) as resp:
            return json.loads(resp.read())

    def post(self, path: str, data: dict[str, Any]) -> Any:
        """POST JSON to a control route and decode the answer."""
        req = urllib.request.Request(
            self.url + path,
            data=json.dumps(data).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    def stats(self) -> dict[str, Any]:
        """``GET /_sandbox/stats``."""
        return self.get("/_sandbox/stats")  # type: ignore[no-any-return]

    def gc(self) -> dict[str, Any] | None:
        """The sandbox process's collector pauses so far (``gc_stats=True``), else None."""
        if self.gc_url is None:
            return None
        with urllib.request.urlopen(self.gc_url, timeout=30) as resp:
            return json.loads(resp.read())  # type: ignore[no-any-return]

    def register(self, public_key_pem: bytes) -> None:
        """Register the benchmark client with this public key (``POST /_sandbox/clients``)."""
        self.post(
            "/_sandbox/clients",
            {
                "client_id": BENCH_CLIENT_ID,
                "client_secret": BENCH_CLIENT_SECRET,
                "public_key_pem": public_key_pem.decode("ascii"),
                "kid": BENCH_KID,
                "iss": BENCH_ISS,
            },
        )


@contextlib.contextmanager
def sandbox_process(
    *extra_args: str, startup_timeout: float = 30.0, gc_stats: bool = False
) -> Iterator[SandboxProcess]:
    """Run the sandbox as a child process on a free port; always stop it on exit.

    With ``gc_stats`` it runs under ``_sandbox_gc.py``: ``SandboxProcess.gc()`` then
    answers its collector's pauses.
    """
    log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed in the finally
    program = [str(Path(__file__).with_name("_sandbox_gc.py"))] if gc_stats else ["-m"]
    cmd = [
        sys.executable,
        *program,
        *([] if gc_stats else ["payments_async.sandbox"]),
        "--host",
        LOOPBACK,
        "--port",
        "0",
        "--log-level",
        "WARNING",  # the access log at INFO would cost the server a log line per request
        *extra_args,
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, cwd=ROOT)
    try:
        found = _wait_for_banner(proc, startup_timeout)
        if found is None:
            log.seek(0)
            raise RuntimeError(f"the sandbox did not start: {log.read()[-2000:]}")
        url, gc_url = found
        yield SandboxProcess(url=url, proc=proc, ps=psutil.Process(proc.pid), gc_url=gc_url)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
        log.close()


@dataclass
class RawServerProcess:
    """``benchmarks/_rawserver.py`` in its own process, pinned to one core when possible."""

    url: str
    proc: subprocess.Popen[str]
    ps: psutil.Process = field(repr=False)
    cpu: int | None = None

    def cpu_seconds(self) -> float:
        """User + system CPU the server process has used so far."""
        t = self.ps.cpu_times()
        return t.user + t.system

    def stats(self) -> dict[str, Any]:
        """``GET /_stats``: requests, refused, posts, gets."""
        req = urllib.request.Request(
            self.url + "/_stats",
            headers={"Authorization": "Bearer raw-server-access-token", "X-Service-Client-Id": "x"},
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())  # type: ignore[no-any-return]


SERVER_CPU = 0  # the server's core; the benchmark process pins itself to CLIENT_CPU
CLIENT_CPU = 1
_CPUS = frozenset(os.sched_getaffinity(0))  # before any pinning: children may use them all
TWO_CORES = {SERVER_CPU, CLIENT_CPU} <= _CPUS


def pin_client() -> int | None:
    """Pin this process (every thread) to ``CLIENT_CPU`` when the machine has two cores."""
    if TWO_CORES:
        os.sched_setaffinity(0, {CLIENT_CPU})
        return CLIENT_CPU
    return None


@contextlib.contextmanager
def raw_server_process(
    loop: str = "asyncio", startup_timeout: float = 30.0
) -> Iterator[RawServerProcess]:
    """Run the minimal service-like server on a free loopback port, pinned to ``SERVER_CPU``."""
    log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed in the finally
    cmd = [sys.executable, str(ROOT / "benchmarks" / "_rawserver.py"), "--port", "0"]
    cmd += ["--loop", loop]
    if TWO_CORES:
        cmd += ["--cpu", str(SERVER_CPU)]

    def unpin() -> None:  # the child starts with this process's (pinned) affinity
        os.sched_setaffinity(0, _CPUS)

    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=log, text=True, cwd=ROOT, preexec_fn=unpin
    )
    try:
        found = _wait_for_banner(proc, startup_timeout)
        if found is None:
            log.seek(0)
            raise RuntimeError(f"the raw server did not start: {log.read()[-2000:]}")
        url = found[0]
        yield RawServerProcess(
            url=url, proc=proc, ps=psutil.Process(proc.pid), cpu=SERVER_CPU if TWO_CORES else None
        )
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
        log.close()


def _wait_for_banner(proc: subprocess.Popen[str], timeout: float) -> tuple[str, str | None] | None:
    """The sandbox's URL and its gc stats URL (``_sandbox_gc.py`` only), or None."""
    found: list[str] = []
    gc_url: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            m = re.search(r"gc stats on (http://\S+)", line)
            if m:
                gc_url.append(m.group(1))
            m = re.search(r"listening on (http://\S+)", line)
            if m:
                found.append(m.group(1))
                return

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(timeout)
    return (found[0], gc_url[0] if gc_url else None) if found else None


# --- measuring ------------------------------------------------------------------------------


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of already sorted values, nearest-rank."""
    if not sorted_values:
        return float("nan")
    k = max(0, min(len(sorted_values) - 1, round(q / 100 * (len(sorted_values) - 1))))
    return sorted_values[k]


@dataclass
class LoopResult:
    """One closed-loop run: ``n`` operations by ``concurrency`` workers."""

    n: int
    concurrency: int
    wall_s: float
    cpu_s: float
    latencies: list[float]
    errors: int
    server_cpu_s: float | None = None
    first_error: str | None = None

    def summary(self) -> dict[str, Any]:
        """The JSON-ready numbers."""
        lat = sorted(self.latencies)
        ok = max(1, self.n - self.errors)
        out: dict[str, Any] = {
            "n": self.n,
            "concurrency": self.concurrency,
            "errors": self.errors,
            "wall_s": round(self.wall_s, 4),
            "rps": round(self.n / self.wall_s, 1) if self.wall_s else None,
            "p50_ms": round(percentile(lat, 50) * 1000, 3),
            "p99_ms": round(percentile(lat, 99) * 1000, 3),
            "cpu_us_per_req": round(self.cpu_s / ok * 1e6, 1),
            "client_cpu_util": round(self.cpu_s / self.wall_s, 3) if self.wall_s else None,
        }
        if self.server_cpu_s is not None:
            out["server_cpu_us_per_req"] = round(self.server_cpu_s / ok * 1e6, 1)
            out["server_cpu_util"] = round(self.server_cpu_s / self.wall_s, 3)
        if self.first_error:
            out["first_error"] = self.first_error
        return out


async def closed_loop(
    op: Callable[[int], Awaitable[object]],
    n: int,
    concurrency: int,
    *,
    server: SandboxProcess | None = None,
    collect: bool = True,
) -> LoopResult:
    """Run ``op(i)`` for i in range(n) with ``concurrency`` workers; time it all.

    Wall time and the client process's CPU time (``time.process_time``: every thread of
    this process, nothing else) cover exactly the n operations.
    """
    counter = iter(range(n))
    latencies: list[float] = []
    errors = 0
    first_error: str | None = None

    async def worker() -> None:
        nonlocal errors, first_error
        for i in counter:
            t0 = time.perf_counter()
            try:
                await op(i)
            except Exception as exc:
                errors += 1
                if first_error is None:
                    first_error = f"{type(exc).__name__}: {exc}"[:300]
            latencies.append(time.perf_counter() - t0)

    if collect:
        gc.collect()  # before the clocks start: no earlier garbage is charged to this run
    s0 = server.cpu_seconds() if server else None
    c0 = time.process_time()
    w0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.perf_counter() - w0
    cpu = time.process_time() - c0
    s1 = server.cpu_seconds() if server else None
    return LoopResult(
        n=n,
        concurrency=concurrency,
        wall_s=wall,
        cpu_s=cpu,
        latencies=latencies,
        errors=errors,
        server_cpu_s=(s1 - s0) if s0 is not None and s1 is not None else None,
        first_error=first_error,
    )


def median(values: Sequence[float]) -> float | None:
    """The median of the values (None when there are none)."""
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


Variant = tuple[str, Callable[[int], Awaitable[object]], int]
"""(name, op(i), requests per round)."""


def balanced_orders(n: int) -> list[list[int]]:
    """Orders of ``n`` variants in which each one runs right after each other one equally often.

    A Williams design: a plain rotation keeps every variant behind the same neighbour in
    almost every round, so whatever one variant leaves behind (connections to close,
    garbage, a busy server) always lands on the same next one. Here every ordered pair is
    adjacent once in ``n`` rounds (``2n`` for an odd ``n``), and every variant runs once
    in each position.
    """
    first = [0]
    low, high = 1, n - 1
    while len(first) < n:
        first.append(low)
        low += 1
        if len(first) < n:
            first.append(high)
            high -= 1
    orders = [[(v + shift) % n for v in first] for shift in range(n)]
    if n % 2:
        orders += [order[::-1] for order in orders]
    return orders


async def interleaved_rounds(
    variants: Sequence[Variant],
    concurrency: int,
    rounds: int,
    warmup: int,
    server: Any = None,
    before_round: Callable[[int], Awaitable[None]] | None = None,
    log: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """Run every variant once per round, in a balanced order; one row per run.

    The orders (:func:`balanced_orders`) put each variant first, last and right after
    each other variant equally often, which spreads whatever else the machine does, and
    whatever a variant leaves behind, over all variants alike; ratios are then taken
    within a round and their median across rounds reported.
    """
    orders = balanced_orders(len(variants))
    rows: list[dict[str, Any]] = []
    for _name, op, _n in variants:
        await closed_loop(op, warmup, min(concurrency, warmup))  # connections, token, caches
    for r in range(rounds):
        if before_round is not None:
            await before_round(r)
        for name, op, n in [variants[i] for i in orders[r % len(orders)]]:
            res = await closed_loop(op, n, concurrency, server=server)
            row = {"variant": name, "round": r, **res.summary()}
            rows.append(row)
            log(
                f"  c={concurrency:<3d} round {r} {name:13s} {row['rps']:>9} req/s  "
                f"cpu {row['cpu_us_per_req']} µs/req  errors {row['errors']}"
            )
    return rows


def median_ratio(
    rows: Sequence[dict[str, Any]], num: str, den: str, key: str, concurrency: int
) -> float | None:
    """Median over rounds of ``num[key] / den[key]`` taken within each round."""
    by = {(r["variant"], r["round"]): r for r in rows if r["concurrency"] == concurrency}
    vals = []
    for (variant, rnd), row in by.items():
        if variant == num and (den, rnd) in by:
            vals.append(ratio(row[key], by[(den, rnd)][key], 6))
    m = median([v for v in vals if v is not None])
    return None if m is None else round(m, 3)


def median_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (variant, concurrency): the median of each number over the rounds."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["variant"], r["concurrency"]), []).append(r)
    out = []
    for (variant, c), rs in groups.items():
        row: dict[str, Any] = {"variant": variant, "concurrency": c, "rounds": len(rs)}
        for key in ("n", "rps", "p50_ms", "p99_ms", "cpu_us_per_req", "server_cpu_us_per_req"):
            vals = [x[key] for x in rs if x.get(key) is not None]
            if vals:
                m = median(vals)
                row[key] = round(m, 3) if m is not None else None
        row["errors"] = sum(x["errors"] for x in rs)
        out.append(row)
    return out


class RssSampler:
    """Samples this process's RSS from a thread; ``peak`` is the largest value seen."""

    def __init__(self, interval: float = 0.02) -> None:
        self._ps = psutil.Process()
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.start_rss = self._ps.memory_info().rss
        self.peak = self.start_rss

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._ps.memory_info().rss)
            self._stop.wait(self._interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._ps.memory_info().rss)


# --- the machine and the output -------------------------------------------------------------


def machine_info() -> dict[str, Any]:
    """nproc, CPU model, load averages, Python and library versions."""
    model = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    versions = {}
    for dist in (
        "payments-async",
        "aiohttp",
        "msgspec",
        "cryptography",
        "joserfc",
        "httpx",
        "pydantic",
        "PyJWT",
    ):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    return {
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "versions": versions,
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def format_table(rows: Sequence[dict[str, Any]], columns: Sequence[str], title: str = "") -> str:
    """A plain-text table of ``columns`` from ``rows`` (missing values print as ``-``)."""

    def cell(v: Any) -> str:
        if v is None:
            return "-"
        if isinstance(v, bool):
            return "yes" if v else "no"
        if isinstance(v, float):
            return f"{v:,.3f}" if abs(v) < 10 else f"{v:,.1f}"
        if isinstance(v, int):
            return f"{v:,}"
        return str(v)

    body = [[cell(r.get(c)) for c in columns] for r in rows]
    widths = [
        max(len(c), *(len(b[i]) for b in body)) if body else len(c) for i, c in enumerate(columns)
    ]
    lines = []
    if title:
        lines.append(title)
    lines.append("  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True)))
    lines.append("  ".join("-" * w for w in widths))
    lines.extend("  ".join(v.rjust(w) for v, w in zip(b, widths, strict=True)) for b in body)
    return "\n".join(lines)


def write_result(out_dir: Path, name: str, data: dict[str, Any]) -> Path:
    """Write ``<out_dir>/<name>.json`` (indented) and return its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    path.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    return path


def ratio(a: float | None, b: float | None, digits: int = 3) -> float | None:
    """a / b, or None when either is missing or b is zero."""
    if a is None or b is None or b == 0:
        return None
    return round(a / b, digits)
