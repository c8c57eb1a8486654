"""The workers: take notifications from the inbox, confirm each with the client's signed
GET, call back once per final status, wake the waiters, and write what happened.

An item is done once its callbacks (and the event of its first final status) have
returned, and the "delivered" mark of its final status is written in the same
transaction, so no final status reaches the callbacks twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar

from .. import redact_url
from .._errors import NotFoundError, PaymentsError
from .._store import Spell, told
from ..iso20022 import (
    Camt029,
    Outcome,
    Pacs002,
    summarize_resolution,
    summarize_status_report,
)
from ._config import Retries
from ._core import Notification, NotificationKind
from ._defaults import NOTIFY_INBOX_POLL, NOTIFY_WRITE_WAIT, NOTIFY_WRITE_WAIT_MAX
from ._events import (
    CancellationOutcomeHandler,
    EventHandler,
    NotificationEvent,
    PaymentStatusHandler,
    ReceiverStats,
)
from ._inbox import Inbox, InboxError, InboxItem, SharedInbox
from ._items import INBOX_BACK
from ._waiters import Waiters

if TYPE_CHECKING:
    from .._client import PaymentsClient

__all__ = ["Callbacks", "Workers"]

_T = TypeVar("_T")

logger = logging.getLogger("payments_async.notifications")

_ERROR_CHARS: Final = 500  # a parked item's error, as kept in the inbox


@dataclass(frozen=True, slots=True)
class Callbacks:
    """The application's handlers (see ``NotificationReceiver``)."""

    on_payment_status: PaymentStatusHandler | None = None
    on_cancellation_outcome: CancellationOutcomeHandler | None = None
    on_event: EventHandler | None = None


def _stored_error(text: str) -> str:
    """An error as kept in the inbox: redacted, bounded, and without NUL (PostgreSQL
    refuses it in text, and the write would never pass)."""
    return redact_url(text)[:_ERROR_CHARS].replace("\x00", "\\x00")


