"""The bulk chase against the sandbox over HTTP: a row whose recall stays unanswered for
N banking days gets one pacs.028 (never a second camt.056), a pass killed between the
pacs.028 and its record never makes the service store two, and every store and view
shows the chases."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from payments_async import PaymentsClient, RetryPolicy, Timeout
from payments_async.bulk import ChasePolicy, bulk_cancel
from payments_async.bulk._chase import status_request_for
from payments_async.bulk._journal import RowWrites, micros
from payments_async.cli import cli
from payments_async.iso20022 import add_banking_days, target2_today
from payments_async.sandbox import SandboxConfig
from payments_async.testing import SandboxHandle, sandbox_server
from tests.factories import credit_transfer
from tests.support.cli import (
    ThreadedSandbox,
    bulk_rows,
    precreate_payments,
    read_results,
    threaded_sandbox,
    write_csv,
)
from tests.support.postgres import pg_dsn, postgres_server  # noqa: F401 (fixtures)

ROWS = 6
OLD = 3  # the first OLD rows' recalls were acknowledged two weeks ago
# The beneficiary bank never answers by itself: only a chase makes the outcome readable.
SILENT = SandboxConfig(processing_delay=3600, settlement_delay=3600)


@pytest.fixture
def sb() -> Iterator[ThreadedSandbox]:
    with threaded_sandbox(SILENT) as s:
        yield s


def run_cli(sb: ThreadedSandbox, *args: str) -> Result:
    pre = ["--sandbox", "--base-url", sb.url, "--json"]
    return CliRunner().invoke(cli, [*pre, *args], catch_exceptions=False)


def _age_sqlite(journal: Path, lines: range, days: int) -> None:
    """Drive time: the rows' recalls were acknowledged ``days`` calendar days ago."""
    at = micros(datetime.now(UTC) - timedelta(days=days))
    db = sqlite3.connect(journal)
    db.executemany("UPDATE rows SET acknowledged_at = ? WHERE line = ?", [(at, n) for n in lines])
    db.commit()
    db.close()


