"""What a bulk run would do, worked out from its checked input before anything is sent."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

from ..iso20022._calendar import target2_day_end
from ._input import BulkRow, InputCheck, InputScan, RowError
from ._input_row import row_deadline
from ._journal import JournalError
from ._plan import recorded_refusal

__all__ = [
    "REQUESTS_PER_ROW",
    "RunPlan",
    "earliest_recall_deadline",
    "plan_summary",
]

REQUESTS_PER_ROW: Final = 2
"""Requests a row costs at the least: its POST and one read of its outcome. A rate
limit (``--rate``) counts both, so a run's time is estimated from this."""


def earliest_recall_deadline(rows: Iterable[BulkRow]) -> dt.date | None:
    """The earliest date by which one of ``rows`` must be recalled, or None when unknown.

    A row's deadline follows from its recall reason and its ``original_settlement_date``
    (`payments_async.recall_deadline`: banking days or months of the TARGET2 calendar);
    rows without that date have none. It reads the rows once, as a stream.
    """
    earliest: dt.date | None = None
    for row in rows:
        deadline = row_deadline(row)
        if deadline is not None and (earliest is None or deadline < earliest):
            earliest = deadline
    return earliest


def _no_check(row: BulkRow) -> list[RowError]:
    return []


@dataclass(slots=True)
class RunPlan:
    """What a run of a checked input would send: the figures a person confirms.

    Attributes:
        input_name: the input file's name.
        rows: data rows in the input, valid or not.
        to_send: valid rows, each one cancellation request.
        amounts: the sum of the valid rows' amounts, per currency.
        reasons: valid rows per recall reason code (``DUPL``, ``FRAD``, ...).
        refused: every problem of the rows a run refuses, and the rows whose payment the
            journal records a cancellation for (``--skip-invalid`` reports them
            ``invalid``; without it the input is refused as a whole).
        refused_rows: rows a run refuses.
        earliest_recall_deadline: the earliest recall deadline of the rows to send (see
            `earliest_recall_deadline`); None when no row gives its settlement date.
        today: the TARGET2 day the recall windows were judged on.
        past_deadline: the rows refused because their recall window closed before
            ``today``, each problem carrying its deadline (they are among ``refused``
            and are never sent).
    """

    input_name: str
    rows: int = 0
    to_send: int = 0
    amounts: dict[str, Decimal] = field(default_factory=dict)
    reasons: dict[str, int] = field(default_factory=dict)
    refused: tuple[RowError, ...] = ()
    refused_rows: int = 0
    earliest_recall_deadline: dt.date | None = None
    today: dt.date | None = None
    past_deadline: tuple[RowError, ...] = ()

    @classmethod
    def of_check(cls, checked: InputCheck) -> RunPlan:
        """The figures a check alone gives (no second reading of the file): rows, rows
        to send, rows refused, the recall deadlines; no amounts nor reasons."""
        invalid = frozenset(checked.invalid_lines)
        return cls(
            input_name=checked.path.name,
            rows=checked.total,
            to_send=checked.valid,
            refused=tuple(e for e in checked.errors if e.line in invalid),
            refused_rows=len(invalid),
            earliest_recall_deadline=checked.earliest_recall_deadline,
            today=checked.options.today,
            past_deadline=checked.late,
        )

    def estimated_seconds(self, rate: float | None) -> float | None:
        """The least time the run takes at ``rate`` requests per second (None: no rate set):
        ``to_send x REQUESTS_PER_ROW / rate``."""
        if rate is None:
            return None
        return self.to_send * REQUESTS_PER_ROW / rate

    def seconds_left(self, now: dt.datetime) -> float | None:
        """Seconds from ``now`` (aware) to the end of the earliest recall deadline's day in
        TARGET2's time zone; negative once it has passed; None when no deadline is known."""
        deadline = self.earliest_recall_deadline
        if deadline is None:
            return None
        return (target2_day_end(deadline) - now).total_seconds()

    def in_time(self, rate: float | None, now: dt.datetime) -> bool | None:
        """Whether the run can finish by its earliest recall deadline at ``rate``: None when
        that cannot be told (no deadline known, or no rate set)."""
        needed = self.estimated_seconds(rate)
        left = self.seconds_left(now)
        if needed is None or left is None:
            return None
        return needed <= left

    def as_dict(
        self,
        rate: float | None = None,
        *,
        problems: int = 1000,
        now: dt.datetime | None = None,
    ) -> dict[str, Any]:
        """The plan as JSON types (amounts as strings, exact); at most ``problems`` listed.

        With ``now`` (aware), also the seconds left to the earliest recall deadline and
        whether the run can finish in time at ``rate``.
        """
        seconds = self.estimated_seconds(rate)
        deadline = self.earliest_recall_deadline
        left = None if now is None else self.seconds_left(now)
        return {
            "input": self.input_name,
            "rows": self.rows,
            "to_send": self.to_send,
            "amounts": {cur: str(total) for cur, total in sorted(self.amounts.items())},
            "reasons": dict(sorted(self.reasons.items())),
            "refused_rows": self.refused_rows,
            "refused": [
                {"line": e.line, "column": e.column, "message": e.message}
                for e in self.refused[:problems]
            ],
            "refused_listed": min(len(self.refused), problems),
            "earliest_recall_deadline": None if deadline is None else deadline.isoformat(),
            "today": None if self.today is None else self.today.isoformat(),
            "past_deadline_rows": len(self.past_deadline),
            "past_deadline": [
                {
                    "line": e.line,
                    "deadline": e.deadline.isoformat() if e.deadline else None,
                    "message": e.message,
                }
                for e in self.past_deadline[:problems]
            ],
            "rate_per_s": rate,
            "estimated_s": None if seconds is None else round(seconds, 1),
            "seconds_left": None if left is None else round(left, 1),
            "in_time": None if now is None else self.in_time(rate, now),
        }


