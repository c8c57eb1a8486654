"""Receive the service's notifications in a Starlette (ASGI) application.

The receiver's core is framework-neutral: ``NotificationReceiver.check_credentials`` and
``NotificationReceiver.handle`` take the method, the headers and the body bytes and
return the status and JSON body to answer. This file mounts them in Starlette; FastAPI
is the same (it is Starlette underneath).

Run it against the local sandbox (``pip install 'payments-async[examples]'``)::

    payments-async sandbox --notify http://127.0.0.1:8000/notifications \\
        --notify-user bank --notify-password change-me
    PAYMENTS_NOTIFY_PASSWORD=change-me python examples/receiver_starlette.py

then submit and cancel payments with ``payments-async --sandbox ...``: each final status
is printed once, after a signed GET confirmed it.

Before production, give the receiver a durable inbox. This example keeps the default, the
in-memory inbox, which forgets on a restart every notification it had answered 202 but
not yet delivered: pass ``inbox="notifications.db"`` (a SQLite file, for one process) or
``inbox="postgresql://..."`` (the ``scale`` extra, for several processes behind a load
balancer) to ``NotificationReceiver``. See "The inbox" in ``docs/notifications.md``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from payments_async import CancellationOutcome, Credentials, PaymentsClient, PaymentStatus
from payments_async.notifications import (
    Authenticator,
    BasicAuth,
    NotificationReceiver,
    NotificationRejected,
)

OutcomeHandler = Callable[[CancellationOutcome], Awaitable[None]]
StatusHandler = Callable[[str, PaymentStatus], Awaitable[None]]


def create_app(
    credentials: Credentials,
    *,
    base_url: str,
    auth: Authenticator,
    on_cancellation_outcome: OutcomeHandler | None = None,
    on_payment_status: StatusHandler | None = None,
    path: str = "/notifications",
) -> Starlette:
    """A Starlette app whose lifespan owns the client and the receiver.

    ``app.state.client`` and ``app.state.receiver`` are set while it runs, so request
    handlers elsewhere in the app can wait on outcomes the receiver wakes.
    """

    async def receive(request: Request) -> Response:
        receiver: NotificationReceiver = request.app.state.receiver
        try:  # credentials first, before a byte of the body is read
            await receiver.check_credentials(request.headers)
        except NotificationRejected as exc:
            return Response(
                b'{"error":"' + exc.message.encode() + b'"}',
                status_code=401,
                media_type="application/json",
                headers={"WWW-Authenticate": 'Basic realm="notifications", Bearer'},
            )
        limit = receiver.max_body_bytes
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                return Response(b'{"error":"body too large"}', 413, media_type="application/json")
        status, answer = await receiver.handle(
            request.method, request.headers, bytes(body), authenticated=True
        )
        return Response(answer, status_code=status, media_type="application/json")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with (
            PaymentsClient(credentials, base_url=base_url) as client,
            # The in-memory inbox (no inbox=): fine here, not durable. In production pass
            # inbox="notifications.db" or inbox="postgresql://..." (see the docstring).
            NotificationReceiver(
                client,
                auth=auth,
                on_cancellation_outcome=on_cancellation_outcome,
                on_payment_status=on_payment_status,
            ) as receiver,
        ):
            app.state.client = client
            app.state.receiver = receiver
            yield

    return Starlette(routes=[Route(path, receive, methods=["POST"])], lifespan=lifespan)


async def _print_outcome(outcome: CancellationOutcome) -> None:
    print(f"cancellation {outcome.payments_service_id}: {outcome.outcome.value} ({outcome.status})")


async def _print_status(payments_service_id: str, status: PaymentStatus) -> None:
    print(f"payment {payments_service_id}: {status.outcome.value} ({status.status})")


def main() -> None:
    """Serve on 127.0.0.1:8000 for the local sandbox's predefined client."""
    import uvicorn

    app = create_app(
        Credentials.sandbox(),
        base_url=os.environ.get("PAYMENTS_BASE_URL", "http://127.0.0.1:8765"),
        auth=BasicAuth("bank", os.environ["PAYMENTS_NOTIFY_PASSWORD"]),
        on_cancellation_outcome=_print_outcome,
        on_payment_status=_print_status,
    )
    uvicorn.run(app, host="127.0.0.1", port=8000)


if __name__ == "__main__":
    main()
