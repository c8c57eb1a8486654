"""The durable journal of a bulk run: one SQLite file (WAL) recording every row's state.

A row moves through ``planned -> sent -> acknowledged -> final``. The plan (the fixed
``assgnmt.id`` and ``cxlId`` of every row, and the exact camt.056 bytes to send) is
committed in one transaction *before* anything is sent, so a killed run resumed with the
same command resends a row only with its recorded id: the service answers 200 and
nothing is created twice.

Commits are grouped, not deferred: a state change is queued, every change queued during
the same turn of the event loop is written in one transaction, and the coroutine that
made the change resumes only after that transaction has committed. So the runner never
takes the next step of a row (send, poll, report) before the change it depends on is in
the file, yet 10,000 rows do not cost 40,000 commits. ``synchronous=NORMAL`` in WAL mode
survives a killed process (SIGKILL included); only a power loss can drop the last
transactions, which a resume then redoes safely with the recorded ids.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import json
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any, Final, Generic, TypeVar

from .._store import (
    FileLock,
    GroupCommit,
    SqliteBatch,
    lock_file,
    open_sqlite,
    open_sqlite_read_only,
    sqlite_error,
)
from ._errors import JOURNAL_ERRORS, JournalError, JournalUnavailableError
from ._recall import MAY_HAVE_REACHED, SQLITE, first_per_payment
from ._rows import RowOutcome, Stage, stored_outcome

__all__ = [
    "PLANNED_COLUMNS",
    "READ_BATCH",
    "ROW_COLUMNS",
    "Journal",
    "JournalError",
    "JournalUnavailableError",
    "PlannedRow",
    "RowState",
    "RowUpdate",
    "RowWrites",
    "SqliteJournal",
    "StoreReads",
    "UtcClock",
    "ensure_sqlite_schema",
    "journal_counts",
    "micros",
    "row_from_record",
]

SCHEMA_VERSION: Final = 1

READ_BATCH: Final = 1000
"""Rows a store reads per query when rows are iterated: the most it holds in memory."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rows (
    line INTEGER PRIMARY KEY,
    original_end_to_end_id TEXT,
    assignment_id TEXT UNIQUE,
    cancellation_id TEXT,
    body BLOB,
    state TEXT NOT NULL,
    payments_service_id TEXT,
    created INTEGER,
    attempts INTEGER NOT NULL DEFAULT 0,
    outcome TEXT,
    status TEXT,
    reason_codes TEXT,
    reason_text TEXT,
    return_request_needed INTEGER,
    error TEXT,
    sent_at INTEGER,
    acknowledged_at INTEGER,
    final_at INTEGER,
    chases INTEGER NOT NULL DEFAULT 0,
    chased_at INTEGER,
    recall_deadline TEXT,
    updated_at REAL NOT NULL
);
"""


def ensure_sqlite_schema(db: sqlite3.Connection) -> None:
    """Create a journal file's tables when missing (its rows, meta and recall ledger)."""
    db.executescript(_SCHEMA + SQLITE.schema())


ROW_COLUMNS: Final = (
    "line, original_end_to_end_id, assignment_id, cancellation_id, body, state, "
    "payments_service_id, created, attempts, outcome, status, reason_codes, reason_text, "
    "return_request_needed, error, sent_at, acknowledged_at, final_at, chases, chased_at, "
    "recall_deadline"
)
"""The columns `row_from_record` reads, in its order (every store has them)."""

_SELECT_AFTER: Final = f"SELECT {ROW_COLUMNS} FROM rows WHERE line > ? ORDER BY line LIMIT ?"  # noqa: S608
_SELECT_UNFINISHED_AFTER: Final = (
    f"SELECT {ROW_COLUMNS} FROM rows WHERE line > ? "  # noqa: S608
    "AND state NOT IN ('final', 'invalid') ORDER BY line LIMIT ?"
)
_COUNT_STATES: Final = "SELECT state, COUNT(*) FROM rows GROUP BY state"


