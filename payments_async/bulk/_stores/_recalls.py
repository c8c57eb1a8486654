"""One recall per payment outside a bulk run: ``cancel --journal`` claims its recall in
the journal's database (a SQLite file or PostgreSQL) before sending it (see `.._recall`)."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ... import PaymentsError
from ..._store import is_connection_lost, lock_file, open_sqlite, sqlite_error
from .._errors import JOURNAL_ERRORS, JournalError, JournalUnavailableError
from .._journal import ensure_sqlite_schema
from .._recall import (
    HELD,
    POSTGRES,
    SQLITE,
    AlreadyRecalledError,
    Recall,
    RecallTables,
    first_per_payment,
)
from .._rows import RowOutcome, is_final_refusal, never_sent
from . import is_postgres_url

__all__ = ["RecallLedger", "open_recall_ledger"]


class RecallLedger:
    """The recalls of one journal's database, for a recall made outside a bulk run.

    `claim` records a recall before it is sent and refuses a second one for the same
    payment; `settle` records what became of it. Open it with `open_recall_ledger`; it is
    a context manager (it holds a SQLite file's lock, as a run does, until closed).

    Args:
        conn: an autocommit connection (``sqlite3`` or psycopg) with the tables in place.
        tables: the database's tables.
        close: releases the connection (and lock).
        path: the SQLite file, to name in errors.
    """

    def __init__(
        self, conn: Any, tables: RecallTables, close: contextlib.ExitStack, path: Path | None = None
    ) -> None:
        self._path = path
        self._conn = conn
        self._t = tables
        self._close = close

    def __enter__(self) -> RecallLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the connection (and a SQLite file's lock)."""
        self._close.close()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """One transaction; a database failure is a `JournalError` (a full disk or a lost
        server a `JournalUnavailableError`)."""
        try:
            if isinstance(self._conn, sqlite3.Connection):
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    yield
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
                self._conn.execute("COMMIT")
                return
            with self._conn.transaction():
                # One claim at a time: the check and the record are one step.
                self._conn.execute(f"LOCK TABLE {self._t.recalls} IN SHARE ROW EXCLUSIVE MODE")
                yield
        except JournalError:
            raise
        except Exception as exc:
            if isinstance(self._conn, sqlite3.Connection) and self._path is not None:
                raise sqlite_error("write", "journal", self._path, exc, JOURNAL_ERRORS) from exc
            if is_connection_lost(exc):
                raise JournalUnavailableError(f"cannot write the journal: {exc}") from exc
            raise JournalError(f"cannot write the journal: {exc}") from exc

    def recorded(self, original_end_to_end_id: str) -> Recall | None:
        """The first recall recorded for a payment, or None."""
        m = self._t.mark
        sql = self._t.select(
            f"original_end_to_end_id = {m} AND {HELD}", f"original_end_to_end_id = {m}"
        )
        found = self._conn.execute(sql, (original_end_to_end_id, original_end_to_end_id))
        return first_per_payment(found.fetchall()).get(original_end_to_end_id)

    def claim(self, original_end_to_end_ids: Sequence[str], message_id: str) -> None:
        """Record a recall of these payments by ``message_id`` before it is sent.

        A message already recorded for a payment (the same camt.056 sent again) is
        allowed: the service answers it with the same cancellation.

        Raises:
            AlreadyRecalledError: another recall of one of them is recorded (nothing
                is recorded then).
        """
        m = self._t.mark
        with self._transaction():
            for e2e in original_end_to_end_ids:
                first = self.recorded(e2e)
                if first is not None and first.message_id != message_id:
                    raise AlreadyRecalledError(first)
            for e2e in original_end_to_end_ids:
                if self.recorded(e2e) is None:
                    self._conn.execute(
                        f"INSERT INTO {self._t.recalls} (original_end_to_end_id, message_id, "  # noqa: S608
                        f"recorded_at) VALUES ({m}, {m}, {m})",
                        (e2e, message_id, time.time()),
                    )

    def settle(self, message_id: str, outcome: str | None) -> None:
        """Record what became of a claimed recall: its outcome, ``refused`` (the service
        refused it for good) or ``not_sent`` (it never left): both let the payment be
        recalled again."""
        m = self._t.mark
        with self._transaction():
            self._conn.execute(
                f"UPDATE {self._t.recalls} SET outcome = {m} WHERE message_id = {m} "  # noqa: S608
                "AND run_id IS NULL",
                (outcome, message_id),
            )

    def failed(self, message_id: str, exc: PaymentsError) -> None:
        """Record what a failed submission of a claimed recall means for it: ``not_sent``
        when it cannot have reached the service, ``refused`` when the service refused it
        for good (both let the payment be recalled again); otherwise it stands, outcome
        not known (the service may have it)."""
        if never_sent(exc):
            self.settle(message_id, RowOutcome.NOT_SENT.value)
        elif is_final_refusal(exc):
            self.settle(message_id, RowOutcome.REFUSED.value)


def open_recall_ledger(target: str | Path) -> RecallLedger:
    """The recall ledger of a bulk journal: a SQLite file (created when missing; locked as
    a run locks it) or a ``postgresql://`` database (tables created when missing).

    Raises:
        JournalBusyError: a run holds the SQLite file.
        JournalError: the journal cannot be opened.
    """
    stack = contextlib.ExitStack()
    if is_postgres_url(target):
        from ._postgres import connect, ensure_schema

        conn: Any = stack.enter_context(connect(str(target)))
        try:
            ensure_schema(conn)
        except JournalError:
            stack.close()
            raise
        except Exception as exc:  # psycopg's: a database that refuses the tables
            stack.close()
            raise JournalError(f"cannot open the journal's database: {exc}") from exc
        except BaseException:
            stack.close()
            raise
        return RecallLedger(conn, POSTGRES, stack)
    path = Path(target)
    lock = lock_file(path, JOURNAL_ERRORS, what="journal")
    stack.callback(lock.release)
    try:
        db = open_sqlite(path, synchronous="FULL")
        stack.callback(db.close)
        ensure_sqlite_schema(db)
    except (sqlite3.Error, OSError) as exc:
        stack.close()
        raise sqlite_error("open", "journal", path, exc, JOURNAL_ERRORS) from exc
    except BaseException:
        stack.close()
        raise
    return RecallLedger(db, SQLITE, stack, path)
