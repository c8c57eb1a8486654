"""The encoded bodies of the GET routes, kept until the status they show changes."""

from __future__ import annotations

from typing import Final

from aiohttp import web

from ._lifecycle import CancellationStatus, PaymentStatus

__all__ = ["BODIES_KEY", "BodyCache"]


class BodyCache:
    """Encoded GET bodies by id, rebuilt only when the status or its time changes.

    Per id it keeps the status's fields (a tuple of strings, bools and None) and the body
    (bytes): objects the garbage collector does not track. Keeping the status object
    itself (a fresh one per final record) made two tracked objects per id read: 20,000
    more for the collector to traverse per 10,000 settled cancellations, and full
    collections of 0.1-0.15 s in the sandbox's process that delayed its notifications.
    """

    def __init__(self) -> None:
        self._statuses: dict[str, tuple[object, ...]] = {}
        self._bodies: dict[str, bytes] = {}

    def get(self, key: str, status: PaymentStatus | CancellationStatus, at: float) -> bytes | None:
        if self._statuses.get(key) != (*_fields(status), at):
            return None
        return self._bodies[key]

    def put(
        self, key: str, status: PaymentStatus | CancellationStatus, at: float, body: bytes
    ) -> None:
        self._statuses[key] = (*_fields(status), at)
        self._bodies[key] = body


def _fields(status: PaymentStatus | CancellationStatus) -> tuple[object, ...]:
    # Every field, read from the class itself: a field added later is compared too. The
    # body's time is compared beside them: it can move without the status changing.
    return tuple(getattr(status, name) for name in status.__slots__)


BODIES_KEY: Final = web.AppKey("payments_async.sandbox.bodies", BodyCache)
