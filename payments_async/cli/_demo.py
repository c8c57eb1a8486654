"""``payments-async demo``: the whole mission against an embedded sandbox, narrated."""

from __future__ import annotations

import asyncio
import secrets
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from decimal import Decimal

from rich.console import Console
from rich.text import Text

from payments_async import CancellationOutcome, Hooks, PaymentsClient, PollPolicy
from payments_async.iso20022 import (
    Camt056,
    Outcome,
    Pacs008,
    build_cancellation,
    build_credit_transfer,
    summarize_status_report,
)
from payments_async.notifications import BasicAuth, NotificationReceiver, ReceiverServer
from payments_async.sandbox import SandboxConfig
from payments_async.testing import SandboxHandle, sandbox_server

from ._private import MIN_RSA_BITS, SANDBOX_CLIENT_ID, NotificationTarget, generate_private_key

__all__ = ["run_demo"]

DEMO_SETTLEMENT_DELAY = 0.3  # seconds a cancellation stays pending in the demo's sandbox
DEMO_POLL = PollPolicy(initial=0.1, maximum=0.5)  # poll briskly: the sandbox is local
DEMO_KEY_ID = "demo-kid"
DEMO_ISSUER = "payments-async-demo"
DEMO_HOOK_USER = "sandbox-notifier"

DEBTOR_IBAN = "FR1420041010050500013M02606"
CREDITOR_IBAN = "DE89370400440532013000"
CREDITOR_AGENT_BIC = "COBADEFFXXX"
ASSIGNER_BIC = "BNPAFRPPXXX"
ASSIGNEE_BIC = "COBADEFFXXX"


def _payment(amount: str) -> Pacs008:
    return build_credit_transfer(
        debtor_name="Alice Martin",
        debtor_iban=DEBTOR_IBAN,
        debtor_agent_id="30004",
        creditor_name="Bob Schmidt",
        creditor_iban=CREDITOR_IBAN,
        creditor_agent_id="37040044",
        amount=Decimal(amount),
        remittance="Invoice 2024-001",
    )


def _cancel(payment: Pacs008, amount: str) -> Camt056:
    return build_cancellation(
        original_end_to_end_id=payment.end_to_end_id,
        amount=Decimal(amount),
        creditor_agent_bic=CREDITOR_AGENT_BIC,
        creditor_iban=CREDITOR_IBAN,
        assigner_bic=ASSIGNER_BIC,
        assignee_bic=ASSIGNEE_BIC,
        reason="DUPL",
    )


async def _notification_step(
    sb: SandboxHandle,
    step: Callable[..., None],
    more: Callable[..., None],
    expect: Callable[[bool, str], None],
) -> None:
    """Two cancellations settle together: one waiter is woken by a notification, one polls."""
    assert sb.credentials is not None
    password = secrets.token_urlsafe(16)
    gets: Counter[str] = Counter()

    def counting() -> Hooks:
        # GETs by the id they read (a path ends with the paymentsServiceId)
        return Hooks(
            on_request=lambda e: (
                gets.update([e.path.rsplit("/", 1)[-1]]) if e.method == "GET" else None
            )
        )

    async def timed(coro: Awaitable[CancellationOutcome]) -> tuple[CancellationOutcome, float]:
        result = await coro
        return result, time.monotonic() - t0

    async with (
        PaymentsClient(sb.credentials, base_url=sb.url, hooks=counting()) as notified,
        PaymentsClient(sb.credentials, base_url=sb.url, poll=DEMO_POLL, hooks=counting()) as polled,
    ):
        receiver = NotificationReceiver(notified, auth=BasicAuth(DEMO_HOOK_USER, password))
        async with receiver, ReceiverServer(receiver) as server:
            sb.server.notifier.subscribe(
                sb.credentials.client_id,
                NotificationTarget(url=server.url, username=DEMO_HOOK_USER, password=password),
            )
            step(
                "notify",
                f"a receiver listens on {server.url} (HTTP Basic); the sandbox notifies it "
                "of every final status (our extension: the real sandbox does not)",
            )
            pay_c, pay_d = _payment("10.00"), _payment("20.00")
            await notified.submit_credit_transfer(pay_c)
            await notified.submit_credit_transfer(pay_d)
            cxl_c = await notified.request_cancellation(_cancel(pay_c, "10.00"))
            cxl_d = await notified.request_cancellation(_cancel(pay_d, "20.00"))
            t0 = time.monotonic()
            gets.clear()
            (out_c, took_c), (out_d, took_d) = await asyncio.gather(
                timed(notified.wait_for_cancellation_outcome(cxl_c.payments_service_id)),
                timed(polled.wait_for_cancellation_outcome(cxl_d.payments_service_id)),
            )
            step(
                "camt.029",
                f"C by notification: {out_c.outcome.value.upper()} after {took_c:.2f} s, "
                f"{gets[cxl_c.payments_service_id]} GET (the receiver's signed confirmation)",
                style="green",
            )
            step(
                "camt.029",
                f"D by polling:      {out_d.outcome.value.upper()} after {took_d:.2f} s, "
                f"{gets[cxl_d.payments_service_id]} GETs",
                style="green",
            )
            more(
                "a notification is only a hint: the status is confirmed by a signed GET; "
                "polling stays on as a slower safety net",
                style="dim",
            )
            expect(out_c.accepted and out_d.accepted, "both cancellations should be accepted")
            expect(receiver.stats.callbacks >= 1, "the receiver should have confirmed C")


