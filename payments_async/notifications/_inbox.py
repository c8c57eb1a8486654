"""The receiver's inbox: where an accepted notification waits, and what was delivered.

A notification is written to the inbox (and committed) before it is answered 202; the
receiver's workers take items from it, and an item is done only once its callbacks have
returned. The inbox holds one item per (kind, id): a notification for an id already
waiting is folded into its item (its ``seq`` grows, so a read already in flight is redone).
The "delivered" marks of final statuses live beside the items, and an item's completion
and its mark are written in one transaction.

Three stores: `MemoryInbox` (tests; NOT durable), `SqliteInbox` (a file, one process) and
`PostgresInbox` (shared by several receiver processes). `open_inbox` picks one.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

import msgspec

from .._errors import ConfigurationError, PaymentsError
from ._core import Notification

__all__ = [
    "Inbox",
    "InboxError",
    "InboxFull",
    "InboxItem",
    "InboxStatus",
    "MemoryInbox",
    "decode_notification",
    "encode_notification",
    "open_inbox",
]

_POSTGRES_SCHEMES: Final = ("postgresql://", "postgres://")
_ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final = msgspec.json.Decoder(Notification)


class InboxError(PaymentsError):
    """The inbox cannot be opened, read or written (the receiver answers 503 meanwhile)."""


class InboxFull(InboxError):
    """The inbox holds as many unprocessed notifications as it may (503: redeliver later)."""


@dataclass(frozen=True, slots=True)
class InboxItem:
    """One (kind, id) waiting to be processed.

    Attributes:
        notification: the latest notification received for it.
        seq: grows with every notification folded in; a completion written with an older
            ``seq`` leaves the item waiting (a newer notification arrived meanwhile).
        attempts: failed callback attempts so far.
        received_at: when the oldest notification not yet processed arrived (epoch s).
    """

    notification: Notification
    seq: int
    attempts: int
    received_at: float

    @property
    def key(self) -> tuple[str, str]:
        """``(kind, payments_service_id)``."""
        return (self.notification.kind.value, self.notification.payments_service_id)


@dataclass(frozen=True, slots=True)
class InboxStatus:
    """What an inbox holds (``payments-async listen --status`` prints it).

    Attributes:
        depth: items waiting to be processed (callbacks waiting to be retried included).
        failed: items whose callbacks kept failing, parked (a new notification for the id
            tries again).
        oldest_undone_at: arrival time (epoch s) of the oldest waiting item, or None.
        delivered: final statuses handed to the callbacks.
        last_error: the error of the most recently parked item, if any.
        tracked: ids tracked for the sweep whose final status is not delivered yet.
    """

    depth: int
    failed: int
    oldest_undone_at: float | None
    delivered: int
    last_error: str | None = None
    tracked: int = 0


class Inbox(Protocol):
    """Where notifications wait; every awaited write is committed when it returns.

    Attributes:
        durable: True when what is written survives the process.
    """

    durable: bool

    async def open(self) -> None:
        """Connect and create what is missing. Raises `InboxError`."""
        ...

    async def aclose(self) -> None:
        """Write what is queued and disconnect."""
        ...

    async def put(self, notification: Notification) -> None:
        """Store a notification (fold it into its id's item); committed on return.

        Raises:
            InboxFull: the inbox is at its bound.
            InboxError: it cannot be written.
        """
        ...

    async def claim(self, limit: int) -> list[InboxItem]:
        """Up to ``limit`` due items, held for this receiver until completed or released."""
        ...

    async def is_delivered(self, key: str) -> bool:
        """True when this final status (``kind:id:status``) was already delivered."""
        ...

    async def complete(self, item: InboxItem, delivered: str | None) -> bool:
        """Mark ``item`` processed and, in the same transaction, ``delivered`` delivered
        (and the id no longer tracked: its final status is known).

        Returns:
            True when ``delivered`` was not marked before (False also when it is None).

        Raises:
            InboxError: nothing was written; ``item`` is still held.
        """
        ...

    async def retry(self, item: InboxItem, *, delay: float, park: bool, error: str) -> None:
        """Release ``item`` after a failed callback (counted in its ``attempts``): due
        again after ``delay`` seconds, or parked as failed when ``park``. When it raises,
        ``item`` is still held."""
        ...

    async def defer(self, item: InboxItem, *, delay: float) -> None:
        """Release ``item`` after a failed confirming read: due again after ``delay``
        seconds, its ``attempts`` unchanged (only failed callbacks lead to parking)."""
        ...

    def release(self, item: InboxItem) -> None:
        """Give up the hold on ``item`` without writing (the receiver is stopping, or
        processing it failed before any callback ran)."""
        ...

    async def status(self) -> InboxStatus:
        """Depth, failed items, the oldest waiting item."""
        ...

    async def track(self, kind: str, payments_service_id: str, *, check_after: float) -> None:
        """Remember an id the application awaits; due for a sweep after ``check_after`` s."""
        ...

    async def due_tracked(self, limit: int, *, recheck: float) -> list[tuple[str, str]]:
        """Up to ``limit`` tracked ``(kind, id)`` due for a read; each is due again only
        after ``recheck`` seconds (unless its final status is delivered meanwhile)."""
        ...

    async def prune(self, older_than: float) -> int:
        """Delete done items and delivered marks older than ``older_than`` seconds;
        return how many. Waiting, parked and tracked ones are kept."""
        ...


def encode_notification(notification: Notification) -> bytes:
    """A notification as stored in an inbox (JSON)."""
    return _ENCODER.encode(notification)


def decode_notification(raw: bytes | str | memoryview) -> Notification:
    """The notification `encode_notification` wrote."""
    return _DECODER.decode(bytes(raw) if isinstance(raw, memoryview) else raw)


def open_inbox(target: str | Path, **options: Any) -> Inbox:
    """An inbox in a SQLite file or a PostgreSQL database (not opened yet).

    Args:
        target: a file path, or a ``postgresql://`` address (needs the ``scale`` extra).
        **options: passed to the store (``lease`` for PostgreSQL).
    """
    if isinstance(target, str) and target.startswith(_POSTGRES_SCHEMES):
        from ._postgres import PostgresInbox

        return PostgresInbox(target, **options)
    from ._sqlite import SqliteInbox

    return SqliteInbox(target)


@dataclass(slots=True)
class _Entry:
    notification: Notification
    seq: int
    state: str  # "pending", "done" or "failed"
    attempts: int
    not_before: float
    received_at: float
    error: str | None = None
    folded: int = 1  # notifications folded into it since it was last done


class MemoryInbox:
    """An inbox in this process's memory, for tests: NOT durable (a restart forgets it).

    Args:
        capacity: notifications accepted but not processed; beyond it `put` raises
            `InboxFull`.
        delivered_capacity: delivered marks kept (the oldest are forgotten).
    """

    durable = False

    def __init__(self, capacity: int, delivered_capacity: int) -> None:
        if capacity < 1 or delivered_capacity < 1:
            raise ConfigurationError("capacity and delivered_capacity must be >= 1")
        self._capacity = capacity
        self._delivered_capacity = delivered_capacity
        self._items: dict[tuple[str, str], _Entry] = {}
        self._waiting = 0  # notifications folded into pending items
        self._claimed: set[tuple[str, str]] = set()
        self._delivered: OrderedDict[str, None] = OrderedDict()
        self._last_error: str | None = None
        self._tracked: dict[tuple[str, str], float] = {}  # -> when due

    async def open(self) -> None:
        """Nothing to open."""

    async def aclose(self) -> None:
        """Nothing to close (the items stay, for a receiver started again)."""

    async def put(self, notification: Notification) -> None:
        """Fold the notification into its item (no await: it is there on return)."""
        if self._waiting >= self._capacity:
            raise InboxFull("the inbox is full, retry later")
        key = (notification.kind.value, notification.payments_service_id)
        entry = self._items.get(key)
        now = time.time()
        if entry is None:
            self._items[key] = _Entry(notification, 1, "pending", 0, 0.0, now)
        else:
            if entry.state != "pending":  # a waiting item keeps its attempts and its wait
                entry.received_at, entry.folded = now, 0
                entry.attempts, entry.not_before = 0, 0.0
            entry.notification, entry.seq, entry.state = notification, entry.seq + 1, "pending"
            entry.folded += 1
        self._waiting += 1

    async def claim(self, limit: int) -> list[InboxItem]:
        """Due items not held already, oldest first."""
        now = time.time()
        out: list[InboxItem] = []
        for key, e in self._items.items():
            if len(out) >= limit:
                break
            if e.state == "pending" and e.not_before <= now and key not in self._claimed:
                self._claimed.add(key)
                out.append(InboxItem(e.notification, e.seq, e.attempts, e.received_at))
        return out

    async def is_delivered(self, key: str) -> bool:
        """True when marked (and not yet forgotten)."""
        return key in self._delivered

    async def complete(self, item: InboxItem, delivered: str | None) -> bool:
        """Mark done (unless renotified since the claim) and mark ``delivered``."""
        self._claimed.discard(item.key)
        first = False
        if delivered is not None and delivered not in self._delivered:
            self._delivered[delivered] = None
            if len(self._delivered) > self._delivered_capacity:
                self._delivered.popitem(last=False)
            first = True
        if delivered is not None:
            self._tracked.pop(item.key, None)
        entry = self._items.get(item.key)
        if entry is not None and entry.seq == item.seq and entry.state == "pending":
            self._waiting -= entry.folded
            del self._items[item.key]  # nothing else to remember once done
        return first

    async def retry(self, item: InboxItem, *, delay: float, park: bool, error: str) -> None:
        """Due again after ``delay``, or parked."""
        self._claimed.discard(item.key)
        entry = self._items.get(item.key)
        if entry is None:
            return
        entry.attempts += 1
        entry.not_before = time.time() + delay
        entry.error = error
        if park:  # whatever came meanwhile: the callback runs only for a final status
            entry.state = "failed"
            self._waiting -= entry.folded
            entry.folded = 0
            self._last_error = error

    async def defer(self, item: InboxItem, *, delay: float) -> None:
        """Due again after ``delay``; its attempts unchanged."""
        self._claimed.discard(item.key)
        entry = self._items.get(item.key)
        if entry is not None:
            entry.not_before = time.time() + delay

    def release(self, item: InboxItem) -> None:
        """Let another worker take it."""
        self._claimed.discard(item.key)

    async def status(self) -> InboxStatus:
        """Counted from memory."""
        pending = [e for e in self._items.values() if e.state == "pending"]
        return InboxStatus(
            depth=len(pending),
            failed=sum(e.state == "failed" for e in self._items.values()),
            oldest_undone_at=min((e.received_at for e in pending), default=None),
            delivered=len(self._delivered),
            last_error=self._last_error,
            tracked=len(self._tracked),
        )

    async def track(self, kind: str, payments_service_id: str, *, check_after: float) -> None:
        """Remember it (kept until its final status is delivered)."""
        self._tracked.setdefault((kind, payments_service_id), time.time() + check_after)

    async def due_tracked(self, limit: int, *, recheck: float) -> list[tuple[str, str]]:
        """The due ones, each due again after ``recheck``."""
        now = time.time()
        due = [key for key, at in self._tracked.items() if at <= now][:limit]
        for key in due:
            self._tracked[key] = now + recheck
        return due

    async def prune(self, older_than: float) -> int:
        """Nothing: done items are forgotten at once and marks beyond the bound."""
        return 0


class GroupCommit:
    """Operations queued while a transaction is written go into the next one.

    A store subclasses it and writes a batch in `_write`; every queued operation's
    future resolves once its transaction has committed (or fails with `InboxError`).
    """

    def __init__(self) -> None:
        self._pending: list[tuple[Callable[[Any], Any], asyncio.Future[Any]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self.commits = 0  # transactions written, for tests and the benchmark

    def _submit(self, op: Callable[[Any], Any]) -> asyncio.Future[Any]:
        """Queue ``op`` (called with the store's connection or cursor) for the next
        transaction; the future resolves to its result once committed."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append((op, fut))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_loop())
        return fut

    async def _write(self, ops: Sequence[Callable[[Any], Any]]) -> list[Any]:
        """Run ``ops`` in one transaction; their results in order."""
        raise NotImplementedError

    async def _flush_loop(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                results = await self._write([op for op, _ in batch])
            except Exception as exc:  # every waiting writer hears of it; none hangs
                error = exc if isinstance(exc, InboxError) else InboxError(f"{exc!r}")
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(error)
                continue
            self.commits += 1
            for (_, fut), result in zip(batch, results, strict=True):
                if not fut.done():
                    fut.set_result(result)

    async def _drain(self) -> None:
        if self._flusher is not None:
            await asyncio.gather(self._flusher, return_exceptions=True)