def test_a_rerun_chases_each_unanswered_recall_once_after_its_banking_days(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    rows = bulk_rows(ROWS, prefix="E2E-CHASE")
    precreate_payments(sb, [r["original_end_to_end_id"] for r in rows])
    src = write_csv(tmp_path / "recall.csv", rows)
    results = tmp_path / "recall.results.csv"
    journal = tmp_path / "recall.results.journal.sqlite"
    args = ("bulk-cancel", str(src), "--results", str(results), "--timeout", "0.2")
    first = run_cli(sb, *args, "--concurrency", "4")
    assert first.exit_code == 3, first.output  # every recall pending: nobody answered
    camt056 = sb.stats()["requests"]["camt056"]
    assert camt056 == ROWS

    # Acknowledged today: not due yet, nothing sent.
    early = run_cli(sb, *args, "--chase-after", "2")
    assert json.loads(early.stdout)["chase"]["due"] == 0
    assert sb.stats()["requests"].get("pacs028", 0) == 0

    # Two weeks later for the first rows (at least 8 banking days, whatever the date).
    _age_sqlite(journal, range(2, 2 + OLD), days=14)
    chased = run_cli(sb, *args, "--chase-after", "2", "--timeout", "5")
    summary = json.loads(chased.stdout)
    assert summary["chase"] == {
        "due": OLD,
        "chased": OLD,
        "settled": 0,
        "failed": 0,
        "error": None,
    }
    stats = sb.stats()
    assert stats["requests"]["pacs028"] == OLD
    assert (stats["status_requests_stored"], stats["recalls_chased"]) == (OLD, OLD)
    assert stats["requests"]["camt056"] == camt056  # no camt.056 sent again
    assert stats["cancellations_stored"] == ROWS
    # The chase made the answers readable: the run read them.
    assert summary["accepted"] == OLD
    by_line = {int(r["line"]): r for r in read_results(results)}
    for line, row in by_line.items():
        if line < 2 + OLD:
            assert (row["chases"], row["outcome"]) == ("1", "accepted")
            assert datetime.fromisoformat(row["chased_at"]).tzinfo is not None
        else:
            assert (row["chases"], row["chased_at"], row["outcome"]) == ("0", "", "pending")

    # Once per row: a chased row that is final is never chased again, the others are
    # not due; nothing more is sent.
    again = run_cli(sb, *args, "--chase-after", "2")
    assert json.loads(again.stdout)["chase"]["chased"] == 0
    assert sb.stats()["status_requests_stored"] == OLD

    status = run_cli(sb, "bulk-status", "--journal", str(journal))
    assert json.loads(status.stdout)["chased"] == {"rows": OLD, "chases": OLD}
    report = run_cli(sb, "bulk-report", "--results", str(results))
    assert json.loads(report.stdout)["chased"] == {"rows": OLD, "chases": OLD}
    page = tmp_path / "report.html"
    run_cli(sb, "bulk-report", "--results", str(results), "--output", str(page))
    assert f"{OLD} rows chased with a request for status update" in page.read_text()


def test_chase_options_are_checked_before_anything_is_sent(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    src = write_csv(tmp_path / "recall.csv", bulk_rows(1))
    zero = run_cli(sb, "bulk-cancel", str(src), "--chase-after", "0")
    assert zero.exit_code == 2
    assert "--chase-after" in zero.output
    alone = run_cli(sb, "bulk-cancel", str(src), "--chase-limit", "2")
    assert alone.exit_code == 2
    assert "--chase-limit goes with --chase-after" in alone.output
    status = run_cli(sb, "bulk-status", "--journal", str(tmp_path / "j"), "--chase-after", "1")
    assert status.exit_code == 2
    assert "--chase-after goes with --refresh" in status.output
    assert sb.stats()["requests"].get("camt056", 0) == 0


def test_refresh_chases_a_database_run_s_unanswered_recalls(
    sb: ThreadedSandbox,
    tmp_path: Path,
    pg_dsn: str,  # noqa: F811
) -> None:
    import psycopg

    rows = bulk_rows(ROWS, prefix="E2E-PGCHASE")
    precreate_payments(sb, [r["original_end_to_end_id"] for r in rows])
    src = write_csv(tmp_path / "recall.csv", rows)
    ran = run_cli(sb, "bulk-cancel", str(src), "--journal", pg_dsn, "--timeout", "0.2")
    assert ran.exit_code == 3, ran.output
    at = micros(datetime.now(UTC) - timedelta(days=14))
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(
            "UPDATE payments_bulk_rows SET acknowledged_at = %s WHERE line < %s", (at, 2 + OLD)
        )
    camt056 = sb.stats()["requests"]["camt056"]
    refreshed = run_cli(sb, "bulk-status", "--queue", pg_dsn, "--refresh", "--chase-after", "2")
    assert "chase: 3 unanswered recall(s) chased" in refreshed.stderr
    stats = sb.stats()
    assert (stats["status_requests_stored"], stats["requests"]["camt056"]) == (OLD, camt056)
    status = json.loads(refreshed.stdout)
    assert status["chased"] == {"rows": OLD, "chases": OLD}
    # The chased recalls are answered now: the next refresh reads them, chases nothing.
    settled = run_cli(sb, "bulk-status", "--queue", pg_dsn, "--refresh", "--chase-after", "2")
    assert json.loads(settled.stdout)["accepted"] == OLD
    assert sb.stats()["status_requests_stored"] == OLD


class _Killed(BaseException):
    """The process dies: here, between the pacs.028 and its record."""


async def test_a_pass_killed_before_recording_its_chase_never_makes_two(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = bulk_rows(ROWS, prefix="E2E-KILL")
    src = write_csv(tmp_path / "recall.csv", rows)
    journal = tmp_path / "j.sqlite"
    later = add_banking_days(target2_today(), 2)
    async with sandbox_server(SILENT) as sb, _client(sb) as client:
        for r in rows:  # the payments the rows recall, unprocessed for an hour
            e2e = r["original_end_to_end_id"]
            await client.submit_credit_transfer(credit_transfer(end_to_end_id=e2e))
        kw = {"journal_path": journal, "results_path": tmp_path / "r.csv"}
        first = await bulk_cancel(client, src, timeout=0.05, **kw)
        assert first.totals.get("pending", 0) == ROWS

        async def killed(self: RowWrites, line: int, chases: int) -> None:
            raise _Killed

        monkeypatch.setattr(RowWrites, "mark_chased", killed)
        with pytest.raises(_Killed):
            await bulk_cancel(
                client, src, timeout=0.05, chase=ChasePolicy(after=2), today=later, **kw
            )
        monkeypatch.undo()
        # The killed pass sent every due row's pacs.028 and recorded none of them.
        assert sb.server.stats()["status_requests_stored"] == ROWS
        rows_now = _journal_rows(journal)
        assert [r.chases for r in rows_now] == [0] * ROWS

        # What a pass sends for a row not recorded as chased is what the killed pass
        # sent: the same message id, so the service answers 200 and stores nothing new.
        resent = await client.request_status_update(status_request_for(rows_now[0]))
        assert resent.replayed
        assert sb.server.stats()["status_requests_stored"] == ROWS

        after = await bulk_cancel(
            client, src, timeout=5, chase=ChasePolicy(after=2), today=later, **kw
        )
        stats = sb.server.stats()
    # The next pass reads each recall first: the beneficiary bank answered the killed
    # pass's chase, so the rows are settled, not chased again.
    assert after.chases is not None
    assert (after.chases.due, after.chases.settled, after.chases.chased) == (ROWS, ROWS, 0)
    assert stats["status_requests_stored"] == ROWS
    assert stats["requests"]["camt056"] == ROWS  # no camt.056 sent again
    assert after.totals.get("accepted", 0) == ROWS


def _client(sb: SandboxHandle) -> PaymentsClient:
    assert sb.credentials is not None
    return PaymentsClient(
        sb.credentials,
        base_url=sb.url,
        retry=RetryPolicy.for_testing(attempts=4),
        timeout=Timeout(total=10),
    )


def _journal_rows(path: Path) -> list:  # type: ignore[type-arg]
    from payments_async.bulk._journal import ROW_COLUMNS, row_from_record

    db = sqlite3.connect(path)
    try:
        records = db.execute(f"SELECT {ROW_COLUMNS} FROM rows ORDER BY line").fetchall()
    finally:
        db.close()
    return [row_from_record(rec) for rec in records]


def test_a_queued_run_rerun_with_chase_after_chases_without_resending(
    sb: ThreadedSandbox,
    tmp_path: Path,
    pg_dsn: str,  # noqa: F811
) -> None:
    import os
    import subprocess
    import sys

    import psycopg

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "payments_async", "--sandbox", "--base-url", sb.url]
        done = subprocess.run(
            [*cmd, *args], cwd=root, env=env, capture_output=True, text=True, timeout=120
        )
        assert "Traceback" not in done.stderr, done.stderr
        return done

    rows = bulk_rows(ROWS, prefix="E2E-QCHASE")
    precreate_payments(sb, [r["original_end_to_end_id"] for r in rows])
    src = write_csv(tmp_path / "recall.csv", rows)
    # The run's recalls sent and left pending (by a single process on the same database:
    # a worker would wait for them to the end), then rerun through the queue.
    sent = cli("bulk-cancel", str(src), "--journal", pg_dsn, "--timeout", "0.2")
    assert sent.returncode == 3, sent.stderr
    at = micros(datetime.now(UTC) - timedelta(days=14))
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(
            "UPDATE payments_bulk_rows SET acknowledged_at = %s WHERE line < %s", (at, 2 + OLD)
        )
    camt056 = sb.stats()["requests"]["camt056"]
    assert camt056 == ROWS
    rerun = cli("bulk-cancel", str(src), "--queue", pg_dsn, "--no-wait", "--chase-after", "2")
    assert rerun.returncode == 0, rerun.stderr
    assert "chase: 3 unanswered recall(s) chased" in rerun.stderr
    stats = sb.stats()
    assert (stats["status_requests_stored"], stats["requests"]["camt056"]) == (OLD, camt056)
    with psycopg.connect(pg_dsn) as conn:
        chased = conn.execute(
            "SELECT line, chases FROM payments_bulk_rows ORDER BY line"
        ).fetchall()
    assert chased == [(n, 1 if n < 2 + OLD else 0) for n in range(2, 2 + ROWS)]


async def test_an_outage_stops_a_pass_and_a_refused_chase_skips_only_its_row(
    tmp_path: Path,
) -> None:
    from payments_async.bulk import SqliteJournal
    from payments_async.bulk._chase import chase_rows
    from payments_async.iso20022 import decode_camt056, encode
    from payments_async.sandbox import FaultConfig

    rows = bulk_rows(ROWS, prefix="E2E-FAIL")
    src = write_csv(tmp_path / "recall.csv", rows)
    path = tmp_path / "j.sqlite"
    later = add_banking_days(target2_today(), 2)
    policy = ChasePolicy(after=2)
    async with sandbox_server(SILENT) as sb, _client(sb) as client:
        for r in rows:
            await client.submit_credit_transfer(
                credit_transfer(end_to_end_id=r["original_end_to_end_id"])
            )
        await bulk_cancel(client, src, timeout=0.05, journal_path=path, results_path=None)
        # Line 2's recorded recall names an assgnmt.id the service never stored.
        db = sqlite3.connect(path)
        (body,) = db.execute("SELECT body FROM rows WHERE line = 2").fetchone()
        recall = decode_camt056(body)
        recall.fito_fi_pmt_cxl_req.assgnmt.id = "BC-NEVER-STORED"
        db.execute("UPDATE rows SET body = ? WHERE line = 2", (encode(recall),))
        (sha,) = db.execute("SELECT value FROM meta WHERE key = 'input_sha256'").fetchone()
        db.commit()
        db.close()
        journal = SqliteJournal.open(path, input_sha256=sha, new_run_id="unused")
        try:
            reads_before = sb.server.stats()["requests"].get("camt029", 0)
            sb.server.set_faults(FaultConfig(error_503=1.0))
            down = await chase_rows(
                client,
                journal.iter_rows(unfinished=True),
                journal,
                policy,
                today=later,
                concurrency=1,
            )
            reads_while_down = sb.server.stats()["requests"]["camt029"] - reads_before
            sb.server.set_faults(FaultConfig())
            up = await chase_rows(
                client, journal.iter_rows(unfinished=True), journal, policy, today=later
            )
            chases = {r.line: r.chases for r in journal.iter_rows()}
        finally:
            journal.close()
        stats = sb.server.stats()
    # The outage: the first read failed for good, the pass stopped, nothing was sent.
    assert (down.due, down.chased, down.failed) == (ROWS, 0, ROWS)
    assert down.halted is not None
    assert reads_while_down == 4  # one row's read and its retries (4 attempts), no more
    # Back up: the row the service refuses is skipped and counted; the others chased.
    assert (up.due, up.chased, up.failed, up.halted) == (ROWS, ROWS - 1, 1, None)
    assert up.error is not None
    assert up.error.startswith("line 2: ApiError: POST /payments/pacs028/v03 -> 400")
    assert chases == {n: (0 if n == 2 else 1) for n in range(2, 2 + ROWS)}
    assert stats["status_requests_stored"] == ROWS - 1
