"""The bulk journal: the plan before anything is sent, every change committed when awaited."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from payments_async.bulk import (
    JournalError,
    MemoryJournal,
    PlannedRow,
    SqliteJournal,
    journal_counts,
)
from payments_async.bulk._input import read_input
from payments_async.bulk._plan import plan_rows
from payments_async.iso20022 import decode_camt056, encode

HEADER = (
    "original_end_to_end_id,amount,creditor_agent_bic,creditor_iban,reason,assigner_bic,"
    "assignee_bic,assignment_id"
)


def _rows(n: int) -> list[PlannedRow]:
    return [PlannedRow(i, f"E2E-{i}", f"BC-X-{i}", f"CX-X-{i}", b"{}") for i in range(2, n + 2)]


def _states(path: Path) -> dict[int, str]:
    """Read the file through a second connection, as a resumed process would."""
    db = sqlite3.connect(path)
    try:
        return dict(db.execute("SELECT line, state FROM rows").fetchall())
    finally:
        db.close()


def test_plan_is_committed_in_one_transaction_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    j = SqliteJournal.open(path, input_sha256="a" * 64, new_run_id="RUN1")
    assert not j.is_planned()
    j.plan([*_rows(3), PlannedRow(5, None, None, None, None, error="amount: bad")])
    assert _states(path) == {2: "planned", 3: "planned", 4: "planned", 5: "invalid"}
    j.close()
    again = SqliteJournal.open(path, input_sha256="a" * 64, new_run_id="OTHER")
    assert again.is_planned()
    assert again.run_id == "RUN1"  # the recorded run id wins: same ids on resume
    rows = again.rows()
    assert [r.assignment_id for r in rows[:3]] == ["BC-X-2", "BC-X-3", "BC-X-4"]
    assert rows[3].error == "amount: bad"
    assert rows[3].is_done
    # WAL mode: while the journal is open its log sits beside the file ...
    assert (tmp_path / "j.sqlite-wal").exists()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()
    again.close()
    # ... and closing the last connection checkpoints the log into the file and removes it.
    assert not (tmp_path / "j.sqlite-wal").exists()


async def test_a_run_of_another_input_sets_aside_only_a_finished_run_or_with_new_run(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.sqlite"
    j = SqliteJournal.open(path, input_sha256="a" * 64, new_run_id="R1")
    j.plan(_rows(2))
    j.close()
    other = SqliteJournal.open(path, input_sha256="b" * 64, new_run_id="R2")
    with pytest.raises(JournalError, match="unfinished run of a different input file"):
        other.plan(_rows(3))
    other.close()
    kept = SqliteJournal.open(path, input_sha256="a" * 64, new_run_id="X")
    assert (kept.run_id, kept.is_planned(), len(kept.rows())) == ("R1", True, 2)  # untouched
    for line in (2, 3):  # the run ends: its rows final
        await kept.mark_error(line, "refused", final=True)
    kept.close()
    after = SqliteJournal.open(path, input_sha256="b" * 64, new_run_id="R2")
    after.plan(_rows(3))  # a finished run is set aside without --new-run
    assert (after.run_id, len(after.rows())) == ("R2", 3)
    after.close()
    forced = SqliteJournal.open(path, input_sha256="c" * 64, new_run_id="R3", new_run=True)
    forced.plan(_rows(1))  # R2's rows are all planned, unfinished: set aside on request
    assert (forced.run_id, [r.line for r in forced.rows()]) == ("R3", [2])
    forced.close()


def test_a_file_that_is_not_a_journal_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute("INSERT INTO meta VALUES ('schema', '99')")
    db.commit()
    db.close()
    with pytest.raises(JournalError, match="not a bulk journal"):
        SqliteJournal.open(path, input_sha256="a" * 64, new_run_id="R")


async def test_each_change_is_in_the_file_when_its_await_returns(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    j = SqliteJournal.open(path, input_sha256="a" * 64, new_run_id="R")
    j.plan(_rows(2))
    await j.mark_sent(2)
    assert _states(path)[2] == "sent"
    await j.mark_acknowledged(2, "cxl-1", created=True)
    assert _states(path)[2] == "acknowledged"
    await j.mark_final(
        2,
        outcome="rejected",
        status="RJTC",
        reason_codes=["ARDT"],
        reason_text="already processed",
        return_request_needed=True,
    )
    await j.mark_error(3, "ServerError: 503", final=False)
    j.close()
    reopened = SqliteJournal.open(path, input_sha256="a" * 64, new_run_id="R")
    row2, row3 = reopened.rows()
    assert (row2.state, row2.payments_service_id, row2.created, row2.attempts) == (
        "final",
        "cxl-1",
        True,
        1,
    )
    assert (row2.outcome, row2.reason_codes, row2.return_request_needed) == (
        "rejected",
        ("ARDT",),
        True,
    )
    assert (row3.state, row3.error) == ("planned", "ServerError: 503")
    assert journal_counts(path) == {"final": 1, "planned": 1}
    reopened.close()


async def test_changes_made_together_share_one_commit(tmp_path: Path) -> None:
    j = SqliteJournal.open(tmp_path / "j.sqlite", input_sha256="a" * 64, new_run_id="R")
    j.plan(_rows(200))
    before = j.commits
    await asyncio.gather(*(j.mark_sent(line) for line in range(2, 202)))
    assert j.commits == before + 1  # 200 changes, one transaction, all durable on return
    assert set(_states(j.path).values()) == {"sent"}
    j.close()


async def test_a_failed_write_fails_the_awaiting_step(tmp_path: Path) -> None:
    j = SqliteJournal.open(tmp_path / "j.sqlite", input_sha256="a" * 64, new_run_id="R")
    j.plan(_rows(1))
    assert len(j.rows()) == 1  # the runner reads the plan back before it sends
    j._db.execute("DROP TABLE rows")  # simulate a broken file
    with pytest.raises(JournalError, match="cannot write journal"):
        await j.mark_sent(2)
    j.close()


def test_an_unreadable_plan_is_a_journal_error(tmp_path: Path) -> None:
    j = SqliteJournal.open(tmp_path / "j.sqlite", input_sha256="a" * 64, new_run_id="R")
    j.plan(_rows(1))
    j._db.execute("DROP TABLE rows")  # simulate a broken file
    with pytest.raises(JournalError, match="cannot read journal"):
        j.rows()
    j.close()


def test_plan_streams_a_generator_and_a_failing_one_leaves_no_plan(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    j = SqliteJournal.open(path, input_sha256="a" * 64, new_run_id="R")

    def failing() -> Iterator[PlannedRow]:
        yield from _rows(3)
        raise JournalError("the input changed")

    with pytest.raises(JournalError, match="the input changed"):
        j.plan(failing())
    assert not j.is_planned()
    assert _states(path) == {}  # rolled back: nothing half-planned
    j.plan(iter(_rows(4)))
    assert j.is_planned()
    assert [r.line for r in j.rows()] == [2, 3, 4, 5]
    j.close()


async def test_close_writes_what_is_still_queued(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    j = SqliteJournal.open(path, input_sha256="a" * 64, new_run_id="R")
    j.plan(_rows(1))
    task = asyncio.ensure_future(j.mark_acknowledged(2, "cxl-9", created=False))
    await asyncio.sleep(0)  # queued, flush scheduled but not yet run
    j.close()
    await task
    assert _states(path)[2] == "acknowledged"


async def test_memory_journal_keeps_the_same_states() -> None:
    j = MemoryJournal("R")
    j.plan(_rows(1))
    await j.mark_sent(2)
    await j.mark_acknowledged(2, "cxl-1", created=False)
    await j.mark_error(2, "refused", final=True)
    (row,) = j.rows()
    assert (row.state, row.outcome, row.error, row.attempts) == ("final", "refused", "refused", 1)
    assert j.path is None


def test_plan_fixes_ids_and_bodies_that_resend_byte_for_byte(tmp_path: Path) -> None:
    p = tmp_path / "in.csv"
    p.write_text(
        HEADER
        + "\nE2E-1,12.50,COBADEFFXXX,DE89370400440532013000,DUPL,BNPAFRPPXXX,COBADEFFXXX,"
        + "\nE2E-2,7,COBADEFFXXX,DE89370400440532013000,CUST,BNPAFRPPXXX,COBADEFFXXX,MY-ID-2"
        + "\nE2E-3,oops,COBADEFFXXX,DE89370400440532013000,CUST,BNPAFRPPXXX,COBADEFFXXX,\n",
        encoding="utf-8",
    )
    planned = plan_rows(read_input(p), "0123456789AB")
    assert [r.assignment_id for r in planned] == ["BC-0123456789AB-2", "MY-ID-2", None]
    assert [r.cancellation_id for r in planned[:2]] == ["CX-0123456789AB-2", "CX-0123456789AB-3"]
    assert planned[2].error is not None
    assert "amount" in planned[2].error
    for row in planned[:2]:
        assert row.body is not None
        msg = decode_camt056(row.body)
        assert msg.message_id == row.assignment_id
        assert encode(msg) == row.body  # a resend after a crash is the very same message
        assert len(row.assignment_id or "") <= 35


def test_the_recall_ledger_refuses_a_second_recall_until_the_first_did_not_count(
    tmp_path: Path,
) -> None:
    from payments_async import ApiError, TransportError
    from payments_async.bulk import AlreadyRecalledError, open_recall_ledger

    path = tmp_path / "j.sqlite"
    with open_recall_ledger(path) as ledger:
        ledger.claim(["E2E-1"], "M-1")
        ledger.claim(["E2E-1"], "M-1")  # the same message again: its resend is allowed
        with pytest.raises(AlreadyRecalledError, match=r"camt.056 M-1 \(the cancel command\)"):
            ledger.claim(["E2E-2", "E2E-1"], "M-2")
        assert ledger.recorded("E2E-2") is None  # a refused claim records nothing
        ledger.failed("M-1", TransportError("refused", request_sent=False))  # never left
        ledger.claim(["E2E-1"], "M-2")
        refused = ApiError("bad", method="POST", path="/cancellations", status=400)
        ledger.failed("M-2", refused)  # the service refused it for good
        ledger.claim(["E2E-1"], "M-3")
        ledger.failed("M-3", TransportError("reset", request_sent=True))  # it may have it
        with pytest.raises(AlreadyRecalledError) as caught:
            ledger.claim(["E2E-1"], "M-4")
        assert caught.value.first.message_id == "M-3"
        ledger.settle("M-3", "accepted")
        assert str(ledger.recorded("E2E-1")).endswith("(the cancel command), accepted")
    # A bulk run's journal in the same file sees the recall.
    journal = SqliteJournal.open(path, input_sha256="a" * 64, new_run_id="R")
    assert journal.recorded_cancellations() == {
        "E2E-1": "camt.056 M-3 (the cancel command), accepted"
    }
    journal.close()
