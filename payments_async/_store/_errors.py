"""The error types of a store: each room raises its own, the kit makes them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["StoreErrors"]


@dataclass(frozen=True, slots=True)
class StoreErrors:
    """How a room's store says it cannot be used.

    Attributes:
        error: the error of a store that cannot be used as it is (a refused password,
            another schema, a bad address): a rerun as it is cannot help. Made with one
            message.
        unavailable: the error of a store out of reach for now (a database restarting,
            hung or away past the wait, a full disk): a rerun once it is back finishes
            the work. Made with one message.
        busy: makes the error of a store another process holds, from the store as shown
            and the holder (``pid 12 on host, since ...``, or empty).
    """

    error: type[Exception]
    unavailable: type[Exception]
    busy: Callable[[str, str], Exception]
