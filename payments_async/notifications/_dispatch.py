"""The receiver: a bounded queue, confirmation by the client's signed GET, dedup, callbacks.

A notification is a hint. It is accepted (2xx) as soon as it is authenticated, parsed and
queued; workers then read the status with the client's own signed GET, and only that
confirmed status reaches callbacks and waiters.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Protocol, Self

import msgspec

from .._errors import ConfigurationError, PaymentsError
from ..iso20022 import (
    Camt029,
    Outcome,
    Pacs002,
    PaymentStatus,
    decode_camt029,
    decode_pacs002,
    encode,
    summarize_resolution,
    summarize_status_report,
)
from ._core import (
    Authenticator,
    Notification,
    NotificationKind,
    NotificationRejected,
    authenticate,
    parse,
)
from ._defaults import (
    NOTIFY_MAX_BODY_BYTES,
    NOTIFY_QUEUE_SIZE,
    NOTIFY_SEEN_CAPACITY,
    NOTIFY_WORKERS,
)

if TYPE_CHECKING:
    from .._client import PaymentsClient
    from .._models import CancellationOutcome

__all__ = [
    "MemorySeenStore",
    "NotificationEvent",
    "NotificationReceiver",
    "ReceiverStats",
    "SeenStore",
]

logger = logging.getLogger("payments_async.notifications")

PaymentStatusHandler = Callable[[str, PaymentStatus], Awaitable[None]]
CancellationOutcomeHandler = Callable[["CancellationOutcome"], Awaitable[None]]

_ACCEPTED_BODY: Final = b'{"accepted":true}'
_QUEUE_FULL_BODY: Final = b'{"error":"queue full, retry later"}'


class SeenStore(Protocol):
    """Remembers which final statuses were already handed to a callback.

    Pass a durable one (a database table with a unique key) to keep "exactly once per
    final status per id" across restarts; the default is a bounded in-memory set.
    """

    async def add(self, key: str) -> bool:
        """Record ``key``; True when it was not there before (the callback then runs)."""
        ...


class MemorySeenStore:
    """A bounded in-memory ``SeenStore``: the oldest keys are forgotten past ``capacity``.

    Args:
        capacity: how many keys are kept.
    """

    def __init__(self, capacity: int = NOTIFY_SEEN_CAPACITY) -> None:
        if capacity < 1:
            raise ConfigurationError("capacity must be >= 1")
        self._capacity = capacity
        self._keys: OrderedDict[str, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._keys)

    async def add(self, key: str) -> bool:
        """Record ``key``; True when new."""
        if key in self._keys:
            self._keys.move_to_end(key)
            return False
        self._keys[key] = None
        if len(self._keys) > self._capacity:
            self._keys.popitem(last=False)
        return True


@dataclass(frozen=True, slots=True)
class NotificationEvent:
    """One processed notification and the status the confirming read found.

    Attributes:
        notification: what arrived.
        status: the confirmed raw status (``sts.conf`` / ``txSts``), or None when the
            confirming read failed.
        outcome: the confirmed outcome (``Outcome.PENDING`` while not final).
        final: True when the confirmed status is final.
        first: True when this final status reached the callbacks now (False for a
            duplicate, a late delivery, or a status that is not final).
        error: the error of a failed confirming read.
    """

    notification: Notification
    status: str | None
    outcome: Outcome
    final: bool
    first: bool
    error: PaymentsError | None = None


@dataclass(slots=True)
class ReceiverStats:
    """Counters of a receiver (tests and the benchmark read them).

    Attributes:
        received: requests handled.
        accepted: notifications queued (answered 202).
        rejected: refusals by HTTP status (401, 413, 422, ...).
        queue_full: notifications refused with 503 because the queue was full.
        confirm_reads: confirming GETs made.
        confirm_failures: confirming GETs that failed (after the client's retries).
        known_final: notifications for an id already confirmed final (no GET made).
        callbacks: callbacks run (one per final status per id).
    """

    received: int = 0
    accepted: int = 0
    rejected: Counter[int] = field(default_factory=Counter)
    queue_full: int = 0
    confirm_reads: int = 0
    confirm_failures: int = 0
    known_final: int = 0
    callbacks: int = 0


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
    final, and poll only as a slower safety net.

    Args:
        client: the client whose signed GETs confirm each notification.
        auth: how the service authenticates (``BasicAuth`` or ``BearerAuth``); required.
        on_payment_status: ``async (payments_service_id, PaymentStatus)``, once per final
            status per id.
        on_cancellation_outcome: ``async (CancellationOutcome)``, once per final outcome
            per id.
        on_event: ``async (NotificationEvent)`` for every processed notification
            (duplicates and non-final statuses included), e.g. to print them.
        queue_size: notifications accepted but not yet processed; when full, 503.
        workers: confirming reads in flight at once.
        seen: where "already delivered" is remembered; a ``MemorySeenStore`` by default.
        seen_capacity: capacity of the default store and of the confirmed-final cache.
        max_body_bytes: larger bodies are refused with 413.

    Exceptions raised by a callback are logged and do not stop the receiver.
    """

    def __init__(
        self,
        client: PaymentsClient,
        *,
        auth: Authenticator,
        on_payment_status: PaymentStatusHandler | None = None,
        on_cancellation_outcome: CancellationOutcomeHandler | None = None,
        on_event: Callable[[NotificationEvent], Awaitable[None]] | None = None,
        queue_size: int = NOTIFY_QUEUE_SIZE,
        workers: int = NOTIFY_WORKERS,
        seen: SeenStore | None = None,
        seen_capacity: int = NOTIFY_SEEN_CAPACITY,
        max_body_bytes: int = NOTIFY_MAX_BODY_BYTES,
    ) -> None:
        if auth is None or not hasattr(auth, "check"):
            raise ConfigurationError(
                "a receiver needs auth=BasicAuth(...) or BearerAuth(...): notifications "
                "are never accepted unauthenticated"
            )
        if queue_size < 1 or workers < 1 or seen_capacity < 1 or max_body_bytes < 1:
            raise ConfigurationError(
                "queue_size, workers, seen_capacity and max_body_bytes must be >= 1"
            )
        self._client = client
        self._auth = auth
        self._on_payment = on_payment_status
        self._on_cancellation = on_cancellation_outcome
        self._on_event = on_event
        self._queue_size = queue_size
        self._worker_count = workers
        self._seen: SeenStore = seen if seen is not None else MemorySeenStore(seen_capacity)
        self._capacity = seen_capacity
        self.max_body_bytes = max_body_bytes
        self.stats = ReceiverStats()
        self._queue: asyncio.Queue[Notification] | None = None
        self._workers: list[asyncio.Task[None]] = []
        # Confirmed finals, kept encoded: bytes are one object the garbage collector never
        # traverses, where a decoded message is a tree of ~15 tracked objects; 10,000 of
        # those were enough to start a full collection (a 0.5-1 s pause) mid-stream.
        # Keyed by (kind value, id): a tuple of strings, which the collector stops tracking,
        # where one holding the enum member stays tracked.
        self._final: OrderedDict[tuple[str, str], bytes] = OrderedDict()
        self._inflight: set[tuple[str, str]] = set()
        self._again: set[tuple[str, str]] = set()
        # id -> its sleeping waiter (nearly always one), or a list of them: no container
        # per waiter for the collector to traverse
        self._watchers: dict[str, asyncio.Future[None] | list[asyncio.Future[None]]] = {}

    def __repr__(self) -> str:
        return f"NotificationReceiver(client={self._client!r}, auth={self._auth!r})"

    @property
    def base_url(self) -> str:
        """The service's base address: notification URIs must point under it."""
        return self._client.base_url

    # --- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Start the workers and attach to the client's waiters."""
        if self._queue is not None:
            return
        self._queue = asyncio.Queue(self._queue_size)
        self._workers = [
            asyncio.create_task(self._work(self._queue), name=f"notifications-{i}")
            for i in range(self._worker_count)
        ]
        self._client.attach_notifications(self)

    async def aclose(self) -> None:
        """Detach from the client and stop the workers (queued notifications are dropped)."""
        if self._queue is None:
            return
        self._client.attach_notifications(None)
        self._queue = None
        workers, self._workers = self._workers, []
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)

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
        """Wait until every queued notification has been processed (tests use it)."""
        if self._queue is not None:
            await self._queue.join()

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
        """Handle one HTTP request: authenticate, parse, queue; never raises for bad input.

        Args:
            method: the HTTP method.
            headers: the request headers.
            body: the raw body.
            authenticated: True when ``check_credentials`` already passed for these headers.

        Returns:
            ``(status, json_body)``: 202 when queued, 503 when the queue is full or the
            receiver is not started, or the 4xx of a refused notification.
        """
        try:
            if not authenticated:
                await self.check_credentials(headers)
            self.stats.received += 1
            notification = parse(
                method, headers, body, base_url=self.base_url, max_body_bytes=self.max_body_bytes
            )
        except NotificationRejected as exc:
            if exc.status != 401 or authenticated:
                self.stats.rejected[exc.status or 400] += 1
            return exc.status or 400, msgspec.json.encode({"error": exc.message})
        if self._queue is None:
            return 503, b'{"error":"receiver not started"}'
        try:
            self._queue.put_nowait(notification)
        except asyncio.QueueFull:
            self.stats.queue_full += 1
            return 503, _QUEUE_FULL_BODY
        self.stats.accepted += 1
        return 202, _ACCEPTED_BODY

    # --- what the client's waiters see (the NotificationSource interface) --------------

    def watch(self, payments_service_id: str, waiter: asyncio.Future[None]) -> None:
        """Complete ``waiter`` when a final status for this id has been confirmed."""
        current = self._watchers.get(payments_service_id)
        if current is None:
            self._watchers[payments_service_id] = waiter
        elif isinstance(current, list):
            current.append(waiter)
        else:
            self._watchers[payments_service_id] = [current, waiter]

    def unwatch(self, payments_service_id: str, waiter: asyncio.Future[None]) -> None:
        """Stop watching (the waiter woke, returned or gave up)."""
        current = self._watchers.get(payments_service_id)
        if current is waiter:
            del self._watchers[payments_service_id]
        elif isinstance(current, list):
            if waiter in current:
                current.remove(waiter)
            if not current:
                del self._watchers[payments_service_id]

    def _wake(self, payments_service_id: str) -> None:
        """Complete every waiter of this id (they are forgotten: each sleep registers anew)."""
        current = self._watchers.pop(payments_service_id, None)
        for waiter in current if isinstance(current, list) else (current,):
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    def confirmed(self, payments_service_id: str, kind: str) -> Pacs002 | Camt029 | None:
        """The confirmed final message for this id, if a notification brought one.

        Args:
            payments_service_id: the id.
            kind: ``"payment"`` or ``"cancellation"``.
        """
        return self._recall((NotificationKind(kind).value, payments_service_id))

    def _recall(self, key: tuple[str, str]) -> Pacs002 | Camt029 | None:
        raw = self._final.get(key)
        if raw is None:
            return None
        if key[0] == NotificationKind.CANCELLATION.value:
            return decode_camt029(raw)
        return decode_pacs002(raw)

    # --- processing --------------------------------------------------------------------

    async def _work(self, queue: asyncio.Queue[Notification]) -> None:
        while True:
            notification = await queue.get()
            try:
                await self._process(notification)
            except Exception:
                logger.exception(
                    "notification for %s could not be processed",
                    notification.payments_service_id,
                )
            finally:
                queue.task_done()

    async def _process(self, notification: Notification) -> None:
        key = (notification.kind.value, notification.payments_service_id)
        if key in self._final:
            # A duplicate, or a late/out-of-order delivery: final statuses are terminal.
            self.stats.known_final += 1
            known = self._recall(key) if self._on_event is not None else None
            if known is not None:
                await self._emit(notification, known, first=False)
            return
        if key in self._inflight:
            self._again.add(key)  # the read in flight may predate this change: read again
            return
        self._inflight.add(key)
        try:
            while True:
                self._again.discard(key)
                message = await self._confirm(notification)
                if message is None:
                    return
                if await self._settle(notification, key, message):
                    return
                if key not in self._again:
                    return
        finally:
            self._inflight.discard(key)

    async def _confirm(self, notification: Notification) -> Pacs002 | Camt029 | None:
        psid = notification.payments_service_id
        self.stats.confirm_reads += 1
        try:
            if notification.kind is NotificationKind.CANCELLATION:
                return await self._client.get_cancellation_outcome(psid)
            return await self._client.get_credit_transfer_status(psid)
        except PaymentsError as exc:
            self.stats.confirm_failures += 1
            logger.warning("confirming read for notified %s failed: %s", psid, exc)
            await self._call(
                self._on_event,
                NotificationEvent(notification, None, Outcome.UNKNOWN, False, False, exc),
            )
            return None

    async def _settle(
        self,
        notification: Notification,
        key: tuple[str, str],
        message: Pacs002 | Camt029,
    ) -> bool:
        """Act on a confirmed status; True when it was final."""
        psid = notification.payments_service_id
        if isinstance(message, Camt029):
            resolution = summarize_resolution(message)
            final, status = resolution.is_final, resolution.status
        else:
            payment = summarize_status_report(message)
            final, status = payment.is_final, payment.status
        if not final:
            await self._emit(notification, message, first=False)
            return False
        self._final[key] = encode(message)
        if len(self._final) > self._capacity:
            self._final.popitem(last=False)
        self._wake(psid)
        first = await self._seen.add(f"{notification.kind.value}:{psid}:{status}")
        if first:
            self.stats.callbacks += 1
            if isinstance(message, Camt029):
                if self._on_cancellation is not None:  # nothing to build without a handler
                    from .._models import CancellationOutcome

                    await self._call(
                        self._on_cancellation,
                        CancellationOutcome.from_resolution(psid, message, resolution),
                    )
            elif self._on_payment is not None:
                try:
                    await self._on_payment(psid, payment)
                except Exception:
                    logger.exception("on_payment_status callback failed for %s", psid)
        await self._emit(notification, message, first=first)
        return True

    async def _emit(
        self, notification: Notification, message: Pacs002 | Camt029, *, first: bool
    ) -> None:
        if self._on_event is None:
            return
        if isinstance(message, Camt029):
            summary: Any = summarize_resolution(message)
        else:
            summary = summarize_status_report(message)
        await self._call(
            self._on_event,
            NotificationEvent(
                notification, summary.status, summary.outcome, summary.is_final, first
            ),
        )

    @staticmethod
    async def _call(handler: Callable[[Any], Awaitable[None]] | None, arg: object) -> None:
        if handler is None:
            return
        try:
            await handler(arg)
        except Exception:
            logger.exception("notification callback %r failed", handler)
