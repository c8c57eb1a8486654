"""Polling at scale: 10,000 concurrent ``wait_for_cancellation_outcome`` waiters, one process.

Issue 7, item 3. The sandbox runs as a separate process with a settlement delay D: each
cancellation stays PDCR for D seconds after it was stored, then answers its final code.
The benchmark stores W cancellations (the sandbox's predefined client: no signing, the
POSTs are not what is measured), then starts W waiters at once with the library's
default ``PollPolicy`` and measures:

* the time from the last settlement to the last waiter returning, and each waiter's lag
  (its return minus its own settlement instant);
* the client process's peak RSS growth over the RSS just before the waiters start
  (sampled every 20 ms from a thread);
* client CPU per poll (process CPU during the waiting phase / GET attempts);
* requests per waiter, counted with ``Hooks.on_request`` and checked against the
  sandbox's own ``/_sandbox/stats``, and against the poll schedule: no waiter may send
  more than one request per poll interval.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import time
from calendar import timegm
from decimal import Decimal
from pathlib import Path
from typing import Any

from _harness import (
    ASSIGNEE_BIC,
    ASSIGNER_BIC,
    CREDITOR_AGENT_BIC,
    CREDITOR_IBAN,
    RssSampler,
    SandboxProcess,
    format_table,
    machine_info,
    parse_args,
    percentile,
    sandbox_process,
    write_result,
)

from payments_async import Credentials, Hooks, Limits, PaymentsClient, RequestEvent, Timeout
from payments_async._constants import CAMT029_PATH
from payments_async._polling import PollPolicy
from payments_async.iso20022 import build_cancellation

NAME = "polling"


def _epoch(creation_date_time: str) -> float:
    """``2024-08-01T08:00:00.123`` (UTC, no zone designator) -> epoch seconds."""
    whole, _, frac = creation_date_time.partition(".")
    return timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) + float("0." + (frac or "0"))


def allowed_polls(wait_s: float, policy: PollPolicy) -> int:
    """The most polls a waiter may send in ``wait_s``: one at the start, then one per
    elapsed interval, taking every interval at its shortest (full negative jitter)."""
    polls, elapsed, base = 1, 0.0, policy.initial
    while True:
        elapsed += base * (1 - policy.jitter)
        if elapsed > wait_s:
            return polls
        polls += 1
        base = min(policy.maximum, base * policy.multiplier)


async def run(
    sb: SandboxProcess,
    waiters: int,
    delay: float,
    wait_timeout: float,
    client_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    client_kwargs = client_kwargs or {}
    counts: dict[str, int] = {}
    retries = 0

    attempt_errors: dict[str, int] = {}

    def on_request(ev: RequestEvent) -> None:
        if ev.method == "GET":
            counts[ev.path] = counts.get(ev.path, 0) + 1
            if ev.error is not None:
                kind = ev.error.message.split(":")[0][:60]
                attempt_errors[kind] = attempt_errors.get(kind, 0) + 1

    def on_retry(ev: RequestEvent) -> None:
        nonlocal retries
        retries += 1

    policy = PollPolicy()
    client = PaymentsClient(
        Credentials.sandbox(),
        base_url=sb.url,
        poll=policy,
        hooks=Hooks(on_request=on_request, on_retry=on_retry),
        **client_kwargs,
    )
    try:
        sem = asyncio.Semaphore(64)

        async def submit(i: int) -> tuple[str, float]:
            msg = build_cancellation(
                original_end_to_end_id=f"E2E{i:08d}",
                amount=Decimal("10.00"),
                creditor_agent_bic=CREDITOR_AGENT_BIC,
                creditor_iban=CREDITOR_IBAN,
                assigner_bic=ASSIGNER_BIC,
                assignee_bic=ASSIGNEE_BIC,
            )
            async with sem:
                sub = await client.request_cancellation(msg)
            assert sub.creation_date_time is not None
            return sub.payments_service_id, _epoch(sub.creation_date_time) + delay

        t0 = time.perf_counter()
        subs = await asyncio.gather(*(submit(i) for i in range(waiters)))
        setup_s = time.perf_counter() - t0
        for psid, _ in subs:  # allocated now, so the hook adds no memory while measured
            counts[f"{CAMT029_PATH}/{psid}"] = 0
        stats0 = sb.stats()
        done: list[float] = [0.0] * waiters
        outcomes: dict[str, int] = {}
        errors: dict[str, int] = {}
        first_error: list[str] = []

        async def wait(i: int, psid: str) -> None:
            try:
                out = await client.wait_for_cancellation_outcome(psid, timeout=wait_timeout)
            except Exception as exc:  # reported, not raised: the run must finish
                name = type(exc).__name__
                errors[name] = errors.get(name, 0) + 1
                if not first_error:
                    first_error.append(f"{name}: {exc}"[:400])
                key = "error"
            else:
                key = out.outcome.name
            done[i] = time.time()
            outcomes[key] = outcomes.get(key, 0) + 1

        async def progress() -> None:
            last, t_last = 0, time.perf_counter()
            while True:
                await asyncio.sleep(5)
                now_gets, now = sum(counts.values()), time.perf_counter()
                finished = sum(outcomes.values())
                print(
                    f"    t={now - w0:5.1f}s  finished {finished}/{waiters}  GETs "
                    f"{now_gets} ({(now_gets - last) / (now - t_last):,.0f}/s)  "
                    f"retries {retries}  errors {sum(errors.values())}",
                    flush=True,
                )
                last, t_last = now_gets, now

        gc.collect()
        with RssSampler() as rss:
            start_wall = time.time()
            c0 = time.process_time()
            s0 = sb.cpu_seconds()
            w0 = time.perf_counter()
            ticker = asyncio.create_task(progress())
            try:
                await asyncio.gather(*(wait(i, psid) for i, (psid, _) in enumerate(subs)))
            finally:
                ticker.cancel()
            waiting_s = time.perf_counter() - w0
            cpu_s = time.process_time() - c0
            server_cpu_s = sb.cpu_seconds() - s0
        stats1 = sb.stats()
    finally:
        await client.aclose()

    settles = [s for _, s in subs]
    lags = sorted(d - s for d, s in zip(done, settles, strict=True))  # errors included
    gets = sum(counts.values())
    per_waiter = [counts[f"{CAMT029_PATH}/{psid}"] for psid, _ in subs]
    over = [
        n - allowed_polls(d - start_wall, policy) for n, d in zip(per_waiter, done, strict=True)
    ]
    sandbox_gets = stats1["requests"].get("camt029", 0) - stats0["requests"].get("camt029", 0)
    return {
        "waiters": waiters,
        "settlement_delay_s": delay,
        "setup_submit_s": round(setup_s, 2),
        "waiting_phase_s": round(waiting_s, 2),
        "all_final_after_last_settlement_s": round(max(done) - max(settles), 3),
        "lag_p50_s": round(percentile(lags, 50), 3),
        "lag_p99_s": round(percentile(lags, 99), 3),
        "lag_max_s": round(lags[-1], 3),
        "settlement_spread_s": round(max(settles) - min(settles), 2),
        "rss_before_mb": round(rss.start_rss / 2**20, 1),
        "rss_peak_mb": round(rss.peak / 2**20, 1),
        "rss_growth_mb": round((rss.peak - rss.start_rss) / 2**20, 1),
        "rss_growth_kb_per_waiter": round((rss.peak - rss.start_rss) / 1024 / waiters, 2),
        "gets": gets,
        "gets_seen_by_sandbox": sandbox_gets,
        "get_attempts_failed": sum(attempt_errors.values()),
        "get_attempt_errors": attempt_errors,
        "retries": retries,
        "requests_per_waiter_mean": round(gets / waiters, 2),
        "requests_per_waiter_max": max(per_waiter),
        "max_requests_over_schedule": max(over),
        "waiters_over_schedule": sum(1 for o in over if o > 0),
        "cpu_us_per_poll": round(cpu_s / max(1, gets) * 1e6, 1),
        "client_cpu_s": round(cpu_s, 2),
        "server_cpu_s": round(server_cpu_s, 2),
        "outcomes": outcomes,
        "errors": errors,
        "first_error": first_error[0] if first_error else None,
        "wait_timeout_s": wait_timeout,
        "client_options": client_kwargs,
        "poll_policy": {
            "initial": policy.initial,
            "maximum": policy.maximum,
            "multiplier": policy.multiplier,
            "jitter": policy.jitter,
        },
    }


def _extra_options(p: Any) -> None:
    p.add_argument("--waiters", type=int, help="override the number of waiters")
    p.add_argument("--connection-limit", type=int, help="diagnostic: PaymentsClient option")
    p.add_argument("--connect-timeout", type=float, help="diagnostic: PaymentsClient option")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__.splitlines()[0], argv, extra=_extra_options)
    waiters, delay = (200, 2.0) if args.quick else (10_000, 20.0)
    if args.waiters:
        waiters = args.waiters
    client_kwargs: dict[str, Any] = {}
    if args.connection_limit:
        client_kwargs["limits"] = Limits(connections=args.connection_limit)
    if args.connect_timeout:
        client_kwargs["timeout"] = Timeout(connect=args.connect_timeout)
    info = machine_info()
    with sandbox_process("--settlement-delay", str(delay)) as sb:
        print(f"sandbox {sb.url} (pid {sb.proc.pid}); {waiters} waiters", flush=True)
        r = asyncio.run(run(sb, waiters, delay, delay + 60, client_kwargs))
    info["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    targets = {
        "every waiter final": not r["errors"],
        "rss_growth_mb <= 50": r["rss_growth_mb"] <= 50,
        "at most one request per waiter per poll interval": r["max_requests_over_schedule"] <= 0,
    }
    result = {
        "benchmark": NAME,
        "quick": args.quick,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": info,
        "result": r,
        "targets_met": targets,
    }
    rows = [{"metric": k, "value": v} for k, v in r.items() if not isinstance(v, dict)]
    rows.append({"metric": "get_attempt_errors", "value": r["get_attempt_errors"] or "-"})
    print(format_table(rows, ["metric", "value"], title="Polling at scale"))
    print("Targets:", targets)
    name = NAME if not client_kwargs and not args.waiters else NAME + "-diagnostic"
    path = write_result(args.out, name, result)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
