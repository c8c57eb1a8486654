"""TARGET2 banking days and the SEPA recall deadlines counted on them."""

from __future__ import annotations

import datetime as dt

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import payments_async
from payments_async.iso20022 import (
    RECALL_WINDOWS,
    Camt056,
    add_banking_days,
    decode_camt056,
    encode,
    is_banking_day,
    recall_deadline,
    recall_window_problems,
    target2_today,
    validate,
)
from payments_async.iso20022._calendar import easter_sunday
from tests.factories import cancellation

D = dt.date


@pytest.mark.parametrize(
    ("year", "easter"),
    [
        (2024, D(2024, 3, 31)),
        (2025, D(2025, 4, 20)),
        (2026, D(2026, 4, 5)),
        (2027, D(2027, 3, 28)),
        (2028, D(2028, 4, 16)),
        (2038, D(2038, 4, 25)),  # the latest date Easter can fall on
        (2285, D(2285, 3, 22)),  # the earliest
    ],
)
def test_easter_by_the_gregorian_computus(year: int, easter: dt.date) -> None:
    assert easter_sunday(year) == easter


@pytest.mark.parametrize(
    ("day", "open_"),
    [
        # Easter 2026: Good Friday 3 April and Easter Monday 6 April closed
        (D(2026, 4, 2), True),
        (D(2026, 4, 3), False),
        (D(2026, 4, 4), False),
        (D(2026, 4, 5), False),
        (D(2026, 4, 6), False),
        (D(2026, 4, 7), True),
        # Easter 2027: Good Friday 26 March and Easter Monday 29 March closed
        (D(2027, 3, 25), True),
        (D(2027, 3, 26), False),
        (D(2027, 3, 29), False),
        (D(2027, 3, 30), True),
        # Christmas and New Year 2026/27
        (D(2026, 12, 24), True),
        (D(2026, 12, 25), False),
        (D(2026, 12, 26), False),  # a Saturday anyway
        (D(2026, 12, 28), True),
        (D(2026, 12, 31), True),
        (D(2027, 1, 1), False),
        (D(2027, 1, 4), True),
        # Christmas 2025 falls on weekdays: both closed; 1 May 2026 a Friday
        (D(2025, 12, 25), False),
        (D(2025, 12, 26), False),
        (D(2026, 5, 1), False),
        (D(2026, 5, 4), True),
        # other public holidays are TARGET2 banking days
        (D(2026, 10, 3), False),  # a Saturday
        (D(2026, 12, 8), True),
        (D(2026, 11, 1), False),  # a Sunday
        (D(2027, 11, 1), True),
    ],
)
def test_target2_closing_days(day: dt.date, open_: bool) -> None:
    assert is_banking_day(day) is open_
    assert payments_async.is_banking_day(day) is open_


def test_a_datetime_counts_by_its_date_and_a_string_is_refused() -> None:
    assert is_banking_day(dt.datetime(2026, 4, 3, 23, 59)) is False
    with pytest.raises(TypeError, match="expected a date"):
        is_banking_day("2026-04-03")  # type: ignore[arg-type]


def test_banking_days_step_over_easter_and_christmas() -> None:
    # Thursday before Easter 2026 + 1 banking day: Tuesday after Easter Monday
    assert add_banking_days(D(2026, 4, 2), 1) == D(2026, 4, 7)
    assert add_banking_days(D(2026, 4, 7), -1) == D(2026, 4, 2)
    # 24 December 2026 + 1: the 28th; + 4: the 31st (open); + 5: 4 January (1st closed)
    assert add_banking_days(D(2026, 12, 24), 1) == D(2026, 12, 28)
    assert add_banking_days(D(2026, 12, 24), 4) == D(2026, 12, 31)
    assert add_banking_days(D(2026, 12, 24), 5) == D(2027, 1, 4)
    assert add_banking_days(D(2026, 12, 25), 0) == D(2026, 12, 25)


# --- recall deadlines: both ends of each window ---------------------------------------------


