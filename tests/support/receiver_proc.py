"""A notification receiver as its own process, for the kill tests (``python -m`` this).

``python -m tests.support.receiver_proc BASE_URL INBOX CALLBACK_FILE KILL_AFTER [LEASE]``
serves a receiver on a free loopback port (printed as one JSON line), with a durable
inbox; its payment callback appends ``id status`` to CALLBACK_FILE with an fsync. After
its KILL_AFTER-th 202 has been written to the socket (0: never) it SIGKILLs itself, before
the callback of that notification can run, and at a moment when no callback has returned
without its "delivered" mark committed (the one instant the guarantee leaves out; see
docs/notifications.md).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable

from aiohttp import web

from payments_async import Credentials, PaymentsClient, PaymentStatus
from payments_async.notifications import (
    BasicAuth,
    Inbox,
    NotificationReceiver,
    PostgresInbox,
    ReceiverLimits,
    ReceiverServer,
    open_inbox,
)

HOOK_USER = "payments-service"
HOOK_PASSWORD = "hook-password-0123456789"


async def main(
    base_url: str, target: str, callback_file: str, kill_after: int, lease: float
) -> None:
    fd = os.open(callback_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    async def on_payment(psid: str, status: PaymentStatus) -> None:
        # No await inside: the line is in the file (and on disk) when the callback returns.
        os.write(fd, f"{psid} {status.status}\n".encode())
        os.fsync(fd)

    inbox: Inbox = (
        PostgresInbox(target, lease=lease)
        if target.startswith("postgresql")
        else open_inbox(target)
    )
    answered = 0

    @web.middleware
    async def kill_after_answering(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        nonlocal answered
        response = await handler(request)
        if response.status != 202:
            return response
        answered += 1
        stats = receiver.stats
        if kill_after and answered >= kill_after and stats.callbacks == stats.delivered:
            await response.prepare(request)
            await response.write_eof()
            os.kill(os.getpid(), signal.SIGKILL)
        return response

    async with PaymentsClient(Credentials.sandbox(), base_url=base_url) as client:
        receiver = NotificationReceiver(
            client,
            auth=BasicAuth(HOOK_USER, HOOK_PASSWORD),
            on_payment_status=on_payment,
            inbox=inbox,
            limits=ReceiverLimits(workers=8),
        )
        server = ReceiverServer(receiver, port=0)
        server.app.middlewares.append(kill_after_answering)
        async with receiver, server:
            print(json.dumps({"url": server.url}), flush=True)
            await asyncio.Event().wait()  # until killed


if __name__ == "__main__":
    base, inbox_target, callbacks, kill = sys.argv[1:5]
    lease = float(sys.argv[5]) if len(sys.argv) > 5 else 60.0
    asyncio.run(main(base, inbox_target, callbacks, int(kill), lease))