@dataclass(frozen=True, slots=True)
class PlannedRow:
    """One row as planned: fixed ids and the exact request body, or why it is invalid.

    Attributes:
        line: the row's line number in the input file (its key).
        original_end_to_end_id: the payment to cancel.
        assignment_id: ``assgnmt.id``, the idempotency key of the camt.056.
        cancellation_id: ``cxlId``.
        body: the encoded camt.056, sent byte for byte on every attempt and every resume.
        error: for an invalid row, the validation problems (and no ids or body).
        recall_deadline: the last day its recall may be sent
            (`payments_async.recall_deadline` of its reason and the original settlement
            date), or None when the row does not give its settlement date.
    """

    line: int
    original_end_to_end_id: str | None
    assignment_id: str | None
    cancellation_id: str | None
    body: bytes | None
    error: str | None = None
    recall_deadline: date | None = None

    @property
    def stage(self) -> Stage:
        """``invalid`` for a row with an error, else ``planned``."""
        return Stage.INVALID if self.error is not None else Stage.PLANNED

    def stored(self) -> tuple[Any, ...]:
        """The row's values of `PLANNED_COLUMNS`, in their order, as a store writes them."""
        ids = (self.original_end_to_end_id, self.assignment_id, self.cancellation_id)
        deadline = None if self.recall_deadline is None else self.recall_deadline.isoformat()
        return (self.line, *ids, self.body, self.stage.value, self.error, deadline)


PLANNED_COLUMNS: Final = (
    "line, original_end_to_end_id, assignment_id, cancellation_id, body, state, error, "
    "recall_deadline"
)
"""The columns a plan writes per row (`PlannedRow.stored`); every store adds its own."""


@dataclass(frozen=True, slots=True)
class RowState:
    """A row as the journal knows it.

    Attributes:
        line: the row's line number in the input file.
        original_end_to_end_id: the payment to cancel.
        assignment_id: ``assgnmt.id``.
        cancellation_id: ``cxlId``.
        body: the camt.056 bytes to (re)send.
        state: the row's stage in the journal.
        payments_service_id: the service's id of the cancellation, once acknowledged.
        created: True when the service answered 201, False for 200 (it had it already).
        attempts: submissions made for this row, over every run.
        outcome: once final: ``accepted``, ``rejected``, ``unknown``, ``refused``,
            ``not_sent`` or ``aborted``.
        status: the raw final ``sts.conf`` (or ``txCxlSts``).
        reason_codes: the rejection reason codes.
        reason_text: the service's reason texts, or a sentence for people.
        return_request_needed: True when rejected: ask the beneficiary for a pacs.004.
        error: the last error met on this row (kept until the row succeeds).
        sent_at: when its last POST started (UTC), or None while never sent.
        acknowledged_at: when the service last answered its POST (UTC), or None.
        final_at: when its outcome became final (UTC), or None while not final.
        chases: requests for status update (pacs.028) the service took for this row's
            recall, over every run.
        chased_at: when the latest of them was recorded (UTC), or None while never chased.
        recall_deadline: the last day its recall may be sent, or None when unknown (see
            `PlannedRow`).
    """

    line: int
    original_end_to_end_id: str | None
    assignment_id: str | None
    cancellation_id: str | None
    body: bytes | None
    state: Stage
    payments_service_id: str | None = None
    created: bool | None = None
    attempts: int = 0
    outcome: RowOutcome | None = None
    status: str | None = None
    reason_codes: tuple[str, ...] = ()
    reason_text: str | None = None
    return_request_needed: bool = False
    error: str | None = None
    sent_at: datetime | None = None
    acknowledged_at: datetime | None = None
    final_at: datetime | None = None
    chases: int = 0
    chased_at: datetime | None = None
    recall_deadline: date | None = None

    @property
    def is_done(self) -> bool:
        """True when a run leaves this row alone (final or invalid)."""
        return self.state in (Stage.FINAL, Stage.INVALID)


