"""What every inbox stores and says: its items, its status, its errors and its protocol."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

import msgspec

from .._errors import PaymentsError
from .._store import StoreErrors
from ._core import Notification

__all__ = [
    "INBOX_BACK",
    "INBOX_ERRORS",
    "Inbox",
    "InboxBusyError",
    "InboxError",
    "InboxFull",
    "InboxItem",
    "InboxStatus",
    "InboxUnavailableError",
    "SharedInbox",
    "StoredInbox",
    "decode_notification",
    "encode_notification",
]

INBOX_BACK: Final = "the inbox can be used again"
"""How the end of an inbox outage is said, by whichever part of the receiver meets it."""

_ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final = msgspec.json.Decoder(Notification)


class InboxError(PaymentsError):
    """The inbox cannot be opened, read or written (the receiver answers 503 meanwhile)."""


class InboxUnavailableError(InboxError):
    """The inbox cannot be reached or written for now: its database is away (or hung), or
    its disk is full. Said once per outage; the receiver answers 503 meanwhile and the
    sender redelivers."""


class InboxBusyError(InboxError):
    """Another process holds the SQLite inbox (one receiver process per file); its message
    names the holder."""


def _busy(inbox: str, holder: str) -> InboxBusyError:
    who = f" ({holder})" if holder else ""
    return InboxBusyError(
        f"inbox {inbox} is in use by another receiver{who}: a SQLite inbox serves one "
        "process; stop that one, or share a PostgreSQL inbox between receivers"
    )


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


class StoredInbox(Protocol):
    """What every inbox stores and answers; every awaited write is committed when it
    returns. Which worker takes which item is `Inbox`'s (claim) or `SharedInbox`'s (serve).

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
        """Let ``item`` go after a failed callback (counted in its ``attempts``): due
        again after ``delay`` seconds, or parked as failed when ``park``. When it raises,
        ``item`` is still held."""
        ...

    async def defer(self, item: InboxItem, *, delay: float) -> None:
        """Let ``item`` go after a failed confirming read: due again after ``delay``
        seconds, its ``attempts`` unchanged (only failed callbacks lead to parking)."""
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


class Inbox(StoredInbox, Protocol):
    """An inbox whose receiver takes its items itself (one process: memory, SQLite)."""

    async def claim(self, limit: int) -> list[InboxItem]:
        """Up to ``limit`` due items, held for this receiver until completed or released."""
        ...

    def release(self, item: InboxItem) -> None:
        """Give up the hold on ``item`` without writing (the receiver is stopping, or
        processing it failed before any callback ran)."""
        ...


@runtime_checkable
class SharedInbox(StoredInbox, Protocol):
    """An inbox that hands its items to the receivers sharing it (PostgreSQL): each item to
    one receiver at a time, again after its wait, and a dead receiver's to another."""

    async def serve(self, process: Callable[[InboxItem], Awaitable[None]], *, workers: int) -> None:
        """Run ``process`` on the items this receiver is given, ``workers`` at once, until
        cancelled (the items being processed are then given again)."""
        ...


def encode_notification(notification: Notification) -> bytes:
    """A notification as stored in an inbox (JSON)."""
    return _ENCODER.encode(notification)


def decode_notification(raw: bytes | str | memoryview) -> Notification:
    """The notification `encode_notification` wrote."""
    return _DECODER.decode(bytes(raw) if isinstance(raw, memoryview) else raw)


INBOX_ERRORS: Final = StoreErrors(InboxError, InboxUnavailableError, _busy)
"""The inbox's errors, as the storage kit raises them."""
