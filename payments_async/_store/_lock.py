"""One writer per SQLite store: an exclusive lock on a file beside it, naming its holder.

The lock is an ``flock`` on ``<store>.lock``; the kernel releases it when the process
ends, however it ends, so a killed process never leaves a store locked. The same lock
guards a bulk journal and a notification inbox.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from pathlib import Path
from typing import Any, Final

from ._errors import StoreErrors

__all__ = ["FileLock", "holder_text", "lock_file", "run_holder"]

_LOCK_SUFFIX: Final = ".lock"


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


class FileLock:
    """An exclusive lock on a store file, held until `release` (or the process ends).

    Take it with `lock_file`.
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


def lock_file(store: Path, errors: StoreErrors, *, what: str) -> FileLock:
    """Lock a store file for this process, before the store is opened.

    Args:
        store: the store's file (it need not exist yet; its folder is made).
        errors: the room's errors.
        what: the store as messages name it (``journal``, ``inbox``).

    Raises:
        Exception: ``errors.busy`` (with the file, quoted, and the holder) when another
            process holds the lock, ``errors.error``
            when the lock file cannot be made.
    """
    import fcntl

    path = store.with_name(store.name + _LOCK_SUFFIX)
    shown = repr(str(store))
    while True:
        try:
            store.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise errors.error(f"cannot open {what} {shown}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise errors.busy(shown, holder) from None
        except OSError as exc:
            os.close(fd)
            raise errors.error(f"cannot open {what} {shown}: {exc.strerror}") from exc
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # released and removed by its holder since we opened it
            os.close(fd)
            continue
        try:
            os.ftruncate(fd, 0)
            os.write(fd, json.dumps(run_holder()).encode())
        except OSError:  # a full disk: the lock holds, only its holder is not recorded
            pass
        return FileLock(path, fd)


def _read_holder(fd: int) -> str:
    try:
        return holder_text(json.loads(os.pread(fd, 4096, 0) or b"null"))
    except (OSError, ValueError):
        return ""
