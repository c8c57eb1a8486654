"""The waiters' registry: which of the client's waiters sleep on which id, and the
confirmed final messages they read when woken."""

from __future__ import annotations

import asyncio
from collections import OrderedDict

from ..iso20022 import Camt029, Pacs002, decode_camt029, decode_pacs002, encode
from ._core import NotificationKind

__all__ = ["Waiters"]


class Waiters:
    """Sleeping waiters by id, and the last ``capacity`` confirmed final messages.

    A waiter is completed (and forgotten) once a final status of its id is confirmed; it
    then reads the message with ``recall`` instead of polling.

    Args:
        capacity: confirmed final messages kept (the oldest are forgotten).
    """

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        # Kept encoded: bytes are one object the garbage collector never traverses, where
        # a decoded message is a tree of tracked objects; enough of those start a full
        # collection mid-stream. Keyed by (kind value, id): a tuple of strings, which the
        # collector stops tracking, where one holding the enum member stays tracked.
        self._final: OrderedDict[tuple[str, str], bytes] = OrderedDict()
        # id -> its sleeping waiter (nearly always one), or a list of them: no container
        # per waiter for the collector to traverse
        self._watchers: dict[str, asyncio.Future[None] | list[asyncio.Future[None]]] = {}

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

    def __len__(self) -> int:
        """Ids with a sleeping waiter."""
        return len(self._watchers)

    def confirm(self, key: tuple[str, str], message: Pacs002 | Camt029) -> None:
        """Keep ``message`` as the final one of ``key`` (``(kind, id)``) and wake the
        waiters of its id."""
        self._final[key] = encode(message)
        if len(self._final) > self._capacity:
            self._final.popitem(last=False)
        self.wake(key[1])

    def wake(self, payments_service_id: str) -> None:
        """Complete every waiter of this id (they are forgotten: each sleep registers
        anew)."""
        current = self._watchers.pop(payments_service_id, None)
        for waiter in current if isinstance(current, list) else (current,):
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    def recall(self, key: tuple[str, str]) -> Pacs002 | Camt029 | None:
        """The confirmed final message of ``key`` (``(kind, id)``), if still kept."""
        raw = self._final.get(key)
        if raw is None:
            return None
        if key[0] == NotificationKind.CANCELLATION.value:
            return decode_camt029(raw)
        return decode_pacs002(raw)
