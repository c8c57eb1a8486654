"""One run per journal: the lock a run holds on its journal until it closes it.

A SQLite journal is locked with an exclusive ``flock`` on a file beside it
(``<journal>.lock``), which names the holder; the kernel releases it when the process
ends, however it ends, so a killed run never leaves a journal locked. A PostgreSQL
journal is locked with session advisory locks per run (see the PostgreSQL store).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from pathlib import Path
from typing import Any, Final

from ._journal import JournalError

__all__ = ["JournalBusyError", "JournalLock", "holder_text", "lock_journal_file", "run_holder"]

_LOCK_SUFFIX: Final = ".lock"


class JournalBusyError(JournalError):
    """Another run holds the journal: nothing was sent.

    With ``lost``, the run had started: its connection to a PostgreSQL journal was lost
    and another run took the journal before it reconnected; it stopped before writing or
    sending anything more, and what it recorded is kept.

    Attributes:
        holder: who holds it, as people read it (``pid 123 on host, since 12:03:04 UTC``),
            or an empty string when it cannot be told.
    """

    def __init__(self, journal: str, holder: str, *, lost: bool = False) -> None:
        self.holder = holder
        who = f" ({holder})" if holder else ""
        if lost:
            said = (
                f"journal {journal} was taken by another run{who} while this run's "
                "connection to it was lost; this run stopped and every change it made is "
                "kept: wait for that run to end (or stop it), then run the same command "
                "again to resume"
            )
        else:
            said = (
                f"journal {journal} is in use by another run{who}; nothing was sent: wait "
                "for that run to end (or stop it), then run the same command again to resume"
            )
        super().__init__(said)


def run_holder() -> dict[str, Any]:
    """What a lock records about the process holding it: pid, host and start time."""
    return {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}


def holder_text(holder: object) -> str:
    """``pid 123 on host, since 12:03:04 UTC`` from what `run_holder` recorded."""
    if not isinstance(holder, dict):
        return ""
    parts = []
    if "pid" in holder:
        parts.append(f"pid {holder['pid']}")
    if "host" in holder:
        parts.append(f"on {holder['host']}")
    started = holder.get("started")
    if isinstance(started, int | float):
        parts.append(f"since {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(started))}")
    return " ".join(parts).replace(" since", ", since")


class JournalLock:
    """An exclusive lock on a journal file, held until `release` (or the process ends).

    Take it with `lock_journal_file`.
    """

    def __init__(self, path: Path, fd: int) -> None:
        self._path = path
        self._fd: int | None = fd

    def release(self) -> None:
        """Remove the lock file and release the lock; calling it again does nothing."""
        if self._fd is None:
            return
        # Unlinked while still locked: a process that opened it meanwhile finds, once it
        # holds the lock, that the path names another file, and starts again.
        with contextlib.suppress(OSError):
            self._path.unlink()
        os.close(self._fd)
        self._fd = None


def lock_journal_file(journal: Path) -> JournalLock:
    """Lock a journal file for this process's run, before the journal is opened.

    Args:
        journal: the journal file (it need not exist yet).

    Raises:
        JournalBusyError: another process holds the lock.
        JournalError: the lock file cannot be made.
    """
    import fcntl

    path = journal.with_name(journal.name + _LOCK_SUFFIX)
    shown = repr(str(journal))
    while True:
        try:
            journal.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise JournalError(f"cannot open journal {shown}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise JournalBusyError(shown, holder) from None
        except OSError as exc:
            os.close(fd)
            raise JournalError(f"cannot open journal {shown}: {exc.strerror}") from exc
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # released and removed by its holder since we opened it
            os.close(fd)
            continue
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(run_holder()).encode())
        return JournalLock(path, fd)


def _read_holder(fd: int) -> str:
    try:
        return holder_text(json.loads(os.pread(fd, 4096, 0) or b"null"))
    except (OSError, ValueError):
        return ""
