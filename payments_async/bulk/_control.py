"""A bulk run's control: pause, resume, abort and the confirmation, recorded beside its
journal and obeyed by every process that sends the run's rows.

The control history lives in a table of its own, ``payments_bulk_control``, in the run's
own database: the SQLite journal file of a local run, or the PostgreSQL database of a
``--journal postgresql://`` or ``--queue`` run. It is created by whoever writes to it first
(``CREATE TABLE IF NOT EXISTS``). Each event names the action, who (``user@host`` or
what the operator gave), when (UTC), and optionally a reason and counts. The run's state
is read from its history::

    running --pause--> paused --resume--> running
    running | paused --abort--> aborted   (for good)

A sending process asks a `RunGate` before each POST: while the run is paused it waits
(reads of outcomes of rows already sent go on), once it is aborted a row never sent ends
final ``aborted`` with the error ``not sent (aborted ...)`` (`aborted_change`), and a row
already sent (in flight) is finished as usual. The gate reads the state at most once per
`CONTROL_INTERVAL`, so a pause is obeyed within about that long.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import logging
import socket
import sqlite3
import time
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from .._store import is_connection_lost, open_sqlite, sqlite_error
from ._errors import JOURNAL_ERRORS, JournalError
from ._rows import RowChange, RowOutcome, Stage
from ._stores import _connect as pg_connect
from ._stores import is_postgres_url

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

__all__ = [
    "ABORTED_ERROR",
    "CONTROL_INTERVAL",
    "Action",
    "ControlEvent",
    "ControlState",
    "RunAbortedError",
    "RunControlError",
    "RunFinishedError",
    "RunGate",
    "RunNotFoundError",
    "RunState",
    "WorkerGates",
    "aborted_change",
    "default_actor",
    "journal_gate",
    "read_control",
    "record_action",
]

logger = logging.getLogger("payments_async.bulk.control")

CONTROL_INTERVAL: Final = 1.0
"""Seconds a sending process goes at most without reading its run's control state."""

ABORTED_ERROR: Final = "not sent (aborted"
"""How the error of a row an abort kept from being sent begins."""


class Action(StrEnum):
    """What a control event records; stored as its value."""

    CONFIRMED = "confirmed"
    """A person confirmed the run's counts before it sent anything (or ``--yes``)."""
    PAUSED = "paused"
    """No new request of the run is sent until it is resumed."""
    RESUMED = "resumed"
    """Sending goes on."""
    ABORTED = "aborted"
    """Rows not sent yet end ``aborted``; rows in flight finish."""


class RunState(StrEnum):
    """A run's state as its control history makes it."""

    RUNNING = "running"
    PAUSED = "paused"
    ABORTED = "aborted"


_STATE_AFTER: Final = {
    Action.PAUSED: RunState.PAUSED,
    Action.RESUMED: RunState.RUNNING,
    Action.ABORTED: RunState.ABORTED,
}


class RunControlError(JournalError):
    """A control action that cannot be taken (nothing was recorded)."""


class RunNotFoundError(RunControlError):
    """No such run in the journal or database given."""


class RunFinishedError(RunControlError):
    """The run has no row left to send or wait for: there is nothing to pause or abort."""


class RunAbortedError(RunControlError):
    """The run was aborted: it cannot be paused or resumed any more."""