@pytest.mark.parametrize("reason", ["DUPL", "TECH"])
def test_ten_banking_days_for_a_duplicate_or_a_technical_problem(reason: str) -> None:
    # Settled Friday 27 March 2026: the window spans Easter (3 and 6 April closed).
    settled = D(2026, 3, 27)
    deadline = recall_deadline(reason, settled)
    assert deadline == D(2026, 4, 14)
    assert payments_async.recall_deadline(reason, settled) == deadline
    # the last day in time is the 10th banking day; the next banking day is late
    assert add_banking_days(settled, 10) == deadline
    assert add_banking_days(settled, 11) == D(2026, 4, 15)
    # across Christmas and New Year 2026/27
    assert recall_deadline(reason, D(2026, 12, 21)) == D(2027, 1, 6)


@pytest.mark.parametrize("reason", ["FRAD", "AC03", "AM09", "CUST"])
def test_thirteen_months_for_fraud_and_the_originators_requests(reason: str) -> None:
    # 13 months after Tuesday 27 April 2027 ... a day in time, the next one late
    assert recall_deadline(reason, D(2026, 3, 27)) == D(2027, 4, 27)
    # the end falls on Good Friday 2027 (26 March): the Thursday before
    assert recall_deadline(reason, D(2026, 2, 26)) == D(2027, 3, 25)
    # 31 January + 13 months: 28 February 2026, a Saturday: Friday the 27th
    assert recall_deadline(reason, D(2025, 1, 31)) == D(2026, 2, 27)
    # 30 November 2025 + 13 months: 30 December 2026, a Wednesday
    assert recall_deadline(reason, D(2025, 11, 30)) == D(2026, 12, 30)
    # ... and 25 November 2025 lands on Christmas 2026: the 24th
    assert recall_deadline(reason, D(2025, 11, 25)) == D(2026, 12, 24)


def test_unknown_reason_and_bad_date_are_refused() -> None:
    with pytest.raises(ValueError, match="'AC04' is not a SEPA recall reason"):
        recall_deadline("AC04", D(2026, 1, 5))
    with pytest.raises(TypeError, match="expected a date"):
        recall_deadline("DUPL", "2026-01-05")  # type: ignore[arg-type]


def test_each_window_says_where_the_rulebook_sets_it() -> None:
    assert set(RECALL_WINDOWS) == {"DUPL", "TECH", "FRAD", "AC03", "AM09", "CUST"}
    assert RECALL_WINDOWS["DUPL"].describe() == (
        "10 banking days after settlement (EPC125-05 SCT rulebook 2025: Recall)"
    )
    assert "13 months" in RECALL_WINDOWS["CUST"].describe()
    assert "Request for Recall by the Originator" in RECALL_WINDOWS["AM09"].describe()


# --- properties ---------------------------------------------------------------------------

days = st.dates(min_value=D(2000, 1, 1), max_value=D(2099, 12, 31))
reasons = st.sampled_from(sorted(RECALL_WINDOWS))


@given(day=days, reason=reasons)
def test_a_deadline_is_a_banking_day_after_the_settlement(day: dt.date, reason: str) -> None:
    deadline = recall_deadline(reason, day)
    assert is_banking_day(deadline)
    assert deadline > day


@given(day=days, reason=st.sampled_from(["DUPL", "TECH"]))
def test_ten_banking_days_lie_in_the_window(day: dt.date, reason: str) -> None:
    deadline = recall_deadline(reason, day)
    span = (deadline - day).days
    between = [day + dt.timedelta(days=i) for i in range(1, span + 1)]
    assert sum(map(is_banking_day, between)) == 10
    assert span <= 19  # at most 19 calendar days (checked day by day over 2000-2099)


@given(day=days, reason=st.sampled_from(["FRAD", "AC03", "AM09", "CUST"]))
def test_thirteen_months_end_within_days_of_the_same_date(day: dt.date, reason: str) -> None:
    deadline = recall_deadline(reason, day)
    months = (deadline.year - day.year) * 12 + deadline.month - day.month
    assert months in (12, 13)
    assert 389 <= (deadline - day).days <= 397


@given(a=days, b=days, reason=reasons)
def test_a_later_settlement_never_has_an_earlier_deadline(
    a: dt.date, b: dt.date, reason: str
) -> None:
    first, second = sorted((a, b))
    assert recall_deadline(reason, first) <= recall_deadline(reason, second)


@given(day=days, count=st.integers(min_value=-30, max_value=30))
def test_banking_days_added_and_taken_away_return_to_a_banking_day(
    day: dt.date, count: int
) -> None:
    there = add_banking_days(day, count)
    if count:
        assert is_banking_day(there)
        if is_banking_day(day):
            assert add_banking_days(there, -count) == day