@dataclass(frozen=True, slots=True)
class RowUpdate:
    """One row's change as every store writes it: the fields of `RowState` to set.

    Attributes:
        line: the row.
        values: ``{RowState field: new value}``.
        one_more_attempt: count one more attempt (``attempts + 1``).
        if_attempts: make the change only if the row is still ``sent`` after exactly this
            many attempts (a compare-and-set), else change nothing; None: always.
        if_chases: make the change only if the row is still ``acknowledged`` with exactly
            this many chases recorded (a compare-and-set), else change nothing; None:
            always.
        if_planned: make the change only if the row is still ``planned`` (never sent),
            else change nothing.
    """

    line: int
    values: dict[str, Any]
    one_more_attempt: bool = False
    if_attempts: int | None = None
    if_chases: int | None = None
    if_planned: bool = False

    def stored(self) -> dict[str, Any]:
        """``values`` as a database column holds them: words as text, codes as JSON."""
        out: dict[str, Any] = {}
        for name, value in self.values.items():
            if isinstance(value, StrEnum):
                value = value.value
            elif isinstance(value, datetime):
                value = micros(value)
            elif name == "reason_codes":
                value = json.dumps(list(value))
            out[name] = value
        return out

    def applied_to(self, row: RowState) -> RowState:
        """``row`` with this change made (unchanged when ``if_attempts``, ``if_chases`` or
        ``if_planned`` does not hold)."""
        if self.if_attempts is not None and (
            row.state != Stage.SENT or row.attempts != self.if_attempts
        ):
            return row
        if self.if_chases is not None and (
            row.state != Stage.ACKNOWLEDGED or row.chases != self.if_chases
        ):
            return row
        if self.if_planned and row.state != Stage.PLANNED:
            return row
        values = dict(self.values)
        if "reason_codes" in values:
            values["reason_codes"] = tuple(values["reason_codes"])
        if self.one_more_attempt:
            values["attempts"] = row.attempts + 1
        return replace(row, **values)

    def statement(self, table: str, key: str, key_params: tuple[Any, ...], mark: str) -> Statement:
        """The SQL ``UPDATE`` of this change, for a store whose placeholder is ``mark``.

        Args:
            table: the rows' table.
            key: the condition naming the row (``line = ?``).
            key_params: its parameters.
            mark: the driver's placeholder (``?`` or ``%s``).
        """
        stored = {**self.stored(), "updated_at": time.time()}
        sets = [f"{name} = {mark}" for name in stored]
        if self.one_more_attempt:
            sets.append("attempts = attempts + 1")
        sql = f"UPDATE {table} SET {', '.join(sets)} WHERE {key}"  # noqa: S608
        params = (*stored.values(), *key_params)
        if self.if_attempts is not None:
            sql += f" AND state = 'sent' AND attempts = {mark}"
            params = (*params, self.if_attempts)
        if self.if_chases is not None:
            sql += f" AND state = 'acknowledged' AND chases = {mark}"
            params = (*params, self.if_chases)
        if self.if_planned:
            sql += " AND state = 'planned'"
        return sql, params


Statement = tuple[str, tuple[Any, ...]]
"""An SQL statement and its parameters."""


UtcClock = Callable[[], datetime]
"""A clock giving the current time as an aware UTC datetime."""


def _utc_now() -> datetime:
    """The current time, UTC."""
    return datetime.now(UTC)


