"""``bulk-status`` of a run that ended its waiting with rows pending: their age and their
days left to the recall deadline (also in the report, opened in Chromium), and
``--refresh`` settling them later with reads only (no POST, counted at the sandbox)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from payments_async import recall_deadline
from payments_async.bulk import SqliteJournal
from payments_async.bulk._times import NO_DEADLINE, banking_days_left
from payments_async.cli import cli
from payments_async.iso20022 import target2_today
from payments_async.sandbox import SandboxConfig
from tests.support.chromium import Chromium, chromium_or_skip
from tests.support.cli import (
    ThreadedSandbox,
    bulk_rows,
    precreate_payments,
    threaded_sandbox,
    write_csv,
)
from tests.support.postgres import pg_dsn, postgres_server  # noqa: F401 (fixtures)

ROWS = 12
POSTS = ("pacs008", "camt056", "pacs028")  # every message POST (a token is asked to read)


@pytest.fixture
def sb() -> Iterator[ThreadedSandbox]:
    # cancellations stay pending (PDCR) until the test resolves them
    with threaded_sandbox(SandboxConfig(processing_delay=3600, settlement_delay=3600)) as s:
        yield s


def run_cli(sb: ThreadedSandbox, *args: str, json_out: bool = True) -> Result:
    pre = ["--sandbox", "--base-url", sb.url] + (["--json"] if json_out else [])
    return CliRunner().invoke(cli, [*pre, *args], catch_exceptions=False)


def posts(sb: ThreadedSandbox) -> int:
    requests = sb.stats()["requests"]
    return sum(requests.get(route, 0) for route in POSTS)


@pytest.mark.parametrize("store", ["postgresql", "sqlite"])
def test_refresh_settles_pending_rows_by_reading_only(
    store: str, sb: ThreadedSandbox, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # a run in a database (bulk-status --queue) and a local run's journal file
    journal = (
        request.getfixturevalue("pg_dsn") if store == "postgresql" else str(tmp_path / "j.sqlite")
    )
    where = ["--queue" if store == "postgresql" else "--journal", journal]
    results = tmp_path / "recall.results.csv"
    rows = bulk_rows(ROWS, prefix="E2E-REFRESH")
    settled = target2_today()  # the first half give the payment's settlement date
    for r in rows:
        r["original_settlement_date"] = ""
    for r in rows[: ROWS // 2]:
        r["original_settlement_date"] = settled.isoformat()
    precreate_payments(sb, [r["original_end_to_end_id"] for r in rows])
    src = write_csv(tmp_path / "recall.csv", rows)
    ran = run_cli(
        sb, "bulk-cancel", str(src), "--journal", journal, "--results", str(results),
        "--timeout", "0.2", "--concurrency", "4",
    )  # fmt: skip
    assert ran.exit_code == 3, ran.output  # the run ended its waiting with rows pending
    status = json.loads(run_cli(sb, "bulk-status", *where).stdout)
    assert status["pending"] == ROWS
    assert status["pending_by_age"] == {"0": ROWS}  # sent today
    left = banking_days_left(dt.datetime.now(dt.UTC).date(), recall_deadline("DUPL", settled))
    assert left > 0
    by_left = {str(left): ROWS // 2, NO_DEADLINE: ROWS - ROWS // 2}
    assert status["pending_by_days_left"] == by_left
    assert status["latency"]["rows"] == ROWS

    shown = run_cli(sb, "bulk-status", *where, json_out=False)
    assert "pending" in shown.output
    assert "(None)" not in shown.output
    assert ("queued or running" in shown.output) is (store == "postgresql")  # a file: no jobs
    assert f"by banking days since sent: 0: {ROWS}" in shown.output
    assert (
        f"by banking days left to the recall deadline: {left}: {ROWS // 2}, "
        f"{NO_DEADLINE}: {ROWS - ROWS // 2}"
    ) in shown.output
    run = ["--queue", journal] if store == "postgresql" else ["--results", str(results)]
    _check_report(sb, tmp_path, run, status)

    # The service decides half of them meanwhile.
    cxl = sorted(sb.cancellations(), key=lambda c: c.original_end_to_end_id)
    for c in cxl[: ROWS // 2]:
        sb.call(sb.server.resolve_cancellation, c.payments_service_id, "accepted")
    before = posts(sb)
    refreshed = run_cli(sb, "bulk-status", *where, "--refresh")
    assert posts(sb) == before  # reads only: no message sent
    assert refreshed.exit_code == 3, refreshed.output
    after = json.loads(refreshed.stdout)
    assert (after["accepted"], after["pending"]) == (ROWS // 2, ROWS - ROWS // 2)
    assert after["pending_by_age"] == {"0": ROWS - ROWS // 2}
    assert "refreshed 12 pending rows: 6 final now" in refreshed.stderr

    for c in cxl[ROWS // 2 :]:
        sb.call(sb.server.resolve_cancellation, c.payments_service_id, "accepted")
    done = run_cli(sb, "bulk-status", *where, "--refresh")
    assert done.exit_code == 0, done.output
    final = json.loads(done.stdout)
    assert final["accepted"] == ROWS
    assert final["pending_by_age"] == {}
    assert posts(sb) == before
    assert len(sb.cancellations()) == ROWS  # nothing recalled twice


def test_refresh_with_the_service_down_is_an_error_without_traceback(
    tmp_path: Path,
    pg_dsn: str,  # noqa: F811
) -> None:
    with threaded_sandbox(SandboxConfig(processing_delay=3600, settlement_delay=3600)) as sb:
        rows = bulk_rows(3, prefix="E2E-DOWN")
        precreate_payments(sb, [r["original_end_to_end_id"] for r in rows])
        src = write_csv(tmp_path / "recall.csv", rows)
        ran = run_cli(sb, "bulk-cancel", str(src), "--journal", pg_dsn, "--timeout", "0.2")
        assert ran.exit_code == 3, ran.output
        url = sb.url
    gone = CliRunner().invoke(
        cli,
        ["--sandbox", "--base-url", url, "bulk-status", "--queue", pg_dsn, "--refresh"],
        catch_exceptions=False,
    )
    assert gone.exit_code == 3, gone.output
    assert "Traceback" not in gone.output
    assert gone.output.strip()


def _check_report(
    sb: ThreadedSandbox, tmp_path: Path, run: list[str], status: dict[str, object]
) -> None:
    """The report of the pending run gives bulk-status's figures and draws both pending
    charts in Chromium, fetching nothing."""
    pytest.importorskip("matplotlib")
    page = tmp_path / "pending.html"
    made = run_cli(sb, "bulk-report", *run, "--output", str(page))
    assert made.exit_code == 0, made.output
    report = json.loads(made.stdout)
    assert report["pending_by_age"] == status["pending_by_age"]
    assert report["pending_by_days_left"] == status["pending_by_days_left"]
    listed = [r["recall_deadline"] for r in report["pending_rows"]]
    assert listed == [listed[0]] * (ROWS // 2) + [None] * (ROWS - ROWS // 2)  # nearest first
    browser = chromium_or_skip()
    with Chromium(browser) as chromium:
        seen = chromium.load(page.as_uri())
        assert seen.errors == []
        assert seen.requests == [page.as_uri()]
        drawn = chromium.evaluate(
            "[...document.querySelectorAll('figure')].map(f => [f.id,"
            " f.querySelector('svg').getBoundingClientRect().height])"
        )
        charts = dict(drawn)
        for chart in ("chart-pending-age", "chart-pending-deadline"):
            assert charts.get(chart, 0) > 100, drawn
        chromium.screenshot(tmp_path / "pending.png")


def test_refresh_of_a_journal_file_a_run_holds_is_refused_reading_nothing(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    # The run waits for its own rows: a refresh beside it would record them twice over.
    rows = bulk_rows(2, prefix="E2E-BUSY")
    precreate_payments(sb, [r["original_end_to_end_id"] for r in rows])
    journal = tmp_path / "busy.sqlite"
    src = write_csv(tmp_path / "busy.csv", rows)
    ran = run_cli(sb, "bulk-cancel", str(src), "--journal", str(journal), "--timeout", "0.2")
    assert ran.exit_code == 3, ran.output
    reads = sb.stats()["requests"].get("camt029", 0)
    held = SqliteJournal.open_existing(journal)  # as a resumed run holds it
    try:
        busy = run_cli(sb, "bulk-status", "--journal", str(journal), "--refresh")
    finally:
        held.close()
    assert busy.exit_code != 0, busy.output
    assert "Traceback" not in busy.output
    assert len(busy.output.strip().splitlines()) == 1, busy.output
    assert "is in use by another run" in busy.output, busy.output
    assert sb.stats()["requests"].get("camt029", 0) == reads  # nothing read
    assert posts(sb) == 2
