"""One group commit for every store: changes queued while a transaction is being written
go into the next one, and each caller resumes only once its change is committed.

`GroupCommit` is the engine; a store gives it a batch writer: `SqliteBatch` (a SQLite
connection, on a thread of its own or inline) or `PsycopgBatch` (one asyncio psycopg
connection that waits out outages under the one policy, `Outage`).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ._errors import StoreErrors
from ._outage import Outage, is_connection_lost, quiet_psycopg
from ._postgres import aconnect
from ._sqlite import sqlite_error

if TYPE_CHECKING:
    import psycopg

__all__ = ["HANG_AFTER", "GroupCommit", "PsycopgBatch", "SqliteBatch"]

_LATE: Final = 5.0
"""Seconds past its bound after which a hung transaction's timer fired late: the process
itself did not run meanwhile."""

HANG_AFTER: Final = 15.0
"""Seconds one transaction of changes may take before its database is taken for hung:
its connection is dropped and the changes are written again on a new one (the outage
policy then waits for the database)."""

Op = Callable[[Any], Any]
"""One change: called with the batch's connection (SQLite) or cursor (psycopg) inside the
transaction; its result (awaited when it is awaitable) resolves the caller's future."""


class GroupCommit:
    """Operations queued while a transaction is written go into the next one.

    Args:
        write: writes a batch of operations in one transaction, returning their results
            in order; what it raises fails every caller of that batch.
    """

    def __init__(self, write: Callable[[Sequence[Op]], Awaitable[list[Any]]]) -> None:
        self._write = write
        self._pending: list[tuple[Op, asyncio.Future[Any]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self.commits = 0  # transactions written, for tests and benchmarks

    def submit(self, op: Op) -> asyncio.Future[Any]:
        """Queue ``op`` for the next transaction; the future resolves to its result once
        that transaction has committed, or fails with what the writer raised."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append((op, fut))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_loop())
        return fut

    async def _flush_loop(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                results = await self._write([op for op, _ in batch])
            except Exception as exc:  # every waiting caller hears of it; none hangs
                self._settle(batch, exc)
                continue
            self._settle(batch, results)

    def write_pending(self, write_now: Callable[[Sequence[Op]], list[Any]]) -> None:
        """Write what is queued at once with a synchronous writer (a store closing outside
        a turn of the event loop, with nothing being written); callers hear as usual."""
        batch, self._pending = self._pending, []
        if not batch:
            return
        try:
            results = write_now([op for op, _ in batch])
        except Exception as exc:
            self._settle(batch, exc)
            return
        self._settle(batch, results)

    def _settle(
        self, batch: list[tuple[Op, asyncio.Future[Any]]], got: list[Any] | Exception
    ) -> None:
        if isinstance(got, Exception):
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(got)
            return
        self.commits += 1
        for (_, fut), result in zip(batch, got, strict=True):
            if not fut.done():
                fut.set_result(result)

    async def drain(self) -> None:
        """Wait until everything queued is written (or has failed)."""
        while self._flusher is not None and not self._flusher.done():
            await asyncio.gather(self._flusher, return_exceptions=True)

    def cancel(self) -> None:
        """Stop writing at once (outside a running loop's turn): queued changes are dropped."""
        if self._flusher is not None and not self._flusher.done():
            self._flusher.cancel()
        self._pending.clear()


class SqliteBatch:
    """Writes a batch in one SQLite transaction (``BEGIN IMMEDIATE``), rolled back whole on
    failure.

    Args:
        db: the connection's getter (None once the store is closed).
        path: the file, for messages.
        what: the store as messages name it.
        errors: the room's errors (a full disk is ``errors.unavailable``).
        executor: the store's own thread, or None to write on the event loop's thread.
    """

    def __init__(
        self,
        db: Callable[[], sqlite3.Connection | None],
        path: Path,
        what: str,
        errors: StoreErrors,
        executor: Executor | None = None,
    ) -> None:
        self._db = db
        self._path = path
        self._what = what
        self._errors = errors
        self._executor = executor

    def write_now(self, ops: Sequence[Op]) -> list[Any]:
        """Write ``ops`` in one transaction on this thread."""
        db = self._db()
        if db is None:
            raise self._errors.error(f"{self._what} {str(self._path)!r} is not open")
        try:
            db.execute("BEGIN IMMEDIATE")
            results = [op(db) for op in ops]
            db.execute("COMMIT")
        except (sqlite3.Error, OSError) as exc:
            if db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
            raise sqlite_error("write", self._what, self._path, exc, self._errors) from exc
        return results

    async def __call__(self, ops: Sequence[Op]) -> list[Any]:
        if self._executor is None:
            return self.write_now(ops)
        return await asyncio.get_running_loop().run_in_executor(self._executor, self.write_now, ops)


class PsycopgBatch:
    """Writes a batch in one transaction on one asyncio psycopg connection, waiting out an
    outage of the database (one policy: `Outage`) before the window ends.

    Calls take turns: one transaction at a time on the connection (a store may use one
    batch writer for its reads, called from many tasks). A transaction that takes longer
    than `HANG_AFTER` is taken for a hung database: its
    connection is dropped and the batch written again on a new one. The batch's
    operations must be safe to run again after a failed transaction (which is rolled
    back whole).

    Args:
        dsn: the database's address.
        errors: the room's errors.
        what: the store as messages name it.
        window: seconds to wait for the database from the first failure.
        prepare: run on every new connection before anything is written (settings,
            locks); what it raises, other than a lost connection, fails the batch.
        pipeline: send a batch's statements in pipeline mode (one round trip); off when
            an operation reads a statement's result before the next is sent.
        hang_after: `HANG_AFTER` unless given.
    """

    def __init__(
        self,
        dsn: str,
        *,
        errors: StoreErrors,
        what: str,
        window: float,
        prepare: Callable[[psycopg.AsyncConnection[Any]], Awaitable[None]] | None = None,
        pipeline: bool = False,
        hang_after: float = HANG_AFTER,
    ) -> None:
        self._dsn = dsn
        self._errors = errors
        self._what = what
        self._window = window
        self._prepare = prepare
        self._pipeline = pipeline
        self._hang_after = hang_after
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._turn = asyncio.Lock()  # one transaction at a time on the connection

    async def __call__(self, ops: Sequence[Op]) -> list[Any]:
        async with self._turn:
            return await self._write(ops)

    async def _write(self, ops: Sequence[Op]) -> list[Any]:
        outage = Outage(self._dsn, window=self._window, errors=self._errors, what=self._what)
        while True:
            began = time.monotonic()
            try:
                async with asyncio.timeout(self._hang_after):
                    conn = await self._connection()
                    async with contextlib.AsyncExitStack() as tx:
                        await tx.enter_async_context(conn.transaction())
                        if self._pipeline:
                            await tx.enter_async_context(conn.pipeline())
                        cur = await tx.enter_async_context(conn.cursor())
                        results = []
                        for op in ops:
                            result = op(cur)
                            results.append(await result if asyncio.iscoroutine(result) else result)
            except Exception as exc:
                # A lost connection, a hung one, or none to be had for now (no server
                # answered, or one restarting): waited out; anything else is the batch's.
                if not (is_connection_lost(exc) or isinstance(exc, self._errors.unavailable)):
                    raise self._failed(exc) from exc
                await self.aclose()
                # A hang is found only at its bound: the outage began with the transaction.
                # A bound that fired late was a stall of this process (it was stopped, or
                # starved), not of the database: a lost connection, made again silently.
                took = time.monotonic() - began
                hung = isinstance(exc, TimeoutError) and took < self._hang_after + _LATE
                await asyncio.sleep(outage.failed(exc, began=began if hung else None))
                continue
            outage.ended()
            return results

    def _failed(self, exc: Exception) -> Exception:
        """What a batch that failed for another reason than an outage raises: the room's
        own errors as they are, a database's answer as ``errors.error``."""
        import psycopg

        if isinstance(exc, psycopg.Error):
            return self._errors.error(f"cannot write the PostgreSQL {self._what}: {exc}")
        return exc

    async def _connection(self) -> psycopg.AsyncConnection[Any]:
        conn = self._conn
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        quiet_psycopg()
        conn = await aconnect(self._dsn, self._errors)
        try:
            if self._prepare is not None:
                await self._prepare(conn)
        except BaseException:
            await conn.close()
            raise
        self._conn = conn
        return conn

    @property
    def connection(self) -> psycopg.AsyncConnection[Any] | None:
        """The connection in use, if any (for a store's reads on the same session)."""
        return self._conn

    async def aclose(self) -> None:
        """Close the connection (a new one is made on the next batch)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()

    def close(self) -> None:
        """Close the connection's socket at once, outside the event loop."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.pgconn.finish()
