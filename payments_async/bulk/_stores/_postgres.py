"""The bulk journal in PostgreSQL (psycopg 3): the same rows and states as the SQLite file.

A database holds any number of runs, each keyed by its input's SHA-256: the same input
given twice finds the run it started, as the SQLite file beside the results does. The
plan is written with ``COPY`` inside one transaction that holds the run's row lock, so
two commands planning the same input at once produce one plan: the second waits, then
finds it planned and resumes it.

State changes use the same group commit as the SQLite file: every change queued while a
transaction is being written goes into the next one, and each coroutine resumes only
after its change is committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Final, TypeVar

from ... import _store as store
from ..._store import GroupCommit, is_connection_lost
from .._errors import JournalError, JournalUnavailableError
from .._journal import (
    PLANNED_COLUMNS,
    READ_BATCH,
    ROW_COLUMNS,
    PlannedRow,
    RowState,
    RowUpdate,
    RowWrites,
    StoreReads,
    row_from_record,
)
from .._recall import HELD, POSTGRES, first_per_payment
from ._connect import batch, connect, connect_error, outage, require_psycopg
from ._run_lock import lock_run, lock_writer

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

__all__ = [
    "ROW_COLUMNS",
    "SCHEMA_VERSION",
    "GroupCommitter",
    "PostgresJournal",
    "PostgresRows",
    "connect",
    "connect_error",
    "ensure_schema",
    "find_run",
    "is_connection_lost",
    "lock_run",
    "open_run",
    "outage",
    "plan_run",
    "read_row",
    "require_psycopg",
    "row_from_record",
]

SCHEMA_VERSION: Final = 1

# Table names carry a prefix: the database is often shared with procrastinate's tables.
_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS payments_bulk_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS payments_bulk_runs (
    run_id TEXT PRIMARY KEY,
    input_sha256 TEXT NOT NULL UNIQUE,
    input_name TEXT,
    planned BOOLEAN NOT NULL DEFAULT FALSE,
    rows_total INTEGER NOT NULL DEFAULT 0,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS payments_bulk_rows (
    run_id TEXT NOT NULL REFERENCES payments_bulk_runs (run_id) ON DELETE CASCADE,
    line INTEGER NOT NULL,
    original_end_to_end_id TEXT,
    assignment_id TEXT,
    cancellation_id TEXT,
    body BYTEA,
    state TEXT NOT NULL,
    payments_service_id TEXT,
    created BOOLEAN,
    attempts INTEGER NOT NULL DEFAULT 0,
    outcome TEXT,
    status TEXT,
    reason_codes TEXT,
    reason_text TEXT,
    return_request_needed BOOLEAN,
    error TEXT,
    sent_at BIGINT,
    acknowledged_at BIGINT,
    final_at BIGINT,
    chases INTEGER NOT NULL DEFAULT 0,
    chased_at BIGINT,
    recall_deadline DATE,
    updated_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, line),
    UNIQUE (run_id, assignment_id)
);
CREATE INDEX IF NOT EXISTS payments_bulk_rows_state ON payments_bulk_rows (run_id, state);
""" + POSTGRES.schema()

_T = TypeVar("_T")
logger = logging.getLogger("payments_async.bulk")

# One lock id for "creating the schema", so processes starting together do not race.
_SCHEMA_LOCK: Final = 0x70A7_B01C

_SELECT_AFTER: Final = (
    f"SELECT {ROW_COLUMNS} FROM payments_bulk_rows "  # noqa: S608
    "WHERE run_id = %s AND line > %s ORDER BY line LIMIT %s"
)
_SELECT_UNFINISHED_AFTER: Final = (
    f"SELECT {ROW_COLUMNS} FROM payments_bulk_rows "  # noqa: S608
    "WHERE run_id = %s AND line > %s AND state NOT IN ('final', 'invalid') "
    "ORDER BY line LIMIT %s"
)
_COUNT_STATES: Final = (
    "SELECT state, COUNT(*) FROM payments_bulk_rows WHERE run_id = %s GROUP BY state"
)

