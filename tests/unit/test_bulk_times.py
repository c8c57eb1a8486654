"""A bulk run's row times added up: latency percentiles, rows over time, pending age."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from payments_async.bulk import RunTimes, run_report
from payments_async.bulk._times import OVER_TIME_BUCKETS, banking_days_between

T0 = dt.datetime(2026, 3, 27, 9, 0, tzinfo=dt.UTC)  # a Friday; 3 and 6 April: Easter


def test_banking_days_count_the_days_the_service_works_after_sending() -> None:
    friday = T0.date()
    assert banking_days_between(friday, friday) == 0
    assert banking_days_between(friday, dt.date(2026, 3, 28)) == 0  # Saturday
    assert banking_days_between(friday, dt.date(2026, 3, 30)) == 1  # Monday
    # Good Friday and Easter Monday are closed: Mon-Thu count, then Tuesday
    assert banking_days_between(friday, dt.date(2026, 4, 7)) == 5
    assert banking_days_between(dt.date(2026, 4, 7), friday) == 0


def test_latency_percentiles_are_nearest_rank_in_whole_milliseconds() -> None:
    times = RunTimes()
    for ms in range(1, 101):  # 1 ms .. 100 ms, one row each
        sent = T0 + dt.timedelta(seconds=ms)
        times.add_row(
            unfinished=False,
            sent_at=sent,
            acknowledged_at=sent + dt.timedelta(milliseconds=ms, microseconds=999),
            final_at=None,
        )
    assert times.latency() == {"rows": 100, "p50_ms": 50, "p90_ms": 90, "p99_ms": 99}
    assert RunTimes().latency() is None


def test_rows_over_time_fit_a_bounded_number_of_buckets() -> None:
    times = RunTimes()
    for minute in range(600):  # ten hours, two rows sent a minute, one made final
        at = T0 + dt.timedelta(minutes=minute)
        times.add_row(unfinished=False, sent_at=at, acknowledged_at=None, final_at=None)
        times.add_row(unfinished=False, sent_at=at, acknowledged_at=None, final_at=at)
    series = times.over_time()
    assert series is not None
    assert series["start"] == T0.isoformat()
    assert series["bucket_minutes"] == 10
    assert len(series["sent"]) == len(series["final"]) == OVER_TIME_BUCKETS
    assert series["sent"] == [20] * 60
    assert series["final"] == [10] * 60
    assert RunTimes().over_time() is None


def _records(days: int) -> list[dict[str, Any]]:
    """Rows sent one an hour over ``days`` days: every fourth one pending."""
    out = []
    for i in range(days * 24):
        sent = T0 + dt.timedelta(hours=i)
        pending = i % 4 == 3
        out.append(
            {
                "line": i + 2,
                "original_end_to_end_id": f"E2E-{i}",
                "outcome": "pending" if pending else "accepted",
                "attempts": 1,
                "sent_at": sent.isoformat(),
                "acknowledged_at": (sent + dt.timedelta(milliseconds=40 + i % 10)).isoformat(),
                "final_at": None if pending else (sent + dt.timedelta(minutes=5)).isoformat(),
            }
        )
    return out


def test_the_report_shows_the_times_as_figures_and_charts() -> None:
    pytest.importorskip("matplotlib")
    report = run_report(_records(4), "t", today=dt.date(2026, 3, 31))
    data = report.as_dict()
    assert data["not_recorded"] is None
    assert data["latency"] == {"rows": 96, "p50_ms": 44, "p90_ms": 48, "p99_ms": 49}
    # sent from Friday 27 March 09:00 to Tuesday 31 March 08:00, counted to that Tuesday:
    # Friday (3 pending), the weekend (12) are 2 banking days old, Monday's 6 one
    assert data["pending_by_age"] == {"0": 3, "1": 6, "2": 15}
    assert sum(data["over_time"]["sent"]) == 96
    assert sum(data["over_time"]["final"]) == 72
    assert json.dumps(data)
    page = report.to_html()
    for chart in ("over-time", "latency", "pending-age"):
        assert f"id='chart-{chart}'" in page
    assert "p99 49 ms" in page


def test_a_results_file_without_times_says_what_cannot_be_shown() -> None:
    records = [{"line": 2, "outcome": "accepted", "attempts": 1}]
    data = run_report(records, "t").as_dict()
    assert data["not_recorded"]
    assert data["latency"] is None
    assert data["over_time"] is None


def test_days_left_to_a_deadline_count_banking_days_signed() -> None:
    from payments_async.bulk._times import banking_days_left

    thursday = dt.date(2026, 4, 2)  # the day before Good Friday
    assert banking_days_left(thursday, thursday) == 0
    assert banking_days_left(thursday, dt.date(2026, 4, 7)) == 1  # Tuesday after Easter
    assert banking_days_left(dt.date(2026, 4, 7), thursday) == -1
    assert banking_days_left(dt.date(2026, 4, 8), thursday) == -2


def test_pending_rows_are_counted_by_days_left_to_their_deadline() -> None:
    pytest.importorskip("matplotlib")
    records = _records(2)  # 12 pending, sent Friday 27 and Saturday 28 March
    deadlines = ["2026-03-27", "2026-03-31", "2026-04-02", None]  # past, today, 2 left, none
    pending = [r for r in records if r["outcome"] == "pending"]
    for i, rec in enumerate(pending):
        rec["recall_deadline"] = deadlines[i % 4]
    report = run_report(records, "t", today=dt.date(2026, 3, 31))
    data = report.as_dict()
    assert data["pending_by_days_left"] == {"-2": 3, "0": 3, "2": 3, "no deadline": 3}
    assert sum(data["pending_by_age"].values()) == 12
    # the most urgent listed first: the past deadline, then today's, then later, then none
    listed = [(r["recall_deadline"], r["days_left"]) for r in data["pending_rows"]]
    assert listed == sorted(listed, key=lambda d: d[0] or "9")
    assert listed[0] == ("2026-03-27", -2)
    assert listed[-1] == (None, None)
    page = report.to_html()
    assert "id='chart-pending-deadline'" in page
    assert "banking days left to the recall deadline" in page


def test_a_report_lists_the_most_urgent_pending_rows_of_a_large_run() -> None:
    from payments_async.bulk._report import REPORT_ROWS

    records = [
        {
            "line": i,
            "outcome": "pending",
            "attempts": 1,
            "sent_at": T0.isoformat(),
            # every seventh row's deadline is the nearest; the listing keeps those first
            "recall_deadline": "2026-04-01" if i % 7 == 0 else "2026-04-20",
        }
        for i in range(2, 3 * REPORT_ROWS)
    ]
    report = run_report(records, "t", today=dt.date(2026, 3, 31))
    lines = [r["line"] for r in report.pending_rows]
    assert len(lines) == REPORT_ROWS
    urgent = [i for i in range(2, 3 * REPORT_ROWS) if i % 7 == 0]
    assert lines[: len(urgent)] == urgent
    assert (
        lines[len(urgent) :]
        == [i for i in range(2, 3 * REPORT_ROWS) if i % 7][: REPORT_ROWS - len(urgent)]
    )
