"""Notifications vs polling: 10,000 cancellation waiters, settlement -> outcome and GETs per waiter.

Issue 12. The sandbox runs as a separate process pinned to core 0 (this process to core
1, ``os.sched_setaffinity``; ``--no-pin`` leaves both free) with settlement delay D: each
cancellation stays PDCR for D seconds after it is stored. The benchmark submits W
cancellations at a steady R per second (500; the predefined sandbox client: no signing)
and starts each one's ``wait_for_cancellation_outcome`` right after its submission; D
defaults to W / R + 10 s, so all W waiters are in flight together and the settlements
then arrive as a steady stream of R per second, after the submissions have ended. Both
modes in the same run, with the same sandbox process (``--rounds N``: interleaved,
polling/notifications then notifications/polling, ...):

* ``polling``: the client's default ``PollPolicy`` only;
* ``notifications``: a ``NotificationReceiver`` (HTTP Basic, short notices) attached to
  the same kind of client, served on loopback in this process; the sandbox POSTs each
  final status to it, the receiver confirms it with a signed GET and wakes the waiter.
  The safety-net poll keeps its defaults (``NOTIFIED_POLL_INITIAL``, 60 s, longer than
  D: a notification normally comes first). Its inbox is the in-memory one (not durable);
* ``notifications-sqlite``: the same with the durable inbox, a SQLite file (each
  notification committed before its 202, group-committed).

Measured per row: each waiter's lag (its return minus its settlement instant, from the
sandbox's ``creationDateTime`` + D; same machine clock), p50/p99/max, and GETs per waiter
(every GET the client sent, the receiver's confirmations included, counted with
``Hooks.on_request`` and checked against the sandbox's ``/_sandbox/stats``); the load
average before and after each row; CPU per settlement of each process over the settlement
phase; the garbage collector's pauses. For notifications also the lag per stage
(``delivery``: settlement -> queued by the receiver; ``queue``: -> its confirming GET
starts; ``confirm_get``; ``wake``: -> the waiter returned) and the sandbox's own timings
(final -> fired, final -> first 2xx), and ``callback_p99_ms``: settlement ->
``on_cancellation_outcome`` called. ``--profile`` adds cProfile of the settlement phase.

Then two ``ingest`` rows (in-memory and SQLite inbox): the ids the rows above settled
(``--ingest`` of them, 5,000) are POSTed to a fresh receiver all at once, 64 at a time from
this process, and the rates at which they are answered 202 and processed (confirmed,
handed to the callback, marked done) are the notifications per second it sustains.
"""

from __future__ import annotations

import asyncio
import base64
import gc
import os
import secrets
import sys
import tempfile
import time
from calendar import timegm
from decimal import Decimal
from pathlib import Path
from typing import Any

import aiohttp
from _harness import (
    ASSIGNEE_BIC,
    ASSIGNER_BIC,
    CREDITOR_AGENT_BIC,
    CREDITOR_IBAN,
    SandboxProcess,
    format_table,
    machine_info,
    parse_args,
    percentile,
    sandbox_process,
    write_result,
)

from payments_async import (
    CancellationOutcome,
    Credentials,
    Hooks,
    PaymentsClient,
    RequestEvent,
    ServiceProfile,
)
from payments_async._constants import NOTIFIED_POLL_INITIAL, POLL_JITTER, SANDBOX_CLIENT_ID
from payments_async.iso20022 import build_cancellation
from payments_async.notifications import (
    BasicAuth,
    NotificationReceiver,
    ReceiverLimits,
    ReceiverServer,
    Sweep,
)

NAME = "notifications"
MODES = ("polling", "notifications", "notifications-sqlite")
DEFAULT_RATE = 500.0
HOOK_USER = "bench-notifier"


def _epoch(creation_date_time: str) -> float:
    """``2024-08-01T08:00:00.123`` (UTC, no zone designator) -> epoch seconds."""
    whole, _, frac = creation_date_time.partition(".")
    return timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) + float("0." + (frac or "0"))


