"""``payments-async bulk-cancel`` as a user runs it, checked against the sandbox's own state."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from payments_async import Credentials, PaymentsClient, RetryPolicy, Timeout
from payments_async.bulk import BulkReport, RunTotals, SqliteJournal, bulk_cancel
from payments_async.bulk._input import read_input
from payments_async.bulk._plan import plan_rows
from payments_async.cli import cli
from payments_async.iso20022 import decode_camt056
from payments_async.sandbox import SandboxConfig
from tests.support.cli import (
    FakeService,
    ThreadedSandbox,
    bulk_rows,
    fake_service,
    precreate_payments,
    read_results,
    threaded_sandbox,
    write_csv,
    write_jsonl,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sb() -> Iterator[ThreadedSandbox]:
    # Payments stay unprocessed for the whole module: their cancellations are accepted.
    with threaded_sandbox(SandboxConfig(processing_delay=600, settlement_delay=0.1)) as s:
        yield s


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Results and journals go to the working directory: make it the test's own."""
    monkeypatch.chdir(tmp_path)


def bulk(sb: ThreadedSandbox, *args: str, json_out: bool = False) -> Result:
    pre = ["--sandbox", "--base-url", sb.url] + (["--json"] if json_out else [])
    return CliRunner().invoke(cli, [*pre, "bulk-cancel", *args], catch_exceptions=False)


