"""A bulk run's progress read from its journal: rows by state and outcome, their errors,
and their times, added up by the store's own SQL (a PostgreSQL database or a SQLite file).

Both stores answer the same questions with the same grouping, so ``bulk-status`` shows a
local run's journal file and a queued run's database alike.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from .._store import open_sqlite_read_only, sqlite_error
from ._errors import JOURNAL_ERRORS
from ._rows import RowOutcome, RunTotals, Stage, outcome_of
from ._times import RunTimes

__all__ = [
    "POSTGRES_STATUS",
    "SQLITE_STATUS",
    "QueueStatus",
    "StatusQueries",
    "journal_status",
    "read_status",
]


@dataclass(frozen=True, slots=True)
class QueueStatus:
    """Progress of a run, read from its journal (a database, or a local run's file).

    Attributes:
        run_id: the run.
        input_name: its input file's name (None when the journal does not keep it).
        rows: data rows in the run.
        states: rows per journal state (``planned``, ``sent``, ``acknowledged``,
            ``final``, ``invalid``).
        outcomes: final rows per outcome (``accepted``, ``rejected``, ``unknown``,
            ``refused``, ``not_sent``, ``aborted``).
        queued: rows with a job waiting or running (0 for a run without a queue).
        errors: rows not final whose last attempt met an error.
        totals: every row by outcome, as the single-process runner's report counts them
            (the same words, and the same ``verdict``).
        times: the service's latency and the rows not final by the day they were sent
            and by their recall deadline (`RunTimes`, without the over-time series).
    """

    run_id: str
    input_name: str | None
    rows: int
    states: dict[str, int]
    outcomes: dict[str, int]
    queued: int
    errors: int
    totals: RunTotals
    times: RunTimes = field(default_factory=RunTimes)

    @property
    def done(self) -> int:
        """Rows that need nothing more: final or invalid."""
        return self.states.get(Stage.FINAL, 0) + self.states.get(Stage.INVALID, 0)

    @property
    def settled(self) -> bool:
        """True when no row has a job waiting or running: the run has gone as far as it can."""
        return self.queued == 0


@dataclass(frozen=True, slots=True)
class StatusQueries:
    """The SQL of `read_status` in one store's dialect.

    Attributes:
        rows: the rows of the run: a table, and the condition that picks the run's rows.
        latency_ms: whole milliseconds from ``sent_at`` to ``acknowledged_at``, rounded
            down (as `RunTimes` counts them with Python's floor division).
        sent_day: the day since the epoch of ``sent_at``, rounded down.
    """

    rows: str
    latency_ms: str
    sent_day: str

    def totals(self) -> str:
        """Rows per state, stored outcome and whether they met an error."""
        return (
            "SELECT state, outcome, error IS NOT NULL, COUNT(*), "  # noqa: S608
            f"COUNT(*) FILTER (WHERE return_request_needed) FROM {self.rows} GROUP BY 1, 2, 3"
        )

    def latencies(self) -> str:
        """Rows per whole millisecond of latency."""
        return (
            f"SELECT {self.latency_ms}, COUNT(*) FROM {self.rows} "  # noqa: S608
            "AND acknowledged_at IS NOT NULL AND sent_at IS NOT NULL GROUP BY 1"
        )

    def chased(self) -> str:
        """Rows chased with a request for status update, and the requests the service took."""
        return (
            f"SELECT COUNT(*), COALESCE(SUM(chases), 0) FROM {self.rows} "  # noqa: S608
            "AND chases > 0"
        )

    def unfinished(self, column: str) -> str:
        """Rows in flight or pending per ``column`` (a day or a recall deadline)."""
        return (
            f"SELECT {column}, COUNT(*) FROM {self.rows} "  # noqa: S608
            "AND state IN ('sent', 'acknowledged') AND sent_at IS NOT NULL GROUP BY 1"
        )


POSTGRES_STATUS: Final = StatusQueries(
    rows="payments_bulk_rows WHERE run_id = %(run)s",
    latency_ms="FLOOR((acknowledged_at - sent_at) / 1000.0)::bigint",
    sent_day="FLOOR(sent_at / 86400000000.0)::bigint",
)
# SQLite's integer division truncates toward zero: the modulo keeps it a floor.
SQLITE_STATUS: Final = StatusQueries(
    rows="rows WHERE TRUE",
    latency_ms="((acknowledged_at - sent_at) - (((acknowledged_at - sent_at) % 1000) + 1000) "
    "% 1000) / 1000",
    sent_day="sent_at / 86400000000",
)

Execute = Callable[[str], Iterable[Sequence[Any]]]
"""Runs one query of `StatusQueries` on the run's store and gives its records."""


@dataclass(slots=True)
class RowsAddedUp:
    """What `read_status` counts (see `QueueStatus` for each field)."""

    states: dict[str, int] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=dict)
    totals: RunTotals = field(default_factory=RunTotals)
    errors: int = 0
    times: RunTimes = field(default_factory=RunTimes)


def read_status(execute: Execute, sql: StatusQueries) -> RowsAddedUp:
    """A run's rows added up by its store: five grouped queries, whatever its size."""
    out = RowsAddedUp()
    for state, stored, has_error, n, returns in execute(sql.totals()):
        out.states[state] = out.states.get(state, 0) + n
        outcome = outcome_of(state, stored)
        out.totals.add(outcome, final=state == Stage.FINAL, rows=n)
        out.totals.return_requests += returns if outcome is RowOutcome.REJECTED else 0
        if state == Stage.FINAL:
            out.outcomes[outcome.value] = out.outcomes.get(outcome.value, 0) + n
        elif has_error and state != Stage.INVALID:
            out.errors += n
    times = out.times
    for ms, n in execute(sql.latencies()):
        times.latency_ms[int(ms)] += n
    for day, n in execute(sql.unfinished(sql.sent_day)):
        times.add_unfinished(int(day), n)
    for deadline, n in execute(sql.unfinished("recall_deadline")):
        times.unfinished_deadlines[_date(deadline)] += n
    for chased_rows, chases in execute(sql.chased()):
        times.chased_rows, times.chases = int(chased_rows), int(chases)
    return out


def _date(value: dt.date | str | None) -> dt.date | None:
    """A recall deadline as a date (SQLite keeps ISO 8601 text, PostgreSQL a date)."""
    return dt.date.fromisoformat(value) if isinstance(value, str) else value


def journal_status(path: str | Path) -> QueueStatus:
    """Read a local run's progress from its journal file, without disturbing its writer.

    Raises:
        JournalError: the file cannot be read as a journal.
    """
    path = Path(path)
    try:
        db = open_sqlite_read_only(path)
        try:
            run_id = db.execute("SELECT value FROM meta WHERE key = 'run_id'").fetchone()
            added = read_status(lambda q: db.execute(q).fetchall(), SQLITE_STATUS)
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise sqlite_error("read", "journal", path, exc, JOURNAL_ERRORS) from exc
    return QueueStatus(
        run_id=str(run_id[0]) if run_id else "",
        input_name=None,
        rows=sum(added.states.values()),
        states=added.states,
        outcomes=added.outcomes,
        queued=0,
        errors=added.errors,
        totals=added.totals,
        times=added.times,
    )