def _utc(value: datetime | str) -> datetime:
    when = datetime.fromisoformat(value) if isinstance(value, str) else value
    return when.astimezone(UTC) if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _shown(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M:%S UTC")


@dataclass(frozen=True, slots=True)
class ControlEvent:
    """One recorded control event.

    Attributes:
        action: what was done.
        by: who did it (``user@host``, or what the operator gave with ``--by``).
        at: when, in UTC.
        reason: why, as the operator said it, or None.
        counts: figures recorded with it (a confirmation's rows and amounts), or None.
    """

    action: Action
    by: str
    at: datetime
    reason: str | None = None
    counts: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The event as JSON types (``at`` in ISO 8601, UTC)."""
        return {
            "action": self.action.value,
            "by": self.by,
            "at": self.at.isoformat(),
            "reason": self.reason,
            "counts": self.counts,
        }

    def describe(self) -> str:
        """One line: ``paused 2026-11-28 06:30:01 UTC by ann@host: threshold at the bank``."""
        line = f"{self.action.value} {_shown(self.at)} by {self.by}"
        if self.counts:
            line += " (" + ", ".join(f"{k} {v}" for k, v in self.counts.items()) + ")"
        return f"{line}: {self.reason}" if self.reason else line


@dataclass(frozen=True, slots=True)
class ControlState:
    """A run's current control state and its history, oldest first.

    Attributes:
        run_id: the run.
        history: every control event of the run, oldest first.
        aborted_rows: rows that ended ``aborted``.
        changed: False when the action just asked for changed nothing (a pause of a
            paused run, a resume of a running one); True otherwise.
    """

    run_id: str
    history: tuple[ControlEvent, ...] = ()
    aborted_rows: int = 0
    changed: bool = True

    @property
    def last_change(self) -> ControlEvent | None:
        """The event that set the current state (None: never paused or aborted)."""
        for event in reversed(self.history):
            if event.action is Action.ABORTED:
                return event
        for event in reversed(self.history):
            if event.action in _STATE_AFTER:
                return event
        return None

    @property
    def state(self) -> RunState:
        """``running``, ``paused`` or ``aborted``."""
        event = self.last_change
        return RunState.RUNNING if event is None else _STATE_AFTER[event.action]

    def describe(self) -> str:
        """``paused since 2026-11-28 06:30:01 UTC by ann@host`` (or ``running``)."""
        event = self.last_change
        if event is None or self.state is RunState.RUNNING:
            return RunState.RUNNING.value
        line = f"{self.state.value} since {_shown(event.at)} by {event.by}"
        return f"{line}: {event.reason}" if event.reason else line

    def as_dict(self) -> dict[str, Any]:
        """The state and history as JSON types (``bulk-status --json``'s ``control``)."""
        event = self.last_change
        current = None if self.state is RunState.RUNNING else event
        return {
            "state": self.state.value,
            "since": None if current is None else current.at.isoformat(),
            "by": None if current is None else current.by,
            "reason": None if current is None else current.reason,
            "aborted_rows": self.aborted_rows,
            "history": [e.as_dict() for e in self.history],
        }


def default_actor() -> str:
    """Who the operating system says runs this process: ``user@host``."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):  # no name for this uid (a bare container)
        import os

        user = f"uid{os.getuid()}"
    return f"{user}@{socket.gethostname()}"


def aborted_change(event: ControlEvent | None) -> RowChange:
    """What to record for a row never sent when its run is aborted: final ``aborted``,
    its error ``not sent (aborted by who at when[: reason])``."""
    said = "" if event is None else f" by {event.by} at {_shown(event.at)}"
    if event is not None and event.reason:
        said += f": {event.reason}"
    return RowChange(
        stage=Stage.FINAL, outcome=RowOutcome.ABORTED, error=f"{ABORTED_ERROR}{said})", left=False
    )


# --- the tables ----------------------------------------------------------------------------

_SQLITE_TABLE: Final = """
CREATE TABLE IF NOT EXISTS payments_bulk_control (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    action TEXT NOT NULL,
    actor TEXT NOT NULL,
    at TEXT NOT NULL,
    reason TEXT,
    counts TEXT
)
"""

_PG_TABLE: Final = """
CREATE TABLE IF NOT EXISTS payments_bulk_control (
    seq BIGSERIAL PRIMARY KEY,
    run_id TEXT NOT NULL,
    action TEXT NOT NULL,
    actor TEXT NOT NULL,
    at TIMESTAMPTZ NOT NULL,
    reason TEXT,
    counts JSONB
);
CREATE INDEX IF NOT EXISTS payments_bulk_control_run ON payments_bulk_control (run_id, seq)
"""

_HISTORY: Final = (
    "SELECT action, actor, at, reason, counts FROM payments_bulk_control "
    "WHERE run_id = {p} ORDER BY seq"
)
_INSERT: Final = (
    "INSERT INTO payments_bulk_control (run_id, action, actor, at, reason, counts) "
    "VALUES ({p}, {p}, {p}, {p}, {p}, {p})"
)
# What a sending process reads once per interval: the event that sets the state.
_CURRENT: Final = (
    "SELECT action, actor, at, reason, counts FROM payments_bulk_control "
    "WHERE run_id = {p} AND action IN ('paused', 'resumed', 'aborted') "
    "ORDER BY (action = 'aborted') DESC, seq DESC LIMIT 1"
)
_ABORTED_ROWS: Final = {
    "sqlite": "SELECT COUNT(*) FROM rows WHERE state = 'final' AND outcome = 'aborted'",
    "pg": "SELECT COUNT(*) FROM payments_bulk_rows WHERE run_id = %s AND state = 'final' "
    "AND outcome = 'aborted'",
}
_UNFINISHED: Final = {
    "sqlite": "SELECT COUNT(*) FROM rows WHERE state NOT IN ('final', 'invalid')",
    "pg": "SELECT COUNT(*) FROM payments_bulk_rows WHERE run_id = %s "
    "AND state NOT IN ('final', 'invalid')",
}


def _event(rec: tuple[Any, ...]) -> ControlEvent:
    action, actor, at, reason, counts = rec
    if isinstance(counts, str):
        counts = json.loads(counts)
    return ControlEvent(Action(action), str(actor), _utc(at), reason, counts or None)


def _lock_id(run_id: str) -> int:
    return zlib.crc32(f"payments-bulk-control:{run_id}".encode()) & 0x7FFF_FFFF


def _refuse(state: ControlState, action: Action, unfinished: int) -> ControlState | None:
    """None when ``action`` is to be recorded; the unchanged state when it changes
    nothing. Raises when it cannot be taken."""
    if action is Action.CONFIRMED:
        return None
    now = state.state
    if now is RunState.ABORTED:
        if action is Action.ABORTED:
            return _unchanged(state)
        raise RunAbortedError(f"run {state.run_id} was {state.describe()}: nothing to {action}")
    if unfinished == 0:
        raise RunFinishedError(
            f"run {state.run_id} is finished (every row is final): nothing to {_verb(action)}"
        )
    if (action is Action.PAUSED and now is RunState.PAUSED) or (
        action is Action.RESUMED and now is RunState.RUNNING
    ):
        return _unchanged(state)
    return None


def _verb(action: Action) -> str:
    return {"paused": "pause", "resumed": "resume", "aborted": "abort"}.get(action, action)


def _unchanged(state: ControlState) -> ControlState:
    return ControlState(state.run_id, state.history, state.aborted_rows, changed=False)


# --- SQLite -------------------------------------------------------------------------------


def _sqlite_open(path: Path) -> sqlite3.Connection:
    if not path.is_file():
        raise RunNotFoundError(f"no journal file {str(path)!r}")
    try:
        return open_sqlite(path, synchronous="FULL")
    except (sqlite3.Error, OSError) as exc:
        raise sqlite_error("open", "journal", path, exc, JOURNAL_ERRORS) from exc


def _sqlite_run_id(db: sqlite3.Connection, path: Path) -> str:
    try:
        rec = db.execute("SELECT value FROM meta WHERE key = 'run_id'").fetchone()
    except sqlite3.OperationalError:
        rec = None
    if rec is None:
        raise RunNotFoundError(f"{str(path)!r} holds no bulk run")
    return str(rec[0])


def _sqlite_state(db: sqlite3.Connection, run_id: str) -> ControlState:
    try:
        history = tuple(_event(r) for r in db.execute(_HISTORY.format(p="?"), (run_id,)))
    except sqlite3.OperationalError as exc:
        if not _no_table(exc):
            raise
        history = ()  # never controlled
    try:
        (aborted,) = db.execute(_ABORTED_ROWS["sqlite"]).fetchone()
    except sqlite3.OperationalError:  # the plan is not written yet
        aborted = 0
    return ControlState(run_id, history, int(aborted))


def _sqlite_record(
    path: Path, action: Action, by: str, at: datetime, reason: str | None, counts: Any
) -> ControlState:
    db = _sqlite_open(path)
    try:
        run_id = _sqlite_run_id(db, path)
        db.execute(_SQLITE_TABLE)
        db.execute("BEGIN IMMEDIATE")  # one writer decides from the state it read
        try:
            state = _sqlite_state(db, run_id)
            try:
                (unfinished,) = db.execute(_UNFINISHED["sqlite"]).fetchone()
            except sqlite3.OperationalError:
                unfinished = 1  # planned later: not finished
            same = _refuse(state, action, int(unfinished))
            if same is not None:
                db.execute("ROLLBACK")
                return same
            db.execute(
                _INSERT.format(p="?"),
                (run_id, action.value, by, at.isoformat(), reason, _counts_json(counts)),
            )
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        return _sqlite_state(db, run_id)
    except sqlite3.Error as exc:
        raise sqlite_error("write", "journal", path, exc, JOURNAL_ERRORS) from exc
    finally:
        db.close()


def _sqlite_read(path: Path) -> ControlState:
    db = _sqlite_open(path)
    try:
        return _sqlite_state(db, _sqlite_run_id(db, path))
    except sqlite3.Error as exc:
        raise sqlite_error("read", "journal", path, exc, JOURNAL_ERRORS) from exc
    finally:
        db.close()


def _counts_json(counts: dict[str, Any] | None) -> str | None:
    return None if counts is None else json.dumps(counts, default=str)


# --- PostgreSQL ---------------------------------------------------------------------------


def _pg_ensure(conn: psycopg.Connection[Any]) -> None:
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_id("schema"),))
        conn.execute(_PG_TABLE)


def _pg_run(conn: psycopg.Connection[Any], run: str | None) -> str:
    if run is None:
        rec = conn.execute(
            "SELECT run_id FROM payments_bulk_runs ORDER BY created_at DESC LIMIT 1"
        ).fetchone()
    else:
        rec = conn.execute(
            "SELECT run_id FROM payments_bulk_runs WHERE run_id = %s", (run,)
        ).fetchone()
    if rec is None:
        raise RunNotFoundError(f"no bulk run {run!r} in this database" if run else "no bulk runs")
    return str(rec[0])


def _pg_state(conn: psycopg.Connection[Any], run_id: str) -> ControlState:
    table = conn.execute("SELECT to_regclass('payments_bulk_control') IS NOT NULL").fetchone()
    history = (
        tuple(_event(r) for r in conn.execute(_HISTORY.format(p="%s"), (run_id,)))
        if table and table[0]
        else ()
    )
    rec = conn.execute(_ABORTED_ROWS["pg"], (run_id,)).fetchone()
    return ControlState(run_id, history, int(rec[0]) if rec else 0)


def _pg_do(
    dsn: str, work: Callable[[psycopg.Connection[Any]], ControlState], *, write: bool = True
) -> ControlState:
    import psycopg

    conn = pg_connect.connect(dsn)
    try:
        tables = conn.execute("SELECT to_regclass('payments_bulk_runs') IS NOT NULL").fetchone()
        if not (tables and tables[0]):
            raise RunNotFoundError("no bulk runs in this database")
        if write:
            _pg_ensure(conn)
        return work(conn)
    except psycopg.Error as exc:
        if is_connection_lost(exc):
            raise pg_connect.connect_error(dsn, exc) from None
        raise JournalError(f"cannot use the run's control table: {exc}") from None
    finally:
        conn.close()


def _pg_record(
    dsn: str,
    run: str | None,
    action: Action,
    by: str,
    at: datetime,
    reason: str | None,
    counts: Any,
) -> ControlState:
    def work(conn: psycopg.Connection[Any]) -> ControlState:
        run_id = _pg_run(conn, run)
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_id(run_id),))
            state = _pg_state(conn, run_id)
            rec = conn.execute(_UNFINISHED["pg"], (run_id,)).fetchone()
            same = _refuse(state, action, int(rec[0]) if rec else 0)
            if same is not None:
                return same
            conn.execute(
                _INSERT.format(p="%s"),
                (run_id, action.value, by, at, reason, _counts_json(counts)),
            )
        return _pg_state(conn, run_id)

    return _pg_do(dsn, work)


# --- the public functions -----------------------------------------------------------------


def record_action(
    target: str | Path,
    action: Action,
    *,
    run: str | None = None,
    by: str | None = None,
    reason: str | None = None,
    counts: dict[str, Any] | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> ControlState:
    """Record a control event of a run and return the run's state after it.

    A pause of a paused run, a resume of a running one and an abort of an aborted one
    record nothing (``changed`` is False). A confirmation is recorded whatever the state.

    Args:
        target: the journal file of a local run, or a ``postgresql://`` database (a
            ``--journal`` or ``--queue`` run).
        action: what to record.
        run: the run's id in a database (the latest run when None); ignored for a file.
        by: who (`default_actor` when None).
        reason: why, as the operator says it.
        counts: figures to keep with the event (a confirmation's counts).
        now: the clock (UTC).

    Raises:
        RunNotFoundError: no such journal file or run.
        RunFinishedError: every row of the run is final (not for a confirmation).
        RunAbortedError: a pause or resume of an aborted run.
        JournalError: the journal or database cannot be used;
            `JournalUnavailableError` while it cannot be reached.
    """
    who = by or default_actor()
    at = now()
    if is_postgres_url(target):
        return _pg_record(str(target), run, action, who, at, reason, counts)
    return _sqlite_record(Path(target), action, who, at, reason, counts)


def read_control(target: str | Path, run: str | None = None) -> ControlState:
    """A run's control state and history (empty for a run never controlled).

    Args:
        target: as for `record_action`.
        run: as for `record_action`.

    Raises:
        RunNotFoundError: no such journal file or run.
        JournalError: the journal or database cannot be used.
    """
    if is_postgres_url(target):
        return _pg_do(str(target), lambda conn: _pg_state(conn, _pg_run(conn, run)), write=False)
    return _sqlite_read(Path(target))


# --- obeying it ---------------------------------------------------------------------------

Reader = Callable[[], Awaitable[ControlEvent | None]]
"""Reads the event that sets a run's state (None: running, never paused or aborted)."""


@dataclass(slots=True)
class RunGate:
    """What a sending process asks before each POST of a run's row.

    The state is read at most once per ``interval`` whoever asks (one read at a time);
    a read that fails keeps the state known before (the journal's own writes say when the
    database is away).

    Args:
        read: reads the event that sets the state.
        interval: seconds between reads, at most.
        clock: monotonic seconds.
        sleep: waits that many seconds (`asyncio.sleep`).
    """

    read: Reader
    interval: float = CONTROL_INTERVAL
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    _event: ControlEvent | None = field(default=None, init=False)
    _read_at: float | None = field(default=None, init=False)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)

    async def current(self) -> ControlEvent | None:
        """The event that sets the state, at most ``interval`` old."""
        async with self._lock:
            now = self.clock()
            if self._read_at is None or now - self._read_at >= self.interval:
                try:
                    self._event = await self.read()
                except Exception as exc:  # kept: see the class docstring
                    logger.debug("cannot read the run's control state: %s", exc)
                self._read_at = self.clock()
        return self._event

    async def may_send(self, stopping: Callable[[], bool] = lambda: False) -> bool:
        """Wait while the run is paused (until ``stopping()``); False once it is aborted.

        Returns:
            True: send. False: the run is aborted (a row never sent is not to be sent:
            see `aborted_change` and `aborted_by`).
        """
        while True:
            event = await self.current()
            if event is None or event.action is Action.RESUMED:
                return True
            if event.action is Action.ABORTED:
                return False
            if stopping():
                return True  # the caller's own stop decides
            await self.sleep(self.interval)

    @property
    def aborted_by(self) -> ControlEvent | None:
        """The abort event, once `may_send` returned False."""
        event = self._event
        return event if event is not None and event.action is Action.ABORTED else None


def journal_gate(target: str | Path, run_id: str) -> tuple[RunGate, Callable[[], None]]:
    """The gate of a local run on its journal, and the function that closes it.

    Args:
        target: the journal file, or its ``postgresql://`` database.
        run_id: the run.
    """
    if is_postgres_url(target):
        dsn = str(target)
        held: list[psycopg.Connection[Any]] = []

        def read_pg() -> ControlEvent | None:
            if not held:
                held.append(pg_connect.connect(dsn))
            try:
                rec = held[0].execute(_CURRENT.format(p="%s"), (run_id,)).fetchone()
            except Exception:
                held.pop().close()
                raise
            return None if rec is None else _event(rec)

        def close_pg() -> None:
            while held:
                held.pop().close()

        return RunGate(_to_thread(read_pg, missing_table=True)), close_pg

    path = Path(target)
    opened: list[sqlite3.Connection] = []

    def read_sqlite() -> ControlEvent | None:
        if not opened:
            opened.append(open_sqlite(path, synchronous="NORMAL", check_same_thread=False))
        rec = opened[0].execute(_CURRENT.format(p="?"), (run_id,)).fetchone()
        return None if rec is None else _event(rec)

    def close_sqlite() -> None:
        while opened:
            opened.pop().close()

    return RunGate(_to_thread(read_sqlite, missing_table=True)), close_sqlite


def _to_thread(read: Callable[[], ControlEvent | None], *, missing_table: bool) -> Reader:
    async def reader() -> ControlEvent | None:
        try:
            return await asyncio.to_thread(read)
        except Exception as exc:
            if missing_table and _no_table(exc):
                return None  # never controlled
            raise

    return reader


def _no_table(exc: BaseException) -> bool:
    if isinstance(exc, sqlite3.OperationalError):
        return "no such table" in str(exc)
    with contextlib.suppress(ImportError):
        import psycopg

        return isinstance(exc, psycopg.errors.UndefinedTable)
    return False


class WorkerGates:
    """A worker's gates, one per run it has rows of, read on the worker's own pool.

    Args:
        pool: the worker's connections for reads.
        interval: seconds between reads of a run's state, at most.
    """

    def __init__(
        self, pool: psycopg_pool.AsyncConnectionPool[Any], interval: float = CONTROL_INTERVAL
    ) -> None:
        self._pool = pool
        self._interval = interval
        self._gates: dict[str, RunGate] = {}

    def gate(self, run_id: str) -> RunGate:
        """The gate of ``run_id`` (made on first use)."""
        gate = self._gates.get(run_id)
        if gate is None:
            gate = self._gates[run_id] = RunGate(self._reader(run_id), self._interval)
        return gate

    def _reader(self, run_id: str) -> Reader:
        async def read() -> ControlEvent | None:
            try:
                async with self._pool.connection() as conn:
                    cur = await conn.execute(_CURRENT.format(p="%s"), (run_id,))
                    rec = await cur.fetchone()
            except Exception as exc:
                if _no_table(exc):
                    return None
                raise
            return None if rec is None else _event(rec)

        return read
