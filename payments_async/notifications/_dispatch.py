"""The receiver: an inbox, confirmation by the client's signed GET, dedup, callbacks.

A notification is a hint. It is accepted (202) once it is authenticated, parsed and
committed to the inbox; workers then take it from the inbox, read the status with the
client's own signed GET, and only that confirmed status reaches callbacks and waiters. An
item is done once its callbacks have returned, and the "delivered" mark of its final
status is written in the same transaction, so no final status reaches the callbacks twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Self

import msgspec

from .. import redact_url
from .._errors import ConfigurationError, NotFoundError, PaymentsError
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
from ._config import Retries
from ._core import (
    Authenticator,
    Notification,
    NotificationKind,
    NotificationRejected,
    authenticate,
    parse,
)
from ._defaults import (
    NOTIFY_INBOX_POLL,
    NOTIFY_MAX_BODY_BYTES,
    NOTIFY_PRUNE_EVERY,
    NOTIFY_QUEUE_SIZE,
    NOTIFY_RETENTION,
    NOTIFY_SEEN_CAPACITY,
    NOTIFY_SWEEP_GRACE,
    NOTIFY_SWEEP_RATE,
    NOTIFY_WORKERS,
    NOTIFY_WRITE_WAIT,
    NOTIFY_WRITE_WAIT_MAX,
)
from ._inbox import Inbox, InboxError, InboxFull, InboxItem, MemoryInbox, open_inbox

if TYPE_CHECKING:
    from .._client import PaymentsClient
    from .._models import CancellationOutcome, Submission

__all__ = [
    "NotificationEvent",
    "NotificationReceiver",
    "ReceiverStats",
]

logger = logging.getLogger("payments_async.notifications")

PaymentStatusHandler = Callable[[str, PaymentStatus], Awaitable[None]]
CancellationOutcomeHandler = Callable[["CancellationOutcome"], Awaitable[None]]
EventHandler = Callable[["NotificationEvent"], Awaitable[None]]

_ACCEPTED_BODY: Final = b'{"accepted":true}'
_QUEUE_FULL_BODY: Final = b'{"error":"queue full, retry later"}'
_STORE_DOWN_BODY: Final = b'{"error":"cannot store the notification, retry later"}'

_ERROR_CHARS: Final = 500  # a parked callback's error, as kept in the inbox


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
        accepted: notifications committed to the inbox (answered 202).
        rejected: refusals by HTTP status (401, 413, 422, ...).
        queue_full: notifications refused with 503 because the inbox was at its bound.
        store_failures: notifications refused with 503 because the inbox could not be
            written.
        confirm_reads: confirming GETs made.
        confirm_failures: confirming GETs that failed (after the client's retries).
        known_final: notifications for an id already confirmed final (no GET made).
        callbacks: final statuses whose callbacks returned (one per final status per id).
        delivered: of those, the ones whose "delivered" mark is committed.
        callback_errors: callback attempts that raised (each is retried, then parked).
        parked: items parked as failed: after ``Retries.callback_attempts`` failed
            callback attempts, or ``Retries.not_found_reads`` reads answered 404.
        not_found: items parked because the service answered 404 to every read (an id
            it does not know).
        write_retries: writes of a delivery's outcome (the completion after its callback
            returned, or the retry after it raised) that failed and were tried again; the
            item stays held meanwhile, so its callback never runs again for it.
        tracked: submissions of the attached client tracked for the sweep.
        track_failures: submissions that could not be tracked (the inbox was not
            writable); their outcomes reach the callbacks only by a notification.
    """

    received: int = 0
    accepted: int = 0
    rejected: Counter[int] = field(default_factory=Counter)
    queue_full: int = 0
    store_failures: int = 0
    confirm_reads: int = 0
    confirm_failures: int = 0
    known_final: int = 0
    callbacks: int = 0
    delivered: int = 0
    callback_errors: int = 0
    parked: int = 0
    not_found: int = 0
    write_retries: int = 0
    tracked: int = 0
    track_failures: int = 0


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
        queue_size: notifications the in-memory inbox holds unprocessed; when full, 503.
        workers: items processed at once (confirming reads in flight).
        seen_capacity: delivered marks the in-memory inbox keeps, and the size of the
            confirmed-final cache.
        max_body_bytes: larger bodies are refused with 413.
        retries: how failed callbacks and confirming reads are tried again, and when a
            notification is parked as failed (``stats.parked``, ``inbox status``):
            ``Retries()`` tries a raising callback 5 times, and parks a notification whose
            id the service answers 404 after 3 reads over 6 s.
        sweep_grace: seconds an id given to ``track`` may go without its final status
            before the sweep reads it (and again every ``sweep_grace`` until it is final).
        sweep_rate: reads per second the sweep makes at most.
        track_submissions: track (as ``track`` does) every pacs.008 and camt.056 the
            attached client submits while the receiver is started; False leaves tracking
            to your calls of ``track``.
        retention: seconds a done item and a delivered mark stay in a durable inbox
            (30 days); older ones are deleted when the receiver starts and every hour
            after. A notification redelivered after its mark is gone reaches the
            callbacks again. ``math.inf`` keeps them forever.

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
        inbox: Inbox | str | Path | None = None,
        queue_size: int = NOTIFY_QUEUE_SIZE,
        workers: int = NOTIFY_WORKERS,
        seen_capacity: int = NOTIFY_SEEN_CAPACITY,
        max_body_bytes: int = NOTIFY_MAX_BODY_BYTES,
        retries: Retries | None = None,
        sweep_grace: float = NOTIFY_SWEEP_GRACE,
        sweep_rate: float = NOTIFY_SWEEP_RATE,
        track_submissions: bool = True,
        retention: float = NOTIFY_RETENTION,
    ) -> None:
        if auth is None or not hasattr(auth, "check"):
            raise ConfigurationError(
                "a receiver needs auth=BasicAuth(...) or BearerAuth(...): notifications "
                "are never accepted unauthenticated"
            )
        if min(queue_size, workers, seen_capacity, max_body_bytes) < 1:
            raise ConfigurationError(
                "queue_size, workers, seen_capacity and max_body_bytes must be >= 1"
            )
        if not (0 < sweep_grace < float("inf") and 0 < sweep_rate < float("inf")):
            raise ConfigurationError("sweep_grace and sweep_rate must be positive and finite")
        if not retention > 0:
            raise ConfigurationError("retention must be a positive number of seconds")
        self._client = client
        self._auth = auth
        self._on_payment = on_payment_status
        self._on_cancellation = on_cancellation_outcome
        self._on_event = on_event
        self._worker_count = workers
        if inbox is None:
            inbox = MemoryInbox(queue_size, seen_capacity)
        elif isinstance(inbox, str | Path):
            inbox = open_inbox(inbox)
        self.inbox: Inbox = inbox
        self._capacity = seen_capacity
        self.max_body_bytes = max_body_bytes
        self._retries = retries or Retries()
        self._sweep_grace = float(sweep_grace)
        self._sweep_rate = float(sweep_rate)
        self._track_submissions = bool(track_submissions)
        self._retention = float(retention)
        self.stats = ReceiverStats()
        self._started = False
        self._items: asyncio.Queue[InboxItem] = asyncio.Queue()
        self._more = asyncio.Event()  # something may be due: a put, a worker freed
        self._busy = 0  # items claimed and not finished
        self._tasks: list[asyncio.Task[None]] = []
        # (kind, id) -> confirming reads failed in a row: their own backoff, kept apart
        # from the callback attempts that lead to parking (bounded like the finals)
        self._read_failures: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._not_found: OrderedDict[tuple[str, str], int] = OrderedDict()  # 404s, likewise
        self._write_failing = False  # a delivery's write failed and is being retried
        # Confirmed finals, kept encoded: bytes are one object the garbage collector never
        # traverses, where a decoded message is a tree of ~15 tracked objects; 10,000 of
        # those were enough to start a full collection (a 0.5-1 s pause) mid-stream.
        # Keyed by (kind value, id): a tuple of strings, which the collector stops tracking,
        # where one holding the enum member stays tracked.
        self._final: OrderedDict[tuple[str, str], bytes] = OrderedDict()
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
        """Open the inbox, start the workers (they take what an earlier run left undone)
        and attach to the client's waiters.

        Raises:
            InboxError: the inbox cannot be opened.
        """
        if self._started:
            return
        await self.inbox.open()
        self._started = True
        self._items = asyncio.Queue()
        self._busy = 0
        self._tasks = [
            asyncio.create_task(self._feed(), name="notifications-inbox"),
            asyncio.create_task(self._sweep(), name="notifications-sweep"),
        ]
        if self._retention < float("inf"):
            self._tasks.append(asyncio.create_task(self._prune(), name="notifications-prune"))
        self._tasks += [
            asyncio.create_task(self._work(), name=f"notifications-{i}")
            for i in range(self._worker_count)
        ]
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
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        while not self._items.empty():
            self.inbox.release(self._items.get_nowait())
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
        while self._started and (self._busy or (await self.inbox.status()).depth):
            self._more.set()
            await asyncio.sleep(0.005)

    async def track(self, payments_service_id: str, kind: str) -> None:
        """Await this id's final status even if its notification never comes.

        The id is kept in the inbox (durable with a durable inbox); once ``sweep_grace``
        seconds pass without its final status being delivered, the sweep reads its status
        (at most ``sweep_rate`` reads per second over all tracked ids) as if a
        notification had come, and again every ``sweep_grace`` until it is final. Its
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
            NotificationKind(kind).value, payments_service_id, check_after=self._sweep_grace
        )

    async def submitted(self, submission: Submission, path: str) -> None:
        """Track an accepted submission of the attached client (it awaits this first).

        The client calls this for every pacs.008 and camt.056 it submitted (created or
        replayed) while the receiver is started with ``track_submissions`` (the default),
        so the id is tracked, as by ``track``, before the submission is returned. A
        failure to write the inbox is logged and counted (``stats.track_failures``), never
        raised: the submission stands, and only a notification or a waiter learns its
        outcome.

        Args:
            submission: what the client returns to its caller.
            path: where it was POSTed (the client profile's ``camt056_path`` for a
                cancellation, else a payment).
        """
        if not (self._started and self._track_submissions):
            return
        cancellation = path == self._client.profile.camt056_path
        kind = NotificationKind.CANCELLATION if cancellation else NotificationKind.PAYMENT
        psid = submission.payments_service_id
        try:
            await self.inbox.track(kind.value, psid, check_after=self._sweep_grace)
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
            logger.error(
                "notification for %s not stored: %s", notification.payments_service_id, exc
            )
            return 503, _STORE_DOWN_BODY
        self.stats.accepted += 1
        self._more.set()
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

    async def _feed(self) -> None:
        """Take due items from the inbox while a worker is free; wait for more."""
        while True:
            self._more.clear()
            free = self._worker_count - self._busy
            items: list[InboxItem] = []
            if free > 0:
                try:
                    items = await self.inbox.claim(free)
                except InboxError as exc:
                    logger.error("cannot read the notification inbox: %s", exc)
            for item in items:
                self._busy += 1
                self._items.put_nowait(item)
            if items:
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(NOTIFY_INBOX_POLL):
                    await self._more.wait()

    async def _sweep(self) -> None:
        """Read tracked ids past their grace, at most ``sweep_rate`` per second."""
        pause = 1.0 / self._sweep_rate
        idle = min(self._sweep_grace / 2, 1.0)
        while True:
            try:
                due = await self.inbox.due_tracked(
                    max(1, int(self._sweep_rate)), recheck=self._sweep_grace
                )
            except InboxError as exc:
                logger.error("cannot read the tracked ids: %s", exc)
                due = []
            for kind, psid in due:
                try:
                    await self.inbox.put(Notification(psid, NotificationKind(kind), "short"))
                except InboxError as exc:  # read again after sweep_grace
                    logger.warning("sweep of %s not stored: %s", psid, exc)
                self._more.set()
                await asyncio.sleep(pause)
            if not due:
                await asyncio.sleep(idle)

    async def _prune(self) -> None:
        """Delete what is past ``retention`` now, then every ``NOTIFY_PRUNE_EVERY`` s."""
        while True:
            try:
                pruned = await self.inbox.prune(self._retention)
            except InboxError as exc:
                logger.warning("cannot prune the inbox: %s", exc)
            else:
                if pruned:
                    logger.info("pruned %d done items and delivered marks", pruned)
            await asyncio.sleep(NOTIFY_PRUNE_EVERY)

    async def _work(self) -> None:
        while True:
            item = await self._items.get()
            try:
                await self._process(item)
            except asyncio.CancelledError:
                self.inbox.release(item)
                raise
            except Exception:
                self.inbox.release(item)
                logger.exception(
                    "notification for %s could not be processed",
                    item.notification.payments_service_id,
                )
            finally:
                self._busy -= 1
                self._more.set()

    async def _process(self, item: InboxItem) -> None:
        notification = item.notification
        key = item.key
        message = self._recall(key)
        if message is not None:
            # A duplicate, or a late/out-of-order delivery: final statuses are terminal.
            self.stats.known_final += 1
        else:
            read = await self._confirm(notification)
            if isinstance(read, NotFoundError):
                await self._not_known(item, read)
                return
            if isinstance(read, PaymentsError):  # try again later, never parked
                failures = self._count(self._read_failures, key)
                wait = self._retries.backoff(failures)
                await self._write_held(
                    notification.payments_service_id,
                    lambda: self.inbox.defer(item, delay=wait),
                )
                return
            message = read
            self._read_failures.pop(key, None)
            self._not_found.pop(key, None)
        if isinstance(message, Camt029):
            summary: Any = summarize_resolution(message)
        else:
            summary = summarize_status_report(message)
        if not summary.is_final:
            await self._write_held(
                notification.payments_service_id, lambda: self.inbox.complete(item, None)
            )
            await self._emit(notification, message, first=False)
            return
        psid = notification.payments_service_id
        self._final[key] = encode(message)
        if len(self._final) > self._capacity:
            self._final.popitem(last=False)
        self._wake(psid)
        mark = f"{notification.kind.value}:{psid}:{summary.status}"
        if await self.inbox.is_delivered(mark):
            # Not the first: the mark is there.
            await self._write_held(psid, lambda: self.inbox.complete(item, mark))
            await self._emit(notification, message, first=False)
            return
        try:
            await self._deliver(psid, message, summary)
        except Exception as exc:
            self.stats.callback_errors += 1
            attempts = item.attempts + 1
            park = attempts >= self._retries.callback_attempts
            logger.exception(
                "callback failed for %s (attempt %d of %d%s)",
                psid,
                attempts,
                self._retries.callback_attempts,
                ", parked as failed" if park else "",
            )
            # Stored as text: no NUL (PostgreSQL refuses it, and the write would never pass).
            error = redact_url(f"{exc!r}")[:_ERROR_CHARS].replace("\x00", "\\x00")
            await self._write_held(
                psid,
                lambda: self.inbox.retry(
                    item, delay=self._retries.backoff(attempts), park=park, error=error
                ),
            )
            if park:
                self.stats.parked += 1
            return
        self.stats.callbacks += 1
        await self._write_held(psid, lambda: self.inbox.complete(item, mark))
        self.stats.delivered += 1
        await self._emit(notification, message, first=True)

    def _count(self, counts: OrderedDict[tuple[str, str], int], key: tuple[str, str]) -> int:
        """One more failure of ``key`` in ``counts`` (bounded like the confirmed finals)."""
        failures = counts.pop(key, 0) + 1
        counts[key] = failures
        if len(counts) > self._capacity:
            counts.popitem(last=False)
        return failures

    async def _not_known(self, item: InboxItem, error: NotFoundError) -> None:
        """A read answered 404: read again a few times (the service's read side may lag
        its notifier), then park the item with the reason and never read it again."""
        psid = item.notification.payments_service_id
        reads = self._count(self._not_found, item.key)
        if reads < self._retries.not_found_reads:
            wait = self._retries.not_found_backoff(reads)
            await self._write_held(psid, lambda: self.inbox.defer(item, delay=wait))
            return
        self._not_found.pop(item.key, None)
        self._read_failures.pop(item.key, None)
        reason = (
            f"the service does not know {item.notification.kind.value} {psid}: "
            f"{reads} confirming reads answered {error.status}"
        )
        logger.error("notification for %s parked as failed: %s", psid, reason)
        stored = redact_url(reason)[:_ERROR_CHARS].replace("\x00", "\\x00")
        await self._write_held(
            psid, lambda: self.inbox.retry(item, delay=0.0, park=True, error=stored)
        )
        self.stats.parked += 1
        self.stats.not_found += 1

    async def _write_held(self, psid: str, write: Callable[[], Awaitable[object]]) -> None:
        """Write what processing the item decided, keeping it held until it is written.

        Releasing the item instead would make it due again at once: its callback would run
        again for a status it already handled (or, after it raised, uncounted), and any
        other write that keeps failing would loop, with a confirming GET and a log record
        on every pass. So a failed write is tried again with backoff, logged once per
        outage; only stopping the receiver lets the item go (the documented crash window).
        """
        wait = NOTIFY_WRITE_WAIT
        while True:
            try:
                await write()
            except InboxError as exc:
                self.stats.write_retries += 1
                if not self._write_failing:
                    self._write_failing = True
                    logger.error(
                        "cannot write the delivery of %s to the inbox: %s; items whose "
                        "callbacks ran are held and their writes retried until they succeed",
                        psid,
                        exc,
                    )
                await asyncio.sleep(wait)
                wait = min(wait * 2, NOTIFY_WRITE_WAIT_MAX)
                continue
            if self._write_failing:
                self._write_failing = False
                logger.warning("the inbox is writable again: the deliveries held are written")
            return

    async def _confirm(self, notification: Notification) -> Pacs002 | Camt029 | PaymentsError:
        """The status the client's signed GET reads, or the error it raised."""
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
            return exc

    async def _deliver(self, psid: str, message: Pacs002 | Camt029, summary: Any) -> None:
        """Run the delivery callback of a final status; what it raises propagates."""
        if isinstance(message, Camt029):
            if self._on_cancellation is not None:  # nothing to build without a handler
                from .._models import CancellationOutcome

                await self._on_cancellation(
                    CancellationOutcome.from_resolution(psid, message, summary)
                )
        elif self._on_payment is not None:
            await self._on_payment(psid, summary)

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
