"""A bulk run's row times added up: rows sent and made final over time, the service's
latency, and the rows not final by age and by days left to their recall deadlines, in
banking days.

Pure and of bounded size whatever the run's size: latencies are counted per whole
millisecond, rows per minute and per day. ``bulk-status`` fills it from SQL aggregates,
``bulk-report`` from the rows one by one; both give the same figures because the stores
keep times as whole microseconds (`._journal.micros`) and both sides use integer maths.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final

from .. import is_banking_day
from ._journal import micros

__all__ = [
    "NO_DEADLINE",
    "OVER_TIME_BUCKETS",
    "PERCENTILES",
    "RunTimes",
    "banking_days_between",
    "banking_days_left",
]

PERCENTILES: Final = (50, 90, 99)
"""The latency percentiles shown (nearest rank)."""

NO_DEADLINE: Final = "no deadline"
"""The key of rows whose recall deadline is not known in `RunTimes.unfinished_by_days_left`."""

OVER_TIME_BUCKETS: Final = 60
"""Time buckets of a run's over-time series at most: its size whatever the run's length."""

_US_PER_MS: Final = 1000
_US_PER_MINUTE: Final = 60_000_000
_US_PER_DAY: Final = 86_400_000_000
_EPOCH_DAY: Final = dt.date(1970, 1, 1)


def banking_days_between(start: dt.date, end: dt.date) -> int:
    """Banking days after ``start`` up to and including ``end`` (0 when ``end <= start``).

    A row sent on a Friday is 1 banking day old on the next Monday, 0 on the Saturday.
    """
    days = 0
    day = start
    while day < end:
        day += dt.timedelta(days=1)
        days += is_banking_day(day)
    return days


def banking_days_left(today: dt.date, deadline: dt.date) -> int:
    """Banking days from ``today`` to a recall ``deadline``: 0 on the deadline itself, a
    positive count before it (the banking days after today up to and including it), a
    negative count after it (``-1`` on the first banking day past it)."""
    if deadline >= today:
        return banking_days_between(today, deadline)
    return -banking_days_between(deadline, today)


@dataclass(slots=True)
class RunTimes:
    """The row times of a run, counted.

    Attributes:
        latency_ms: rows per whole milliseconds from ``sent_at`` to ``acknowledged_at``.
        sent_per_minute: rows per minute (since the epoch) of their ``sent_at``.
        final_per_minute: rows per minute of their ``final_at``.
        unfinished_sent_on: rows not final (in flight or pending) per UTC day of their
            ``sent_at``.
        chased_rows: rows whose recall was chased at least once (a pacs.028 the service
            took).
        chases: those chases, all rows together.
        unfinished_deadlines: the same rows per recall deadline (None: not known).
    """

    latency_ms: Counter[int] = field(default_factory=Counter)
    sent_per_minute: Counter[int] = field(default_factory=Counter)
    final_per_minute: Counter[int] = field(default_factory=Counter)
    unfinished_sent_on: Counter[dt.date] = field(default_factory=Counter)
    chased_rows: int = 0
    chases: int = 0
    unfinished_deadlines: Counter[dt.date | None] = field(default_factory=Counter)

    def add_row(
        self,
        *,
        unfinished: bool,
        sent_at: dt.datetime | None,
        acknowledged_at: dt.datetime | None,
        final_at: dt.datetime | None,
        chases: int = 0,
        recall_deadline: dt.date | None = None,
    ) -> None:
        """Count one row's times (``unfinished``: the row is in flight or pending) and
        its ``chases``."""
        if chases:
            self.chased_rows += 1
            self.chases += chases
        sent = None if sent_at is None else micros(sent_at)
        if sent is not None:
            self.sent_per_minute[sent // _US_PER_MINUTE] += 1
            if unfinished:
                self.add_unfinished(sent // _US_PER_DAY, 1)
                self.unfinished_deadlines[recall_deadline] += 1
            if acknowledged_at is not None:
                self.latency_ms[(micros(acknowledged_at) - sent) // _US_PER_MS] += 1
        if final_at is not None:
            self.final_per_minute[micros(final_at) // _US_PER_MINUTE] += 1

    def add_unfinished(self, epoch_day: int, rows: int) -> None:
        """Count ``rows`` unfinished rows sent on the ``epoch_day``-th day since 1970-01-01."""
        self.unfinished_sent_on[_EPOCH_DAY + dt.timedelta(days=epoch_day)] += rows

    def chased(self) -> dict[str, int]:
        """``{"rows": rows chased at least once, "chases": their chases}``."""
        return {"rows": self.chased_rows, "chases": self.chases}

    def latency(self) -> dict[str, Any] | None:
        """``{"rows": n, "p50_ms": .., "p90_ms": .., "p99_ms": ..}`` of the service's
        answers to the POSTs (nearest rank, whole milliseconds), or None with none."""
        rows = sum(self.latency_ms.values())
        if not rows:
            return None
        out: dict[str, Any] = {"rows": rows}
        ranks = {p: math.ceil(p * rows / 100) for p in PERCENTILES}
        seen = 0
        for ms in sorted(self.latency_ms):
            seen += self.latency_ms[ms]
            for p, rank in ranks.items():
                if f"p{p}_ms" not in out and seen >= rank:
                    out[f"p{p}_ms"] = ms
        return out

    def unfinished_by_age(self, today: dt.date) -> dict[str, int]:
        """Rows not final per age in banking days since sent (``{"0": n, "1": n, ...}``,
        youngest first), as of ``today`` (UTC)."""
        ages: Counter[int] = Counter()
        for day, n in self.unfinished_sent_on.items():
            ages[banking_days_between(day, today)] += n
        return {str(age): ages[age] for age in sorted(ages)}

    def unfinished_by_days_left(self, today: dt.date) -> dict[str, int]:
        """The same rows per banking days left to their recall deadline as of ``today``
        (`banking_days_left`: ``{"-1": n, "0": n, "4": n}``, the most urgent first), and
        under `NO_DEADLINE` those whose deadline is not known."""
        left: Counter[int] = Counter()
        for deadline, n in self.unfinished_deadlines.items():
            if deadline is not None:
                left[banking_days_left(today, deadline)] += n
        out = {str(days): left[days] for days in sorted(left)}
        unknown = self.unfinished_deadlines[None]
        return out | ({NO_DEADLINE: unknown} if unknown else {})

    def over_time(self) -> dict[str, Any] | None:
        """Rows sent and made final per time bucket (at most `OVER_TIME_BUCKETS`):
        ``{"start": ISO time, "bucket_minutes": m, "sent": [...], "final": [...]}``, or
        None when no row was sent."""
        minutes = [*self.sent_per_minute, *self.final_per_minute]
        if not minutes:
            return None
        first, last = min(minutes), max(minutes)
        width = max(1, math.ceil((last - first + 1) / OVER_TIME_BUCKETS))
        count = (last - first) // width + 1

        def series(per_minute: Counter[int]) -> list[int]:
            out = [0] * count
            for minute, n in per_minute.items():
                out[(minute - first) // width] += n
            return out

        start = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=first)
        return {
            "start": start.isoformat(),
            "bucket_minutes": width,
            "sent": series(self.sent_per_minute),
            "final": series(self.final_per_minute),
        }