# --- a camt.056 against its window ----------------------------------------------------------


def _recall(reason: str, settled: str) -> Camt056:
    document = msgspec.json.decode(encode(cancellation("E2E-W", reason=reason)))
    tx = document["fitoFIPmtCxlReq"]["undrlyg"][0]["txInf"][0]
    tx["orgnlTxRef"]["intrBkSttlmDt"] = settled
    return decode_camt056(msgspec.json.encode(document))


@pytest.mark.parametrize(
    ("reason", "settled", "deadline"),
    [
        ("DUPL", "2026-03-27", D(2026, 4, 14)),
        ("TECH", "2026-12-21", D(2027, 1, 6)),
        ("FRAD", "2026-03-27", D(2027, 4, 27)),
        ("CUST", "2025-01-31", D(2026, 2, 27)),
    ],
)
def test_a_recall_on_its_deadline_passes_and_one_day_late_is_named(
    reason: str, settled: str, deadline: dt.date
) -> None:
    msg = _recall(reason, settled)
    validate(msg)  # the field is ISO's orgnlTxRef.intrBkSttlmDt
    assert recall_window_problems(msg, deadline) == []
    (late,) = recall_window_problems(msg, deadline + dt.timedelta(days=1))
    assert late.path == "$.fitoFIPmtCxlReq.undrlyg[0].txInf[0].orgnlTxRef.intrBkSttlmDt"
    assert late.message.startswith(
        f"a {reason} recall of a payment settled on {settled} had to be sent by "
        f"{deadline.isoformat()} ("
    )
    assert "EPC125-05 SCT rulebook 2025: " in late.message


def test_a_recall_without_a_settlement_date_is_not_judged() -> None:
    msg = cancellation("E2E-N", reason="DUPL")
    assert msg.body.undrlyg[0].tx_inf[0].orgnl_tx_ref.intr_bk_sttlm_dt is None
    assert recall_window_problems(msg, D(2099, 1, 1)) == []


# --- the builder refuses a late recall ------------------------------------------------------


def test_the_builder_sends_the_settlement_date_and_refuses_a_recall_one_day_late() -> None:
    on_time = cancellation(
        "E2E-B", reason="DUPL", original_settlement_date=D(2026, 3, 27), sent_on=D(2026, 4, 14)
    )
    assert on_time.body.undrlyg[0].tx_inf[0].orgnl_tx_ref.intr_bk_sttlm_dt == "2026-03-27"
    with pytest.raises(payments_async.ValidationError) as info:
        cancellation(
            "E2E-B",
            reason="DUPL",
            original_settlement_date=D(2026, 3, 27),
            sent_on=D(2026, 4, 15),
        )
    (problem,) = info.value.problems
    assert problem.path == "$.fitoFIPmtCxlReq.undrlyg[0].txInf[0].orgnlTxRef.intrBkSttlmDt"
    assert "had to be sent by 2026-04-14" in problem.message
    assert "it is 2026-04-15" in problem.message


def test_the_builder_counts_today_in_target2s_time_zone() -> None:
    # a 13-month window settled long ago is closed today; one settled today is open
    with pytest.raises(payments_async.ValidationError, match="had to be sent by 2020-"):
        cancellation("E2E-T", reason="FRAD", original_settlement_date=D(2019, 1, 2))
    today = target2_today()
    assert cancellation("E2E-T", reason="FRAD", original_settlement_date=today)
    with pytest.raises(payments_async.ValidationError, match="expected a date, got str"):
        cancellation("E2E-T", original_settlement_date="2026-01-05")


def test_target2_today_is_the_date_in_brussels() -> None:
    utc = dt.UTC
    assert target2_today(dt.datetime(2026, 12, 31, 23, 30, tzinfo=utc)) == D(2027, 1, 1)
    assert target2_today(dt.datetime(2026, 6, 30, 21, 59, tzinfo=utc)) == D(2026, 6, 30)
    assert target2_today(dt.datetime(2026, 6, 30, 22, 0, tzinfo=utc)) == D(2026, 7, 1)
    with pytest.raises(ValueError, match="naive"):
        target2_today(dt.datetime(2026, 6, 30, 22, 0))