def refused(sb: ThreadedSandbox, *args: str) -> tuple[str, Result]:
    """``bulk-cancel`` refused as a usage error: exit 2, no traceback, one error line."""
    result = CliRunner().invoke(cli, ["--sandbox", "--base-url", sb.url, "bulk-cancel", *args])
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    errors = [x for x in result.stderr.splitlines() if x.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    return errors[0], result


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
    assert re.search(r"\brejected\s*│\s*10\b", result.stdout), result.stdout
    # Every rejection is NOOR (no such payment): nothing to return, so no pacs.004 advice.
    assert "pacs.004" not in result.stdout
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
    assert "1 payment(s) of this input already have a cancellation recorded" in result.stderr
    assert "--new-run" in result.stderr
    assert camt056_requests(sb) == requests


@pytest.mark.parametrize(
    ("results", "named"),
    [
        ("", "names no file"),
        ("in.csv/r.csv", "cannot write"),  # a file where its folder should be
        ("fifo.csv", "not a regular file"),  # would be replaced by the atomic rename
    ],
    ids=["empty", "parent-is-a-file", "fifo"],
)
def test_a_results_file_that_cannot_be_written_is_refused_before_anything_is_sent(
    sb: ThreadedSandbox, tmp_path: Path, results: str, named: str
) -> None:
    src = write_csv(tmp_path / "in.csv", bulk_rows(2, prefix="E2E-RW"))
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    requests = camt056_requests(sb)
    error, _ = refused(sb, str(src), "--results", results, "--journal", str(tmp_path / "j.sqlite"))
    assert named in error
    assert camt056_requests(sb) == requests
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert not (tmp_path / "j.sqlite").exists()


def test_a_results_file_that_fails_at_the_end_leaves_the_journal_to_write_it_again(
    sb: ThreadedSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder took a file when checked, the disk filled up while the rows were sent."""
    import errno

    from payments_async.bulk import _results

    src = write_csv(tmp_path / "full.csv", bulk_rows(3, prefix="E2E-FULL"))
    written = _results.write_results

    def disk_full(*args: object, **kwargs: object) -> Path:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(_results, "write_results", disk_full)
    requests = camt056_requests(sb)
    result = bulk(sb, str(src), "--journal", str(tmp_path / "j.sqlite"))
    assert result.exit_code == 3, result.output
    errors = [x for x in result.stderr.splitlines() if x.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    assert "No space left on device" in errors[0]
    assert "run the same command again" in errors[0]
    assert camt056_requests(sb) == requests + 3

    monkeypatch.setattr(_results, "write_results", written)
    again = bulk(sb, str(src), "--journal", str(tmp_path / "j.sqlite"))
    assert again.exit_code == 1, again.output  # every row final (rejected: no payments)
    assert camt056_requests(sb) == requests + 3  # nothing sent again
    assert len(read_results(tmp_path / "full.results.csv")) == 3


def test_a_journal_address_of_another_scheme_is_refused_without_its_password(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    src = write_csv(tmp_path / "in.csv", bulk_rows(2, prefix="E2E-JS"))
    requests = camt056_requests(sb)
    for address in ("mysql://bulk:TopSecret-1@db.example/q", "Postgresql://u:TopSecret-1@h/db"):
        error, result = refused(sb, str(src), "--journal", address)
        assert "is not a journal" in error
        assert "TopSecret" not in result.output
    assert camt056_requests(sb) == requests
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]  # no folder named after it


def test_an_interrupted_run_in_a_database_says_how_to_resume_without_the_password(
    tmp_path: Path,
) -> None:
    import io

    from rich.console import Console

    from payments_async.bulk import BulkCounts
    from payments_async.cli._context import Settings
    from payments_async.cli._render import bulk_summary as _bulk_summary

    argv = [
        "--proxy",
        "http://me:Proxy-Pw@127.0.0.1:3128",
        "bulk-cancel",
        "in.csv",
        "--journal=postgresql://bulk:Db-Pw@db.example/runs?sslpassword=Key-Pw",
        "--results",
        "postgresql://db.example/x?password=Query-Pw",  # an odd name, but argv all the same
    ]
    out, err = io.StringIO(), io.StringIO()
    settings = Settings(argv=argv, out=Console(file=out), err=Console(file=err, width=300))
    report = BulkReport(
        counts=BulkCounts(),
        row_count=3,
        results_path=tmp_path / "in.results.csv",
        journal_path=None,  # a database: no file
        resumed=False,
        already_final=0,
        elapsed=1.0,
        interrupted=True,
        totals=RunTotals.of({"not_sent": 3}),
    )
    shown = "PostgreSQL postgresql://***@db.example/runs"
    assert _bulk_summary(settings, report, Path("in.csv"), None, shown) == 130
    said = out.getvalue() + err.getvalue()
    assert f"journal: {shown}" in said
    assert "to resume, run the same command again" in said
    assert "--journal=postgresql://***@db.example/runs?sslpassword=***" in said
    assert "postgresql://db.example/x?password=***" in said
    assert "http://***@127.0.0.1:3128" in said
    assert "Pw" not in said
    assert "starts over" not in said


def test_a_journal_that_cannot_be_made_is_a_usage_error_not_the_results_fault(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    src = write_csv(tmp_path / "in.csv", bulk_rows(2, prefix="E2E-JM"))
    (tmp_path / "afile").write_text("x")
    requests = camt056_requests(sb)
    # a file where the journal's folder should be
    error, _ = refused(sb, str(src), "--journal", str(tmp_path / "afile" / "j.sqlite"))
    assert "cannot open journal" in error
    assert "results" not in error
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


# --- refused, not sent, unknown, interrupted: each said as it is --------


def _rows_file(tmp_path: Path, n: int, prefix: str) -> tuple[Path, list[dict[str, str]]]:
    rows = bulk_rows(n, prefix=prefix)
    return write_csv(tmp_path / f"{prefix.lower()}.csv", rows), rows


def test_a_row_refused_for_good_is_reported_as_refused_and_no_rerun_is_advised(
    tmp_path: Path,
) -> None:
    src, rows = _rows_file(tmp_path, 3, "E2E-REFUSED")
    refused = rows[1]["original_end_to_end_id"]  # line 3: its assgnmt.id is "already used"
    with fake_service(FakeService(refuse_e2e=frozenset({refused}))) as fake:
        pre = ["--sandbox", "--base-url", fake.url]
        result = CliRunner().invoke(cli, [*pre, "bulk-cancel", str(src)])
        assert result.exit_code == 1, result.output  # every row done; one refused
        assert "refused by the service (see the reason)" in result.stdout
        assert "1 row(s) refused by the service" in result.stderr
        assert "will not change that" in result.stderr
        assert "run the same command again" not in result.stderr
        results = {r["line"]: r for r in read_results(tmp_path / "e2e-refused.results.csv")}
        assert results["3"]["outcome"] == "refused"
        assert "DUPLICATE_MESSAGE_ID" in results["3"]["reason"]
        assert "-> 400" in results["3"]["reason"]
        assert {results["2"]["outcome"], results["4"]["outcome"]} == {"accepted"}

        posts = (fake.requests or {}).get("camt056", 0)
        again = CliRunner().invoke(cli, [*pre, "--json", "bulk-cancel", str(src)])
        assert again.exit_code == 1
        summary = json.loads(again.stdout)
        assert (summary["refused"], summary["accepted"]) == (1, 2)
        assert (fake.requests or {}).get("camt056", 0) == posts  # a rerun sends nothing


def test_a_token_endpoint_failure_leaves_rows_not_sent_and_stops_sending(
    tmp_path: Path,
) -> None:
    src, _ = _rows_file(tmp_path, 6, "E2E-NOTOKEN")
    results = tmp_path / "notoken.results.csv"
    journal_path = tmp_path / "notoken.journal.sqlite"

    async def run(url: str) -> BulkReport:
        retry = RetryPolicy.for_testing()
        async with PaymentsClient(
            Credentials.sandbox(), base_url=url, retry=retry, timeout=Timeout(total=1.0)
        ) as client:
            return await bulk_cancel(
                client, src, results_path=results, journal_path=journal_path, concurrency=2
            )

    with fake_service(FakeService(token_status=503)) as fake:
        report = asyncio.run(run(fake.url))
        assert (fake.requests or {}).get("camt056", 0) == 0  # no POST could be sent
        assert report.halted is not None  # the first failure stopped the others
        assert report.counts.sent == 0
        assert report.totals["not_sent"] == 6
        assert report.totals["in_flight"] == 0
        assert {r["outcome"] for r in read_results(results)} == {"not_sent"}
        assert {r.state for r in report.rows} == {"planned"}  # a rerun sends them all

        fake.token_status = 200  # the token endpoint is back: the same run finishes
        again = asyncio.run(run(fake.url))
        assert again.resumed
        assert again.totals["accepted"] == 6
        assert (fake.requests or {}).get("camt056", 0) == 6


def test_unknown_outcomes_are_counted_apart_with_what_to_do(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    src, rows = _rows_file(tmp_path, 3, "E2E-UNKNOWN")
    precreate_payments(sb, [r["original_end_to_end_id"] for r in rows])
    checked = read_input(src)
    journal = SqliteJournal.open(
        tmp_path / "e2e-unknown.results.journal.sqlite",
        input_sha256=checked.sha256,
        new_run_id="UNK1",
    )
    journal.plan(plan_rows(checked, journal.run_id))

    async def unknown_final() -> None:  # an earlier run met codes nobody can classify
        await journal.mark_sent(2)
        await journal.mark_acknowledged(2, "cxl-earlier", True)
        await journal.mark_final(
            2,
            outcome="unknown",
            status="ZZZZ",
            reason_codes=(),
            reason_text=None,
            return_request_needed=False,
        )

    asyncio.run(unknown_final())
    journal.close()

    result = bulk(sb, str(src))
    assert result.exit_code == 3, result.output
    assert "outcome unknown (check with the bank)" in result.stdout
    assert "1 row(s) ended with an outcome nobody can tell" in result.stderr
    assert "payments-async outcome ID" in result.stderr
    assert "run the same command again" not in result.stderr  # a rerun cannot help
    summary = json.loads(bulk(sb, str(src), json_out=True).stdout)
    assert (summary["unknown"], summary["accepted"]) == (1, 2)


def test_a_row_sent_before_whose_message_is_now_refused_ends_unknown_not_refused(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    """An earlier run sent row 2; its recorded message no longer passes validation (a
    later version checks more). It cannot be resent, and the service may have it."""
    src, rows = _rows_file(tmp_path, 3, "E2E-NOTRESENT")
    precreate_payments(sb, [r["original_end_to_end_id"] for r in rows])
    checked = read_input(src)
    journal_path = tmp_path / "e2e-notresent.results.journal.sqlite"
    journal = SqliteJournal.open(journal_path, input_sha256=checked.sha256, new_run_id="NRS1")
    journal.plan(plan_rows(checked, journal.run_id))
    journal.close()
    db = sqlite3.connect(journal_path)
    db.execute("UPDATE rows SET state = 'sent', attempts = 1, body = ? WHERE line = 2", (b"{}",))
    db.commit()
    db.close()
    posts = camt056_requests(sb)

    result = bulk(sb, str(src))
    assert result.exit_code == 3, result.output  # an unknown outcome: check with the bank
    assert "1 row(s) ended with an outcome nobody can tell" in result.stderr
    # Row 2's attempt never left: not counted sent.
    assert "this run: 2 request(s) sent, 2 row(s) acknowledged" in result.stdout
    assert "3 row(s) finished" in result.stdout
    assert camt056_requests(sb) == posts + 2  # rows 3 and 4 only
    results = {r["line"]: r for r in read_results(tmp_path / "e2e-notresent.results.csv")}
    assert results["2"]["outcome"] == "unknown"  # not "refused": it may be stored
    assert "not sent again: ValidationError" in results["2"]["reason"]
    assert "an earlier attempt sent this message" in results["2"]["reason"]
    assert {results["3"]["outcome"], results["4"]["outcome"]} == {"accepted"}
    summary = json.loads(bulk(sb, str(src), json_out=True).stdout)
    assert (summary["unknown"], summary["accepted"], summary["refused"]) == (1, 2, 0)
    assert camt056_requests(sb) == posts + 2  # final: a rerun sends nothing


@pytest.mark.parametrize("rate", [None, "40"], ids=["unlimited", "rate-40"])
def test_ctrl_c_lets_the_rows_in_flight_finish_and_the_summary_agrees_with_its_table(
    tmp_path: Path, rate: str | None
) -> None:
    """At Ctrl-C, rows waiting for a rate slot were marked sent and never reached the
    service, yet the results said "in flight"; the summary counted rows recorded in the
    journal but cut off before they were counted, and planning as run time."""
    config = SandboxConfig(processing_delay=3600, settlement_delay=0.3)
    with threaded_sandbox(config) as sandbox:
        src, _ = _rows_file(tmp_path, 400, "E2E-SIGINT")
        cmd = [
            sys.executable,
            "-m",
            "payments_async",
            "--sandbox",
            "--base-url",
            sandbox.url,
            "--json",
            "bulk-cancel",
            str(src),
            "--concurrency",
            "16",
            *(["--rate", rate] if rate else []),
        ]
        proc = subprocess.Popen(
            cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 60
        while camt056_requests(sandbox) < 60:  # the event: the service has 60 rows
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run never reached 60 requests"
            time.sleep(0.005)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert "Traceback" not in err
        summary = json.loads(out)
        run = summary["this_run"]
        received = camt056_requests(sandbox)  # counted at the service
        results = read_results(tmp_path / "e2e-sigint.results.csv")
        outcomes = Counter(r["outcome"] for r in results)

        # Every row in flight at the Ctrl-C finished: none is left "sent, no answer",
        # every row the service received is acknowledged, and every other is not sent.
        assert outcomes["in_flight"] == 0, (outcomes, received)
        assert outcomes["not_sent"] == 400 - received
        assert run["sent"] == run["submitted"] == received
        # Every count of the summary is the table's.
        for outcome, rows in outcomes.items():
            assert summary[outcome] == rows, (outcome, summary, outcomes)
        final = sum(outcomes[o] for o in ("accepted", "rejected", "refused", "unknown"))
        assert run["finished"] == final
        assert summary["already_final"] == 0
        # rows/s over the time spent sending and waiting, not planning.
        assert 0 < summary["sending_s"] <= summary["elapsed_s"]
        assert summary["rows_per_s"] == pytest.approx(final / summary["sending_s"], abs=0.1)


def test_rows_whose_outcome_codes_nobody_can_classify_are_counted_unknown(
    tmp_path: Path,
) -> None:
    src, _ = _rows_file(tmp_path, 3, "E2E-ZZZZ")
    with fake_service(FakeService(conf="ZZZZ", tx_cxl_sts="ZZZZ")) as fake:
        pre = ["--sandbox", "--base-url", fake.url, "--json"]
        result = CliRunner().invoke(cli, [*pre, "bulk-cancel", str(src), "--timeout", "30"])
        assert result.exit_code == 3, result.output
        summary = json.loads(result.stdout)
        assert (summary["unknown"], summary["in_flight"], summary["pending"]) == (3, 0, 0)
        results = read_results(tmp_path / "e2e-zzzz.results.csv")
        assert {(r["outcome"], r["status"]) for r in results} == {("unknown", "ZZZZ")}


def test_a_database_journal_without_the_scale_extra_is_named_without_its_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Naming the journal needs no psycopg (the scale extra): nothing is parsed."""
    from payments_async.bulk import JournalError
    from payments_async.bulk._stores import _postgres
    from payments_async.cli.commands.bulk import journal_shown as _journal_shown

    def missing() -> None:
        raise JournalError("a PostgreSQL journal needs psycopg")

    monkeypatch.setattr(_postgres, "require_psycopg", missing)
    assert _journal_shown("postgresql://u:Pw-1@h/db") == "PostgreSQL postgresql://***@h/db"
    assert _journal_shown(None) is None
    assert _journal_shown("j.sqlite") is None
