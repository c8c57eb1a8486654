"""The receiver: the composition of verify-and-parse, the inbox, the workers, the sweep and
the waiters' registry, behind one lifecycle and one framework-neutral ``handle``.

A notification is a hint. It is accepted (202) once it is authenticated, parsed and
committed to the inbox; the workers (``_worker``) then confirm it with the client's own
signed GET, and only that confirmed status reaches callbacks and waiters (``_waiters``).
The sweep (``_sweep``) stands in for notifications that never come.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Final, Self

import msgspec

from .._errors import ConfigurationError
from .._store import Spell, told
from ..iso20022 import Camt029, Pacs002
from ._config import ReceiverLimits, Retries, Sweep
from ._core import Authenticator, NotificationKind, NotificationRejected, authenticate, parse
from ._defaults import NOTIFY_OUTAGE_SETTLE, NOTIFY_RETENTION
from ._events import (
    CancellationOutcomeHandler,
    EventHandler,
    PaymentStatusHandler,
    ReceiverStats,
)
from ._inbox import Inbox, InboxError, InboxFull, MemoryInbox, SharedInbox, open_inbox
from ._items import INBOX_BACK
from ._sweep import prune, sweep
from ._waiters import Waiters
from ._worker import Callbacks, Workers

if TYPE_CHECKING:
    from .._client import PaymentsClient
    from .._models import Submission

__all__ = ["NotificationReceiver"]

logger = logging.getLogger("payments_async.notifications")

_ACCEPTED_BODY: Final = b'{"accepted":true}'
_QUEUE_FULL_BODY: Final = b'{"error":"queue full, retry later"}'
_STORE_DOWN_BODY: Final = b'{"error":"cannot store the notification, retry later"}'
_JOIN_POLL: Final = 0.005  # seconds between two looks at the inbox in join()


class NotificationReceiver:
    """Receives the service's notifications and turns them into confirmed outcomes.

    ```python
    async with PaymentsClient(creds, base_url=url) as client, NotificationReceiver(
        client, auth=BasicAuth("service", secret), on_cancellation_outcome=handle
    ) as receiver:
        app = create_app(receiver)  # mount it, or use receiver.handle() in any framework
    ```

    While started it is attached to ``client``: ``wait_for_cancellation_outcome`` and
    ``wait_for_payment_status`` return as soon as a notification for their id is confirmed
    final, and poll only as a slower safety net; and each submission the client makes is
    tracked for the sweep before it is returned (``submitted``).

    Args:
        client: the client whose signed GETs confirm each notification.
        auth: how the service authenticates (``BasicAuth`` or ``BearerAuth``); required.
        on_payment_status: ``async (payments_service_id, PaymentStatus)``, once per final
            status per id.
        on_cancellation_outcome: ``async (CancellationOutcome)``, once per final outcome
            per id.
        on_event: ``async (NotificationEvent)`` for every processed notification
            (duplicates and non-final statuses included), e.g. to print them.
        inbox: where accepted notifications and delivered marks are kept: a SQLite file
            path, a ``postgresql://`` address (several receivers may share it), or an
            ``Inbox``; by default in memory, which is NOT durable (a restart forgets what
            was accepted and what was delivered).
        limits: workers, body size, the in-memory inbox's bound and the confirmed-final
            cache (``ReceiverLimits()``: 32 workers, 256 KiB, 10,000, 100,000).
        retries: how failed callbacks and confirming reads are tried again, and when a
            notification is parked as failed (``stats.parked``, ``inbox status``):
            ``Retries()`` tries a raising callback 5 times, and parks a notification whose
            id the service answers 404 after 3 reads over 6 s.
        sweep: when a tracked id whose notification never came is read, and whether the
            client's submissions are tracked (``Sweep()``: after 60 s, 10 reads/s, every
            submission tracked).
        retention: seconds a done item and a delivered mark stay in a durable inbox
            (30 days); older ones are deleted when the receiver starts and every hour
            after. A notification redelivered after its mark is gone reaches the
            callbacks again. ``math.inf`` keeps them forever.

    Raises:
        ConfigurationError: no ``auth``, or a ``retention`` that is not positive.

    An exception raised by ``on_event`` is logged and does not stop the receiver.
    """

    def __init__(
        self,
        client: PaymentsClient,
        *,
        auth: Authenticator,
        on_payment_status: PaymentStatusHandler | None = None,
        on_cancellation_outcome: CancellationOutcomeHandler | None = None,
        on_event: EventHandler | None = None,
        inbox: Inbox | SharedInbox | str | Path | None = None,
        limits: ReceiverLimits | None = None,
        retries: Retries | None = None,
        sweep: Sweep | None = None,
        retention: float = NOTIFY_RETENTION,
    ) -> None:
        if auth is None or not hasattr(auth, "check"):
            raise ConfigurationError(
                "a receiver needs auth=BasicAuth(...) or BearerAuth(...): notifications "
                "are never accepted unauthenticated"
            )
        if not retention > 0:
            raise ConfigurationError("retention must be a positive number of seconds")
        self.limits = limits or ReceiverLimits()
        self.sweep = sweep or Sweep()
        self._client = client
        self._auth = auth
        if inbox is None:
            inbox = MemoryInbox(self.limits.queue_size, self.limits.seen_capacity)
        elif isinstance(inbox, str | Path):
            inbox = open_inbox(inbox)
        self.inbox: Inbox | SharedInbox = inbox
        self._retention = float(retention)
        self.stats = ReceiverStats()
        self.waiters = Waiters(self.limits.seen_capacity)
        # the inbox cannot be used (deliveries refused, held items' writes retried, the
        # sweep's reads): one spell for every part, said once per outage by the receiver
        self._storing = Spell(logger, settle=NOTIFY_OUTAGE_SETTLE)
        self.workers = Workers(
            client,
            inbox,
            callbacks=Callbacks(on_payment_status, on_cancellation_outcome, on_event),
            retries=retries or Retries(),
            waiters=self.waiters,
            stats=self.stats,
            count=self.limits.workers,
            capacity=self.limits.seen_capacity,
            failing=self._storing,
        )
        self._started = False
        self._chores: list[asyncio.Task[None]] = []

    def __repr__(self) -> str:
        return f"NotificationReceiver(client={self._client!r}, auth={self._auth!r})"

    @property
    def base_url(self) -> str:
        """The service's base address: notification URIs must point under it."""
        return self._client.base_url

    @property
    def max_body_bytes(self) -> int:
        """Larger notification bodies are refused with 413 (``limits.max_body_bytes``)."""
        return self.limits.max_body_bytes

    # --- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Open the inbox, start the workers (they take what an earlier run left undone)
        and the sweep, and attach to the client's waiters.

        Raises:
            InboxError: the inbox cannot be opened.
        """
        if self._started:
            return
        await self.inbox.open()
        self._started = True
        self.workers.start()
        self._chores = [
            asyncio.create_task(
                sweep(self.inbox, self.sweep, self.workers.wake, self._storing),
                name="notifications-sweep",
            )
        ]
        if self._retention < math.inf:
            self._chores.append(
                asyncio.create_task(
                    prune(self.inbox, self._retention, self._storing), name="notifications-prune"
                )
            )
        self._client.attach_notifications(self)

    async def aclose(self) -> None:
        """Detach from the client, stop the workers and close the inbox.

        What is accepted and not yet processed stays in the inbox: a durable one hands it
        to the next start (of this or another process), the in-memory one to the next
        start of this receiver.
        """
        if not self._started:
            return
        self._client.attach_notifications(None)
        self._started = False
        chores, self._chores = self._chores, []
        for task in chores:
            task.cancel()
        await asyncio.gather(*chores, return_exceptions=True)
        await self.workers.stop()
        await self.inbox.aclose()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def join(self) -> None:
        """Wait until no item in the inbox is waiting or being processed (tests use it)."""
        while self._started and (self.workers.busy or (await self.inbox.status()).depth):
            self.workers.wake()
            await asyncio.sleep(_JOIN_POLL)

    # --- tracking for the sweep ------------------------------------------------------

    async def track(self, payments_service_id: str, kind: str) -> None:
        """Await this id's final status even if its notification never comes.

        The id is kept in the inbox (durable with a durable inbox); once ``sweep.grace``
        seconds pass without its final status being delivered, the sweep reads its status
        (at most ``sweep.rate`` reads per second over all tracked ids) as if a
        notification had come, and again every ``sweep.grace`` until it is final. Its
        final status reaches the callbacks once, whether a notification or the sweep
        finds it.

        Args:
            payments_service_id: the id.
            kind: ``"payment"`` or ``"cancellation"``.

        Raises:
            InboxError: the inbox cannot be written (or the receiver is not started).
        """
        if not self._started:
            raise InboxError("start the receiver before tracking ids")
        await self.inbox.track(
            NotificationKind(kind).value, payments_service_id, check_after=self.sweep.grace
        )

    async def submitted(self, submission: Submission, path: str) -> None:
        """Track an accepted submission of the attached client (it awaits this first).

        The client calls this for every pacs.008 and camt.056 it submitted (created or
        replayed) while the receiver is started with ``sweep.track_submissions`` (the
        default), so the id is tracked, as by ``track``, before the submission is
        returned. A failure to write the inbox is logged and counted
        (``stats.track_failures``), never raised: the submission stands, and only a
        notification or a waiter learns its outcome.

        Args:
            submission: what the client returns to its caller.
            path: where it was POSTed (the client profile's ``camt056_path`` for a
                cancellation, else a payment).
        """
        if not (self._started and self.sweep.track_submissions):
            return
        cancellation = path == self._client.profile.camt056_path
        kind = NotificationKind.CANCELLATION if cancellation else NotificationKind.PAYMENT
        psid = submission.payments_service_id
        try:
            await self.inbox.track(kind.value, psid, check_after=self.sweep.grace)
        except InboxError as exc:
            self.stats.track_failures += 1
            logger.error("submission %s not tracked: %s", psid, exc)
            return
        self.stats.tracked += 1

    # --- the HTTP side, framework-neutral --------------------------------------------

    async def check_credentials(self, headers: Mapping[str, str]) -> None:
        """Authenticate a request from its headers alone (before reading the body).

        Raises:
            NotificationRejected: 401.
        """
        try:
            await authenticate(headers, self._auth)
        except NotificationRejected:
            self.stats.received += 1
            self.stats.rejected[401] += 1
            raise

    async def handle(
        self,
        method: str,
        headers: Mapping[str, str],
        body: bytes,
        *,
        authenticated: bool = False,
    ) -> tuple[int, bytes]:
        """Handle one HTTP request: authenticate, parse, store; never raises for bad input.

        Args:
            method: the HTTP method.
            headers: the request headers.
            body: the raw body.
            authenticated: True when ``check_credentials`` already passed for these headers.

        Returns:
            ``(status, json_body)``: 202 once committed to the inbox, 503 when the inbox
            is full or cannot be written or the receiver is not started (the service
            redelivers), or the 4xx of a refused notification.
        """
        try:
            if not authenticated:
                await self.check_credentials(headers)
            self.stats.received += 1
            notification = parse(
                method,
                headers,
                body,
                base_url=self.base_url,
                max_body_bytes=self.max_body_bytes,
                profile=self._client.profile,
            )
        except NotificationRejected as exc:
            if exc.status != 401 or authenticated:
                self.stats.rejected[exc.status or 400] += 1
            return exc.status or 400, msgspec.json.encode({"error": exc.message})
        if not self._started:
            return 503, b'{"error":"receiver not started"}'
        try:
            await self.inbox.put(notification)
        except InboxFull:
            self.stats.queue_full += 1
            return 503, _QUEUE_FULL_BODY
        except InboxError as exc:
            self.stats.store_failures += 1
            self._storing.failed(
                "cannot store notifications (the one for %s: %s); deliveries are answered "
                "503 and the service sends them again, until the inbox can be written",
                notification.payments_service_id,
                exc,
                told=told(exc),
            )
            return 503, _STORE_DOWN_BODY
        self._storing.ended(INBOX_BACK)
        self.stats.accepted += 1
        self.workers.wake()
        return 202, _ACCEPTED_BODY

    # --- what the client's waiters see (the NotificationSource interface) --------------

    def watch(self, payments_service_id: str, waiter: asyncio.Future[None]) -> None:
        """Complete ``waiter`` when a final status for this id has been confirmed."""
        self.waiters.watch(payments_service_id, waiter)

    def unwatch(self, payments_service_id: str, waiter: asyncio.Future[None]) -> None:
        """Stop watching (the waiter woke, returned or gave up)."""
        self.waiters.unwatch(payments_service_id, waiter)

    def confirmed(self, payments_service_id: str, kind: str) -> Pacs002 | Camt029 | None:
        """The confirmed final message for this id, if a notification brought one.

        Args:
            payments_service_id: the id.
            kind: ``"payment"`` or ``"cancellation"``.
        """
        return self.waiters.recall((NotificationKind(kind).value, payments_service_id))
