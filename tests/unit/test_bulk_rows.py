"""The bulk row state machine: one vocabulary, pure transitions, one verdict for the exit code.

The single-process runner and the queue's workers both record what these functions return
(`tests/integration/test_bulk_parity.py` runs one input through both).
"""

from __future__ import annotations

import pytest

from payments_async import (
    ApiError,
    AuthenticationError,
    OutcomeUnknownError,
    PaymentsError,
    RateLimitedError,
    ServerError,
    TransportError,
    ValidationError,
)
from payments_async.bulk import RowOutcome, RunTotals, Stage, Verdict
from payments_async.bulk._rows import (
    after_failure,
    after_wait_failure,
    outcome_of,
    stored_outcome,
)

POST = "/payments/camt056/v08"
TOKEN = "/oauth/token"

REFUSED_400 = ApiError("duplicate assignment", status=400, method="POST", path=POST)
SERVER_503 = ServerError("busy", status=503, method="POST", path=POST)
CONNECTION_REFUSED = TransportError("refused", request_sent=False, method="POST", path=POST)
DROPPED = TransportError("reset", request_sent=True, method="POST", path=POST)
TOKEN_DOWN = ServerError("down", status=503, method="POST", path=TOKEN)
TOKEN_REFUSED = AuthenticationError("invalid_client", status=401, method="POST", path=TOKEN)
RATE_LIMITED = RateLimitedError("slow down", status=429, method="POST", path=POST)
UNKNOWN_POST = OutcomeUnknownError("no answer", message_id="BC-1", method="POST", path=POST)
BAD_BODY = ValidationError.single("$.assgnmt.id", "too long")
# The call's time ran out before it tried the service (a burst, or the process paused).
QUEUED = TransportError(
    "timed out waiting for a free connection",
    request_sent=False,
    queued=True,
    method="POST",
    path=POST,
)


@pytest.mark.parametrize(
    ("stage", "exc", "expected"),
    [
        # Never left, and no earlier attempt: the service does not have it.
        (Stage.PLANNED, CONNECTION_REFUSED, (Stage.PLANNED, None, False, True, True)),
        (Stage.PLANNED, TOKEN_DOWN, (Stage.PLANNED, None, False, True, True)),
        (Stage.PLANNED, TOKEN_REFUSED, (Stage.PLANNED, None, False, True, True)),
        # Never left for want of a free connection: planned again, tried again in this
        # run, and it says nothing about the service.
        (Stage.PLANNED, QUEUED, (Stage.PLANNED, None, False, True, False)),
        (Stage.SENT, QUEUED, (Stage.SENT, None, True, True, False)),
        # Its own message refused before any I/O: it can never be sent.
        (Stage.PLANNED, BAD_BODY, (Stage.FINAL, RowOutcome.NOT_SENT, False, False, False)),
        # The same message, but an earlier attempt sent it: nobody can tell.
        (Stage.SENT, BAD_BODY, (Stage.FINAL, RowOutcome.UNKNOWN, False, False, False)),
        # Never left this time, but an earlier attempt may have reached the service.
        (Stage.SENT, CONNECTION_REFUSED, (Stage.SENT, None, True, True, True)),
        # The service refused it for good, whatever came before.
        (Stage.PLANNED, REFUSED_400, (Stage.FINAL, RowOutcome.REFUSED, True, False, False)),
        (Stage.SENT, REFUSED_400, (Stage.FINAL, RowOutcome.REFUSED, True, False, False)),
        # May be stored, or a rerun may well succeed: stays sent, tried again.
        (Stage.PLANNED, SERVER_503, (Stage.SENT, None, True, True, False)),
        (Stage.PLANNED, DROPPED, (Stage.SENT, None, True, True, False)),
        (Stage.PLANNED, RATE_LIMITED, (Stage.SENT, None, True, True, False)),
        (Stage.PLANNED, UNKNOWN_POST, (Stage.SENT, None, True, True, False)),
    ],
)
def test_a_failed_attempt_moves_the_row_as_the_table_says(
    stage: Stage, exc: PaymentsError, expected: tuple[object, ...]
) -> None:
    change = after_failure(stage, exc)
    got = (change.stage, change.outcome, change.left, change.retry, change.unreachable)
    assert got == expected
    assert (change.error or change.reason_text or "").startswith(
        ("not sent again: ValidationError", type(exc).__name__)
    )


