"""Where a bulk journal lives: a SQLite file (the default) or a PostgreSQL database.

Both stores implement `payments_async.bulk.Journal`; `open_journal` picks
one from the ``--journal`` value. PostgreSQL needs the ``scale`` extra (psycopg), and
psycopg is imported only when a ``postgresql://`` journal is opened.
"""

from __future__ import annotations

from pathlib import Path

from .._journal import Journal, SqliteJournal

__all__ = ["is_postgres_url", "open_journal"]

_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(target: str | Path) -> bool:
    """True when ``target`` names a PostgreSQL database rather than a file."""
    return isinstance(target, str) and target.startswith(_SCHEMES)


def open_journal(
    target: str | Path,
    *,
    input_sha256: str,
    new_run_id: str,
    input_name: str | None = None,
    new_run: bool = False,
) -> Journal:
    """Open the journal of an input in a SQLite file or a PostgreSQL database.

    Args:
        target: a file path, or a ``postgresql://`` address.
        input_sha256: the input's digest (a file journal must record the same; in a
            database it is the key of the input's run).
        new_run_id: the run id to record when the journal is new.
        input_name: the input's file name, kept by the PostgreSQL store for status.
        new_run: a file journal of another input starts a new run rather than being
            refused (see `SqliteJournal.open`); a database keeps a run per input, and
            the planner (``payments_async.bulk.open_run``) checks a new run's payments
            against the other runs' recorded cancellations.

    Raises:
        JournalError: the journal cannot be opened, or belongs to another input.
    """
    if is_postgres_url(target):
        from ._postgres import PostgresJournal

        return PostgresJournal.open(
            str(target), input_sha256=input_sha256, new_run_id=new_run_id, input_name=input_name
        )
    return SqliteJournal.open(
        target, input_sha256=input_sha256, new_run_id=new_run_id, new_run=new_run
    )
