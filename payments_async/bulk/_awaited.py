"""What a bulk journal still awaits: cancellations the service acknowledged, outcome unknown."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from .._store import open_sqlite_read_only
from ._errors import JournalError
from ._rows import Stage
from ._stores import is_postgres_url

__all__ = ["awaited_cancellations"]

_AWAITED_FILE = (
    "SELECT payments_service_id FROM rows WHERE state = ? "
    "AND payments_service_id IS NOT NULL ORDER BY line"
)
_AWAITED_DATABASE = (
    "SELECT payments_service_id FROM payments_bulk_rows WHERE state = %s "
    "AND payments_service_id IS NOT NULL ORDER BY run_id, line"
)


def awaited_cancellations(target: str | Path) -> list[str]:
    """The ``paymentsServiceId`` of every row acknowledged by the service whose outcome the
    journal does not hold yet (every run, in a PostgreSQL journal), read without
    disturbing a running writer.

    Args:
        target: a journal file, or a ``postgresql://`` address.

    Raises:
        JournalError: the journal cannot be read.
    """
    state = Stage.ACKNOWLEDGED.value
    if is_postgres_url(target):
        import psycopg

        from ._stores._postgres import connect

        with connect(str(target)) as conn:
            try:
                rows = conn.execute(_AWAITED_DATABASE, (state,)).fetchall()
            except psycopg.Error as exc:  # no bulk tables in that database
                raise JournalError(f"no bulk journal in that database: {exc}") from None
        return [str(r[0]) for r in rows]
    path = Path(target)
    if not path.is_file():
        raise JournalError(f"no journal at {str(path)!r}")
    try:
        db = open_sqlite_read_only(path)
        try:
            return [str(r[0]) for r in db.execute(_AWAITED_FILE, (state,)).fetchall()]
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise JournalError(f"cannot read journal {str(path)!r}: {exc}") from exc
