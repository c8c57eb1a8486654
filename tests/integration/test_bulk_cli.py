"""``payments-async bulk-cancel`` as a user runs it, checked against the sandbox's own state."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import (
    ThreadedSandbox,
    bulk_rows,
    precreate_payments,
    read_results,
    threaded_sandbox,
    write_csv,
    write_jsonl,
)
from click.testing import CliRunner, Result

from payments_async import Credentials, PaymentsClient
from payments_async.bulk import SqliteJournal, plan_rows, read_input
from payments_async.cli import cli
from payments_async.iso20022 import decode_camt056
from payments_async.sandbox import SandboxConfig


@pytest.fixture(scope="module")
def sb() -> Iterator[ThreadedSandbox]:
    # Payments stay unprocessed for the whole module: their cancellations are accepted.
    with threaded_sandbox(SandboxConfig(processing_delay=600, settlement_delay=0.1)) as s:
        yield s


def bulk(sb: ThreadedSandbox, *args: str, json_out: bool = False) -> Result:
    pre = ["--sandbox", "--base-url", sb.url] + (["--json"] if json_out else [])
    return CliRunner().invoke(cli, [*pre, "bulk-cancel", *args], catch_exceptions=False)


def camt056_requests(sb: ThreadedSandbox) -> int:
    return int(sb.stats()["requests"].get("camt056", 0))


def test_bulk_cancel_csv_then_rerun_changes_nothing(sb: ThreadedSandbox, tmp_path: Path) -> None:
    rows = bulk_rows(20, prefix="E2E-HAPPY")
    paid = [r["original_end_to_end_id"] for r in rows[::2]]
    precreate_payments(sb, paid)
    src = write_csv(tmp_path / "cancel.csv", rows)
    stored = sb.stats()["cancellations_stored"]

    result = bulk(sb, str(src), "--concurrency", "4")
    assert result.exit_code == 1, result.output  # all final, some rejected
    assert "accepted" in result.stdout
    assert "rejected (ask for a pacs.004 return)" in result.stdout
    assert "results: " in result.stdout
    results = read_results(tmp_path / "cancel.results.csv")
    assert [int(r["line"]) for r in results] == list(range(2, 22))
    accepted = {r["original_end_to_end_id"] for r in results if r["outcome"] == "accepted"}
    assert accepted == set(paid)
    for r in results:
        if r["outcome"] == "rejected":
            assert r["return_request_needed"] == "false"  # NOOR: nothing to return
            assert r["reason_codes"] == "NOOR"
        assert r["payments_service_id"].startswith("cxl-")
        assert r["assignment_id"].startswith("BC-")
    assert sb.stats()["cancellations_stored"] == stored + 20
    assert (tmp_path / "cancel.results.journal.sqlite").exists()

    # The same command again: every row is final, nothing is sent.
    requests = camt056_requests(sb)
    again = bulk(sb, str(src), "--concurrency", "4", json_out=True)
    assert again.exit_code == 1
    summary = json.loads(again.stdout)
    assert summary["already_final"] == 20
    assert summary["resumed"] is True
    assert summary["this_run"]["submitted"] == 0
    assert camt056_requests(sb) == requests
    assert read_results(tmp_path / "cancel.results.csv") == results


def test_all_accepted_jsonl_is_exit_0(sb: ThreadedSandbox, tmp_path: Path) -> None:
    rows = bulk_rows(5, prefix="E2E-JSONL")
    precreate_payments(sb, [r["original_end_to_end_id"] for r in rows])
    src = write_jsonl(tmp_path / "cancel.jsonl", rows)
    result = bulk(sb, str(src), "--results", str(tmp_path / "out.jsonl"), json_out=True)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["accepted"] == 5
    assert summary["rows"] == 5
    assert summary["journal"] == str(tmp_path / "out.journal.sqlite")
    lines = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert {x["outcome"] for x in lines} == {"accepted"}
    assert all(x["return_request_needed"] is False for x in lines)


def test_bad_rows_are_all_listed_by_line_and_nothing_is_sent(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    rows = bulk_rows(6, prefix="E2E-BAD")
    rows[1]["creditor_iban"] = "DE00370400440532013000"  # line 3: mod-97 fails
    rows[3]["amount"] = "ten"  # line 5
    rows[4]["reason"] = "WHY"  # line 6
    src = write_csv(tmp_path / "bad.csv", rows)
    requests = camt056_requests(sb)
    result = bulk(sb, str(src))
    assert result.exit_code == 2
    err = result.stderr
    assert f"{src}: line 3: creditor_iban:" in err
    assert f"{src}: line 5: amount: not a decimal number" in err
    assert f"{src}: line 6: reason:" in err
    assert "nothing was sent" in err
    assert "Traceback" not in result.output
    assert camt056_requests(sb) == requests
    assert not (tmp_path / "bad.results.csv").exists()
    assert not (tmp_path / "bad.results.journal.sqlite").exists()

    as_json = bulk(sb, str(src), json_out=True)
    assert as_json.exit_code == 2
    problems = json.loads(as_json.stdout)["problems"]
    assert {p["line"] for p in problems} == {3, 5, 6}

    skipped = bulk(sb, str(src), "--skip-invalid")
    assert skipped.exit_code == 1  # NOOR rejections for the three valid rows
    assert camt056_requests(sb) == requests + 3
    outcomes = {int(r["line"]): r["outcome"] for r in read_results(tmp_path / "bad.results.csv")}
    assert outcomes == {2: "rejected", 3: "invalid", 4: "rejected", 5: "invalid", 6: "invalid"} | {
        7: "rejected"
    }


def test_a_journal_of_another_file_is_refused(sb: ThreadedSandbox, tmp_path: Path) -> None:
    first = write_csv(tmp_path / "a.csv", bulk_rows(2, prefix="E2E-JA"))
    journal = tmp_path / "j.sqlite"
    assert bulk(sb, str(first), "--journal", str(journal)).exit_code == 1
    first.write_text(first.read_text().replace("E2E-JA-000001", "E2E-JA-000009"))
    requests = camt056_requests(sb)
    result = bulk(sb, str(first), "--journal", str(journal))
    assert result.exit_code == 2
    assert "different input file" in result.stderr
    assert camt056_requests(sb) == requests


def test_no_journal_keeps_no_file(sb: ThreadedSandbox, tmp_path: Path) -> None:
    src = write_csv(tmp_path / "nj.csv", bulk_rows(3, prefix="E2E-NJ"))
    result = bulk(sb, str(src), "--no-journal", json_out=True)
    assert result.exit_code == 1
    assert json.loads(result.stdout)["journal"] is None
    assert not list(tmp_path.glob("*.sqlite*"))
    assert len(read_results(tmp_path / "nj.results.csv")) == 3


def test_rows_in_flight_at_a_crash_are_resent_with_their_recorded_id(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    """The crash window: the service stored a row, the journal only says "sent"."""
    rows = bulk_rows(4, prefix="E2E-INFLIGHT")
    precreate_payments(sb, [r["original_end_to_end_id"] for r in rows])
    src = write_csv(tmp_path / "c.csv", rows)
    journal_path = tmp_path / "c.results.journal.sqlite"
    checked = read_input(src)
    journal = SqliteJournal.open(journal_path, input_sha256=checked.sha256, new_run_id="CRASH1")
    journal.plan(plan_rows(checked, journal.run_id))
    first = journal.rows()[0]
    journal.close()
    assert first.body is not None

    async def send_behind_the_journal() -> str:
        async with PaymentsClient(Credentials.sandbox(), base_url=sb.url) as client:
            sub = await client.request_cancellation(decode_camt056(first.body or b""))
            return sub.payments_service_id

    psid = asyncio.run(send_behind_the_journal())
    db = sqlite3.connect(journal_path)
    db.execute("UPDATE rows SET state = 'sent', attempts = 1 WHERE line = ?", (first.line,))
    db.commit()
    db.close()
    stored = sb.stats()["cancellations_stored"]

    result = bulk(sb, str(src), json_out=True)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["resumed"] is True
    assert summary["this_run"] == {"sent": 4, "submitted": 4, "replayed": 1, "finished": 4}
    assert sb.stats()["cancellations_stored"] == stored + 3  # not 4: row 2 existed
    results = read_results(tmp_path / "c.results.csv")
    row2 = next(r for r in results if r["line"] == str(first.line))
    assert row2["payments_service_id"] == psid
    assert row2["replayed"] == "true"
    assert row2["attempts"] == "2"
    assert row2["assignment_id"] == "BC-CRASH1-2"