class RowWrites(abc.ABC):
    """The state changes of a journal's rows: what a row's steps record, for every store.

    Each method turns a transition of `._rows` into one `RowUpdate`; a store only writes
    it (`_apply`). Every change is committed before the awaiting coroutine resumes.

    Attributes:
        clock: what the row's times (``sent_at``, ``acknowledged_at``, ``final_at``) are
            read from; the system clock in UTC unless replaced (a test's fixed clock).
    """

    clock: UtcClock = staticmethod(_utc_now)

    @abc.abstractmethod
    def _apply(self, update: RowUpdate) -> Awaitable[None]:
        """Write one change; the awaitable completes once it is committed."""

    async def mark_sent(self, line: int) -> None:
        """The row is about to be sent (one more attempt)."""
        values = {"state": Stage.SENT, "sent_at": self.clock()}
        await self._apply(RowUpdate(line, values, one_more_attempt=True))

    async def mark_acknowledged(self, line: int, payments_service_id: str, created: bool) -> None:
        """The service answered with the cancellation's ``paymentsServiceId``."""
        values = {
            "state": Stage.ACKNOWLEDGED,
            "payments_service_id": payments_service_id,
            "created": created,
            "error": None,
            "acknowledged_at": self.clock(),
        }
        await self._apply(RowUpdate(line, values))

    async def mark_final(
        self,
        line: int,
        *,
        outcome: str,
        status: str | None,
        reason_codes: Sequence[str],
        reason_text: str | None,
        return_request_needed: bool,
        if_attempts: int | None = None,
    ) -> None:
        """The row's outcome is known; a later run leaves it alone.

        With ``if_attempts``, and so for every method below: the change is made only if
        the row is still ``sent`` after exactly that many attempts (a compare-and-set),
        so an attempt never overwrites what another execution of the same row recorded
        since; otherwise nothing changes.
        """
        values = {
            "state": Stage.FINAL,
            "outcome": RowOutcome(outcome),
            "status": status,
            "reason_codes": tuple(reason_codes),
            "reason_text": reason_text,
            "return_request_needed": return_request_needed,
            "error": None,
            "final_at": self.clock(),
        }
        await self._apply(RowUpdate(line, values, if_attempts=if_attempts))

    async def mark_error(
        self, line: int, error: str, *, final: bool, if_attempts: int | None = None
    ) -> None:
        """Record an error; ``final`` when retrying cannot help: the row ends ``refused``."""
        values: dict[str, Any] = {"error": error}
        if final:
            values.update(state=Stage.FINAL, outcome=RowOutcome.REFUSED, final_at=self.clock())
        await self._apply(RowUpdate(line, values, if_attempts=if_attempts))

    async def mark_not_sent(
        self, line: int, error: str, *, final: bool, if_attempts: int | None = None
    ) -> None:
        """The attempt failed before its request could reach the service: back to
        ``planned`` (``final``: the row ends as ``not_sent``)."""
        values: dict[str, Any] = {"error": error, "state": Stage.PLANNED, "outcome": None}
        if final:
            values.update(state=Stage.FINAL, outcome=RowOutcome.NOT_SENT, final_at=self.clock())
        await self._apply(RowUpdate(line, values, if_attempts=if_attempts))

    async def mark_chased(self, line: int, chases: int) -> None:
        """The service took one more request for status update (pacs.028) on the row's
        recall: ``chases + 1`` of them now, the latest at ``chased_at``.

        Made only if the row is still ``acknowledged`` with exactly ``chases`` recorded
        (a compare-and-set): two passes chasing one row record one chase, and a row made
        final meanwhile stays as it is.
        """
        values = {"chases": chases + 1, "chased_at": self.clock()}
        await self._apply(RowUpdate(line, values, if_chases=chases))

    async def mark_aborted(self, line: int, error: str) -> None:
        """The row's run was aborted before the row was sent: it ends ``aborted``, with
        ``error`` saying who aborted it, when and why. Only a row still ``planned``
        changes: one that another execution of it has sent meanwhile (a worker wrongly
        taken for dead) is finished by that execution, never called aborted."""
        values = {
            "state": Stage.FINAL,
            "outcome": RowOutcome.ABORTED,
            "error": error,
            "final_at": self.clock(),
        }
        await self._apply(RowUpdate(line, values, if_planned=True))