async def run_row(
    sb: SandboxProcess,
    mode: str,
    waiters: int,
    delay: float,
    rate: float,
    first_index: int,
    receiver_options: dict[str, Any],
    profiler: Any = None,
    gc_freeze: bool = False,
    collect: list[str] | None = None,
) -> dict[str, Any]:
    gets = 0
    get_errors = 0
    trace: dict[str, dict[str, float]] | None = None
    stamps: dict[str, tuple[float, float]] = {}  # psid -> (settlement instant, waiter return)
    called: dict[str, float] = {}  # psid -> when on_cancellation_outcome was called

    async def on_outcome(outcome: CancellationOutcome) -> None:
        called.setdefault(outcome.payments_service_id, time.time())

    def on_request(ev: RequestEvent) -> None:
        nonlocal gets, get_errors
        if ev.method == "GET":
            gets += 1
            if ev.error is not None:
                get_errors += 1

    client = PaymentsClient(
        Credentials.sandbox(), base_url=sb.url, hooks=Hooks(on_request=on_request)
    )
    receiver: NotificationReceiver | None = None
    server: ReceiverServer | None = None
    password = secrets.token_urlsafe(16)
    folder = tempfile.TemporaryDirectory(prefix="bench-inbox-")
    try:
        await client.access_token_lifetime()  # the token is not what is measured
        if mode.startswith("notifications"):
            options = dict(receiver_options)
            if mode == "notifications-sqlite":
                options["inbox"] = Path(folder.name) / "inbox.db"
            receiver = NotificationReceiver(
                client,
                auth=BasicAuth(HOOK_USER, password),
                on_cancellation_outcome=on_outcome,
                **options,
            )
            await receiver.start()
            trace = _trace_stages(receiver)
            server = ReceiverServer(receiver)
            await server.start()
            sb.post(
                "/_sandbox/notifications",
                {
                    "client_id": SANDBOX_CLIENT_ID,
                    "url": server.url,
                    "payload": "short",
                    "username": HOOK_USER,
                    "password": password,
                },
            )
        stats0 = sb.stats()
        gc0 = sb.gc()
        sem = asyncio.Semaphore(64)
        lags: list[float] = []
        errors: dict[str, int] = {}
        outcomes: dict[str, int] = {}

        start = time.perf_counter() + 0.1
        submitted = 0
        phase: dict[str, float] = {}

        async def one(i: int) -> None:
            # paced: submission k leaves at start + k / rate, so settlements come at `rate`
            await asyncio.sleep(max(0.0, start + (i - first_index) / rate - time.perf_counter()))
            msg = build_cancellation(
                original_end_to_end_id=f"E2E{i:08d}",
                amount=Decimal("10.00"),
                creditor_agent_bic=CREDITOR_AGENT_BIC,
                creditor_iban=CREDITOR_IBAN,
                assigner_bic=ASSIGNER_BIC,
                assignee_bic=ASSIGNEE_BIC,
            )
            nonlocal submitted
            async with sem:
                sub = await client.request_cancellation(msg)
            del msg  # sent: a waiter does not keep its request (nor would an application)
            submitted += 1
            if submitted == waiters:
                # every waiter is in flight and nothing has settled yet (D > W / rate):
                # from here on the client's and the sandbox's CPU is the settlement path's
                phase["cpu"] = time.process_time()
                phase["t"] = time.perf_counter()
                phase["sandbox_cpu"] = sb.cpu_seconds()
                if profiler is not None:
                    profiler.enable()  # the settlement phase only
                if os.environ.get("BENCH_GC_CENSUS"):
                    _census("all submitted")
                if gc_freeze:
                    # diagnostic: what an application can do once its long-lived state is
                    # built; the collector stops traversing the waiters
                    gc.freeze()
            assert sub.creation_date_time is not None
            settles = _epoch(sub.creation_date_time) + delay
            try:
                out = await client.wait_for_cancellation_outcome(
                    sub.payments_service_id, timeout=delay + 120
                )
            except Exception as exc:  # reported, not raised: the run must finish
                errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
                return
            done = time.time()
            lags.append(done - settles)
            stamps[sub.payments_service_id] = (settles, done)
            if collect is not None:
                collect.append(sub.payments_service_id)
            outcomes[out.outcome.name] = outcomes.get(out.outcome.name, 0) + 1

        gc.collect()
        pauses = _GcPauses()
        gc.callbacks.append(pauses)
        t0 = time.perf_counter()
        c0 = time.process_time()
        s0 = sb.cpu_seconds()
        await asyncio.gather(*(one(first_index + i) for i in range(waiters)))
        wall = time.perf_counter() - t0
        gc.callbacks.remove(pauses)
        if gc_freeze:
            gc.unfreeze()
        if os.environ.get("BENCH_GC_CENSUS"):
            _census("all returned")
        if profiler is not None:
            profiler.disable()
        cpu = time.process_time() - c0
        sandbox_cpu_end = sb.cpu_seconds()
        server_cpu = sandbox_cpu_end - s0
        settle_cpu = time.process_time() - phase.get("cpu", c0)
        settle_sandbox_cpu = sandbox_cpu_end - phase.get("sandbox_cpu", s0)
        if receiver is not None:
            await receiver.join()
        stats1 = sb.stats()
        gc1 = sb.gc()
    finally:
        if server is not None:
            await server.stop()
        if receiver is not None:
            await receiver.aclose()
            sb.post("/_sandbox/notifications/remove", {"client_id": SANDBOX_CLIENT_ID})
        await client.aclose()
        folder.cleanup()

    # when the slow ones settled, and when the collector paused, both as seconds after
    # the first settlement: one stall shows as one cluster
    first_settle = min((st for st, _ in stamps.values()), default=0.0)
    perf_to_epoch = time.time() - time.perf_counter()
    slow = sorted(stamps.values(), key=lambda sd: sd[1] - sd[0])[-max(1, len(stamps) // 100) :]
    slowest_1pct_settled = sorted(round(st - first_settle, 2) for st, _ in slow)
    long_pauses = [
        (round(t + perf_to_epoch - first_settle, 2), gen, round(d * 1000, 1))
        for t, gen, d in pauses.pauses
        if d > 0.02 and t + perf_to_epoch >= first_settle - 1
    ]
    lags.sort()
    sandbox_gets = stats1["requests"].get("camt029", 0) - stats0["requests"].get("camt029", 0)
    sent0, sent1 = stats0["notifications"], stats1["notifications"]
    row: dict[str, Any] = {
        "mode": mode,
        "waiters": waiters,
        "settlement_delay_s": delay,
        "settlements_per_s": rate,
        "lag_p50_ms": round(percentile(lags, 50) * 1000, 1),
        "lag_p99_ms": round(percentile(lags, 99) * 1000, 1),
        "lag_max_ms": round(lags[-1] * 1000, 1) if lags else None,
        "gets_per_waiter": round(gets / waiters, 3),
        "gets": gets,
        "gets_seen_by_sandbox": sandbox_gets,
        "get_errors": get_errors,
        "run_wall_s": round(wall, 1),
        "client_cpu_s": round(cpu, 1),
        "sandbox_cpu_s": round(server_cpu, 1),
        "client_cpu_us_per_settlement": round(settle_cpu / waiters * 1e6),
        "sandbox_cpu_us_per_settlement": round(settle_sandbox_cpu / waiters * 1e6),
        "gc_pauses": pauses.summary(),
        "slowest_1pct_settled_s": [slowest_1pct_settled[:1], slowest_1pct_settled[-1:]],
        "gc_pauses_over_20ms_after_first_settlement": long_pauses,
        "gc_pauses_settlement_phase": pauses.summary(phase.get("t", 0.0)),
        "outcomes": outcomes,
        "errors": errors,
    }
    if receiver is not None:
        callback_lags = sorted(at - stamps[p][0] for p, at in called.items() if p in stamps)
        row["callback_p50_ms"] = round(percentile(callback_lags, 50) * 1000, 1)
        row["callback_p99_ms"] = round(percentile(callback_lags, 99) * 1000, 1)
        row["callbacks"] = len(callback_lags)
        st = receiver.stats
        row["receiver_tracked"] = st.tracked
        row["notifications_delivered"] = sent1["delivered"] - sent0["delivered"]
        row["notification_retries"] = sent1["retries"] - sent0["retries"]
        row["receiver_accepted"] = st.accepted
        row["receiver_queue_full"] = st.queue_full
        row["receiver_confirm_reads"] = st.confirm_reads
        row["receiver_callbacks"] = st.callbacks
        row["receiver_inbox"] = type(receiver.inbox).__name__
        row["receiver_inbox_commits"] = getattr(receiver.inbox, "commits", None)
        # the sandbox's own view (its last 10,000 notifications): status final -> fired by
        # its scheduler, and -> first 2xx answer from the receiver
        row["sandbox_fire_lag_ms"] = sent1.get("fire_lag_ms")
        row["sandbox_delivery_lag_ms"] = sent1.get("delivery_lag_ms")
        # the sandbox process's own collector over the row, and its long pauses from the
        # first settlement on (s after it, generation, ms): a pause there delays firing
        if gc0 is not None and gc1 is not None:
            row["sandbox_gc"] = {
                g: {
                    "count": gc1[g]["count"] - gc0[g]["count"],
                    "total_ms": round(gc1[g]["total_ms"] - gc0[g]["total_ms"], 1),
                }
                for g in ("gen0", "gen1", "gen2")
            }
            row["sandbox_gc_pauses_after_first_settlement"] = [
                (round(t - first_settle, 2), g, ms)
                for t, g, ms in gc1["long"]
                if t >= first_settle - 1
            ]
            row["sandbox_tracked_objects"] = gc1["tracked_objects"]
    if trace is not None:
        row["stages"] = _stage_percentiles(trace, stamps)
    return row


async def run_ingest(
    sb: SandboxProcess, inbox: str, psids: list[str], concurrency: int
) -> dict[str, Any]:
    """Notifications per second sustained: every id POSTed at once, as fast as it is taken.

    The ids are final already (earlier rows settled them), so each notification goes the
    whole way: authenticated, parsed, committed to the inbox and answered 202, confirmed
    by a signed GET, handed to ``on_cancellation_outcome``, marked done. The notices are
    POSTed from this process (``concurrency`` at once), whose CPU they share with the
    receiver: a pessimistic figure for a receiver fed by another machine.
    """
    profile = ServiceProfile()
    password = secrets.token_urlsafe(16)
    header = "Basic " + base64.b64encode(f"{HOOK_USER}:{password}".encode()).decode()
    done: dict[str, float] = {}
    finished = asyncio.Event()

    async def on_outcome(outcome: CancellationOutcome) -> None:
        done.setdefault(outcome.payments_service_id, time.perf_counter())
        if len(done) == len(psids):
            finished.set()

    folder = tempfile.TemporaryDirectory(prefix="bench-inbox-")
    options: dict[str, Any] = {}
    if inbox == "sqlite":
        options["inbox"] = Path(folder.name) / "inbox.db"
    load = [round(x, 2) for x in os.getloadavg()]
    client = PaymentsClient(Credentials.sandbox(), base_url=sb.url)
    receiver = NotificationReceiver(
        client,
        auth=BasicAuth(HOOK_USER, password),
        on_cancellation_outcome=on_outcome,
        sweep=Sweep(track_submissions=False),
        **options,
    )
    answered: list[float] = []
    statuses: dict[int, int] = {}
    try:
        await client.access_token_lifetime()
        async with receiver, ReceiverServer(receiver) as server, aiohttp.ClientSession() as http:
            queue = list(reversed(psids))
            headers = {"Authorization": header, "Content-Type": "application/json"}

            async def sender() -> None:
                while queue:
                    psid = queue.pop()
                    body = {
                        "paymentsServiceId": psid,
                        "originalMessage": f"{sb.url}{profile.camt056_path}/{psid}",
                        "statusReportMessage": f"{sb.url}{profile.camt029_path}/{psid}",
                    }
                    async with http.post(server.url, json=body, headers=headers) as resp:
                        await resp.read()
                        statuses[resp.status] = statuses.get(resp.status, 0) + 1
                        answered.append(time.perf_counter())

            cpu0 = time.process_time()
            t0 = time.perf_counter()
            await asyncio.gather(*(sender() for _ in range(concurrency)))
            async with asyncio.timeout(120):
                await finished.wait()
            cpu = time.process_time() - cpu0
            commits = getattr(receiver.inbox, "commits", None)
    finally:
        await client.aclose()
        folder.cleanup()
    last = max(done.values())
    n = len(psids)
    return {
        "mode": f"ingest-{inbox}",
        "notifications": n,
        "concurrency": concurrency,
        "answered_per_s": round(n / (max(answered) - t0)),
        "processed_per_s": round(n / (last - t0)),
        "answers": statuses,
        "callbacks": len(done),
        "cpu_us_per_notification": round(cpu / n * 1e6),
        "inbox_commits": commits,
        "loadavg_start": load,
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
    }


def _profiled(sb: SandboxProcess, mode: str, args: Any, *row_args: Any) -> dict[str, Any]:
    """Run one row with cProfile over its settlement phase; print the top, keep the file."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    row: dict[str, Any] = asyncio.run(run_row(sb, mode, *row_args, profiler=prof))
    path = args.out / f"{NAME}-{mode}.pstats"
    path.parent.mkdir(parents=True, exist_ok=True)
    prof.dump_stats(path)
    pstats.Stats(prof).sort_stats("tottime").print_stats(30)
    return row


def _census(when: str) -> None:
    from collections import Counter

    objs = gc.get_objects()
    top = Counter(type(o).__qualname__ for o in objs).most_common(15)
    print(f"    gc census ({when}): {len(objs)} tracked; {top}", flush=True)


class _GcPauses:
    """A ``gc.callbacks`` entry: how long the collector stopped the loop, per generation.

    ``since`` (a ``perf_counter`` instant) splits the pauses: the settlement phase only.
    """

    def __init__(self) -> None:
        self._start = 0.0
        self.pauses: list[tuple[float, int, float]] = []  # (start, generation, seconds)

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.pauses.append((self._start, info["generation"], time.perf_counter() - self._start))

    def summary(self, since: float = 0.0) -> dict[str, dict[str, float]]:
        out = {}
        for g in (0, 1, 2):
            p = [d for t, gen, d in self.pauses if gen == g and t >= since]
            out[f"gen{g}"] = {
                "count": len(p),
                "total_ms": round(sum(p) * 1000, 1),
                "max_ms": round(max(p, default=0.0) * 1000, 1),
            }
        return out


def _pin(sb: SandboxProcess) -> dict[str, list[int]] | None:
    """The sandbox on core 0, this client on core 1 (``os.sched_setaffinity``).

    Each process then has a core of its own against the other (other processes of the
    machine still share them); None when there are fewer than two cores.
    """
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        return None
    os.sched_setaffinity(sb.proc.pid, {cores[0]})
    os.sched_setaffinity(0, {cores[1]})
    return {"sandbox": [cores[0]], "client": [cores[1]]}


def _trace_stages(receiver: NotificationReceiver) -> dict[str, dict[str, float]]:
    """Time-stamp each notification as it is stored and as its confirming GET runs.

    Diagnostic only (the benchmark's own wrapping of the inbox's ``put`` and a receiver
    internal; nothing in the library is changed): for each id, ``queued`` (committed to
    the inbox: the receiver answers 202), ``get_start`` and ``get_end`` (the confirming
    read), all ``time.time()``.
    """
    trace: dict[str, dict[str, float]] = {}
    inbox = receiver.inbox
    put = inbox.put
    confirm = receiver.workers.confirm

    async def stored(n: Any) -> None:
        await put(n)
        trace.setdefault(n.payments_service_id, {}).setdefault("queued", time.time())

    async def timed_confirm(n: Any) -> Any:
        t = trace.setdefault(n.payments_service_id, {})
        t.setdefault("get_start", time.time())
        result = await confirm(n)
        t.setdefault("get_end", time.time())
        return result

    inbox.put = stored  # type: ignore[method-assign]
    receiver.workers.confirm = timed_confirm  # type: ignore[method-assign]
    return trace


def _stage_percentiles(
    trace: dict[str, dict[str, float]], stamps: dict[str, tuple[float, float]]
) -> dict[str, dict[str, float]]:
    """p50/p99/max in ms of each stage between settlement and the waiter's return.

    ``delivery``: settlement -> the receiver stored the notification (the sandbox's
    scheduler, its POST, the receiver's HTTP handling, the inbox's commit); ``queue``:
    stored -> a worker
    starts the confirming GET; ``confirm_get``: the GET; ``wake``: GET done -> the waiter
    returned.
    """
    stages: dict[str, list[float]] = {"delivery": [], "queue": [], "confirm_get": [], "wake": []}
    for psid, (settles, done) in stamps.items():
        t = trace.get(psid)
        if t is None or len(t) < 3:
            continue  # returned by the poll fallback, not by a notification
        stages["delivery"].append(t["queued"] - settles)
        stages["queue"].append(t["get_start"] - t["queued"])
        stages["confirm_get"].append(t["get_end"] - t["get_start"])
        stages["wake"].append(done - t["get_end"])
    out = {}
    for name, values in stages.items():
        values.sort()
        out[name] = {
            "p50_ms": round(percentile(values, 50) * 1000, 1),
            "p99_ms": round(percentile(values, 99) * 1000, 1),
            "max_ms": round(values[-1] * 1000, 1) if values else float("nan"),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__.splitlines()[0], argv, extra=_extra)
    waiters = 30 if args.smoke else 300 if args.quick else 10_000
    if args.waiters:
        waiters = args.waiters
    rate = args.rate
    # D: the last submission leaves at W / rate; 10 s more so that every waiter is in
    # flight (and the submissions are over) before the first settlement
    delay = args.settlement_delay or (
        1.0 if args.smoke else 3.0 if args.quick else waiters / rate + 10.0
    )
    options = {"limits": ReceiverLimits(workers=args.workers)} if args.workers else {}
    if waiters / rate >= delay:
        raise SystemExit(
            f"--settlement-delay must exceed waiters / rate ({waiters / rate:g} s): "
            "every waiter must be in flight before the first settlement"
        )
    earliest_safety_poll = NOTIFIED_POLL_INITIAL * (1 - POLL_JITTER)
    if delay >= earliest_safety_poll:
        print(
            f"note: D = {delay:g} s reaches the safety-net poll ({earliest_safety_poll:g} s "
            "at the earliest): waiters with notifications will poll too",
            flush=True,
        )
    info = machine_info()
    modes = MODES if not args.only else (args.only,)
    with sandbox_process("--settlement-delay", str(delay), gc_stats=True) as sb:
        pinned = _pin(sb) if not args.no_pin else None
        info["pinned"] = pinned
        print(
            f"sandbox {sb.url} (pid {sb.proc.pid}); {waiters} waiters per row; "
            f"{rate:g} settlements/s; pinned {pinned}",
            flush=True,
        )
        rows = []
        settled: list[str] = []  # final cancellations, for the ingest rows
        index = 0
        for r in range(args.rounds):
            # interleaved: polling, notifications, polling, ... so drifting load hits both
            for mode in modes if r % 2 == 0 else modes[::-1]:
                load = [round(x, 2) for x in os.getloadavg()]
                row_args = (waiters, delay, rate, index, options)
                if args.profile:
                    row = _profiled(sb, mode, args, *row_args)
                else:
                    row = asyncio.run(
                        run_row(sb, mode, *row_args, gc_freeze=args.gc_freeze, collect=settled)
                    )
                row["gc_freeze"] = args.gc_freeze
                index += waiters
                row["round"] = r + 1
                row["loadavg_start"] = load
                row["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
                print(
                    f"  round {r + 1} {mode}: p50 {row['lag_p50_ms']} ms, "
                    f"p99 {row['lag_p99_ms']} ms, {row['gets_per_waiter']} GETs/waiter, "
                    f"load {load[0]} -> {row['loadavg_end'][0]}",
                    flush=True,
                )
                if "stages" in row:
                    print(f"    stages (ms): {row['stages']}", flush=True)
                    print(f"    gc (settling): {row['gc_pauses_settlement_phase']}", flush=True)
                    print(
                        f"    slowest 1% settled {row['slowest_1pct_settled_s']} s; gc pauses "
                        f"(s, gen, ms): {row['gc_pauses_over_20ms_after_first_settlement']}",
                        flush=True,
                    )
                    print(
                        f"    sandbox: fired {row['sandbox_fire_lag_ms']}, "
                        f"delivered {row['sandbox_delivery_lag_ms']}",
                        flush=True,
                    )
                    if "sandbox_gc" in row:
                        print(
                            f"    sandbox gc (row): {row['sandbox_gc']}; "
                            f"{row['sandbox_tracked_objects']} tracked; pauses (s, gen, ms): "
                            f"{row['sandbox_gc_pauses_after_first_settlement']}",
                            flush=True,
                        )
                rows.append(row)
        ingest: list[dict[str, Any]] = []
        if settled and not args.profile:
            for inbox in ("memory", "sqlite"):
                got = asyncio.run(run_ingest(sb, inbox, settled[: args.ingest], 64))
                print(
                    f"  ingest {inbox}: {got['answered_per_s']}/s answered, "
                    f"{got['processed_per_s']}/s processed, {got['answers']}, "
                    f"load {got['loadavg_start'][0]} -> {got['loadavg_end'][0]}",
                    flush=True,
                )
                ingest.append(got)
    info["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    notified = [r for r in rows if r["mode"].startswith("notifications")]
    worst_p99 = max(r["lag_p99_ms"] for r in notified)
    worst_gets = max(r["gets_per_waiter"] for r in notified)
    durable = [r for r in notified if r["mode"] == "notifications-sqlite"]
    targets = {
        "every waiter final (every row)": all(not r["errors"] for r in rows),
        "notifications: p99 <= 100 ms after settlement (every round)": worst_p99 <= 100,
        "notifications: <= 1.2 GETs per waiter (every round)": worst_gets <= 1.2,
    }
    if durable:
        targets["sqlite inbox: settlement -> callback p99 <= 100 ms (every round)"] = (
            max(r["callback_p99_ms"] for r in durable) <= 100
        )
    for got in ingest:
        if got["mode"] == "ingest-sqlite":
            targets["sqlite inbox: >= 500 notifications/s processed"] = (
                got["processed_per_s"] >= 500
            )
    result = {
        "benchmark": NAME,
        "quick": args.quick,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": info,
        "rows": rows,
        "ingest": ingest,
        "receiver_options": {"workers": args.workers} if args.workers else {},
        "targets_met": targets,
    }
    columns = [
        "round",
        "mode",
        "waiters",
        "lag_p50_ms",
        "lag_p99_ms",
        "lag_max_ms",
        "callback_p99_ms",
        "gets_per_waiter",
        "gets_seen_by_sandbox",
        "run_wall_s",
        "client_cpu_s",
        "client_cpu_us_per_settlement",
        "sandbox_cpu_us_per_settlement",
        "loadavg_start",
    ]
    print(format_table(rows, columns, title="Settlement -> outcome: notifications vs polling"))
    if ingest:
        print(
            format_table(
                ingest,
                [
                    "mode",
                    "notifications",
                    "answered_per_s",
                    "processed_per_s",
                    "cpu_us_per_notification",
                    "inbox_commits",
                    "loadavg_start",
                ],
                title="Notifications per second sustained (in-process sender)",
            )
        )
    print("Targets:", targets)
    diagnostic = (
        args.waiters
        or args.settlement_delay
        or args.workers
        or args.no_pin
        or args.only
        or args.profile
        or args.gc_freeze
    )
    name = NAME if rate == DEFAULT_RATE else f"{NAME}-{rate:g}-per-s"
    if diagnostic:
        name += "-diagnostic"
    path = write_result(args.out, name, result)
    print(f"wrote {path}")
    return 0


def _extra(p: Any) -> None:
    p.add_argument("--waiters", type=int, help="override the number of waiters per row")
    p.add_argument("--settlement-delay", type=float, help="override D (seconds)")
    p.add_argument(
        "--rate", type=float, default=DEFAULT_RATE, help="submissions (settlements) per s"
    )
    p.add_argument("--rounds", type=int, default=1, help="interleaved rounds of both modes")
    p.add_argument("--only", choices=MODES, help="diagnostic: one mode")
    p.add_argument(
        "--gc-freeze", action="store_true", help="diagnostic: gc.freeze() once all are waiting"
    )
    p.add_argument("--no-pin", action="store_true", help="do not pin the two processes")
    p.add_argument("--workers", type=int, help="diagnostic: the receiver's workers")
    p.add_argument(
        "--ingest",
        type=int,
        default=5000,
        help="notifications per ingest row (ids settled by the rows before)",
    )


if __name__ == "__main__":
    sys.exit(main())
