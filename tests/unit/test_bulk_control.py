"""A bulk run's control without a service: the history kept beside a SQLite journal, the
state it makes, what is refused, and the gate a sending process asks."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from payments_async.bulk import RowOutcome, Stage, run_report
from payments_async.bulk._control import (
    Action,
    ControlEvent,
    RunAbortedError,
    RunFinishedError,
    RunGate,
    RunNotFoundError,
    RunState,
    aborted_change,
    journal_gate,
    read_control,
    record_action,
)
from tests.factories import accept_row, planned_journal


def _clock(*times: str) -> list[datetime]:
    return [datetime.fromisoformat(t).replace(tzinfo=UTC) for t in times]


def test_pause_resume_abort_are_kept_with_who_when_why_and_make_the_state(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.sqlite"
    planned_journal(path).close()
    at = iter(_clock("2026-11-28T06:00:00", "2026-11-28T06:01:00", "2026-11-28T06:02:00"))
    paused = record_action(path, Action.PAUSED, by="ann", reason="bank threshold", now=at.__next__)
    assert paused.state is RunState.PAUSED
    assert paused.describe() == "paused since 2026-11-28 06:00:00 UTC by ann: bank threshold"
    assert record_action(path, Action.RESUMED, by="bob", now=at.__next__).state is RunState.RUNNING
    aborted = record_action(path, Action.ABORTED, by="ann", now=at.__next__)
    assert aborted.state is RunState.ABORTED
    assert [(e.action, e.by) for e in aborted.history] == [
        (Action.PAUSED, "ann"),
        (Action.RESUMED, "bob"),
        (Action.ABORTED, "ann"),
    ]
    shown = read_control(path).as_dict()
    assert shown["state"] == "aborted"
    assert shown["since"] == "2026-11-28T06:02:00+00:00"
    assert [e["action"] for e in shown["history"]] == ["paused", "resumed", "aborted"]


def test_a_repeated_action_records_nothing_and_an_aborted_run_stays_aborted(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.sqlite"
    planned_journal(path).close()
    assert record_action(path, Action.RESUMED, by="x").changed is False  # running already
    record_action(path, Action.PAUSED, by="x")
    again = record_action(path, Action.PAUSED, by="y")
    assert again.changed is False
    assert len(again.history) == 1
    record_action(path, Action.ABORTED, by="x")
    with pytest.raises(RunAbortedError, match="aborted since"):
        record_action(path, Action.RESUMED, by="x")
    assert record_action(path, Action.ABORTED, by="x").changed is False
    # a confirmation is kept whatever the state
    confirmed = record_action(path, Action.CONFIRMED, by="x", counts={"to_send": 3})
    assert confirmed.history[-1].counts == {"to_send": 3}
    assert confirmed.state is RunState.ABORTED


def test_no_journal_no_run_or_a_finished_run_is_refused_and_nothing_is_made(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "none.sqlite"
    with pytest.raises(RunNotFoundError):
        record_action(missing, Action.PAUSED)
    assert not missing.exists()
    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).close()
    with pytest.raises(RunNotFoundError, match="holds no bulk run"):
        record_action(empty, Action.PAUSED)
    path = tmp_path / "j.sqlite"
    j = planned_journal(path, rows=1)

    accept_row(j, 2)
    j.close()
    with pytest.raises(RunFinishedError, match="finished"):
        record_action(path, Action.ABORTED)
    assert read_control(path).history == ()


def test_the_gate_reads_once_per_interval_waits_while_paused_and_says_aborted() -> None:
    reads: list[ControlEvent | None] = []
    now = [0.0]
    at = datetime(2026, 11, 28, tzinfo=UTC)
    script = iter(
        [
            ControlEvent(Action.PAUSED, "ann", at),
            ControlEvent(Action.PAUSED, "ann", at),
            ControlEvent(Action.RESUMED, "ann", at),
            ControlEvent(Action.ABORTED, "bob", at, "wrong file"),
        ]
    )

    async def read() -> ControlEvent | None:
        event = next(script)
        reads.append(event)
        return event

    async def sleep(seconds: float) -> None:
        now[0] += seconds  # time driven: a wait is exactly its interval

    async def main() -> None:
        gate = RunGate(read, interval=1.0, clock=lambda: now[0], sleep=sleep)
        assert await gate.may_send() is True  # paused twice, then resumed
        assert len(reads) == 3
        now[0] += 0.5
        assert await gate.may_send() is True  # cached: no read within the interval
        assert len(reads) == 3
        now[0] += 0.5
        assert await gate.may_send() is False
        assert gate.aborted_by is not None
        assert gate.aborted_by.by == "bob"

    asyncio.run(main())


def test_a_stopping_run_is_not_held_by_a_pause() -> None:
    at = datetime(2026, 11, 28, tzinfo=UTC)

    async def read() -> ControlEvent | None:
        return ControlEvent(Action.PAUSED, "ann", at)

    async def main() -> bool:
        return await RunGate(read, interval=0.001).may_send(stopping=lambda: True)

    assert asyncio.run(main()) is True


def test_an_aborted_row_ends_aborted_saying_who_aborted() -> None:
    at = datetime(2026, 11, 28, 6, 30, tzinfo=UTC)
    change = aborted_change(ControlEvent(Action.ABORTED, "ann@h", at, "duplicate file"))
    assert change.stage is Stage.FINAL
    assert change.outcome is RowOutcome.ABORTED
    assert change.left is False
    assert change.error == (
        "not sent (aborted by ann@h at 2026-11-28 06:30:00 UTC: duplicate file)"
    )


def test_a_journal_gate_reads_what_another_connection_records(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    j = planned_journal(path)
    gate, close = journal_gate(path, j.run_id)

    async def main() -> None:
        gate.interval = 0.0
        assert await gate.current() is None  # never controlled: no table read
        record_action(path, Action.PAUSED, by="ann")
        event = await gate.current()
        assert event is not None
        assert event.action is Action.PAUSED
        record_action(path, Action.ABORTED, by="ann")
        assert await gate.may_send() is False

    try:
        asyncio.run(main())
    finally:
        close()
        j.close()


def test_the_report_shows_the_control_history_it_is_given(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    planned_journal(path).close()
    at = iter(_clock("2026-11-28T06:00:00", "2026-11-28T06:05:00"))
    record_action(path, Action.CONFIRMED, by="ann", counts={"to_send": 3}, now=at.__next__)
    record_action(path, Action.PAUSED, by="bob", reason="<wrong> reason", now=at.__next__)
    report = run_report([], "Bulk run: j")
    assert "No control event" not in report.to_html()
    assert "Not read" in report.to_html()
    report.control = read_control(path).as_dict()
    page = report.to_html()
    section = page[page.index("<h2 id='control'>") :]
    assert "Now: paused since 2026-11-28T06:05:00+00:00 by bob." in section
    assert "&lt;wrong&gt; reason" in section  # escaped
    assert section.index("confirmed") < section.index("paused</td>")
    assert "to_send 3" in section
    assert report.as_dict()["control"]["history"][1]["by"] == "bob"