async def run_demo(out: Console, *, processing_delay: float = 1.0) -> int:
    """Run the demo, printing each step; return the exit code (0 when all went as told).

    Args:
        out: where to narrate.
        processing_delay: seconds the sandbox keeps a payment unprocessed; the first
            cancellation must arrive within it.
    """
    start = time.monotonic()
    failures: list[str] = []

    def step(tag: str, text: str | Text, style: str = "") -> None:
        line = Text(f"{tag:<11}", style="bold cyan")
        line.append(text if isinstance(text, Text) else Text(text, style=style))
        out.print(line)

    def more(text: str, style: str = "") -> None:
        out.print(Text(" " * 11 + text, style=style))

    def expect(ok: bool, what: str) -> None:
        if not ok:
            failures.append(what)
            more(f"unexpected: {what}", style="bold red")

    out.print(Text("payments-async demo: the whole flow against an embedded sandbox", "bold"))
    config = SandboxConfig(
        processing_delay=processing_delay, settlement_delay=DEMO_SETTLEMENT_DELAY
    )
    key = generate_private_key(MIN_RSA_BITS)
    client_id = f"demo-client-{uuid.uuid4().hex[:8]}"
    async with sandbox_server(
        config, private_key=key, client_id=client_id, key_id=DEMO_KEY_ID, issuer=DEMO_ISSUER
    ) as sb:
        assert sb.credentials is not None
        step(
            "sandbox",
            f"listening on {sb.url} (payments stay unprocessed {processing_delay:g} s, "
            f"cancellations settle in {DEMO_SETTLEMENT_DELAY:g} s)",
        )
        step(
            "keys",
            f"generated an RSA-{key.key_size} key pair and registered its public key as "
            f"client {client_id} (kid={DEMO_KEY_ID}, iss={DEMO_ISSUER})",
        )
        more(
            f"(no keys yet? --sandbox uses the predefined tokens of client {SANDBOX_CLIENT_ID})",
            style="dim",
        )
        async with PaymentsClient(sb.credentials, base_url=sb.url, poll=DEMO_POLL) as client:
            lifetime = await client.access_token_lifetime()
            step(
                "token",
                f"access token obtained (JWT bearer grant, RS256 assertion); expires in "
                f"{lifetime:.0f} s",
            )

            # 1. a payment, its status, and a cancellation while it is unprocessed
            pay_a = _payment("250.00")
            sub_a = await client.submit_credit_transfer(pay_a)
            step(
                "pacs.008",
                f"payment A, 250.00 EUR -> {201 if sub_a.created else 200} "
                f"{'created' if sub_a.created else 'replayed'}",
            )
            more(f"msgId {sub_a.message_id}")
            more(f"endToEndId {pay_a.end_to_end_id}")
            more(f"paymentsServiceId {sub_a.payments_service_id}, status {sub_a.status}")
            expect(sub_a.created, "payment A should be created (201)")
            report = await client.get_credit_transfer_status(sub_a.payments_service_id)
            st = summarize_status_report(report)
            step("pacs.002", f"payment A status {st.status} ({st.outcome.value}: not processed)")

            cxl_a = build_cancellation(
                original_end_to_end_id=pay_a.end_to_end_id,
                amount=Decimal("250.00"),
                creditor_agent_bic=CREDITOR_AGENT_BIC,
                creditor_iban=CREDITOR_IBAN,
                assigner_bic=ASSIGNER_BIC,
                assignee_bic=ASSIGNEE_BIC,
                reason="DUPL",
                originator_name="Alice Martin",
            )
            csub_a = await client.request_cancellation(cxl_a)
            step(
                "camt.056",
                f"cancel payment A (still unprocessed), reason DUPL -> "
                f"{201 if csub_a.created else 200}, assgnmt.id {csub_a.message_id}",
            )
            t0 = time.monotonic()
            out_a = await client.wait_for_cancellation_outcome(
                csub_a.payments_service_id, timeout=30
            )
            codes = "/".join(c for c in (out_a.status, *out_a.tx_statuses) if c)
            step(
                "camt.029",
                f"waited {time.monotonic() - t0:.1f} s: {out_a.outcome.value.upper()} ({codes})",
                style="green" if out_a.accepted else "red",
            )
            more(out_a.message)
            expect(out_a.outcome is Outcome.ACCEPTED, "cancellation of A should be accepted")

            # 2. a payment that gets processed, then a cancellation that comes too late
            pay_b = _payment("99.90")
            sub_b = await client.submit_credit_transfer(pay_b)
            step(
                "pacs.008",
                f"payment B, 99.90 EUR -> {201 if sub_b.created else 200}, "
                f"paymentsServiceId {sub_b.payments_service_id}",
            )
            st_b = await client.wait_for_payment_status(sub_b.payments_service_id, timeout=30)
            step("pacs.002", f"payment B processed: {st_b.status} ({st_b.outcome.value})")
            cxl_b = build_cancellation(
                original_end_to_end_id=pay_b.end_to_end_id,
                amount=Decimal("99.90"),
                creditor_agent_bic=CREDITOR_AGENT_BIC,
                creditor_iban=CREDITOR_IBAN,
                assigner_bic=ASSIGNER_BIC,
                assignee_bic=ASSIGNEE_BIC,
                reason="CUST",
            )
            csub_b = await client.request_cancellation(cxl_b)
            step(
                "camt.056",
                f"cancel payment B (already processed) -> {201 if csub_b.created else 200}",
            )
            out_b = await client.wait_for_cancellation_outcome(
                csub_b.payments_service_id, timeout=30
            )
            codes = "/".join(c for c in (out_b.status, *out_b.tx_statuses) if c)
            step(
                "camt.029",
                f"{out_b.outcome.value.upper()} ({codes}), reason "
                f"{' '.join(out_b.reason_codes) or '-'}",
                style="yellow",
            )
            for text in out_b.reason_texts:
                more(text)
            if out_b.return_request_needed:
                more(
                    "next: ask the beneficiary to return the funds with a pacs.004 "
                    "(outside this API)",
                    style="yellow",
                )
            expect(out_b.outcome is Outcome.REJECTED, "cancellation of B should be rejected")

            # 3. resubmission: same message id, nothing created twice
            again = await client.submit_credit_transfer(pay_b)
            step(
                "replay",
                f"payment B resubmitted with the same msgId -> "
                f"{201 if again.created else 200} {'created' if again.created else 'replayed'}, "
                f"same paymentsServiceId: {again.payments_service_id == sub_b.payments_service_id}",
            )
            expect(again.replayed, "the resubmission should be answered 200 (replayed)")
            expect(
                again.payments_service_id == sub_b.payments_service_id,
                "the resubmission should return the same paymentsServiceId",
            )

        # 4. an outcome arriving by notification beside one found by polling
        await _notification_step(sb, step, more, expect)
        stats = sb.server.stats()
    step(
        "done",
        f"in {time.monotonic() - start:.1f} s; sandbox stored {stats['payments_stored']} "
        f"payments and {stats['cancellations_stored']} cancellations, answered "
        f"{stats['replays_answered']} replay(s)",
        style="bold",
    )
    if failures:
        out.print(Text(f"the demo did not go as expected: {'; '.join(failures)}", "bold red"))
        return 1
    return 0