class Workers:
    """``count`` workers over one inbox: fed by one task that claims due items, or, for an
    inbox shared by several receivers, given items by the inbox itself (its ``serve``).

    Args:
        client: whose signed GETs confirm each notification.
        inbox: where the items wait.
        callbacks: the application's handlers.
        retries: when a failed read or callback is tried again, and when an item is parked.
        waiters: woken when a final status is confirmed.
        stats: the receiver's counters.
        count: items processed at once.
        capacity: failure counts kept per id (the oldest are forgotten).
        failing: the receiver's one spell of inbox failures, shared by every part of it
            (what stores deliveries, the sweep, these workers), so that a full disk or a
            lost database is said once per outage, not once by each part that meets it.
    """

    def __init__(
        self,
        client: PaymentsClient,
        inbox: Inbox | SharedInbox,
        *,
        callbacks: Callbacks,
        retries: Retries,
        waiters: Waiters,
        stats: ReceiverStats,
        count: int,
        capacity: int,
        failing: Spell,
    ) -> None:
        self._client = client
        self._inbox = inbox
        self._callbacks = callbacks
        self._retries = retries
        self._waiters = waiters
        self._stats = stats
        self._count = count
        self._capacity = capacity
        self._items: asyncio.Queue[InboxItem] = asyncio.Queue()
        self._more = asyncio.Event()  # something may be due: a put, a worker freed
        self.busy = 0  # items claimed and not finished
        self._tasks: list[asyncio.Task[None]] = []
        # (kind, id) -> confirming reads failed in a row, and reads answered 404: their
        # own counts, kept apart from the callback attempts that lead to parking
        self._read_failures: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._not_found: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._failing = failing  # the inbox could not be used (said once per outage)

    def start(self) -> None:
        """Start the feeder and the workers (they take what an earlier run left undone)."""
        self._items = asyncio.Queue()
        self.busy = 0
        inbox = self._inbox
        if isinstance(inbox, SharedInbox):
            serving = inbox.serve(self._given, workers=self._count)
            self._tasks = [asyncio.create_task(serving, name="notifications-inbox")]
            return
        self._tasks = [asyncio.create_task(self._feed(inbox), name="notifications-inbox")]
        self._tasks += [
            asyncio.create_task(self._work(inbox), name=f"notifications-{i}")
            for i in range(self._count)
        ]

    async def stop(self) -> None:
        """Stop every worker; items claimed and not processed are released."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if not isinstance(self._inbox, SharedInbox):
            while not self._items.empty():
                self._inbox.release(self._items.get_nowait())

    def wake(self) -> None:
        """Something may be due (a notification was stored): look now, not at the poll."""
        self._more.set()

    async def _feed(self, inbox: Inbox) -> None:
        """Take due items from the inbox while a worker is free; wait for more."""
        while True:
            self._more.clear()
            free = self._count - self.busy
            items: list[InboxItem] = []
            if free > 0:
                try:
                    items = await inbox.claim(free)
                except InboxError as exc:
                    self._failing.failed(
                        "cannot read the notification inbox: %s", exc, told=told(exc)
                    )
                else:
                    self._failing.ended(INBOX_BACK)
            for item in items:
                self.busy += 1
                self._items.put_nowait(item)
            if items:
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(NOTIFY_INBOX_POLL):
                    await self._more.wait()

    async def _work(self, inbox: Inbox) -> None:
        while True:
            item = await self._items.get()
            try:
                await self.process(item)
            except asyncio.CancelledError:
                inbox.release(item)
                raise
            except Exception:
                inbox.release(item)
                _not_processed(item)
            finally:
                self.busy -= 1
                self._more.set()

    async def _given(self, item: InboxItem) -> None:
        """Process an item a shared inbox gave; what fails is raised to the inbox, which
        gives the item again later."""
        self.busy += 1
        try:
            await self.process(item)
        except asyncio.CancelledError:
            raise
        except Exception:
            _not_processed(item)
            raise
        finally:
            self.busy -= 1

    async def process(self, item: InboxItem) -> None:
        """Confirm one item, call back once for a final status, and write the outcome."""
        notification = item.notification
        key = item.key
        message = self._waiters.recall(key)
        if message is not None:
            # A duplicate, or a late/out-of-order delivery: final statuses are terminal.
            self._stats.known_final += 1
        else:
            read = await self.confirm(notification)
            if isinstance(read, NotFoundError):
                await self._not_known(item, read)
                return
            if isinstance(read, PaymentsError):  # try again later, never parked
                wait = self._retries.backoff(self._one_more(self._read_failures, key))
                await self._write_held(
                    notification.payments_service_id,
                    lambda: self._inbox.defer(item, delay=wait),
                )
                return
            message = read
            self._read_failures.pop(key, None)
            self._not_found.pop(key, None)
        summary = _summary(message)
        psid = notification.payments_service_id
        if not summary.is_final:
            await self._write_held(psid, lambda: self._inbox.complete(item, None))
            await self._emit(notification, message, first=False)
            return
        self._waiters.confirm(key, message)
        mark = f"{notification.kind.value}:{psid}:{summary.status}"
        if await self._held(psid, lambda: self._inbox.is_delivered(mark), "read the mark of"):
            # Not the first: the mark is there.
            await self._write_held(psid, lambda: self._inbox.complete(item, mark))
            await self._emit(notification, message, first=False)
            return
        try:
            await self._deliver(psid, message, summary)
        except Exception as exc:
            await self._callback_failed(item, exc)
            return
        self._stats.callbacks += 1
        # The first final event is part of the delivery (`listen` prints it): handed out
        # before the mark, like the callbacks, so that a process stopped in between hands
        # it out again after its restart rather than never.
        await self._emit(notification, message, first=True)
        await self._write_held(psid, lambda: self._inbox.complete(item, mark))
        self._stats.delivered += 1

    async def confirm(self, notification: Notification) -> Pacs002 | Camt029 | PaymentsError:
        """The status the client's signed GET reads, or the error it raised."""
        psid = notification.payments_service_id
        self._stats.confirm_reads += 1
        try:
            if notification.kind is NotificationKind.CANCELLATION:
                return await self._client.get_cancellation_outcome(psid)
            return await self._client.get_credit_transfer_status(psid)
        except PaymentsError as exc:
            self._stats.confirm_failures += 1
            logger.warning("confirming read for notified %s failed: %s", psid, exc)
            await _call(
                self._callbacks.on_event,
                NotificationEvent(notification, None, Outcome.UNKNOWN, False, False, exc),
            )
            return exc

    def _one_more(self, counts: OrderedDict[tuple[str, str], int], key: tuple[str, str]) -> int:
        """One more failure of ``key`` in ``counts`` (bounded by ``capacity``)."""
        failures = counts.pop(key, 0) + 1
        counts[key] = failures
        if len(counts) > self._capacity:
            counts.popitem(last=False)
        return failures

    async def _not_known(self, item: InboxItem, error: NotFoundError) -> None:
        """A read answered 404: read again a few times (the service's read side may lag
        its notifier), then park the item with the reason and never read it again."""
        psid = item.notification.payments_service_id
        reads = self._one_more(self._not_found, item.key)
        if reads < self._retries.not_found_reads:
            wait = self._retries.not_found_backoff(reads)
            await self._write_held(psid, lambda: self._inbox.defer(item, delay=wait))
            return
        self._not_found.pop(item.key, None)
        self._read_failures.pop(item.key, None)
        reason = (
            f"the service does not know {item.notification.kind.value} {psid}: "
            f"{reads} confirming reads answered {error.status}"
        )
        logger.error("notification for %s parked as failed: %s", psid, reason)
        stored = _stored_error(reason)
        await self._write_held(
            psid, lambda: self._inbox.retry(item, delay=0.0, park=True, error=stored)
        )
        self._stats.parked += 1
        self._stats.not_found += 1

    async def _callback_failed(self, item: InboxItem, exc: Exception) -> None:
        """Count a raising callback: due again after its backoff, or parked."""
        psid = item.notification.payments_service_id
        self._stats.callback_errors += 1
        attempts = item.attempts + 1
        park = attempts >= self._retries.callback_attempts
        logger.error(
            "callback failed for %s (attempt %d of %d%s)",
            psid,
            attempts,
            self._retries.callback_attempts,
            ", parked as failed" if park else "",
            exc_info=exc,
        )
        error = _stored_error(f"{exc!r}")
        wait = self._retries.backoff(attempts)
        await self._write_held(
            psid, lambda: self._inbox.retry(item, delay=wait, park=park, error=error)
        )
        if park:
            self._stats.parked += 1

    async def _write_held(self, psid: str, write: Callable[[], Awaitable[object]]) -> None:
        """Write what processing the item decided, keeping it held until it is written.

        Releasing the item instead would make it due again at once: its callback would run
        again for a status it already handled (or, after it raised, uncounted), and any
        other write that keeps failing would loop, with a confirming GET and a log record
        on every pass. So a failed write is tried again with backoff, logged once per
        outage; only stopping the receiver lets the item go (the documented crash window).
        """
        await self._held(psid, write, "write the delivery of")

    async def _held(self, psid: str, op: Callable[[], Awaitable[_T]], what: str) -> _T:
        """``op``'s result, tried again with backoff while the inbox cannot be reached,
        the item kept held meanwhile (see `_write_held`); said once per outage."""
        wait = NOTIFY_WRITE_WAIT
        while True:
            try:
                result = await op()
            except InboxError as exc:
                self._stats.write_retries += 1
                self._failing.failed(
                    "cannot %s %s in the inbox: %s; the items being processed are held "
                    "and their reads and writes retried until they succeed",
                    what,
                    psid,
                    exc,
                    told=told(exc),
                )
                await asyncio.sleep(wait)
                wait = min(wait * 2, NOTIFY_WRITE_WAIT_MAX)
                continue
            self._failing.ended(INBOX_BACK)
            return result

    async def _deliver(self, psid: str, message: Pacs002 | Camt029, summary: Any) -> None:
        """Run the delivery callback of a final status; what it raises propagates."""
        if isinstance(message, Camt029):
            handler = self._callbacks.on_cancellation_outcome
            if handler is not None:  # nothing to build without a handler
                from .._models import CancellationOutcome

                await handler(CancellationOutcome.from_resolution(psid, message, summary))
        elif self._callbacks.on_payment_status is not None:
            await self._callbacks.on_payment_status(psid, summary)

    async def _emit(
        self, notification: Notification, message: Pacs002 | Camt029, *, first: bool
    ) -> None:
        if self._callbacks.on_event is None:
            return
        summary = _summary(message)
        await _call(
            self._callbacks.on_event,
            NotificationEvent(
                notification, summary.status, summary.outcome, summary.is_final, first
            ),
        )


def _not_processed(item: InboxItem) -> None:
    logger.exception(
        "notification for %s could not be processed", item.notification.payments_service_id
    )


def _summary(message: Pacs002 | Camt029) -> Any:
    if isinstance(message, Camt029):
        return summarize_resolution(message)
    return summarize_status_report(message)


async def _call(handler: Callable[[Any], Awaitable[None]] | None, arg: object) -> None:
    if handler is None:
        return
    try:
        await handler(arg)
    except Exception:
        logger.exception("notification callback %r failed", handler)
