"""The inbox in a SQLite file: durable, for one receiver process (enforced by a lock).

Every read and write runs on one connection in one thread of its own, so the event loop
never waits for the disk. Writes are group-committed (the storage kit's `GroupCommit`):
every notification queued while a transaction is being written goes into the next one,
so a burst pays one ``fsync``, not one per notification (WAL with ``synchronous=FULL``: a
202 survives a power cut). A second process opening the same file is refused with
`InboxBusyError`, naming the holder.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final

from .._store import FileLock, GroupCommit, SqliteBatch, lock_file, open_sqlite, sqlite_error
from ._core import Notification
from ._items import (
    INBOX_ERRORS,
    InboxError,
    InboxItem,
    InboxStatus,
    decode_notification,
    encode_notification,
)

__all__ = ["SqliteInbox"]

SCHEMA_VERSION: Final = "1"

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS inbox (
    kind TEXT NOT NULL,
    payments_service_id TEXT NOT NULL,
    notification BLOB NOT NULL,
    seq INTEGER NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    not_before REAL NOT NULL DEFAULT 0,
    received_at REAL NOT NULL,
    error TEXT,
    updated_at REAL NOT NULL,
    PRIMARY KEY (kind, payments_service_id)
);
CREATE INDEX IF NOT EXISTS inbox_due ON inbox (state, received_at);
CREATE TABLE IF NOT EXISTS delivered (key TEXT PRIMARY KEY, delivered_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS delivered_age ON delivered (delivered_at);
CREATE TABLE IF NOT EXISTS tracked (
    kind TEXT NOT NULL,
    payments_service_id TEXT NOT NULL,
    tracked_at REAL NOT NULL,
    next_check REAL NOT NULL,
    PRIMARY KEY (kind, payments_service_id)
);
CREATE INDEX IF NOT EXISTS tracked_due ON tracked (next_check);
"""

# A new notification for an item folds into it: a done or parked item waits again with its
# attempts started over; a waiting one keeps its failed attempts and its wait (duplicates
# never keep a failing callback from being parked); a read in flight (an older seq) will
# not complete it.
_PUT: Final = """
INSERT INTO inbox (kind, payments_service_id, notification, seq, state, received_at, updated_at)
VALUES (?1, ?2, ?3, 1, 'pending', ?4, ?4)
ON CONFLICT (kind, payments_service_id) DO UPDATE SET
    notification = excluded.notification,
    seq = seq + 1,
    received_at = CASE WHEN state = 'pending' THEN received_at ELSE excluded.received_at END,
    attempts = CASE WHEN state = 'pending' THEN attempts ELSE 0 END,
    not_before = CASE WHEN state = 'pending' THEN not_before ELSE 0 END,
    error = CASE WHEN state = 'pending' THEN error END,
    state = 'pending',
    updated_at = excluded.updated_at
"""
_CLAIM: Final = (
    "SELECT notification, seq, attempts, received_at FROM inbox "
    "WHERE state = 'pending' AND not_before <= ? ORDER BY received_at LIMIT ?"
)
_DONE: Final = (
    "UPDATE inbox SET state = 'done', attempts = 0, error = NULL, updated_at = ? "
    "WHERE kind = ? AND payments_service_id = ? AND seq = ? AND state = 'pending'"
)
# A failed attempt counts, and parks, whatever arrived meanwhile: the callback runs only
# for a final status, and a notification folded in since can bring no other.
_RETRY: Final = (
    "UPDATE inbox SET attempts = attempts + 1, not_before = ?, state = ?, error = ?, "
    "updated_at = ? WHERE kind = ? AND payments_service_id = ?"
)
# A failed confirming read is no failed callback: the attempts stay as they are.
_DEFER: Final = (
    "UPDATE inbox SET not_before = ?, updated_at = ? "
    "WHERE kind = ? AND payments_service_id = ? AND state = 'pending'"
)


