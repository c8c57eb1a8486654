"""Both journal stores behind one interface: SQLite (default) and PostgreSQL (real server)."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from payments_async import Credentials, PaymentsClient
from payments_async.bulk import (
    Journal,
    JournalBusyError,
    JournalError,
    JournalUnavailableError,
    MemoryJournal,
    PlannedRow,
    RowState,
    RunTotals,
    SqliteJournal,
    bulk_cancel,
)
from payments_async.bulk._results import UNFINISHED, _counted, row_outcome
from payments_async.bulk._stores import _postgres as pg
from payments_async.bulk._stores import is_postgres_url, open_journal
from payments_async.bulk._stores._postgres import PostgresJournal
from payments_async.sandbox import SandboxConfig
from tests.support.cli import bulk_rows, read_results, threaded_sandbox, write_csv


def _rows(n: int) -> list[PlannedRow]:
    return [PlannedRow(i, f"E2E-{i}", f"BC-X-{i}", f"CX-X-{i}", b"{}") for i in range(2, n + 2)]


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str | Path]:
    if request.param == "sqlite":
        yield tmp_path / "j.sqlite"
    else:
        yield request.getfixturevalue("pg_dsn")


def _db_states(target: str | Path) -> dict[int, tuple[str, int]]:
    """Read the store through a second connection, as a resumed process would."""
    if is_postgres_url(target):
        with psycopg.connect(str(target)) as conn:
            rows = conn.execute("SELECT line, state, attempts FROM payments_bulk_rows").fetchall()
    else:
        import sqlite3

        db = sqlite3.connect(target)
        rows = db.execute("SELECT line, state, attempts FROM rows").fetchall()
        db.close()
    return {line: (state, attempts) for line, state, attempts in rows}


def test_is_postgres_url() -> None:
    assert is_postgres_url("postgresql://u@h/db")
    assert is_postgres_url("postgres://h/db")
    assert not is_postgres_url(Path("postgresql://looks-like-a-url"))  # a Path is a file
    assert not is_postgres_url("journal.sqlite")


async def test_plan_changes_and_resume_behave_alike(target: str | Path) -> None:
    j: Journal = open_journal(target, input_sha256="a" * 64, new_run_id="RUN1")
    assert not j.is_planned()
    j.plan([*_rows(3), PlannedRow(5, None, None, None, None, error="amount: bad")])
    assert _db_states(target) == {
        2: ("planned", 0),
        3: ("planned", 0),
        4: ("planned", 0),
        5: ("invalid", 0),
    }
    await j.mark_sent(2)
    await j.mark_acknowledged(2, "PSID-2", created=True)
    await asyncio.gather(
        j.mark_sent(3),
        j.mark_final(
            2,
            outcome="rejected",
            status="RJCR",
            reason_codes=["NOOR"],
            reason_text="no such payment",
            return_request_needed=True,
        ),
    )
    await j.mark_error(4, "ServerError: 503", final=False)
    # every awaited change is in the store, as a second connection sees it
    assert _db_states(target) == {
        2: ("final", 1),
        3: ("sent", 1),
        4: ("planned", 0),
        5: ("invalid", 0),
    }
    j.close()

    again = open_journal(target, input_sha256="a" * 64, new_run_id="OTHER")
    assert again.is_planned()
    assert again.run_id == "RUN1"  # the recorded run id wins: same ids on resume
    rows = {r.line: r for r in again.rows()}
    assert rows[2].payments_service_id == "PSID-2"
    assert rows[2].created is True
    assert rows[2].outcome == "rejected"
    assert rows[2].reason_codes == ("NOOR",)
    assert rows[2].return_request_needed
    assert rows[3].attempts == 1
    assert rows[4].error == "ServerError: 503"
    assert rows[5].is_done
    assert rows[2].assignment_id == "BC-X-2"
    with pytest.raises(JournalError, match="already holds a plan"):
        again.plan(_rows(1))
    again.close()


def _old_totals(rows: Sequence[RowState]) -> dict[str, int]:
    """The totals as bulk_cancel counted them before, from every row in memory."""
    words = ("accepted", "rejected", "unknown", "refused", "aborted", "invalid", *UNFINISHED)
    out = dict.fromkeys(words, 0)
    for r in rows:
        name = row_outcome(r)
        out[name] = out.get(name, 0) + 1
    return out


def _journal(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Journal:
    """A new journal of run RUN1 in the store ``kind`` names."""
    if kind == "memory":
        return MemoryJournal("RUN1")
    target = tmp_path / "j.sqlite" if kind == "sqlite" else request.getfixturevalue("pg_dsn")
    return open_journal(target, input_sha256="a" * 64, new_run_id="RUN1")


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgresql"])
async def test_streamed_reads_and_totals_match_every_row_in_memory(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    j = _journal(kind, request, tmp_path)
    j.plan([*_rows(9), PlannedRow(11, None, None, None, None, error="amount: bad")])
    for line in range(3, 11):
        await j.mark_sent(line)
    for line in (4, 5, 6):
        await j.mark_acknowledged(line, f"PSID-{line}", created=True)
    for line, outcome in ((5, "accepted"), (6, "rejected")):
        await j.mark_final(
            line,
            outcome=outcome,
            status="RJCR",
            reason_codes=["NOOR"],
            reason_text=None,
            return_request_needed=False,
        )
    await j.mark_error(7, "ValidationError: refused", final=True)
    await j.mark_not_sent(8, "ValidationError: bad body", final=True)
    await j.mark_not_sent(9, "TransportError: refused", final=False)
    await j.mark_error(10, "ServerError: 503", final=False)
    every = j.rows()
    assert {r.state for r in every} == {"planned", "sent", "acknowledged", "final", "invalid"}
    assert list(j.iter_rows()) == every
    assert list(j.iter_rows(unfinished=True)) == [r for r in every if not r.is_done]
    assert j.state_counts() == Counter(r.state for r in every)
    totals = RunTotals()
    assert list(_counted(j.iter_rows(), totals)) == every
    assert totals.as_dict() == _old_totals(every)
    assert {k: n for k, n in totals.as_dict().items() if n} == {
        "not_sent": 3,  # 2 never sent, 9 back to planned, 8 final as not sent
        "in_flight": 2,  # 3, and 10 whose answer was an error
        "pending": 1,  # 4
        "accepted": 1,
        "rejected": 1,
        "refused": 1,  # 7: final as refused
        "invalid": 1,
    }
    j.close()


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgresql"])
async def test_a_change_for_an_attempt_is_made_only_while_the_row_is_as_it_left_it(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    # Two executions of one row (a worker wrongly taken for dead): the older attempt's
    # late "not sent" / "refused" must not undo what the newer one recorded.
    j = _journal(kind, request, tmp_path)
    j.plan(_rows(3))
    await j.mark_sent(2)  # attempt 1
    await j.mark_sent(2)  # attempt 2, by another execution
    await j.mark_not_sent(2, "late: attempt 1", final=False, if_attempts=1)
    await j.mark_error(2, "late: attempt 1", final=True, if_attempts=1)
    await j.mark_final(
        2,
        outcome="unknown",
        status=None,
        reason_codes=(),
        reason_text="late",
        return_request_needed=False,
        if_attempts=1,
    )
    row = j.rows()[0]
    assert (row.state, row.outcome, row.error, row.attempts) == ("sent", None, None, 2)
    await j.mark_error(2, "refused by attempt 2", final=True, if_attempts=2)
    await j.mark_sent(3)
    await j.mark_acknowledged(3, "PSID-3", created=True)
    await j.mark_not_sent(3, "late: attempt 1", final=False, if_attempts=1)  # not sent: no
    row2, row3 = j.rows()[:2]
    assert (row2.state, row2.outcome, row2.error) == ("final", "refused", "refused by attempt 2")
    assert (row3.state, row3.payments_service_id) == ("acknowledged", "PSID-3")
    j.close()


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgresql"])
async def test_an_abort_ends_only_a_row_no_execution_has_sent(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    # Two executions of one row after an abort: one read it planned and is told the run
    # is aborted, the other had sent it meanwhile. The row is never called aborted then.
    j = _journal(kind, request, tmp_path)
    j.plan(_rows(3))
    await j.mark_sent(2)
    await j.mark_acknowledged(2, "PSID-2", created=True)
    await j.mark_aborted(2, "not sent (aborted by ann)")  # the stale execution
    await j.mark_aborted(3, "not sent (aborted by ann)")
    rows = {r.line: r for r in j.rows()}
    j.close()
    assert (rows[2].state, rows[2].outcome, rows[2].error) == ("acknowledged", None, None)
    assert (rows[3].state, rows[3].outcome) == ("final", "aborted")
    assert rows[3].error == "not sent (aborted by ann)"
    assert rows[3].final_at is not None


def test_postgres_journal_keeps_one_run_per_input(pg_dsn: str) -> None:
    a = PostgresJournal.open(pg_dsn, input_sha256="a" * 64, new_run_id="RUNA")
    b = PostgresJournal.open(pg_dsn, input_sha256="b" * 64, new_run_id="RUNB")
    a.plan(_rows(2))
    b.plan(_rows(5))
    assert (len(a.rows()), len(b.rows())) == (2, 5)
    a.close()
    b.close()
    again = PostgresJournal.open(pg_dsn, input_sha256="b" * 64, new_run_id="NEW")
    assert again.run_id == "RUNB"
    assert len(again.rows()) == 5
    again.close()


def test_two_processes_planning_one_input_write_one_plan(pg_dsn: str) -> None:
    """Both open the run before either plans (as two ``bulk-cancel --queue`` do); the
    second to plan finds it planned."""
    conns = [pg.connect(pg_dsn) for _ in range(2)]
    pg.ensure_schema(conns[0])
    runs = [
        pg.open_run(c, input_sha256="c" * 64, new_run_id=f"RUN{i}", input_name=None)[0]
        for i, c in enumerate(conns)
    ]
    assert runs[0] == runs[1]  # the input's run, whoever came first
    start = threading.Barrier(2)
    outcomes: list[str] = []

    def plan(conn: psycopg.Connection[object]) -> None:
        start.wait()
        outcomes.append("planned" if pg.plan_run(conn, runs[0], _rows(500)) else "refused")

    threads = [threading.Thread(target=plan, args=(c,)) for c in conns]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(outcomes) == ["planned", "refused"]
    assert len(_db_states(pg_dsn)) == 500
    for c in conns:
        c.close()


def test_a_second_journal_of_a_run_is_refused_naming_the_holder(pg_dsn: str) -> None:
    first = PostgresJournal.open(pg_dsn, input_sha256="d" * 64, new_run_id="RUND")
    with pytest.raises(JournalBusyError) as caught:
        PostgresJournal.open(pg_dsn, input_sha256="d" * 64, new_run_id="OTHER")
    assert f"pid {os.getpid()} on {socket.gethostname()}" in caught.value.holder
    assert "run RUND is in use by another run" in str(caught.value)
    other = PostgresJournal.open(pg_dsn, input_sha256="e" * 64, new_run_id="RUNE")
    other.close()  # another input's run is not locked by it
    first.close()
    again = PostgresJournal.open(pg_dsn, input_sha256="d" * 64, new_run_id="OTHER")
    assert again.run_id == "RUND"  # free once the holder closed it
    again.close()


def test_a_second_sqlite_journal_is_refused_until_the_first_closes(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    first = SqliteJournal.open(path, input_sha256="a" * 64, new_run_id="RUN1")
    with pytest.raises(JournalBusyError) as caught:
        SqliteJournal.open(path, input_sha256="a" * 64, new_run_id="RUN2")
    assert f"pid {os.getpid()} on {socket.gethostname()}, since " in caught.value.holder
    assert str(path) in str(caught.value)
    first.close()
    assert not (tmp_path / "j.sqlite.lock").exists()  # a finished run leaves no lock file
    again = SqliteJournal.open(path, input_sha256="a" * 64, new_run_id="RUN2")
    assert again.run_id == "RUN1"
    again.close()


def test_an_address_is_shown_without_any_password() -> None:
    from payments_async import redact_url

    shown = redact_url("postgresql://u:Pw-1@h/db?sslpassword=Pw-2&password=Pw-3&sslmode=require")
    assert shown == "postgresql://***@h/db?sslpassword=***&password=***&sslmode=require"
    assert redact_url("host=h user=u password=Pw-4 dbname=db") == (
        "host=h user=u password=*** dbname=db"
    )


def test_unreachable_postgres_is_a_clear_error_without_the_password(tmp_path: Path) -> None:
    dsn = f"postgresql://bulk:s3cret-pw@/db?host={tmp_path}&connect_timeout=2"
    with pytest.raises(JournalError, match="cannot connect to PostgreSQL") as info:
        open_journal(dsn, input_sha256="a" * 64, new_run_id="R")
    assert "s3cret-pw" not in str(info.value)


def test_the_cli_names_a_database_journal_without_its_password(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from click.testing import CliRunner

    from payments_async.cli import cli

    monkeypatch.chdir(tmp_path)
    # The test server trusts local connections: the password is carried, never checked.
    dsn = pg_dsn.replace("://postgres:@", "://postgres:Not-Shown-Pw@", 1)
    assert "Not-Shown-Pw" in dsn
    with threaded_sandbox(SandboxConfig(processing_delay=3600, settlement_delay=0)) as sb:
        src = write_csv(tmp_path / "pgcli.csv", bulk_rows(3, prefix="E2E-PGCLI"))
        argv = ["--json", "--sandbox", "--base-url", sb.url, "bulk-cancel", str(src)]
        result = CliRunner().invoke(cli, [*argv, "--journal", dsn])
    assert result.exit_code == 1, result.output  # all final: rejected (no such payments)
    summary = json.loads(result.stdout)
    assert summary["journal"].startswith("PostgreSQL postgresql://***@")
    assert "Not-Shown-Pw" not in result.output


async def test_single_process_runner_with_the_postgres_journal(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the results file goes to the working directory
    config = SandboxConfig(processing_delay=3600, settlement_delay=0)
    with threaded_sandbox(config) as sb:
        src = write_csv(tmp_path / "pg.csv", bulk_rows(60, prefix="E2E-PGJ"))
        async with PaymentsClient(Credentials.sandbox(), base_url=sb.url) as client:
            out = tmp_path / "pg.results.csv"
            report = await bulk_cancel(
                client, src, results_path=out, journal_path=pg_dsn, concurrency=8
            )
            assert report.journal_path is None  # nothing on disk
            assert report.totals["rejected"] == 60  # no such payments: NOOR
            # read from the database after the journal was closed
            assert report.row_count == len(report.rows) == 60
            assert {r.outcome for r in report.rows} == {"rejected"}
            assert not (tmp_path / "pg.results.journal.sqlite").exists()
            again = await bulk_cancel(
                client, src, results_path=out, journal_path=pg_dsn, concurrency=8
            )
        assert again.resumed
        assert again.already_final == 60
        assert again.counts.submitted == 0  # nothing resent: the journal said final
        assert sb.stats()["cancellations_stored"] == 60
        results = read_results(out)
        assert [r["outcome"] for r in results] == ["rejected"] * 60
        with psycopg.connect(pg_dsn) as conn:
            stored = conn.execute(
                "SELECT COUNT(*) FROM payments_bulk_rows WHERE state = 'final'"
            ).fetchone()
        assert stored == (60,)


def test_a_server_stopping_or_starting_is_unavailable_not_a_refusal() -> None:
    dsn = "postgresql://u:Pw@h/db"
    for said in ("the database system is shutting down", "the database system is starting up"):
        err = pg.connect_error(dsn, psycopg.OperationalError(f'socket "/s" failed: FATAL:  {said}'))
        assert isinstance(err, JournalUnavailableError), said  # a rerun once it is back works
    refused = pg.connect_error(
        dsn, psycopg.OperationalError('FATAL:  password authentication failed for user "u"')
    )
    assert not isinstance(refused, JournalUnavailableError)
    assert "Pw" not in str(refused)


class _Clock:
    """A clock a test moves: each reading is one minute after the last."""

    def __init__(self) -> None:
        self.now = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(minutes=1)
        return self.now


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgresql"])
async def test_every_store_records_when_a_row_was_sent_acknowledged_and_final(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    j = _journal(kind, request, tmp_path)
    j.clock = _Clock()
    j.plan(_rows(3))
    await j.mark_sent(2)  # 09:01
    await j.mark_acknowledged(2, "PSID-2", created=True)  # 09:02
    await j.mark_final(  # 09:03
        2,
        outcome="accepted",
        status="CNCL",
        reason_codes=[],
        reason_text=None,
        return_request_needed=False,
    )
    await j.mark_sent(3)  # 09:04
    await j.mark_error(3, "ApiError: 422", final=True, if_attempts=1)  # 09:05
    rows = {r.line: r for r in j.rows()}
    j.close()
    if kind != "memory":  # read back by a new journal, as bulk-status and a resume read it
        again = _journal(kind, request, tmp_path)
        rows = {r.line: r for r in again.rows()}
        again.close()
    at = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    times = {line: (r.sent_at, r.acknowledged_at, r.final_at) for line, r in rows.items()}
    assert times == {
        2: (at + timedelta(minutes=1), at + timedelta(minutes=2), at + timedelta(minutes=3)),
        3: (at + timedelta(minutes=4), None, at + timedelta(minutes=5)),
        4: (None, None, None),
    }
    assert all(t is None or t.tzinfo is UTC for ts in times.values() for t in ts)


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgresql"])
async def test_every_store_counts_a_rows_chases_once_per_compare_and_set(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    j = _journal(kind, request, tmp_path)
    j.clock = _Clock()
    j.plan(_rows(2))
    await j.mark_sent(2)  # 09:01
    await j.mark_acknowledged(2, "PSID-2", created=True)  # 09:02
    await j.mark_chased(2, 0)  # 09:03: the first chase
    await j.mark_chased(2, 0)  # a second pass that read the row before: nothing changes
    await j.mark_chased(3, 0)  # never acknowledged: nothing to chase, nothing changes
    rows = {r.line: r for r in j.rows()}
    j.close()
    if kind != "memory":
        again = _journal(kind, request, tmp_path)
        rows = {r.line: r for r in again.rows()}
        again.close()
    at = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    assert (rows[2].chases, rows[2].chased_at) == (1, at + timedelta(minutes=3))
    assert (rows[3].chases, rows[3].chased_at) == (0, None)


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgresql"])
def test_every_store_keeps_each_rows_recall_deadline(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    j = _journal(kind, request, tmp_path)
    deadline = date(2026, 3, 13)
    j.plan(
        [
            PlannedRow(2, "E2E-2", "A-2", "C-2", b"{}", recall_deadline=deadline),
            PlannedRow(3, "E2E-3", "A-3", "C-3", b"{}"),
            PlannedRow(4, None, None, None, None, error="invalid"),
        ]
    )
    rows = j.rows()
    j.close()
    if kind != "memory":  # read back by a new journal, as bulk-status and a resume read it
        again = _journal(kind, request, tmp_path)
        rows = again.rows()
        again.close()
    assert [(r.line, r.recall_deadline) for r in rows] == [(2, deadline), (3, None), (4, None)]


def test_a_process_opens_a_journal_database_made_before_while_a_run_writes_it(
    pg_dsn: str,
) -> None:
    """Opening an existing PostgreSQL journal takes no table lock: its schema's CREATE ...
    IF NOT EXISTS would take a SHARE lock on each table and wait for every worker writing
    rows (a starting worker or ``bulk-status`` stuck behind a run)."""
    import threading

    import psycopg

    PostgresJournal.open(pg_dsn, input_sha256="a" * 64, new_run_id="RUNA").close()
    with psycopg.connect(pg_dsn) as writer:  # a transaction holding the rows, not committed
        writer.execute("UPDATE payments_bulk_rows SET attempts = attempts")
        writer.execute("UPDATE payments_bulk_runs SET rows_total = rows_total")
        opened = threading.Event()

        def open_again() -> None:
            PostgresJournal.open(pg_dsn, input_sha256="b" * 64, new_run_id="RUNB").close()
            opened.set()

        thread = threading.Thread(target=open_again, daemon=True)
        thread.start()
        # A lock wait would last as long as the writer's transaction: here, for ever.
        assert opened.wait(30), "opening waited for the run's transaction"
        writer.rollback()
    thread.join()
