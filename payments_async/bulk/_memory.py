"""A journal that keeps its plan in memory only (``--no-journal``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ._journal import PlannedRow, RowState
from ._rows import RowOutcome, Stage

__all__ = ["MemoryJournal"]


class MemoryJournal:
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

    @property
    def path(self) -> Path | None:
        """Always None: nothing is written."""
        return None

    @property
    def run_id(self) -> str:
        """The random id of this bulk run."""
        return self._run_id

    def is_planned(self) -> bool:
        """True once `plan` ran."""
        return self._planned

    def plan(self, rows: Iterable[PlannedRow]) -> None:
        """Keep the plan in memory."""
        for r in rows:
            self._rows[r.line] = RowState(
                line=r.line,
                original_end_to_end_id=r.original_end_to_end_id,
                assignment_id=r.assignment_id,
                cancellation_id=r.cancellation_id,
                body=r.body,
                state=Stage.INVALID if r.error is not None else Stage.PLANNED,
                error=r.error,
            )
        self._planned = True

    def rows(self) -> list[RowState]:
        """Every row, in line order."""
        return list(self.iter_rows())

    def iter_rows(self, *, unfinished: bool = False) -> Iterator[RowState]:
        """Every row (or every unfinished one) in line order, as it is when reached."""
        for line in sorted(self._rows):
            row = self._rows[line]
            if not (unfinished and row.is_done):
                yield row

    def state_counts(self) -> dict[str, int]:
        """Rows per state."""
        return dict(Counter(r.state for r in self._rows.values()))

    def _update(self, line: int, if_attempts: int | None = None, **changes: Any) -> None:
        row = self._rows[line]
        if if_attempts is not None and (row.state != Stage.SENT or row.attempts != if_attempts):
            return
        self._rows[line] = replace(row, **changes)

    async def mark_sent(self, line: int) -> None:
        """Count one more attempt."""
        self._update(line, state=Stage.SENT, attempts=self._rows[line].attempts + 1)

    async def mark_acknowledged(self, line: int, payments_service_id: str, created: bool) -> None:
        """Keep the ``paymentsServiceId``."""
        self._update(
            line,
            state=Stage.ACKNOWLEDGED,
            payments_service_id=payments_service_id,
            created=created,
            error=None,
        )

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
        """Keep the outcome."""
        self._update(
            line,
            if_attempts,
            state=Stage.FINAL,
            outcome=RowOutcome(outcome),
            status=status,
            reason_codes=tuple(reason_codes),
            reason_text=reason_text,
            return_request_needed=return_request_needed,
            error=None,
        )

    async def mark_error(
        self, line: int, error: str, *, final: bool, if_attempts: int | None = None
    ) -> None:
        """Keep the error (and end the row ``refused`` when retrying cannot help)."""
        if final:
            self._update(
                line, if_attempts, state=Stage.FINAL, outcome=RowOutcome.REFUSED, error=error
            )
        else:
            self._update(line, if_attempts, error=error)

    async def mark_not_sent(
        self, line: int, error: str, *, final: bool, if_attempts: int | None = None
    ) -> None:
        """Keep the error; the row is ``planned`` again (or final ``not_sent``)."""
        if final:
            self._update(
                line, if_attempts, state=Stage.FINAL, outcome=RowOutcome.NOT_SENT, error=error
            )
        else:
            self._update(line, if_attempts, state=Stage.PLANNED, error=error)

    def close(self) -> None:
        """Nothing to release; the rows stay readable."""
