"""One recall per payment: what a journal's database records as recalled, and how.

A payment counts as recalled in a database when a run there holds a row for it that may
reach the service (planned in a run that stays, sent, acknowledged, or final with an
outcome from the service), or when the database's ledger table records a recall made
outside a run (``cancel --journal``, or a run a SQLite file set aside for a new one). A
recall that the service refused for good, or that never left, does not count: the
payment may be recalled again. Both stores read it with the same SQL (`RecallTables`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from ._errors import JournalError

__all__ = [
    "HELD",
    "MAY_HAVE_REACHED",
    "POSTGRES",
    "SQLITE",
    "AlreadyRecalledError",
    "Recall",
    "RecallTables",
    "first_per_payment",
]

MAY_HAVE_REACHED: Final = (
    "(state IN ('sent', 'acknowledged') OR (state = 'final' AND outcome IN "
    "('accepted', 'rejected', 'unknown')))"
)
"""Rows that may have reached the service."""
HELD: Final = f"(state = 'planned' OR {MAY_HAVE_REACHED})"
"""Rows a run that stays may yet send, or sent."""
_STANDS: Final = "(outcome IS NULL OR outcome NOT IN ('refused', 'not_sent', 'aborted'))"


@dataclass(frozen=True, slots=True)
class Recall:
    """A recall a journal's database records for a payment.

    Attributes:
        original_end_to_end_id: the payment recalled.
        message_id: the camt.056's ``assgnmt.id``.
        run_id: the bulk run that holds it, or None for ``cancel``.
        line: its line in that run's input, or None.
        outcome: the outcome when known (``accepted``, ``rejected``, ``unknown``), else None.
    """

    original_end_to_end_id: str
    message_id: str | None
    run_id: str | None
    line: int | None
    outcome: str | None

    def __str__(self) -> str:
        where = "the cancel command" if self.run_id is None else f"run {self.run_id}"
        if self.line is not None:
            where += f", line {self.line}"
        return f"camt.056 {self.message_id} ({where}), {self.outcome or 'outcome not known yet'}"


class AlreadyRecalledError(JournalError):
    """The payment already has a recall recorded in the journal: nothing was sent.

    Attributes:
        first: the recall recorded first.
    """

    def __init__(self, first: Recall) -> None:
        self.first = first
        super().__init__(
            f"payment {first.original_end_to_end_id} is already recalled: {first}; one "
            "recall per payment (SEPA SCT rulebook 2025), so nothing was sent"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.first,))


@dataclass(frozen=True, slots=True)
class RecallTables:
    """Where a database keeps its rows and its ledger, and its driver's placeholder."""

    rows: str
    recalls: str
    run_id: str
    """The run id of a row (a column, or the SQLite file's one run)."""
    mark: str

    def schema(self) -> str:
        """The ledger table."""
        return (
            f"CREATE TABLE IF NOT EXISTS {self.recalls} (original_end_to_end_id TEXT NOT NULL, "
            "message_id TEXT, run_id TEXT, line INTEGER, outcome TEXT, "
            "recorded_at DOUBLE PRECISION NOT NULL);"
            f"CREATE INDEX IF NOT EXISTS {self.recalls}_payment "
            f"ON {self.recalls} (original_end_to_end_id);"
        )

    def select(self, rows_where: str, ledger_where: str = "TRUE") -> str:
        """The recorded recalls: ledger entries that stand, and rows matching ``rows_where``
        (first recorded first)."""
        return (
            "SELECT original_end_to_end_id, message_id, run_id, line, outcome FROM ("  # noqa: S608
            "SELECT original_end_to_end_id, message_id, run_id, line, outcome, recorded_at "
            f"FROM {self.recalls} WHERE {_STANDS} AND {ledger_where} UNION ALL "
            f"SELECT original_end_to_end_id, assignment_id, {self.run_id}, line, outcome, "
            f"updated_at FROM {self.rows} WHERE original_end_to_end_id IS NOT NULL "
            f"AND {rows_where}) AS recorded ORDER BY recorded_at"
        )

    def keep(self, rows_where: str) -> str:
        """Copy the rows matching ``rows_where`` into the ledger (a run set aside)."""
        return (
            f"INSERT INTO {self.recalls} SELECT original_end_to_end_id, assignment_id, "  # noqa: S608
            f"{self.run_id}, line, outcome, updated_at FROM {self.rows} "
            f"WHERE original_end_to_end_id IS NOT NULL AND {rows_where}"
        )


SQLITE: Final = RecallTables(
    rows="rows", recalls="recalls", run_id="(SELECT value FROM meta WHERE key = 'run_id')", mark="?"
)
POSTGRES: Final = RecallTables(
    rows="payments_bulk_rows", recalls="payments_recalls", run_id="run_id", mark="%s"
)


def first_per_payment(found: Sequence[Sequence[Any]]) -> dict[str, Recall]:
    """``{original_end_to_end_id: the first recall recorded}`` from selected records."""
    first: dict[str, Recall] = {}
    for e2e, mid, run, line, outcome in found:
        first.setdefault(
            str(e2e), Recall(str(e2e), mid, run, None if line is None else int(line), outcome)
        )
    return first
