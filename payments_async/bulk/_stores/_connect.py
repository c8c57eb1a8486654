"""A PostgreSQL journal's connections and outages: the storage kit's, with the journal's
errors and its outage window."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ... import _store as store
from .._defaults import JOURNAL_OUTAGE_WINDOW
from .._errors import JOURNAL_ERRORS, JournalError

if TYPE_CHECKING:
    import psycopg

__all__ = ["batch", "connect", "connect_error", "outage", "require_psycopg"]


def require_psycopg() -> None:
    """Raise `JournalError` naming the extra when psycopg is not installed."""
    store.require_psycopg(JOURNAL_ERRORS)


def connect_error(dsn: str, exc: Exception) -> JournalError:
    """The journal's error for a connection that could not be made (see
    `payments_async._store.connect_error`)."""
    error = store.connect_error(dsn, exc, JOURNAL_ERRORS)
    assert isinstance(error, JournalError)
    return error


def connect(dsn: str) -> psycopg.Connection[Any]:
    """A bounded synchronous autocommit connection.

    Raises:
        JournalError: the server refuses us; `JournalUnavailableError` when it cannot be
            reached for now (the password is never part of the message).
    """
    return store.connect(dsn, JOURNAL_ERRORS)


def outage(dsn: str, window: float | None = None) -> store.Outage:
    """The outage policy for one connection to a journal's database.

    Args:
        dsn: the database.
        window: seconds to wait before `JournalUnavailableError` (`JOURNAL_OUTAGE_WINDOW`
            if None; ``inf`` for a worker, which never gives up).
    """
    wait = JOURNAL_OUTAGE_WINDOW if window is None else window
    return store.Outage(dsn, window=wait, errors=JOURNAL_ERRORS, what="journal")


def batch(
    dsn: str, prepare: Callable[[psycopg.AsyncConnection[Any]], Awaitable[None]]
) -> store.PsycopgBatch:
    """The journal's group-commit writer on ``dsn`` (pipelined, outage window as `outage`)."""
    return store.PsycopgBatch(
        dsn,
        errors=JOURNAL_ERRORS,
        what="journal",
        window=JOURNAL_OUTAGE_WINDOW,
        prepare=prepare,
        pipeline=True,
    )
