"""``bulk-status`` of a run that ended its waiting with rows pending: their age, and
``--refresh`` settling them later with reads only (no POST, counted at the sandbox)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from payments_async.cli import cli
from payments_async.sandbox import SandboxConfig
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


def test_refresh_settles_pending_rows_by_reading_only(
    sb: ThreadedSandbox,
    tmp_path: Path,
    pg_dsn: str,  # noqa: F811
) -> None:
    rows = bulk_rows(ROWS, prefix="E2E-REFRESH")
    precreate_payments(sb, [r["original_end_to_end_id"] for r in rows])
    src = write_csv(tmp_path / "recall.csv", rows)
    ran = run_cli(
        sb, "bulk-cancel", str(src), "--journal", pg_dsn, "--timeout", "0.2", "--concurrency", "4"
    )
    assert ran.exit_code == 3, ran.output  # the run ended its waiting with rows pending
    status = json.loads(run_cli(sb, "bulk-status", "--queue", pg_dsn).stdout)
    assert status["pending"] == ROWS
    assert status["pending_by_age"] == {"0": ROWS}  # sent today
    assert status["latency"]["rows"] == ROWS

    shown = run_cli(sb, "bulk-status", "--queue", pg_dsn, json_out=False)
    assert f"by banking days since sent: 0: {ROWS}" in shown.output

    # The service decides half of them meanwhile.
    cxl = sorted(sb.cancellations(), key=lambda c: c.original_end_to_end_id)
    for c in cxl[: ROWS // 2]:
        sb.call(sb.server.resolve_cancellation, c.payments_service_id, "accepted")
    before = posts(sb)
    refreshed = run_cli(sb, "bulk-status", "--queue", pg_dsn, "--refresh")
    assert posts(sb) == before  # reads only: no message sent
    assert refreshed.exit_code == 3, refreshed.output
    after = json.loads(refreshed.stdout)
    assert (after["accepted"], after["pending"]) == (ROWS // 2, ROWS - ROWS // 2)
    assert after["pending_by_age"] == {"0": ROWS - ROWS // 2}
    assert "refreshed 12 pending rows: 6 final now" in refreshed.stderr

    for c in cxl[ROWS // 2 :]:
        sb.call(sb.server.resolve_cancellation, c.payments_service_id, "accepted")
    done = run_cli(sb, "bulk-status", "--queue", pg_dsn, "--refresh")
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