_SELECT_ROW: Final = f"SELECT {ROW_COLUMNS} FROM payments_bulk_rows WHERE run_id = %s AND line = %s"  # noqa: S608


def recorded_elsewhere(conn: psycopg.Connection[Any], run_id: str) -> dict[str, str]:
    """The payments the database records a recall for outside this run (see `.._recall`):
    its ledger's, and other runs' rows that reached or may still reach the service
    (planned included: that run can resume): ``{original_end_to_end_id: the first
    recall, as people read it}``."""
    found = conn.execute(POSTGRES.select(f"run_id <> %s AND {HELD}"), (run_id,)).fetchall()
    return {e2e: str(recall) for e2e, recall in first_per_payment(found).items()}


def ensure_schema(conn: psycopg.Connection[Any]) -> None:
    """Create the tables when missing (serialised across processes by an advisory lock).

    Raises:
        JournalError: the database holds tables of another schema version.
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        # Made once, in one transaction that records its version last. Its CREATE ... IF
        # NOT EXISTS would still take a SHARE lock on each table, blocking (or deadlocking
        # with) the workers writing rows, so a process opening a database made before
        # runs none of it.
        made = conn.execute("SELECT to_regclass('payments_bulk_meta') IS NOT NULL").fetchone()
        got = None
        if made and made[0]:
            got = conn.execute(
                "SELECT value FROM payments_bulk_meta WHERE key = 'schema'"
            ).fetchone()
        if got is None:
            conn.execute(_SCHEMA)
            conn.execute(
                "INSERT INTO payments_bulk_meta (key, value) VALUES ('schema', %s) "
                "ON CONFLICT (key) DO NOTHING",
                (str(SCHEMA_VERSION),),
            )
            got = conn.execute(
                "SELECT value FROM payments_bulk_meta WHERE key = 'schema'"
            ).fetchone()
    if got is None or got[0] != str(SCHEMA_VERSION):
        raise JournalError(
            f"the database holds bulk tables of schema {got[0] if got else None!r}, "
            f"not {SCHEMA_VERSION}"
        )


def find_run(conn: psycopg.Connection[Any], run: str | None) -> tuple[str, bool, int]:
    """``(run_id, planned, rows_total)`` of a run given by id, or of the latest run.

    Raises:
        JournalError: no such run (or no bulk tables at all).
    """
    missing = JournalError(f"no bulk run {run!r} in this database" if run else "no bulk runs")
    tables = conn.execute("SELECT to_regclass('payments_bulk_runs') IS NOT NULL").fetchone()
    if not (tables and tables[0]):
        raise missing
    if run is None:
        rec = conn.execute(
            "SELECT run_id, planned, rows_total FROM payments_bulk_runs "
            "ORDER BY created_at DESC LIMIT 1"
        ).fetchone()
    else:
        rec = conn.execute(
            "SELECT run_id, planned, rows_total FROM payments_bulk_runs WHERE run_id = %s",
            (run,),
        ).fetchone()
    if rec is None:
        raise missing
    return str(rec[0]), bool(rec[1]), int(rec[2])


def open_run(
    conn: psycopg.Connection[Any], *, input_sha256: str, new_run_id: str, input_name: str | None
) -> tuple[str, bool]:
    """The run of this input (created with ``new_run_id`` when new): ``(run_id, planned)``."""
    conn.execute(
        "INSERT INTO payments_bulk_runs (run_id, input_sha256, input_name, created_at) "
        "VALUES (%s, %s, %s, %s) ON CONFLICT (input_sha256) DO NOTHING",
        (new_run_id, input_sha256, input_name, time.time()),
    )
    rec = conn.execute(
        "SELECT run_id, planned FROM payments_bulk_runs WHERE input_sha256 = %s", (input_sha256,)
    ).fetchone()
    assert rec is not None  # inserted above, or already there
    return str(rec[0]), bool(rec[1])


def plan_run(conn: psycopg.Connection[Any], run_id: str, rows: Iterable[PlannedRow]) -> bool:
    """Write the plan of a run unless another process did: True when this call wrote it.

    The run's row is locked for the whole transaction, so of two processes planning the
    same run one writes and the other, once the first commits, finds it planned. ``rows``
    may be a generator: it is consumed only when this process writes the plan.
    """
    import psycopg

    failed: list[Exception] = []

    def given() -> Iterator[PlannedRow]:
        try:
            yield from rows
        except Exception as exc:  # psycopg before 3.2 reports it as a cancelled COPY
            failed.append(exc)
            raise

    now = time.time()
    with conn.transaction():
        rec = conn.execute(
            "SELECT planned FROM payments_bulk_runs WHERE run_id = %s FOR UPDATE", (run_id,)
        ).fetchone()
        if rec is None:
            raise JournalError(f"no bulk run {run_id!r} in this database")
        if rec[0]:
            return False
        n = 0
        try:
            with (
                conn.cursor() as cur,
                cur.copy(
                    f"COPY payments_bulk_rows (run_id, {PLANNED_COLUMNS}, updated_at) FROM STDIN"
                ) as copy,
            ):
                for r in given():
                    copy.write_row((run_id, *r.stored(), now))
                    n += 1
        except psycopg.Error:
            if failed:  # what the rows raised, not how the COPY reports it
                raise failed[0] from None
            raise
        conn.execute(
            "UPDATE payments_bulk_runs SET planned = TRUE, rows_total = %s WHERE run_id = %s",
            (n, run_id),
        )
    return True


class GroupCommitter:
    """Group commit of single-row changes on one asyncio connection.

    Every change queued while a transaction is being written goes into the next one, sent
    in pipeline mode (a batch costs about one round trip, not one per statement); the
    future of each change resolves only once its transaction is committed. The
    connection commits without waiting for the server's disk (``synchronous_commit =
    off``), as the SQLite file's ``synchronous=NORMAL``: a killed client loses nothing
    (the server has every commit); only a crash of the server itself may drop the last
    few hundred milliseconds of changes, which a resume redoes safely with the recorded
    ids.

    With ``run_lock``, the connection holds that run's writer lock: taken when the
    connection is made, and again on every reconnect before anything is written (see
    `lock_writer`); while another session holds it, every change fails with
    `JournalBusyError` and nothing is written.

    Args:
        dsn: the database's address.
        run_lock: the run whose writer lock to hold, or None (changes of any run).
    """

    def __init__(self, dsn: str, *, run_lock: str | None = None) -> None:
        self._run_lock = run_lock
        self._locked = False  # the writer lock was held once: a new one is a reconnect
        self._batch = batch(dsn, self._prepare)
        self._group = GroupCommit(self._batch)

    @property
    def commits(self) -> int:
        """Transactions written, for benchmarks and tests."""
        return self._group.commits

    def write(self, sql: str, params: tuple[Any, ...]) -> asyncio.Future[None]:
        """Queue one change; the future resolves once it is committed.

        The future fails with `JournalError` when its transaction cannot be written
        (`JournalUnavailableError` once the database stayed away for the window,
        `JournalBusyError` when another session holds the run's writer lock).
        """

        async def change(cur: psycopg.AsyncCursor[Any]) -> None:
            await cur.execute(sql, params)

        future: asyncio.Future[None] = self._group.submit(change)
        return future

    async def _prepare(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """A new connection holds the run's writer lock before it writes anything."""
        await conn.execute("SET synchronous_commit = off")
        if self._run_lock is not None:
            await lock_writer(conn, self._run_lock, again=self._locked)
            self._locked = True

    async def aclose(self) -> None:
        """Wait for queued changes, then close the connection."""
        await self._group.drain()
        await self._batch.aclose()

    def close(self) -> None:
        """Close the connection at once (outside the event loop), dropping queued changes."""
        self._group.cancel()
        self._batch.close()


async def read_row(
    pool: psycopg_pool.AsyncConnectionPool[Any], run_id: str, line: int
) -> RowState | None:
    """One row of a run as the journal records it, or None when there is no such row."""
    async with pool.connection() as conn:
        cur = await conn.execute(_SELECT_ROW, (run_id, line))
        rec = await cur.fetchone()
    return None if rec is None else row_from_record(rec)


class PostgresRows(RowWrites):
    """The state changes of one run's rows (the writing half of the journal).

    Every change goes through a `GroupCommitter`, shared by every run of a worker
    process; each awaited change is committed before its coroutine resumes.

    Args:
        committer: the group committer to write with.
        run_id: the run the rows belong to.
    """

    def __init__(self, committer: GroupCommitter, run_id: str) -> None:
        self._committer = committer
        self._run_id = run_id

    def _apply(self, update: RowUpdate) -> asyncio.Future[None]:
        key = "run_id = %s AND line = %s"
        sql, params = update.statement("payments_bulk_rows", key, (self._run_id, update.line), "%s")
        return self._committer.write(sql, params)


class PostgresJournal(PostgresRows, StoreReads["psycopg.Connection[Any]"]):
    """The journal of one run in PostgreSQL, for the single-process runner.

    Open it with `open`. Rows are not kept in memory. Reads and the plan use a
    synchronous connection (a read is one batch of `READ_BATCH` rows, by line);
    state changes go through an asyncio connection in grouped transactions, each awaited
    change committed before its coroutine resumes.

    Args:
        conn: an open autocommit connection with the schema in place.
        dsn: the address, to open the asyncio connection with.
        run_id: this run's id.
        planned: True when the database already holds this run's plan.
    """

    def __init__(
        self, conn: psycopg.Connection[Any], dsn: str, run_id: str, *, planned: bool
    ) -> None:
        super().__init__(GroupCommitter(dsn, run_lock=run_id), run_id)
        self._conn = conn
        self._dsn = dsn
        self._planned = planned
        self._plan_commits = 0

    @classmethod
    def open(
        cls, dsn: str, *, input_sha256: str, new_run_id: str, input_name: str | None = None
    ) -> PostgresJournal:
        """Open the run of this input in the database (creating tables and run if missing).

        A new run's rows whose payment already has a cancellation recorded in another run
        of the database (`recorded_cancellations`) are for the planner to refuse: see
        ``payments_async.bulk.open_run``.

        Args:
            dsn: a ``postgresql://`` address (libpq form).
            input_sha256: the input's digest: the key of its run.
            new_run_id: the run id to record when the input has no run yet.
            input_name: the input file's name, shown by ``bulk-status``.

        A connection lost while the run is being opened (the server restarting) is waited
        out like any outage (`Outage`), and the run opened again.

        Raises:
            JournalError: the server cannot be reached, or holds another schema version.
            JournalUnavailableError: the connection was lost and the server stayed out of
                reach for the outage window.
        """
        import psycopg

        waiting: store.Outage | None = None
        while True:
            try:
                conn = connect(dsn)
            except JournalUnavailableError as exc:
                if waiting is None:  # unreachable from the start: said at once
                    raise
                time.sleep(waiting.failed(exc))
                continue
            try:
                ensure_schema(conn)
                run_id, planned = open_run(
                    conn, input_sha256=input_sha256, new_run_id=new_run_id, input_name=input_name
                )
                lock_run(conn, run_id)
            except psycopg.Error as exc:
                conn.close()
                if not is_connection_lost(exc):
                    raise
                waiting = waiting or outage(dsn)
                time.sleep(waiting.failed(exc))
                continue
            except BaseException:
                conn.close()
                raise
            if waiting is not None:
                waiting.ended()
            return cls(conn, dsn, run_id, planned=planned)

    def plan(self, rows: Iterable[PlannedRow]) -> None:
        """Record every row and mark the plan complete, all in one transaction.

        Raises:
            JournalError: the run already holds a plan (another process wrote it first).
        """
        if self._planned or not plan_run(self._conn, self._run_id, rows):
            raise JournalError("the journal already holds a plan")
        self._planned = True
        self._plan_commits += 1

    def recorded_cancellations(self) -> dict[str, str]:
        """The payments another run of this database records a cancellation for, which
        the service may hold (rows sent at least once, in flight, acknowledged, or final
        with an outcome from the service).

        Returns:
            ``{original_end_to_end_id: "run R, line N, outcome"}``.

        Raises:
            JournalError: the database cannot be read.
        """
        import psycopg

        try:
            return self._reading(lambda conn: recorded_elsewhere(conn, self._run_id))
        except psycopg.Error as exc:
            raise JournalError(f"cannot read the PostgreSQL journal: {exc}") from exc

    def forget_unplanned(self) -> None:
        """Drop this run from the database while it holds no plan (a refused new run), so
        ``bulk-status`` does not show it; nothing happens once it is planned."""
        import psycopg

        with contextlib.suppress(psycopg.Error, JournalError):
            self._reading(
                lambda conn: conn.execute(
                    "DELETE FROM payments_bulk_runs WHERE run_id = %s AND NOT planned",
                    (self._run_id,),
                )
            )

    def state_counts(self) -> dict[str, int]:
        """Rows per state, counted by the database.

        Raises:
            JournalError: the database cannot be read.
        """
        import psycopg

        try:
            return self._reading(
                lambda conn: {
                    str(k): int(n) for k, n in conn.execute(_COUNT_STATES, (self._run_id,))
                }
            )
        except psycopg.Error as exc:
            raise JournalError(f"cannot read the PostgreSQL journal: {exc}") from exc

    def _reading(self, read: Callable[[psycopg.Connection[Any]], _T]) -> _T:
        """``read(connection)``; while the database cannot be reached, reconnect (and
        take the run lock again before reading) with a growing pause, then read again.

        Raises:
            JournalUnavailableError: the database stayed out of reach for the window.
            JournalBusyError: another session took the run lock while this one was lost.
        """
        waiting = outage(self._dsn)
        while True:
            if self._conn.closed:
                try:
                    self._conn = connect(self._dsn)
                except JournalError as exc:  # refused, or a server still starting up
                    time.sleep(waiting.failed(exc))
                    continue
                try:
                    lock_run(self._conn, self._run_id, again=True)
                except Exception as exc:  # never read on a session without the lock
                    self._conn.close()
                    if not is_connection_lost(exc):
                        raise
                    time.sleep(waiting.failed(exc))
                    continue
            try:
                result = read(self._conn)
            except Exception as exc:
                if not is_connection_lost(exc):
                    raise
                self._conn.close()
                time.sleep(waiting.failed(exc))
                continue
            waiting.ended()
            return result

    def _reader(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        """The journal's connection, or a new one once the journal is closed."""
        if self._conn.closed:
            return contextlib.closing(connect(self._dsn))
        return contextlib.nullcontext(self._conn)

    def _fetch(
        self, conn: psycopg.Connection[Any], after: int, *, unfinished: bool
    ) -> list[RowState]:
        import psycopg

        sql = _SELECT_UNFINISHED_AFTER if unfinished else _SELECT_AFTER
        params = (self._run_id, after, READ_BATCH)
        try:
            # The journal's own connection, or the one it had before `_reading` reconnected.
            if conn is self._conn or (conn.closed and not self._conn.closed):
                records = self._reading(lambda c: c.execute(sql, params).fetchall())
            else:
                records = conn.execute(sql, params).fetchall()
        except psycopg.Error as exc:
            raise JournalError(f"cannot read the PostgreSQL journal: {exc}") from exc
        return [row_from_record(rec) for rec in records]

    @property
    def commits(self) -> int:
        """Transactions written (the plan's and the grouped changes'), for benchmarks and tests."""
        return self._plan_commits + self._committer.commits

    async def aclose(self) -> None:
        """Wait for queued changes, then close both connections."""
        await self._committer.aclose()
        self._conn.close()

    def close(self) -> None:
        """Close the connections (changes are committed as they are awaited)."""
        self._committer.close()
        self._conn.close()