class Journal(RowWrites):
    """A bulk run's journal: the plan, the reads, and the row changes (`RowWrites`).

    `SqliteJournal`, `MemoryJournal` and the PostgreSQL store are its stores: each keeps
    only its schema and SQL; the changes and their meaning are written once here.
    """

    _run_id: str
    _planned: bool

    @property
    def path(self) -> Path | None:
        """The journal file, or None when nothing is kept in a local file."""
        return None

    @property
    def run_id(self) -> str:
        """The random id of this bulk run, part of every generated ``assgnmt.id``."""
        return self._run_id

    def is_planned(self) -> bool:
        """True when the plan is already recorded (a resumed run)."""
        return self._planned

    @abc.abstractmethod
    def plan(self, rows: Iterable[PlannedRow]) -> None:
        """Record every row's fixed ids and body in one committed transaction.

        ``rows`` is consumed once, so it may be a generator reading the input as it goes;
        an exception it raises rolls the whole plan back.
        """

    def rows(self) -> list[RowState]:
        """Every row, in line order, all in memory at once (bodies included).

        For a large run prefer `iter_rows`, which holds one batch at a time.
        """
        return list(self.iter_rows())

    @abc.abstractmethod
    def iter_rows(self, *, unfinished: bool = False) -> Iterator[RowState]:
        """Every row, in line order, read as it is consumed.

        A store reads `READ_BATCH` rows per query, by line number, so at most one
        batch is held, and a row changed after it was read is not read again.

        Args:
            unfinished: only the rows a run still has to finish (neither final nor
                invalid).
        """

    @abc.abstractmethod
    def state_counts(self) -> dict[str, int]:
        """Rows per state, ``{state: count}``, counted without reading the rows."""

    def recorded_cancellations(self) -> dict[str, str]:
        """The payments the journal records a recall for outside this run, which a new
        run must not recall again (see `.._recall`); none for a journal kept in memory.

        Returns:
            ``{original_end_to_end_id: the first recall, as people read it}``.

        Raises:
            JournalError: the journal cannot be read.
        """
        return {}

    def forget_unplanned(self) -> None:
        """Leave nothing of this run behind while it holds no plan (a refused new run)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Write what is queued and release the store."""


def row_from_record(rec: Sequence[Any]) -> RowState:
    """A `RowState` from a record of the journal's row columns, in their order.

    Both stores select the same columns; PostgreSQL gives the body as a memoryview,
    ``created`` as a boolean and ``recall_deadline`` as a date, SQLite as bytes, an
    integer and ISO 8601 text.
    """
    (line, e2e, aid, cid, body, state, psid, created, attempts) = rec[:9]
    (outcome, status, codes, text, rrn, error) = rec[9:15]
    (sent_at, acknowledged_at, final_at) = (_utc(t) for t in rec[15:18])
    chases, chased_at, deadline = rec[18], _utc(rec[19]), rec[20]
    return RowState(
        line=line,
        original_end_to_end_id=e2e,
        assignment_id=aid,
        cancellation_id=cid,
        body=None if body is None else bytes(body),
        state=Stage(state),
        payments_service_id=psid,
        created=None if created is None else bool(created),
        attempts=attempts,
        outcome=stored_outcome(outcome),
        status=status,
        reason_codes=tuple(json.loads(codes)) if codes else (),
        reason_text=text,
        return_request_needed=bool(rrn),
        error=error,
        sent_at=sent_at,
        acknowledged_at=acknowledged_at,
        final_at=final_at,
        chases=chases or 0,
        chased_at=chased_at,
        recall_deadline=date.fromisoformat(deadline) if isinstance(deadline, str) else deadline,
    )


_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND: Final = timedelta(microseconds=1)


def micros(at: datetime) -> int:
    """A row time as the stores keep it: whole microseconds since the POSIX epoch, so
    differences and days computed by SQL and by Python agree exactly."""
    return (at - _EPOCH) // _MICROSECOND


def _utc(us: int | None) -> datetime | None:
    return None if us is None else _EPOCH + us * _MICROSECOND


def read_in_batches(fetch: Callable[[int], Sequence[RowState]]) -> Iterator[RowState]:
    """Rows page by page: ``fetch(after)`` returns up to `READ_BATCH` rows whose line
    is greater than ``after``, in line order (a keyset page, so changes to rows already
    read cannot make a row come twice or be skipped)."""
    after = -1
    while True:
        page = fetch(after)
        yield from page
        if len(page) < READ_BATCH:
            return
        after = page[-1].line


