"""A sandbox that notifies, a client, and a receiver on real loopback sockets, wired up."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from payments_async import (
    CancellationOutcome,
    PaymentsClient,
    PaymentStatus,
    PollPolicy,
    ServiceProfile,
)
from payments_async.notifications import (
    Authenticator,
    BasicAuth,
    NotificationReceiver,
    ReceiverServer,
)
from payments_async.sandbox import SandboxConfig
from payments_async.sandbox._notify import NotificationFaults, NotificationTarget
from payments_async.testing import SandboxHandle, sandbox_server

HOOK_USER = "payments-service"
HOOK_PASSWORD = "hook-password-0123456789"
# Safety-net polling so slow that a waiter finishing in a test proves the notification.
NO_POLL = PollPolicy(initial=60.0, maximum=60.0, not_found_grace=60.0)


@dataclass
class Stack:
    """Everything a notification test touches."""

    sandbox: SandboxHandle
    client: PaymentsClient
    receiver: NotificationReceiver
    server: ReceiverServer
    payments: list[tuple[str, PaymentStatus]] = field(default_factory=list)
    outcomes: list[CancellationOutcome] = field(default_factory=list)

    def sandbox_gets(self) -> int:
        requests: Counter[str] = self.sandbox.server.state.stats.requests
        return requests["pacs002"] + requests["camt029"]

    def sent(self) -> dict[str, Any]:
        return self.sandbox.server.notifier.snapshot()


@asynccontextmanager
async def notifying_stack(
    *,
    payload: str = "short",
    auth: Authenticator | None = None,
    target_credentials: dict[str, str] | None = None,
    faults: NotificationFaults | None = None,
    poll: PollPolicy = NO_POLL,
    processing_delay: float = 0.4,
    settlement_delay: float = 0.3,
    profile: ServiceProfile | None = None,
    **receiver_options: Any,
) -> AsyncIterator[Stack]:
    config = SandboxConfig(
        processing_delay=processing_delay,
        settlement_delay=settlement_delay,
        profile=profile or ServiceProfile(),
    )
    async with sandbox_server(config) as sb:
        assert sb.credentials is not None
        if faults is not None:
            sb.server.notifier.set_faults(faults)
        async with PaymentsClient(sb.credentials, base_url=sb.url, profile=profile) as client:
            stack_holder: list[Stack] = []

            async def on_payment(psid: str, status: PaymentStatus) -> None:
                stack_holder[0].payments.append((psid, status))

            async def on_outcome(outcome: CancellationOutcome) -> None:
                stack_holder[0].outcomes.append(outcome)

            options: dict[str, Any] = {
                "on_payment_status": on_payment,
                "on_cancellation_outcome": on_outcome,
                **receiver_options,
            }
            receiver = NotificationReceiver(
                client, auth=auth or BasicAuth(HOOK_USER, HOOK_PASSWORD), **options
            )
            async with receiver, ReceiverServer(receiver) as server:
                client.attach_notifications(receiver, poll=poll)
                creds = target_credentials or {"username": HOOK_USER, "password": HOOK_PASSWORD}
                sb.server.notifier.base_url = sb.url
                sb.server.notifier.subscribe(
                    sb.credentials.client_id,
                    NotificationTarget(url=server.url, payload=payload, **creds),  # type: ignore[arg-type]
                )
                stack = Stack(sb, client, receiver, server)
                stack_holder.append(stack)
                yield stack


async def settle(stack: Stack, *, quiet: float = 0.3, timeout: float = 10.0) -> None:
    """Wait until the sandbox has nothing pending and the receiver's queue is empty."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        sent = stack.sent()
        if not sent["pending"] and not sent["in_flight"]:
            await stack.receiver.join()
            await asyncio.sleep(quiet)
            sent = stack.sent()
            if not sent["pending"] and not sent["in_flight"]:
                await stack.receiver.join()
                return
        await asyncio.sleep(0.05)
    raise AssertionError("notifications did not settle")
