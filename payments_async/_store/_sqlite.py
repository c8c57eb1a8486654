"""SQLite files of the stores: opened the one way, and their failures told the one way (a
full disk is an outage of the store, not a fault of the data)."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path
from typing import Final

from ._errors import StoreErrors

__all__ = ["is_disk_full", "open_sqlite", "open_sqlite_read_only", "sqlite_error"]

_FULL: Final = ("database or disk is full", "no space left on device", "disk quota exceeded")


def is_disk_full(exc: BaseException) -> bool:
    """True when ``exc`` says the disk (or the file system's quota) is full."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    if isinstance(exc, sqlite3.Error) and getattr(exc, "sqlite_errorcode", None) == 13:
        return True  # SQLITE_FULL
    return isinstance(exc, sqlite3.Error | OSError) and any(w in str(exc).lower() for w in _FULL)


def sqlite_error(
    action: str, what: str, path: Path, exc: BaseException, errors: StoreErrors
) -> Exception:
    """The one-line error of a SQLite store that failed: ``errors.unavailable`` for a full
    disk (nothing is lost: free space and run again), else ``errors.error``.

    Args:
        action: what failed (``open``, ``read``, ``write``).
        what: the store as messages name it (``journal``, ``inbox``).
        path: the file.
        exc: the failure (`sqlite3.Error` or `OSError`).
        errors: the room's errors.
    """
    shown = repr(str(path))
    if is_disk_full(exc):
        return errors.unavailable(
            f"cannot {action} {what} {shown}: the disk is full; every change made before is "
            "kept: free some space, then run the same command again"
        )
    said = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return errors.error(f"cannot {action} {what} {shown}: {said}")


def open_sqlite(
    path: Path, *, synchronous: str, check_same_thread: bool = True
) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL, the folder made.

    Args:
        path: the file (created when missing).
        synchronous: ``NORMAL`` (a killed process loses nothing; a power cut may drop the
            last transactions) or ``FULL`` (a committed transaction survives a power cut).
        check_same_thread: False for a connection used from a thread of its own.

    Raises:
        sqlite3.Error, OSError: as they are (see `sqlite_error`).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=check_same_thread)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(f"PRAGMA synchronous={synchronous}")
    except BaseException:
        db.close()
        raise
    return db


def open_sqlite_read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection to an existing file, beside a writer that may be running.

    Raises:
        sqlite3.Error: the file cannot be opened (missing, or not a database).
    """
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
