"""The receiver's inbox: where an accepted notification waits, and what was delivered.

A notification is written to the inbox (and committed) before it is answered 202; the
receiver's workers take items from it, and an item is done only once its callbacks have
returned. The inbox holds one item per (kind, id): a notification for an id already
waiting is folded into its item (its ``seq`` grows, so a read already in flight is redone).
The "delivered" marks of final statuses live beside the items, and an item's completion
and its mark are written in one transaction.

Three stores: `MemoryInbox` (tests; NOT durable) and `SqliteInbox` (a file, one process),
whose receiver claims due items itself, and `PostgresInbox` (shared by several receiver
processes), which hands its items to them as procrastinate jobs. `open_inbox` picks one.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .._errors import ConfigurationError
from ._core import Notification
from ._items import (
    Inbox,
    InboxBusyError,
    InboxError,
    InboxFull,
    InboxItem,
    InboxStatus,
    InboxUnavailableError,
    SharedInbox,
    StoredInbox,
    decode_notification,
    encode_notification,
)
from ._postgres import PostgresInbox
from ._sqlite import SqliteInbox

__all__ = [
    "Inbox",
    "InboxBusyError",
    "InboxError",
    "InboxFull",
    "InboxItem",
    "InboxStatus",
    "InboxUnavailableError",
    "MemoryInbox",
    "SharedInbox",
    "StoredInbox",
    "decode_notification",
    "encode_notification",
    "open_inbox",
]

_POSTGRES_SCHEMES: Final = ("postgresql://", "postgres://")


def open_inbox(target: str | Path, **options: Any) -> Inbox | SharedInbox:
    """An inbox in a SQLite file or a PostgreSQL database (not opened yet).

    Args:
        target: a file path, or a ``postgresql://`` address (needs the ``scale`` extra).
        **options: passed to the store (``lease`` for PostgreSQL).
    """
    if isinstance(target, str) and target.startswith(_POSTGRES_SCHEMES):
        return PostgresInbox(target, **options)
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