class SqliteInbox:
    """The inbox in a SQLite file (created with its folder when missing).

    One process at a time: items are held in this process's memory while processed, so
    `open` takes a lock on the file (``<file>.lock``) and a second process is refused
    with `InboxBusyError` (use `PostgresInbox` for several receivers). `status` reads a
    file another process holds without disturbing it.

    Args:
        path: the file.
    """

    durable = True

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._db: sqlite3.Connection | None = None
        self._thread: ThreadPoolExecutor | None = None
        self._lock: FileLock | None = None
        self._group: GroupCommit | None = None
        self._claimed: set[tuple[str, str]] = set()

    def __repr__(self) -> str:
        return f"SqliteInbox({str(self.path)!r})"

    async def _run(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        if self._thread is None or self._db is None:
            raise InboxError("the inbox is not open")
        db = self._db
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn, db)

    async def open(self) -> None:
        """Lock the file for this process, then open (or create) it.

        Raises:
            InboxBusyError: another process holds the file (nothing was opened).
            InboxUnavailableError: the disk is full.
            InboxError: it cannot be opened, or holds something else.
        """
        if self._db is not None:
            return
        self._lock = lock_file(self.path, INBOX_ERRORS, what="inbox")
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="payments-inbox")
        try:
            self._db = await asyncio.get_running_loop().run_in_executor(self._thread, self._connect)
        except BaseException:
            self._thread.shutdown(wait=False)
            self._thread = None
            self._lock.release()
            self._lock = None
            raise
        batch = SqliteBatch(lambda: self._db, self.path, "inbox", INBOX_ERRORS, self._thread)
        self._group = GroupCommit(batch)

    def _connect(self) -> sqlite3.Connection:
        path = self.path
        db: sqlite3.Connection | None = None
        try:
            db = open_sqlite(path, synchronous="FULL", check_same_thread=False)
            db.executescript(_SCHEMA)
            db.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', ?)", (SCHEMA_VERSION,)
            )
            got = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        except (sqlite3.Error, OSError) as exc:
            if db is not None:
                db.close()
            raise sqlite_error("open", "inbox", path, exc, INBOX_ERRORS) from exc
        if got is None or got[0] != SCHEMA_VERSION:
            db.close()
            raise InboxError(f"{str(path)!r} is not a notification inbox of this version")
        return db

    @property
    def commits(self) -> int:
        """Transactions written, for tests and the benchmark."""
        return 0 if self._group is None else self._group.commits

    def _submit(self, op: Callable[[sqlite3.Connection], Any]) -> asyncio.Future[Any]:
        if self._group is None:
            raise InboxError("the inbox is not open")
        return self._group.submit(op)

    async def aclose(self) -> None:
        """Write what is queued, then close the file and release it."""
        if self._group is not None:
            await self._group.drain()
        db, thread, lock = self._db, self._thread, self._lock
        self._db = self._thread = self._lock = None
        self._claimed.clear()
        if thread is not None:
            if db is not None:
                await asyncio.get_running_loop().run_in_executor(thread, db.close)
            thread.shutdown(wait=True)
        if lock is not None:
            lock.release()

    def _read_error(self, exc: sqlite3.Error) -> Exception:
        return sqlite_error("read", "inbox", self.path, exc, INBOX_ERRORS)

    async def put(self, notification: Notification) -> None:
        """Store it; committed (with whatever else was queued) on return."""
        params = (
            notification.kind.value,
            notification.payments_service_id,
            encode_notification(notification),
            time.time(),
        )
        await self._submit(lambda db: db.execute(_PUT, params))

    async def claim(self, limit: int) -> list[InboxItem]:
        """Due items this process does not hold already, oldest first."""
        held = len(self._claimed)

        def read(db: sqlite3.Connection) -> list[Any]:
            return db.execute(_CLAIM, (time.time(), limit + held)).fetchall()

        try:
            rows = await self._run(read)
        except sqlite3.Error as exc:
            raise self._read_error(exc) from exc
        out: list[InboxItem] = []
        for raw, seq, attempts, received_at in rows:
            item = InboxItem(decode_notification(raw), seq, attempts, received_at)
            if item.key in self._claimed or len(out) >= limit:
                continue
            self._claimed.add(item.key)
            out.append(item)
        return out

    async def is_delivered(self, key: str) -> bool:
        """Read from the file."""

        def read(db: sqlite3.Connection) -> bool:
            found = db.execute("SELECT 1 FROM delivered WHERE key = ?", (key,)).fetchone()
            return found is not None

        try:
            found: bool = await self._run(read)
        except sqlite3.Error as exc:
            raise self._read_error(exc) from exc
        return found

    async def complete(self, item: InboxItem, delivered: str | None) -> bool:
        """Done and delivered, in one transaction."""
        kind, psid = item.key

        def write(db: sqlite3.Connection) -> bool:
            now = time.time()
            first = False
            if delivered is not None:
                cur = db.execute(
                    "INSERT OR IGNORE INTO delivered (key, delivered_at) VALUES (?, ?)",
                    (delivered, now),
                )
                first = cur.rowcount == 1
                db.execute(
                    "DELETE FROM tracked WHERE kind = ? AND payments_service_id = ?", (kind, psid)
                )
            db.execute(_DONE, (now, kind, psid, item.seq))
            return first

        first: bool = await self._submit(write)
        self._claimed.discard(item.key)  # not before: a failed write leaves it held
        return first

    async def retry(self, item: InboxItem, *, delay: float, park: bool, error: str) -> None:
        """Due again later, or parked."""
        kind, psid = item.key
        now = time.time()
        params = (now + delay, "failed" if park else "pending", error, now, kind, psid)
        await self._submit(lambda db: db.execute(_RETRY, params))
        self._claimed.discard(item.key)

    async def defer(self, item: InboxItem, *, delay: float) -> None:
        """Due again later, its attempts unchanged."""
        kind, psid = item.key
        now = time.time()
        params = (now + delay, now, kind, psid)
        try:
            await self._submit(lambda db: db.execute(_DEFER, params))
        finally:
            self._claimed.discard(item.key)

    def release(self, item: InboxItem) -> None:
        """Let another worker of this process take it."""
        self._claimed.discard(item.key)

    async def status(self) -> InboxStatus:
        """Counted by the file; an inbox not opened by this process (another may hold it)
        is read on a read-only connection of its own."""
        if self._db is not None:
            status: InboxStatus = await self._run(read_status)
            return status
        return await asyncio.to_thread(self._status_read_only)

    def _status_read_only(self) -> InboxStatus:
        try:
            db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True)
        except sqlite3.Error as exc:
            raise self._read_error(exc) from exc
        try:
            return read_status(db)
        finally:
            db.close()

    async def track(self, kind: str, payments_service_id: str, *, check_after: float) -> None:
        """Remember it in the file (until its final status is delivered)."""
        now = time.time()
        params = (kind, payments_service_id, now, now + check_after)
        await self._submit(
            lambda db: db.execute(
                "INSERT OR IGNORE INTO tracked (kind, payments_service_id, tracked_at, "
                "next_check) VALUES (?, ?, ?, ?)",
                params,
            )
        )

    async def due_tracked(self, limit: int, *, recheck: float) -> list[tuple[str, str]]:
        """The due ones, each due again after ``recheck``."""

        def take(db: sqlite3.Connection) -> list[tuple[str, str]]:
            now = time.time()
            rows = db.execute(
                "SELECT kind, payments_service_id FROM tracked WHERE next_check <= ? "
                "ORDER BY next_check LIMIT ?",
                (now, limit),
            ).fetchall()
            db.executemany(
                "UPDATE tracked SET next_check = ? WHERE kind = ? AND payments_service_id = ?",
                [(now + recheck, k, p) for k, p in rows],
            )
            return [(str(k), str(p)) for k, p in rows]

        due: list[tuple[str, str]] = await self._submit(take)
        return due

    async def prune(self, older_than: float) -> int:
        """Delete done items and delivered marks older than that, in one transaction."""
        cutoff = time.time() - older_than

        def delete(db: sqlite3.Connection) -> int:
            done = db.execute(
                "DELETE FROM inbox WHERE state = 'done' AND updated_at < ?", (cutoff,)
            ).rowcount
            marks = db.execute("DELETE FROM delivered WHERE delivered_at < ?", (cutoff,)).rowcount
            return int(done) + int(marks)

        pruned: int = await self._submit(delete)
        return pruned


def read_status(db: sqlite3.Connection) -> InboxStatus:
    """What the inbox file holds (also for ``listen --status`` on a file not in use)."""
    try:
        depth, oldest = db.execute(
            "SELECT COUNT(*), MIN(received_at) FROM inbox WHERE state = 'pending'"
        ).fetchone()
        failed, last_error = db.execute(
            "SELECT COUNT(*), (SELECT error FROM inbox WHERE state = 'failed' "
            "ORDER BY updated_at DESC LIMIT 1) FROM inbox WHERE state = 'failed'"
        ).fetchone()
        (delivered,) = db.execute("SELECT COUNT(*) FROM delivered").fetchone()
        (tracked,) = db.execute("SELECT COUNT(*) FROM tracked").fetchone()
    except sqlite3.Error as exc:
        raise InboxError(f"cannot read the inbox: {exc}") from exc
    return InboxStatus(depth, failed, oldest, delivered, last_error, tracked)
