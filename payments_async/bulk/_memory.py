"""A journal that keeps its plan in memory only (``--no-journal``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator

from ._journal import Journal, PlannedRow, RowState, RowUpdate

__all__ = ["MemoryJournal"]


class MemoryJournal(Journal):
    """A journal that keeps nothing on disk (``--no-journal``): no resume after a crash.

    It exists so a run can do without the file (and a benchmark can measure its cost);
    a killed run without a journal cannot be resumed without risking new ids. It holds
    the whole plan in memory, bodies included.

    Args:
        run_id: the id generated ``assgnmt.id`` values are built from.
    """

    def __init__(self, run_id: str) -> None:
        self._rows: dict[int, RowState] = {}
        self._run_id = run_id
        self._planned = False

    def plan(self, rows: Iterable[PlannedRow]) -> None:
        """Keep the plan in memory."""
        for r in rows:
            self._rows[r.line] = RowState(
                line=r.line,
                original_end_to_end_id=r.original_end_to_end_id,
                assignment_id=r.assignment_id,
                cancellation_id=r.cancellation_id,
                body=r.body,
                state=r.stage,
                error=r.error,
                recall_deadline=r.recall_deadline,
            )
        self._planned = True

    def iter_rows(self, *, unfinished: bool = False) -> Iterator[RowState]:
        """Every row (or every unfinished one) in line order, as it is when reached."""
        for line in sorted(self._rows):
            row = self._rows[line]
            if not (unfinished and row.is_done):
                yield row

    def state_counts(self) -> dict[str, int]:
        """Rows per state."""
        return dict(Counter(r.state for r in self._rows.values()))

    async def _apply(self, update: RowUpdate) -> None:
        self._rows[update.line] = update.applied_to(self._rows[update.line])

    def close(self) -> None:
        """Nothing to release; the rows stay readable."""