def plan_summary(checked: InputCheck, recorded: Mapping[str, str] | None = None) -> RunPlan:
    """Read a checked input again, as a stream, and add up what a run of it would send.

    Nothing is written and nothing is sent: the figures come from the file (and
    ``recorded``) alone.

    Args:
        checked: what `check_input` (or ``check_run_input``) found in the file.
        recorded: the payments the run's journal records a cancellation for, as
            ``SqliteJournal.recorded_cancellations`` gives them (a new run in that
            journal, ``new_run``): their rows are refused, as the run refuses them.

    Raises:
        JournalError: the file changed since it was checked.
        OSError: the file cannot be read.
    """
    invalid = frozenset(checked.invalid_lines)
    recorded = recorded or {}
    refused_recorded: list[RowError] = []
    amounts: dict[str, Decimal] = {}
    reasons: Counter[str] = Counter()
    to_send = 0
    scan = InputScan(checked.path, check=_no_check)

    def valid_rows() -> Iterator[BulkRow]:
        nonlocal to_send
        for item in scan:
            if item.header or item.row is None or item.line in invalid:
                continue
            row = item.row
            earlier = recorded.get(row.original_end_to_end_id)
            if earlier is not None:
                refused_recorded.append(
                    RowError(
                        row.line,
                        "original_end_to_end_id",
                        recorded_refusal(row.original_end_to_end_id, earlier),
                    )
                )
                continue
            to_send += 1
            amounts[row.currency] = amounts.get(row.currency, Decimal(0)) + row.amount
            reasons[row.reason] += 1
            yield row

    rows = valid_rows()
    deadline = earliest_recall_deadline(rows)
    for _ in rows:  # the rows the hook did not read: every row is counted
        pass
    if scan.sha256 != checked.sha256 or to_send + len(refused_recorded) != checked.valid:
        raise JournalError(
            f"{str(checked.path)!r} changed while it was being read; nothing was sent"
        )
    return RunPlan(
        input_name=checked.path.name,
        rows=checked.total,
        to_send=to_send,
        amounts=amounts,
        reasons=dict(reasons),
        refused=tuple(
            sorted(
                [*(e for e in checked.errors if e.line in invalid), *refused_recorded],
                key=lambda e: e.line,
            )
        ),
        refused_rows=len(invalid) + len(refused_recorded),
        earliest_recall_deadline=deadline,
        today=checked.options.today,
        past_deadline=checked.late,
    )
