"""Item 1: mixed operations under injected faults; the sandbox's own state proves that
every payment and cancellation exists exactly once: none duplicated, none lost.

Faults: 10% 5xx (500/502/503), 5% 429 with Retry-After, 3% connection dropped
before the response, 3% committed then dropped, 5% latency beyond the read timeout.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest

from payments_async import (
    Camt056,
    Hooks,
    OutcomeUnknownError,
    Pacs008,
    PaymentsClient,
    PaymentsError,
    PollTimeoutError,
    RequestEvent,
    Submission,
    Timeout,
)
from payments_async.sandbox import FaultConfig, SandboxConfig
from payments_async.testing import SandboxHandle, sandbox_server
from tests.factories import cancellation, credit_transfer
from tests.support.reliability import FAST_POLL, fast_retry, record

READ_TIMEOUT = 0.25  # seconds: the client's read timeout...
LATENCY = 0.6  # ...and the injected latency, well beyond it
SOAK_FAULTS = FaultConfig(
    error_500=0.04,
    error_502=0.03,
    error_503=0.03,
    rate_limit_429=0.05,
    retry_after=1,
    drop_before=0.03,
    commit_then_drop=0.03,
    latency=0.05,
    latency_seconds=LATENCY,
    seed=20240801,
)
CONCURRENCY = 40
FORCED_UNKNOWN = 6  # payments and as many cancellations sent while every attempt fails
# Operation mix: credit transfers, cancellations, single reads, waiters.
MIX = (("pay", 0.35), ("cancel", 0.20), ("read", 0.25), ("wait", 0.20))


@dataclass
class Ledger:
    """What the client reported for every operation."""

    payments: dict[str, Pacs008] = field(default_factory=dict)  # every pacs.008 sent
    cancels: dict[str, Camt056] = field(default_factory=dict)  # every camt.056 sent
    done: dict[str, Submission] = field(default_factory=dict)  # message id -> reported
    unknown: dict[str, OutcomeUnknownError] = field(default_factory=dict)
    refused: dict[str, PaymentsError] = field(default_factory=dict)  # other errors
    ops: Counter[str] = field(default_factory=Counter)
    read_errors: Counter[str] = field(default_factory=Counter)
    attempts: Counter[str] = field(default_factory=Counter)
    paid_e2e: list[tuple[str, str]] = field(default_factory=list)  # (e2e, psid)
    cancel_ids: list[str] = field(default_factory=list)
    read_failures: list[PaymentsError] = field(default_factory=list)


async def _submit(client: PaymentsClient, ledger: Ledger, msg: Pacs008 | Camt056) -> None:
    mid = msg.message_id
    try:
        if isinstance(msg, Pacs008):
            ledger.payments[mid] = msg
            sub = await client.submit_credit_transfer(msg)
        else:
            ledger.cancels[mid] = msg
            sub = await client.request_cancellation(msg)
    except OutcomeUnknownError as exc:
        ledger.unknown[mid] = exc
        return
    except PaymentsError as exc:
        ledger.refused[mid] = exc
        return
    assert sub.message_id == mid
    ledger.done[mid] = sub
    if isinstance(msg, Pacs008):
        tx = msg.fito_fi_cstmr_cdt_trf.cdt_trf_tx_inf[0]
        ledger.paid_e2e.append((tx.pmt_id.end_to_end_id, sub.payments_service_id))
    else:
        ledger.cancel_ids.append(sub.payments_service_id)


async def _operation(client: PaymentsClient, ledger: Ledger, kind: str, rng: random.Random) -> None:
    if kind != "pay" and not ledger.paid_e2e:
        kind = "pay"
    ledger.ops[kind] += 1
    if kind == "pay":
        await _submit(client, ledger, credit_transfer())
        return
    if kind == "cancel":
        e2e, _ = rng.choice(ledger.paid_e2e)
        await _submit(client, ledger, cancellation(e2e))
        return
    try:
        if kind == "read":
            if ledger.cancel_ids and rng.random() < 0.4:
                await client.get_cancellation_outcome(rng.choice(ledger.cancel_ids))
            else:
                await client.get_credit_transfer_status(rng.choice(ledger.paid_e2e)[1])
        elif ledger.cancel_ids and rng.random() < 0.4:
            await client.wait_for_cancellation_outcome(rng.choice(ledger.cancel_ids), timeout=15)
        else:
            await client.wait_for_payment_status(rng.choice(ledger.paid_e2e)[1], timeout=15)
    except PaymentsError as exc:
        # Reads never change state; a read whose retries ran out must still be typed.
        ledger.read_errors[f"{kind}:{type(exc).__name__}"] += 1
        ledger.read_failures.append(exc)


async def _run(sb: SandboxHandle, operations: int, seed: int) -> Ledger:
    ledger = Ledger()
    rng = random.Random(seed)
    kinds = rng.choices([k for k, _ in MIX], weights=[w for _, w in MIX], k=operations)
    queue: asyncio.Queue[str] = asyncio.Queue()
    for k in kinds:
        queue.put_nowait(k)

    def on_request(event: RequestEvent) -> None:
        ledger.attempts[str(event.status)] += 1

    assert sb.credentials is not None
    async with PaymentsClient(
        sb.credentials,
        base_url=sb.url,
        retry=fast_retry(attempts=4)["retry"],
        timeout=Timeout(total=8.0, read=READ_TIMEOUT),
        poll=FAST_POLL,
        hooks=Hooks(on_request=on_request),
    ) as client:

        async def worker() -> None:
            while not queue.empty():
                await _operation(client, ledger, queue.get_nowait(), rng)

        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        # Then a burst where every attempt fails (half stored then dropped, half dropped
        # before): each of these ends in OutcomeUnknownError, so both ways of resolving
        # one (200: it had been stored; 201: it had not) are exercised in every run.
        sb.server.set_faults(FaultConfig(commit_then_drop=0.5, drop_before=0.5, seed=seed))
        for _ in range(FORCED_UNKNOWN):
            ledger.ops["forced"] += 1
            await _submit(client, ledger, credit_transfer())
        e2e = ledger.paid_e2e[0][0]
        for _ in range(FORCED_UNKNOWN):
            ledger.ops["forced"] += 1
            await _submit(client, ledger, cancellation(e2e))
        # Requests the sandbox delayed past our timeout are still being handled: let
        # them finish before reading its state.
        await asyncio.sleep(LATENCY + 0.3)
        sb.server.set_faults(FaultConfig())

        # Resolve every OutcomeUnknownError the way the error says: resubmit the same
        # message (same id). 200 = the lost attempt had stored it; 201 = it had not.
        resolved: Counter[str] = Counter()
        for mid in ledger.unknown:
            msg = ledger.payments.get(mid) or ledger.cancels[mid]
            if isinstance(msg, Pacs008):
                sub = await client.submit_credit_transfer(msg)
            else:
                sub = await client.request_cancellation(msg)
            assert sub.message_id == mid
            resolved["already stored (200)" if sub.replayed else "stored now (201)"] += 1
            ledger.done[mid] = sub
        ledger.ops["resolved_unknown_200"] = resolved["already stored (200)"]
        ledger.ops["resolved_unknown_201"] = resolved["stored now (201)"]
    return ledger


def _verify(
    sb: SandboxHandle, ledger: Ledger, label: str, elapsed: float, min_unknown: int = 0
) -> None:
    state = sb.server.state
    assert sb.credentials is not None
    cid = sb.credentials.client_id
    stored_payments: dict[str, list[str]] = {}
    stored_e2e: Counter[str] = Counter()
    for rec in state.payments.values():
        if rec.client_id == cid:
            stored_payments.setdefault(rec.msg_id, []).append(rec.payments_service_id)
            stored_e2e[rec.end_to_end_id] += 1
    stored_cancels: dict[str, list[str]] = {}
    for crec in state.cancellations.values():
        if crec.client_id == cid:
            stored_cancels.setdefault(crec.assignment_id, []).append(crec.payments_service_id)
    stored = {**stored_payments, **stored_cancels}

    sent_ids = set(ledger.payments) | set(ledger.cancels)
    invented = set(stored) - sent_ids  # a retry under a new id would show up here
    duplicates = [mid for mid, ids in stored.items() if len(ids) != 1]
    duplicates += [e2e for e2e, n in stored_e2e.items() if n != 1]
    lost = [mid for mid in ledger.done if mid not in stored]
    mismatched = [
        mid
        for mid, sub in ledger.done.items()
        if mid in stored and stored[mid] != [sub.payments_service_id]
    ]
    # A POST the client reported as refused (not OutcomeUnknownError) must not exist.
    phantoms = {mid: exc for mid, exc in ledger.refused.items() if mid in stored}
    stats = sb.server.stats()
    figures = {
        "operations": sum(
            v for k, v in ledger.ops.items() if not k.startswith("resolved") and k != "forced"
        ),
        "forced_unknown_burst": ledger.ops["forced"],
        "ops_by_kind": dict(ledger.ops),
        "http_attempts": sum(ledger.attempts.values()),
        "faults_injected": stats["faults"],
        "faults_total": stats["faults_total"],
        "outcome_unknown": len(ledger.unknown),
        "resolved_by_resubmit_200": ledger.ops["resolved_unknown_200"],
        "resolved_by_resubmit_201": ledger.ops["resolved_unknown_201"],
        "refused_other_error": Counter(type(e).__name__ for e in ledger.refused.values()),
        "refused_but_stored": len(phantoms),
        "read_errors_after_retries": dict(ledger.read_errors),
        "payments_stored": stats["payments_stored"],
        "cancellations_stored": stats["cancellations_stored"],
        "replays_answered": stats["replays_answered"],
        "replays_changed_body": stats["replays_changed_body"],
        "duplicates": len(duplicates),
        "lost": len(lost),
        "invented_ids": len(invented),
        "seconds": round(elapsed, 1),
    }
    record(label, **figures)
    # Every OutcomeUnknownError names the id to resubmit and the request to trace.
    assert all(e.message_id == mid and e.request_id for mid, e in ledger.unknown.items())
    # Every failed read names its request; a waiter's timeout spans many reads and names
    # the last one's, when that read failed (on a loaded machine the in-process sandbox
    # answers reads later than their 0.25 s, and a waiter may time out on failed reads).
    assert all(
        (e.last_error is None or e.last_error.request_id)
        if isinstance(e, PollTimeoutError)
        else e.request_id
        for e in ledger.read_failures
    ), ledger.read_failures
    assert not invented, f"stored under ids we never sent: {sorted(invented)[:5]}"
    assert not duplicates, f"stored more than once: {duplicates[:5]}"
    assert not lost, f"reported done but not stored: {lost[:5]}"
    assert not mismatched, f"stored under another paymentsServiceId: {mismatched[:5]}"
    assert stats["replays_changed_body"] == 0  # no id was ever resent with other bytes
    assert set(ledger.done) | set(ledger.refused) == sent_ids
    assert len(stored) == len(ledger.done) + len(phantoms)
    assert len(ledger.unknown) >= min_unknown, "too few OutcomeUnknownError to show anything"
    assert stats["faults_total"] > 0
    # A POST reported as refused must not exist: otherwise a caller would send it again
    # under a new id (see test_rate_limited_after_a_stored_attempt_is_outcome_unknown).
    kinds = Counter(type(e).__name__ for e in phantoms.values())
    assert not phantoms, f"{len(phantoms)} POST(s) reported as {dict(kinds)} but stored"


def _config() -> SandboxConfig:
    return SandboxConfig(processing_delay=0.5, settlement_delay=0.3, faults=SOAK_FAULTS)


async def test_fault_soak_reduced() -> None:
    """~300 mixed operations under the issue's fault rates: none duplicated or lost."""
    async with sandbox_server(_config()) as sb:
        start = time.monotonic()
        ledger = await _run(sb, operations=300, seed=1)
        _verify(
            sb,
            ledger,
            "fault soak (default, 300 ops)",
            time.monotonic() - start,
            2 * FORCED_UNKNOWN,
        )


