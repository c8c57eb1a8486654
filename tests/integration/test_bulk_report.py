"""``bulk-report`` of a run, opened in a headless Chromium: nothing fetched, no error, every
chart drawn, and the numbers those of ``bulk-status --json``.

The default run has 2,500 rows: enough for every outcome, every chart and more return
requests than the report lists (200); the 20,000-row run, where the page's size bound
(under 1 MB) is met at scale, is the ``soak`` case (``pytest -m soak``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from payments_async.cli import cli
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

pytestmark = pytest.mark.slow

# Row counts are multiples of 100 (1 % of rows invalid) above 2,000 (10 % of them return
# requests, more than the 200 the report lists).
SCALES = [
    pytest.param(2_500, id="2500"),
    pytest.param(20_000, id="20000", marks=pytest.mark.soak),
]
OUTCOMES = (
    "accepted",
    "rejected",
    "unknown",
    "refused",
    "not_sent",
    "aborted",
    "in_flight",
    "pending",
    "invalid",
)


@pytest.fixture(scope="module")
def sb() -> Iterator[ThreadedSandbox]:
    with threaded_sandbox(SandboxConfig(processing_delay=3600, settlement_delay=0.05)) as s:
        yield s


def run_cli(sb: ThreadedSandbox, *args: str) -> Result:
    return CliRunner().invoke(
        cli, ["--sandbox", "--base-url", sb.url, "--json", *args], catch_exceptions=False
    )


def _run_of(sb: ThreadedSandbox, tmp_path: Path, dsn: str, rows_count: int) -> None:
    """A run of ``rows_count`` rows in a PostgreSQL journal: 60 % accepted, 10 % rejected
    with a return to request (the payment was processed), the rest rejected NOOR (no such
    payment), 1 % invalid."""
    rows = bulk_rows(rows_count, prefix=f"E2E-REPORT{rows_count}")
    for i, r in enumerate(rows):
        if i % 100 == 99:
            r["creditor_iban"] = "DE00"
    e2e = [r["original_end_to_end_id"] for i, r in enumerate(rows) if i % 10 <= 6]
    precreate_payments(sb, e2e)
    processed = {r["original_end_to_end_id"] for i, r in enumerate(rows) if i % 10 == 6}

    def settle() -> None:
        server = sb.server
        for p in list(server.state.payments.values()):
            if p.end_to_end_id in processed:
                server.settle_payment(p.payments_service_id, "ACCC")

    sb.call(settle)
    src = write_csv(tmp_path / "recall.csv", rows)
    result = run_cli(
        sb,
        "bulk-cancel",
        str(src),
        "--journal",
        dsn,
        "--skip-invalid",
        "--results",
        str(tmp_path / "recall.results.csv"),
        "--concurrency",
        "64",
    )
    summary = json.loads(result.stdout)
    assert summary["rows"] == rows_count, result.output
    assert summary["accepted"] == rows_count * 6 // 10
    assert summary["invalid"] == rows_count // 100
    assert summary["return_requests"] == rows_count // 10


@pytest.mark.parametrize("rows", SCALES)
def test_the_report_of_a_run_is_one_page_that_fetches_nothing(
    rows: int,
    sb: ThreadedSandbox,
    tmp_path: Path,
    pg_dsn: str,  # noqa: F811
) -> None:
    pytest.importorskip("matplotlib")
    browser = chromium_or_skip()
    _run_of(sb, tmp_path, pg_dsn, rows)
    status = json.loads(run_cli(sb, "bulk-status", "--queue", pg_dsn).stdout)
    page = tmp_path / "report.html"
    made = run_cli(sb, "bulk-report", "--queue", pg_dsn, "--output", str(page))
    assert made.exit_code == 0, made.output
    report = json.loads(made.stdout)

    # The report's figures are bulk-status's.
    assert report["rows"] == status["rows"] == rows
    assert {k: report["outcomes"][k] for k in OUTCOMES} == {k: status[k] for k in OUTCOMES}
    assert report["return_requests"] == status["return_requests"]
    assert report["latency"] == status["latency"]
    assert report["latency"]["rows"] == rows - rows // 100  # every valid row answered
    assert report["pending_by_age"] == status["pending_by_age"]
    assert sum(report["over_time"]["sent"]) == rows - rows // 100
    assert len(report["return_request_rows"]) == 200  # listed at most; the rest in a file
    assert page.stat().st_size < 1_000_000

    with Chromium(browser) as chromium:
        seen = chromium.load(page.as_uri())
        assert seen.errors == []
        assert seen.requests == [page.as_uri()]  # the page itself, nothing else
        charts = chromium.evaluate(
            "[...document.querySelectorAll('figure')].map(f => {"
            " const s = f.querySelector('svg'); const r = s.getBoundingClientRect();"
            " return [f.id, r.width, r.height, s.querySelectorAll('path').length]; })"
        )
        drawn = ["outcomes", "reasons", "attempts", "over-time", "latency"]
        drawn += ["pending-age"] if status["pending_by_age"] else []
        assert [c[0] for c in charts] == [f"chart-{c}" for c in drawn]
        for chart_id, width, height, paths in charts:
            assert width > 300, chart_id
            assert height > 100, chart_id
            assert paths > 10, chart_id  # bars, axes and their labels drawn as paths
        shown = chromium.evaluate(
            "Object.fromEntries([...document.querySelectorAll('table')[0].rows].slice(1)"
            ".map(r => [r.cells[0].textContent, Number(r.cells[1].textContent.replace(/,/g, ''))]))"
        )
        assert shown == {k: status[k] for k in OUTCOMES}
        assert chromium.evaluate("document.scripts.length") == 0
        chromium.screenshot(tmp_path / "report.png")
    assert (tmp_path / "report.png").stat().st_size > 10_000