_Conn = TypeVar("_Conn")


class StoreReads(Journal, Generic[_Conn]):
    """`Journal.iter_rows` for a store read one batch per query."""

    @abc.abstractmethod
    def _reader(self) -> AbstractContextManager[_Conn]:
        """The connection to read with (a new one once the journal is closed)."""

    @abc.abstractmethod
    def _fetch(self, conn: _Conn, after: int, *, unfinished: bool) -> list[RowState]:
        """Up to `READ_BATCH` rows after line ``after``, in line order."""

    def iter_rows(self, *, unfinished: bool = False) -> Iterator[RowState]:
        """Every row (or every unfinished one) in line order, `READ_BATCH` per query.

        Also after ``close()``: it then reads through a new connection.

        Raises:
            JournalError: the store cannot be read.
        """
        with self._reader() as conn:
            yield from read_in_batches(
                lambda after: self._fetch(conn, after, unfinished=unfinished)
            )


class SqliteJournal(StoreReads[sqlite3.Connection]):
    """The journal file: SQLite in WAL mode, every state change committed before it counts.

    Rows are not kept in memory: reads go to the file, a batch at a time. Open it with
    `open`. The file records the input it belongs to (a SHA-256 of
    its bytes): resuming with a different input is refused rather than guessed at.

    Args:
        connection: an open connection with the schema in place.
        path: the file.
        run_id: this run's id (read back from the file on resume).
        planned: True when the file already holds a plan.
        lock: the lock of this run on the file, released by `close`.
        replacing: the input digest of a new run that replaces the file's run once
            planned, or None.
        new_run: the new run may set aside an unfinished run (see `open`).
    """

    def __init__(
        self,
        connection: sqlite3.Connection,
        path: Path,
        run_id: str,
        *,
        planned: bool,
        lock: FileLock | None = None,
        replacing: str | None = None,
        new_run: bool = False,
    ) -> None:
        self._new_run = new_run
        self._lock = lock
        self._replacing = replacing
        self._db = connection
        self._path = path
        self._run_id = run_id
        self._planned = planned
        self._batch = SqliteBatch(self._open_db, path, "journal", JOURNAL_ERRORS)
        self._group = GroupCommit(self._batch)
        self._plan_commits = 0
        self._closed = False

    @classmethod
    def open(
        cls, path: str | Path, *, input_sha256: str, new_run_id: str, new_run: bool = False
    ) -> SqliteJournal:
        """Lock the journal file for this run, then open (or create) it for an input file.

        Args:
            path: the journal file; created with its directory if missing.
            input_sha256: the input's digest; an existing journal must record the same.
            new_run_id: the run id to record when the file is new.
            new_run: when the file holds an unfinished run of another input, `plan` a new
                run rather than refuse. A file holds one run: the new run's `plan`
                replaces the file's run of another input (a finished one, or with
                ``new_run``) in the same transaction, and keeps that run's recalls in
                the file's ledger (see `recorded_cancellations`).

        Raises:
            JournalBusyError: another run holds the journal (nothing was opened).
            JournalError: the file is not a journal of this version, or it cannot be
                opened or made.
        """
        path = Path(path)
        lock = lock_file(path, JOURNAL_ERRORS, what="journal")
        try:
            return cls._open(path, input_sha256, new_run_id, lock, new_run)
        except BaseException:
            lock.release()
            raise

    @classmethod
    def open_existing(cls, path: str | Path) -> SqliteJournal:
        """Lock and open the journal file of a planned run, whatever its input, to record
        changes of its rows (``bulk-status --refresh``).

        Raises:
            JournalBusyError: a run holds the journal (nothing was opened).
            JournalError: there is no such file, or it is not a journal of this version
                holding a plan, or it cannot be opened.
        """
        path = Path(path)
        if not path.is_file():
            raise JournalError(f"no journal file {str(path)!r}")
        lock = lock_file(path, JOURNAL_ERRORS, what="journal")
        db: sqlite3.Connection | None = None
        try:
            db = open_sqlite(path, synchronous="NORMAL")
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.Error as exc:
            if db is not None:
                db.close()
            lock.release()
            raise sqlite_error("open", "journal", path, exc, JOURNAL_ERRORS) from exc
        if meta.get("schema") != str(SCHEMA_VERSION) or meta.get("planned") != "1":
            db.close()
            lock.release()
            raise JournalError(
                f"{str(path)!r} is not a planned bulk journal of this version "
                f"(schema {meta.get('schema')!r})"
            )
        return cls(db, path, meta["run_id"], planned=True, lock=lock)

    @classmethod
    def _open(
        cls, path: Path, input_sha256: str, new_run_id: str, lock: FileLock, new_run: bool
    ) -> SqliteJournal:
        db: sqlite3.Connection | None = None
        try:
            db = open_sqlite(path, synchronous="NORMAL")
            ensure_sqlite_schema(db)
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
            if not meta:
                db.execute("BEGIN")
                db.executemany(
                    "INSERT INTO meta (key, value) VALUES (?, ?)",
                    [
                        ("schema", str(SCHEMA_VERSION)),
                        ("input_sha256", input_sha256),
                        ("run_id", new_run_id),
                        ("created_at", str(time.time())),
                        ("planned", "0"),
                    ],
                )
                db.execute("COMMIT")
                return cls(db, path, new_run_id, planned=False, lock=lock)
        except (sqlite3.Error, OSError) as exc:  # a full disk; a file in the folder's way
            if db is not None:
                db.close()
            raise sqlite_error("open", "journal", path, exc, JOURNAL_ERRORS) from exc
        if meta.get("schema") != str(SCHEMA_VERSION):
            db.close()
            raise JournalError(
                f"{str(path)!r} is not a bulk journal of this version "
                f"(schema {meta.get('schema')!r}); use another --journal path"
            )
        if meta.get("input_sha256") != input_sha256:
            return cls(
                db,
                path,
                new_run_id,
                planned=False,
                lock=lock,
                replacing=input_sha256,
                new_run=new_run,
            )
        return cls(db, path, meta["run_id"], planned=meta.get("planned") == "1", lock=lock)

    @property
    def path(self) -> Path:
        """The journal file."""
        return self._path

    def plan(self, rows: Iterable[PlannedRow]) -> None:
        """Record every row and mark the plan complete, all in one transaction.

        Either the whole plan is in the file or none of it: a run killed while planning
        (or a ``rows`` generator that raises) leaves no plan, and nothing had been sent.
        The rows are streamed into the file, not kept: `iter_rows` reads them back.

        Raises:
            JournalError: the file holds a plan already, or an unfinished run of another
                input and the journal was not opened with ``new_run`` (nothing is
                written; the rows are read first, so their own refusal comes first).
        """
        if self._planned:
            raise JournalError("the journal already holds a plan")
        now = time.time()
        db = self._db
        db.execute("BEGIN")
        try:
            unfinished = db.execute(_ANY_UNFINISHED).fetchone() is not None
            if self._replacing is not None:
                _replace_run(db, self._replacing, self._run_id)
            db.executemany(
                f"INSERT INTO rows ({PLANNED_COLUMNS}, updated_at) VALUES (?,?,?,?,?,?,?,?,?)",  # noqa: S608
                ((*r.stored(), now) for r in rows),
            )
            if unfinished and self._replacing is not None and not self._new_run:
                raise JournalError(
                    f"journal {str(self._path)!r} holds an unfinished run of a different "
                    "input file (edited since the run started?); nothing was sent. Resume "
                    "with the original file (its rows keep their ids), or start a new run "
                    "with --new-run: that run's rows never sent are set aside, and rows "
                    "whose payment already has a recall recorded in the journal are refused"
                )
            db.execute("UPDATE meta SET value = '1' WHERE key = 'planned'")
            db.execute("COMMIT")
        except BaseException as exc:
            if db.in_transaction:
                db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error | OSError):
                raise sqlite_error("write", "journal", self._path, exc, JOURNAL_ERRORS) from exc
            raise
        self._plan_commits += 1
        self._planned = True
        self._replacing = None

    def recorded_cancellations(self) -> dict[str, str]:
        """The payments the file records a recall for (see `.._recall`): its ledger's,
        and the rows of its run that may have reached the service.

        Returns:
            ``{original_end_to_end_id: the first recall, as people read it}``.
        """
        with self._reader() as db:
            try:
                found = db.execute(SQLITE.select(MAY_HAVE_REACHED)).fetchall()
            except sqlite3.Error as exc:
                raise self._read_error(exc) from exc
        return {e2e: str(recall) for e2e, recall in first_per_payment(found).items()}

    def state_counts(self) -> dict[str, int]:
        """Rows per state, counted by the file (changes still queued are written first).

        Raises:
            JournalError: the file cannot be read.
        """
        with self._reader() as db:
            try:
                return dict(db.execute(_COUNT_STATES).fetchall())
            except sqlite3.Error as exc:
                raise self._read_error(exc) from exc

    def _reader(self) -> AbstractContextManager[sqlite3.Connection]:
        """The connection to read with: the journal's own (after writing what is queued),
        or a new read-only one once the journal is closed."""
        if not self._closed:
            self._group.write_pending(self._batch.write_now)
            return contextlib.nullcontext(self._db)
        try:
            return contextlib.closing(open_sqlite_read_only(self._path))
        except sqlite3.Error as exc:
            raise self._read_error(exc) from exc

    def _fetch(self, db: sqlite3.Connection, after: int, *, unfinished: bool) -> list[RowState]:
        sql = _SELECT_UNFINISHED_AFTER if unfinished else _SELECT_AFTER
        try:
            records = db.execute(sql, (after, READ_BATCH)).fetchall()
        except sqlite3.Error as exc:
            raise self._read_error(exc) from exc
        return [row_from_record(rec) for rec in records]

    def _read_error(self, exc: sqlite3.Error) -> Exception:
        return sqlite_error("read", "journal", self._path, exc, JOURNAL_ERRORS)

    def _apply(self, update: RowUpdate) -> asyncio.Future[None]:
        sql, params = update.statement("rows", "line = ?", (update.line,), "?")
        future: asyncio.Future[None] = self._group.submit(lambda db: db.execute(sql, params))
        return future

    @property
    def commits(self) -> int:
        """Transactions written (the plan's and the group commit's), for benchmarks and
        tests."""
        return self._plan_commits + self._group.commits

    def _open_db(self) -> sqlite3.Connection | None:
        return None if self._closed else self._db

    def close(self) -> None:
        """Commit anything still queued (an interrupted run's last changes), then close."""
        self._group.write_pending(self._batch.write_now)
        self._db.close()
        self._closed = True
        if self._lock is not None:
            self._lock.release()


_ANY_UNFINISHED: Final = "SELECT 1 FROM rows WHERE state NOT IN ('final', 'invalid') LIMIT 1"


def _replace_run(db: sqlite3.Connection, input_sha256: str, run_id: str) -> None:
    """Inside the plan's transaction: keep the recalls of the file's run in its ledger,
    drop its rows, and make the file the new input's."""
    db.execute(SQLITE.keep(MAY_HAVE_REACHED))
    db.execute("DELETE FROM rows")
    db.executemany(
        "UPDATE meta SET value = ? WHERE key = ?",
        [(input_sha256, "input_sha256"), (run_id, "run_id"), (str(time.time()), "created_at")],
    )


def journal_counts(path: str | Path) -> dict[str, int]:
    """Rows per state in a journal file, read without disturbing a running writer.

    Args:
        path: the journal file.

    Returns:
        ``{state: count}``; empty when the plan is not written yet.
    """
    db = open_sqlite_read_only(Path(path))
    try:
        return dict(db.execute(_COUNT_STATES).fetchall())
    except sqlite3.OperationalError:
        return {}
    finally:
        db.close()