def test_a_change_that_ends_or_reverts_a_row_is_conditional_on_the_attempt() -> None:
    # Another execution of the same row (a worker taken for dead) may have moved it on:
    # only a row still as this attempt left it is changed.
    for stage, exc in [
        (Stage.PLANNED, CONNECTION_REFUSED),
        (Stage.PLANNED, BAD_BODY),
        (Stage.SENT, BAD_BODY),
        (Stage.SENT, REFUSED_400),
    ]:
        assert after_failure(stage, exc).conditional
    # Keeping the error on a row that stays sent overwrites nothing another run decided.
    assert not after_failure(Stage.SENT, SERVER_503).conditional


def test_a_failed_wait_keeps_the_row_acknowledged_with_the_error() -> None:
    change = after_wait_failure(Stage.ACKNOWLEDGED, SERVER_503)
    assert (change.stage, change.outcome, change.retry) == (Stage.ACKNOWLEDGED, None, True)
    assert change.error == "ServerError: POST /payments/camt056/v08 -> 503: busy"


@pytest.mark.parametrize(
    ("stage", "stored", "word"),
    [
        ("planned", None, "not_sent"),
        ("sent", None, "in_flight"),
        ("acknowledged", None, "pending"),
        ("invalid", None, "invalid"),
        ("final", "accepted", "accepted"),
        ("final", "rejected", "rejected"),
        ("final", "unknown", "unknown"),
        ("final", "refused", "refused"),
        ("final", "not_sent", "not_sent"),
        ("final", "aborted", "aborted"),
        ("final", None, "unknown"),
    ],
)
def test_every_stage_has_one_word_for_its_owner(stage: str, stored: str | None, word: str) -> None:
    assert outcome_of(stage, stored) == word


def test_an_unknown_stored_word_is_an_error_not_a_guess() -> None:
    with pytest.raises(ValueError, match="sideways"):
        stored_outcome("sideways")
    with pytest.raises(ValueError, match="failed"):
        stored_outcome("failed")


@pytest.mark.parametrize(
    ("counts", "verdict"),
    [
        ({"accepted": 3}, Verdict.DONE),
        ({"accepted": 3, "invalid": 1}, Verdict.DONE),
        ({}, Verdict.DONE),
        ({"accepted": 3, "rejected": 1}, Verdict.SAID_NO),
        ({"accepted": 3, "refused": 1}, Verdict.SAID_NO),
        ({"rejected": 1, "unknown": 1}, Verdict.UNSETTLED),
        ({"refused": 1, "not_sent": 1}, Verdict.UNSETTLED),
        ({"not_sent": 4}, Verdict.UNSETTLED),
        ({"accepted": 3, "aborted": 1}, Verdict.UNSETTLED),  # exit 3: rows never sent
        ({"accepted": 1, "in_flight": 1}, Verdict.UNSETTLED),
        ({"accepted": 1, "pending": 1}, Verdict.UNSETTLED),
    ],
)
def test_the_verdict_of_a_run_follows_docs_cli(counts: dict[str, int], verdict: Verdict) -> None:
    totals = RunTotals.of(counts)
    assert totals.verdict is verdict
    assert totals.rows == sum(counts.values())
    assert totals.complete is not any(k in counts for k in ("not_sent", "in_flight", "pending"))


def test_a_final_not_sent_row_is_not_left_for_a_rerun_but_is_not_done_either() -> None:
    totals = RunTotals()
    totals.add(RowOutcome.NOT_SENT, final=True)  # its message refused before sending
    totals.add(RowOutcome.ACCEPTED)
    assert (totals["not_sent"], totals.unsendable, totals.unfinished) == (1, 1, 0)
    assert totals.complete  # a rerun sends nothing more
    assert totals.verdict is Verdict.UNSETTLED  # yet it is not a success
    totals.add(RowOutcome.NOT_SENT)  # planned: a rerun sends it
    assert (totals["not_sent"], totals.unsendable, totals.unfinished) == (2, 1, 1)
    assert not totals.complete


def test_totals_count_only_the_rejections_that_need_a_return() -> None:
    totals = RunTotals()
    totals.add(RowOutcome.REJECTED, return_request_needed=True)  # e.g. CUST, LEGL
    totals.add(RowOutcome.REJECTED, return_request_needed=False)  # e.g. NOOR, ARDT
    totals.add(RowOutcome.ACCEPTED, return_request_needed=True)  # not a rejection
    assert (totals["rejected"], totals.return_requests, totals["accepted"]) == (2, 1, 1)
    assert list(totals.as_dict()) == [str(o) for o in RowOutcome]
    assert totals.get("not an outcome") == 0