@pytest.mark.soak
async def test_fault_soak_5000_operations() -> None:
    """5,000 mixed operations under the issue's fault rates: none duplicated or lost."""
    async with sandbox_server(_config()) as sb:
        start = time.monotonic()
        ledger = await _run(sb, operations=5000, seed=5000)
        _verify(
            sb, ledger, "fault soak (soak, 5000 ops)", time.monotonic() - start, 2 * FORCED_UNKNOWN
        )


async def test_rate_limited_after_a_stored_attempt_is_outcome_unknown() -> None:
    """Attempt 1 is stored and its answer lost; attempts 2-3 get 429. The caller must be
    told the outcome is unknown (resubmit the same id), not that the POST was refused."""
    async with sandbox_server(SandboxConfig()) as sb:
        assert sb.credentials is not None

        def after_attempt(event: RequestEvent) -> None:
            if event.path.startswith("/payments"):
                sb.server.set_faults(FaultConfig(rate_limit_429=1.0, retry_after=0))

        async with PaymentsClient(
            sb.credentials,
            base_url=sb.url,
            **fast_retry(attempts=3),
            hooks=Hooks(on_request=after_attempt),
        ) as client:
            await client.access_token_lifetime()
            sb.server.set_faults(FaultConfig(commit_then_drop=1.0))
            msg = credit_transfer()
            with pytest.raises(PaymentsError) as info:
                await client.submit_credit_transfer(msg)
            assert sb.server.stats()["payments_stored"] == 1  # the first attempt landed
            assert isinstance(info.value, OutcomeUnknownError), repr(info.value)
