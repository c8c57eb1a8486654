"""Bulk rows and their recall windows: the settlement date column, rows past their window
refused with their deadline, and the plan's feasibility at a rate, on a fixed day."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from payments_async.bulk import InputCheck, RunPlan, plan_summary
from payments_async.bulk._input import check_input, read_input
from payments_async.iso20022 import recall_deadline
from tests.support.cli import bulk_rows, write_csv, write_jsonl

# Friday 27 November 2026: DUPL/TECH rows settled 10 banking days before it are due today.
TODAY = dt.date(2026, 11, 27)
DUE_TODAY = dt.date(2026, 11, 13)  # + 10 banking days = 27 November
ONE_DAY_LATE = dt.date(2026, 11, 12)  # + 10 banking days = 26 November
CET = dt.timezone(dt.timedelta(hours=1))  # Brussels in November


def _rows(dates: list[dt.date | None]) -> list[dict[str, str]]:
    rows = bulk_rows(len(dates), prefix="E2E-WIN")
    for row, day in zip(rows, dates, strict=True):
        row["original_settlement_date"] = "" if day is None else day.isoformat()
    return rows


def _check(path: Path, today: dt.date = TODAY) -> InputCheck:
    return check_input(path, today=today)


def test_a_row_due_today_is_in_time_and_one_a_day_later_is_refused_with_its_deadline(
    tmp_path: Path,
) -> None:
    src = write_csv(tmp_path / "in.csv", _rows([DUE_TODAY, ONE_DAY_LATE, None]))
    checked = _check(src)
    assert checked.valid == 2
    assert checked.invalid_lines == (3,)
    (late,) = checked.late
    assert late.line == 3
    assert late.column == "original_settlement_date"
    assert late.deadline == dt.date(2026, 11, 26) == recall_deadline("DUPL", ONE_DAY_LATE)
    assert "2026-11-26" in late.message
    assert "DUPL" in late.message
    assert checked.earliest_recall_deadline == TODAY  # of the rows to send
    assert checked.options.today == TODAY


def test_the_same_rows_judged_a_day_earlier_are_all_in_time(tmp_path: Path) -> None:
    src = write_csv(tmp_path / "in.csv", _rows([DUE_TODAY, ONE_DAY_LATE]))
    checked = _check(src, today=dt.date(2026, 11, 26))
    assert checked.errors == ()
    assert checked.earliest_recall_deadline == dt.date(2026, 11, 26)


@pytest.mark.parametrize("text", ["27/11/2026", "20261127", "2026-W48-5", "2026-02-30", "soon"])
def test_a_settlement_date_that_is_not_yyyy_mm_dd_is_a_typed_problem(
    tmp_path: Path, text: str
) -> None:
    rows = _rows([DUE_TODAY])
    rows[0]["original_settlement_date"] = text
    src = write_csv(tmp_path / "in.csv", rows)
    (problem,) = read_input(src, today=TODAY).errors
    assert problem.column == "original_settlement_date"
    assert problem.message.startswith("not a date")
    assert "YYYY-MM-DD" in problem.message
    assert problem.deadline is None


def test_jsonl_rows_carry_the_date_and_a_number_is_refused(tmp_path: Path) -> None:
    rows: list[dict[str, object]] = list(_rows([DUE_TODAY, DUE_TODAY]))
    rows[1] = {**rows[1], "original_settlement_date": 20261113}
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    bulk = read_input(src, today=TODAY)
    assert bulk.rows[0].original_settlement_date == DUE_TODAY
    assert [(e.line, e.column) for e in bulk.errors] == [(2, "original_settlement_date")]


def test_a_planned_row_sends_its_settlement_date(tmp_path: Path) -> None:
    from payments_async.bulk._plan import plan_input
    from payments_async.iso20022 import decode_camt056

    src = write_csv(tmp_path / "in.csv", _rows([DUE_TODAY]))
    (planned,) = plan_input(_check(src), "RUN1")
    assert planned.body is not None
    tx = decode_camt056(planned.body).body.undrlyg[0].tx_inf[0]
    assert tx.orgnl_tx_ref.intr_bk_sttlm_dt == "2026-11-13"


def _plan(tmp_path: Path, n: int, settled: dt.date, reason: str = "FRAD") -> RunPlan:
    rows = _rows([settled] * n)
    for row in rows:
        row["reason"] = reason
    return plan_summary(_check(write_csv(tmp_path / "in.csv", rows)))


def test_the_plan_says_the_earliest_deadline_and_whether_the_run_finishes_in_time(
    tmp_path: Path,
) -> None:
    plan = _plan(tmp_path, 10, DUE_TODAY, reason="TECH")  # due today, 27 November
    assert plan.earliest_recall_deadline == TODAY
    noon = dt.datetime(2026, 11, 27, 12, 0, tzinfo=CET)
    assert plan.seconds_left(noon) == 12 * 3600  # to midnight in Brussels
    # 10 rows x 2 requests: 20 s at 1/s, 43,200 s at 1/2160 per second (12 h)
    assert plan.in_time(1.0, noon) is True
    assert plan.in_time(20 / (12 * 3600), noon) is True  # exactly the time left
    assert plan.in_time(20 / (12 * 3600 - 1), noon) is True
    assert plan.in_time(19 / (12 * 3600), noon) is False
    assert plan.in_time(None, noon) is None  # no rate: not estimated
    data = plan.as_dict(1.0, now=noon)
    assert data["earliest_recall_deadline"] == "2026-11-27"
    assert data["seconds_left"] == 43200.0
    assert data["in_time"] is True
    assert data["today"] == "2026-11-27"
    assert data["past_deadline_rows"] == 0


def test_the_plan_lists_the_rows_past_their_window_among_the_refused(tmp_path: Path) -> None:
    src = write_csv(tmp_path / "in.csv", _rows([DUE_TODAY, ONE_DAY_LATE, ONE_DAY_LATE]))
    plan = plan_summary(_check(src))
    assert plan.to_send == 1
    assert plan.refused_rows == 2
    assert [(e.line, e.deadline) for e in plan.past_deadline] == [
        (3, dt.date(2026, 11, 26)),
        (4, dt.date(2026, 11, 26)),
    ]
    data = plan.as_dict()
    assert data["past_deadline_rows"] == 2
    assert data["past_deadline"][0]["deadline"] == "2026-11-26"
    assert RunPlan.of_check(_check(src)).past_deadline == plan.past_deadline


def test_rows_without_settlement_dates_have_no_deadline(tmp_path: Path) -> None:
    plan = plan_summary(_check(write_csv(tmp_path / "in.csv", _rows([None, None]))))
    assert plan.earliest_recall_deadline is None
    assert plan.in_time(100.0, dt.datetime(2026, 11, 27, tzinfo=dt.UTC)) is None
