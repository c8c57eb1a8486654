"""When a bulk row's unanswered recall is chased, and the pacs.028 each chase sends."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

import pytest

from payments_async.bulk import ChasePolicy, Stage
from payments_async.bulk._chase import status_request_for
from payments_async.bulk._journal import RowState
from payments_async.iso20022 import encode, validate
from tests.factories import cancellation

FRIDAY = dt.datetime(2026, 3, 6, 15, 0, tzinfo=dt.UTC)  # 16:00 in Brussels


def _row(**changes: object) -> RowState:
    recall = cancellation("E2E-CHASE-1", assignment_id="BC-RUN-2", cancellation_id="CX-RUN-2")
    row = RowState(
        line=2,
        original_end_to_end_id="E2E-CHASE-1",
        assignment_id=recall.message_id,
        cancellation_id="CX-1",
        body=encode(recall),
        state=Stage.ACKNOWLEDGED,
        payments_service_id="cxl-1",
        acknowledged_at=FRIDAY,
    )
    return replace(row, **changes)  # type: ignore[arg-type]


def test_a_row_is_due_after_its_banking_days_counted_from_its_acknowledgement() -> None:
    policy = ChasePolicy(after=2)
    row = _row()
    assert not policy.due(row, dt.date(2026, 3, 6))  # the day it was acknowledged
    assert not policy.due(row, dt.date(2026, 3, 8))  # Sunday: 0 banking days
    assert not policy.due(row, dt.date(2026, 3, 9))  # Monday: 1
    assert policy.due(row, dt.date(2026, 3, 10))  # Tuesday: 2


def test_easter_days_are_not_counted() -> None:
    # Acknowledged Thursday 2 April 2026; Good Friday and Easter Monday are closed.
    row = _row(acknowledged_at=dt.datetime(2026, 4, 2, 10, 0, tzinfo=dt.UTC))
    policy = ChasePolicy(after=1)
    assert not policy.due(row, dt.date(2026, 4, 6))  # Easter Monday
    assert policy.due(row, dt.date(2026, 4, 7))


def test_the_next_chase_counts_from_the_last_one_up_to_the_limit() -> None:
    policy = ChasePolicy(after=2, limit=2)
    chased = _row(chases=1, chased_at=dt.datetime(2026, 3, 10, 9, 0, tzinfo=dt.UTC))
    assert not policy.due(chased, dt.date(2026, 3, 11))  # 1 banking day after the chase
    assert policy.due(chased, dt.date(2026, 3, 12))
    twice = replace(chased, chases=2)
    assert not policy.due(twice, dt.date(2026, 6, 1))  # the limit reached: never again
    assert not ChasePolicy(after=2).due(chased, dt.date(2026, 6, 1))  # default: once


@pytest.mark.parametrize(
    "state", [Stage.PLANNED, Stage.SENT, Stage.FINAL, Stage.INVALID], ids=lambda s: s.value
)
def test_only_an_acknowledged_row_is_chased(state: Stage) -> None:
    assert not ChasePolicy(after=1).due(_row(state=state), dt.date(2026, 6, 1))


def test_a_policy_refuses_less_than_one_day_or_one_chase() -> None:
    with pytest.raises(ValueError, match="1 banking day or more"):
        ChasePolicy(after=0)
    with pytest.raises(ValueError, match="1 time or more"):
        ChasePolicy(after=1, limit=0)


def test_a_rows_chase_has_ids_fixed_by_its_recall_and_its_number() -> None:
    row = _row()
    first, again = status_request_for(row), status_request_for(row)
    second = status_request_for(replace(row, chases=1))
    assert first.message_id == again.message_id  # a resend is the same request
    tx, tx_again = first.body.tx_inf[0], again.body.tx_inf[0]
    assert tx.sts_req_id == tx_again.sts_req_id
    assert second.message_id != first.message_id  # the next chase is a new request
    assert first.original_message_id == row.assignment_id
    assert (tx.orgnl_end_to_end_id, tx.orgnl_instr_id) == ("E2E-CHASE-1", "CX-RUN-2")
    assert len(first.message_id) <= 35
    validate(first)
