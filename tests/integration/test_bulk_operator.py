"""What an operator steers a bulk run with: the dry run, the confirmation, the rows that
need a person fed back; each checked at the sandbox."""

from __future__ import annotations

import asyncio
import csv
import json
import os
import pty
import select
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner, Result

from payments_async.bulk import SqliteJournal
from payments_async.bulk._input import read_input
from payments_async.bulk._plan import plan_rows
from payments_async.cli import cli
from payments_async.sandbox import SandboxConfig
from tests.support.cli import (
    ThreadedSandbox,
    bulk_rows,
    precreate_payments,
    threaded_sandbox,
    write_csv,
    write_jsonl,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sb() -> Iterator[ThreadedSandbox]:
    # Payments stay unprocessed unless settled by a test: their cancellations are accepted.
    with threaded_sandbox(SandboxConfig(processing_delay=600, settlement_delay=0.05)) as s:
        yield s


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def run_cli(sb: ThreadedSandbox, *args: str, json_out: bool = False) -> Result:
    pre = ["--sandbox", "--base-url", sb.url] + (["--json"] if json_out else [])
    return CliRunner().invoke(cli, [*pre, *args], catch_exceptions=False)


def posts(sb: ThreadedSandbox) -> int:
    """Every POST the sandbox received: camt.056s, pacs.008s and token requests."""
    stats = sb.stats()
    return int(sum(stats["requests"].values())) + int(stats["token_requests"])


def cancellations_by_e2e(sb: ThreadedSandbox) -> Counter[str]:
    """Cancellations stored at the sandbox, per payment they recall."""
    return Counter(c.original_end_to_end_id for c in sb.cancellations())


def _mixed_rows(prefix: str) -> list[dict[str, str]]:
    rows = bulk_rows(8, prefix=prefix)
    rows[2]["reason"] = "FRAD"
    rows[3]["amount"] = "12.5x"  # invalid
    rows[5]["creditor_iban"] = "DE00"  # invalid
    rows[6]["reason"] = "TECH"
    return rows


def test_dry_run_sends_nothing_and_its_counts_are_the_runs(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    rows = _mixed_rows("E2E-DRY")
    precreate_payments(sb, [r["original_end_to_end_id"] for r in rows])
    src = write_csv(tmp_path / "dry.csv", rows)
    before = posts(sb)

    dry = run_cli(
        sb, "bulk-cancel", str(src), "--skip-invalid", "--dry-run", "--rate", "4", json_out=True
    )
    assert dry.exit_code == 0, dry.output
    plan = json.loads(dry.stdout)
    assert posts(sb) == before  # not even a token was asked for
    assert not (tmp_path / "dry.results.journal.sqlite").exists()  # no journal made
    valid = [r for i, r in enumerate(rows) if i not in (3, 5)]
    assert plan["rows"] == 8
    assert plan["to_send"] == 6
    assert plan["refused_rows"] == 2
    assert sorted(p["line"] for p in plan["refused"]) == [5, 7]
    assert {p["column"] for p in plan["refused"]} == {"amount", "creditor_iban"}
    assert plan["amounts"] == {"EUR": str(sum(Decimal(r["amount"]) for r in valid))}
    assert plan["reasons"] == dict(sorted(Counter(r["reason"] for r in valid).items()))
    assert plan["estimated_s"] == 6 * 2 / 4
    assert plan["earliest_recall_deadline"] is None

    text = run_cli(sb, "bulk-cancel", str(src), "--skip-invalid", "--dry-run")
    assert text.exit_code == 0, text.output
    assert "cancellation requests to send" in text.stdout
    assert "line 5: amount" in text.stdout
    assert "dry run: nothing was sent" in text.stderr
    assert posts(sb) == before

    # The real run (stdin is not a terminal: it asks nothing) shows the same counts.
    real = run_cli(sb, "bulk-cancel", str(src), "--skip-invalid", json_out=True)
    summary = json.loads(real.stdout)
    assert summary["invalid"] == plan["refused_rows"]
    assert summary["accepted"] == plan["to_send"]
    stored = cancellations_by_e2e(sb)
    assert {e2e: stored[e2e] for e2e in (r["original_end_to_end_id"] for r in valid)} == {
        r["original_end_to_end_id"]: 1 for r in valid
    }


def test_a_dry_run_of_bad_input_lists_the_problems_and_exits_2(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    src = write_csv(tmp_path / "bad.csv", _mixed_rows("E2E-DRYBAD"))
    before = posts(sb)
    result = CliRunner().invoke(
        cli, ["--sandbox", "--base-url", sb.url, "bulk-cancel", str(src), "--dry-run"]
    )
    assert result.exit_code == 2, result.output
    assert "line 5: amount" in result.stderr
    assert "Traceback" not in result.output
    assert posts(sb) == before


def _on_a_terminal(sb: ThreadedSandbox, args: list[str], answer: bytes) -> tuple[int, str]:
    """Run the CLI with a pseudo-terminal as stdin and stderr; answer its question."""
    main, child = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "payments_async", "--sandbox", "--base-url", sb.url, *args],
        stdin=child,
        stdout=subprocess.PIPE,
        stderr=child,
        env=env,
    )
    os.close(child)
    seen = b""
    deadline = time.monotonic() + 60
    asked = False
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(main, 4096)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
                if not asked and b"[y/N]" in seen:
                    os.write(main, answer)
                    asked = True
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=60)
    finally:
        os.close(main)
        if proc.poll() is None:
            proc.kill()
    assert proc.stdout is not None
    proc.stdout.close()
    return code, seen.decode(errors="replace")


def test_on_a_terminal_a_run_asks_first_and_a_no_sends_nothing(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    rows = bulk_rows(3, prefix="E2E-ASK")
    precreate_payments(sb, [r["original_end_to_end_id"] for r in rows])
    src = write_csv(tmp_path / "ask.csv", rows)
    before = posts(sb)
    code, seen = _on_a_terminal(sb, ["bulk-cancel", str(src)], b"n\n")
    assert code == 2, seen
    assert "send 3 cancellation request(s)?" in seen
    assert "not confirmed: nothing was sent" in seen
    assert posts(sb) == before

    code, seen = _on_a_terminal(sb, ["bulk-cancel", str(src)], b"y\n")
    assert code == 0, seen
    assert cancellations_by_e2e(sb)["E2E-ASK-000000"] == 1

    # Asked again, the question says the run is resumed: every row is final.
    code, seen = _on_a_terminal(sb, ["bulk-cancel", str(src)], b"n\n")
    assert code == 2, seen
    assert "its journal already holds a run of 3 rows (final 3)" in " ".join(seen.split())

    rows = bulk_rows(2, prefix="E2E-YES")
    precreate_payments(sb, [r["original_end_to_end_id"] for r in rows])
    src = write_csv(tmp_path / "yes.csv", rows)
    code, seen = _on_a_terminal(sb, ["bulk-cancel", str(src), "--yes"], b"")
    assert code == 0, seen
    assert "[y/N]" not in seen


def _attention_run(sb: ThreadedSandbox, tmp_path: Path, name: str, fmt: str) -> Path:
    """A run with every kind of row that needs a person: rejected with a return to
    request (CUST), refused by the service, unknown, invalid; and rows that need nobody
    (accepted, rejected NOOR)."""
    prefix = f"E2E-ATT{fmt.upper()}"
    rows = bulk_rows(9, prefix=prefix)
    e2e = [r["original_end_to_end_id"] for r in rows]
    precreate_payments(sb, e2e[:6])
    processed = {p.end_to_end_id: p.payments_service_id for p in _payments(sb, e2e[2:4])}
    for psid in processed.values():  # processed before the recall: funds with the payee
        sb.call(sb.server.settle_payment, psid, "ACCC")
    rows[7]["creditor_iban"] = "DE00"  # invalid
    src = (write_csv if fmt == "csv" else write_jsonl)(tmp_path / f"{name}.{fmt}", rows)

    # An earlier run of the same input recorded two rows as the service left them (the
    # sandbox refuses no valid camt.056 for good): row 4 refused (a 400 a rerun cannot
    # change), row 5 sent and answered with codes nobody can classify.
    line = _first_line(fmt)
    checked = read_input(src)
    journal = SqliteJournal.open(
        tmp_path / f"{name}.results.journal.sqlite",
        input_sha256=checked.sha256,
        new_run_id=f"RUN{fmt.upper()}",
    )
    journal.plan(plan_rows(checked, journal.run_id))

    async def earlier_run() -> None:
        await journal.mark_sent(line + 4)
        await journal.mark_error(
            line + 4, "ApiError: POST /payments/camt056/v08 -> 400 BODY_INVALID", final=True
        )
        await journal.mark_sent(line + 5)
        await journal.mark_acknowledged(line + 5, "cxl-earlier", True)
        await journal.mark_final(
            line + 5,
            outcome="unknown",
            status="ZZZZ",
            reason_codes=(),
            reason_text=None,
            return_request_needed=False,
        )

    asyncio.run(earlier_run())
    journal.close()
    result = run_cli(sb, "bulk-cancel", str(src), "--skip-invalid", json_out=True)
    summary = json.loads(result.stdout)
    assert (summary["accepted"], summary["rejected"], summary["refused"]) == (2, 4, 1), summary
    assert (summary["unknown"], summary["invalid"], summary["return_requests"]) == (1, 1, 2)
    return src


def _first_line(fmt: str) -> int:
    """The line of the first row: a CSV's header is line 1."""
    return 2 if fmt == "csv" else 1


def _payments(sb: ThreadedSandbox, e2e: list[str]) -> list[object]:
    return list(
        sb.call(lambda: [p for p in sb.server.state.payments.values() if p.end_to_end_id in e2e])
    )


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_the_rows_that_need_a_person_fed_back_after_a_fix_recall_nothing_twice(
    sb: ThreadedSandbox, tmp_path: Path, fmt: str
) -> None:
    name = f"att-{fmt}"
    src = _attention_run(sb, tmp_path, name, fmt)
    results = tmp_path / f"{name}.results.{'csv' if fmt == 'csv' else 'jsonl'}"
    out = tmp_path / f"fix.{fmt}"
    made = run_cli(
        sb,
        "bulk-results",
        "--results",
        str(results),
        "--needs-attention",
        str(src),
        "--output",
        str(out),
        json_out=True,
    )
    assert made.exit_code == 0, made.output
    info = json.loads(made.stdout)
    assert info["needs_attention"] == 5
    assert info["by_outcome"] == {"rejected": 2, "refused": 1, "unknown": 1, "invalid": 1}
    if fmt == "csv":
        with out.open(newline="", encoding="utf-8") as fh:
            att = list(csv.DictReader(fh))
        with src.open(newline="", encoding="utf-8") as fh:
            header = next(csv.reader(fh))
        assert list(att[0]) == [*header, "attention"]  # the input's own columns
    else:
        att = [json.loads(x) for x in out.read_text().splitlines()]
    by_line = {int(a["attention"].split(":")[0].removeprefix("line ")): a for a in att}
    line = _first_line(fmt)
    assert sorted(by_line) == [line + i for i in (2, 3, 4, 5, 7)]
    assert "pacs.004" in by_line[line + 2]["attention"]
    assert "pacs.004" in by_line[line + 3]["attention"]
    assert "refused by the service" in by_line[line + 4]["attention"]
    assert "check with the bank" in by_line[line + 5]["attention"]
    assert "invalid" in by_line[line + 7]["attention"]

    # The fix: a good IBAN for the invalid row (the refused one is sent as it is).
    by_line[line + 7]["creditor_iban"] = bulk_rows(1)[0]["creditor_iban"]
    fixed = list(by_line.values())
    (write_csv if fmt == "csv" else write_jsonl)(out, fixed)
    before = Counter(cancellations_by_e2e(sb))
    camt056 = sb.stats()["requests"].get("camt056", 0)
    journal = f"{name}.results.journal.sqlite"
    rerun = [str(out), "--journal", journal, "--new-run", "--skip-invalid"]
    # The dry run of the rerun counts what the rerun then does, and sends nothing.
    requests = posts(sb)
    plan = json.loads(run_cli(sb, "bulk-cancel", *rerun, "--dry-run", json_out=True).stdout)
    assert posts(sb) == requests
    assert (plan["to_send"], plan["refused_rows"]) == (2, 3), plan
    assert all("already has a cancellation recorded" in p["message"] for p in plan["refused"])
    without = run_cli(sb, "bulk-cancel", *rerun[:-1], "--dry-run", json_out=True)
    assert without.exit_code == 2  # as the run: the input is refused without --skip-invalid
    assert posts(sb) == requests

    again = run_cli(sb, "bulk-cancel", *rerun, json_out=True)
    summary = json.loads(again.stdout)
    assert summary["invalid"] == plan["refused_rows"]
    assert summary["accepted"] + summary["rejected"] == plan["to_send"]
    # Only the refused and the invalid row are sent; the rejected and unknown rows are
    # refused, their cancellation being recorded in the journal.
    assert sb.stats()["requests"].get("camt056", 0) - camt056 == 2
    assert summary["invalid"] == 3, summary
    after = cancellations_by_e2e(sb)
    assert all(n == 1 for e2e, n in after.items() if e2e.startswith("E2E-ATT")), after
    sent = {e2e for e2e in after if after[e2e] != before.get(e2e, 0)}
    assert sent == {fixed[2]["original_end_to_end_id"], fixed[4]["original_end_to_end_id"]}


def test_the_rows_of_an_xml_input_that_need_a_person_are_a_camt056_document(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    xml = pytest.importorskip("payments_async.iso20022.xml")
    from tests.integration.test_bulk_cli_xml import document

    data, ids = document("E2E-ATTXML", refused=2)  # transaction 2 carries two reasons
    src = tmp_path / "recall.xml"
    src.write_bytes(data)
    precreate_payments(sb, [ids[0], ids[2]])
    (processed,) = _payments(sb, [ids[2]])
    sb.call(sb.server.settle_payment, processed.payments_service_id, "ACCC")  # type: ignore[attr-defined]
    first = run_cli(sb, "bulk-cancel", str(src), "--skip-invalid", json_out=True)
    summary = json.loads(first.stdout)
    assert (summary["accepted"], summary["rejected"], summary["invalid"]) == (1, 1, 1), summary

    made = run_cli(
        sb,
        "bulk-results",
        "--results",
        "recall.results.csv",
        "--needs-attention",
        str(src),
        "--output",
        "fix.xml",
    )
    assert made.exit_code == 0, made.output
    fixed = (tmp_path / "fix.xml").read_bytes()
    assert b"<!-- attention: transaction 1: line 2: invalid input row" in fixed
    assert b"<!-- attention: transaction 2: line 3: rejected: request a return (pacs.004)" in fixed
    message = xml.from_xml(fixed)
    txs = [tx for und in message.body.undrlyg for tx in und.tx_inf]
    assert [tx.orgnl_end_to_end_id for tx in txs] == [ids[1], ids[2]]

    # The fix: one reason for transaction 1. Fed back, only it is sent.
    und = message.body.undrlyg[0]
    tx = msgspec.structs.replace(txs[0], cxl_rsn_inf=txs[0].cxl_rsn_inf[:1])
    body = msgspec.structs.replace(
        message.body,
        undrlyg=[
            msgspec.structs.replace(und, tx_inf=[tx, *und.tx_inf[1:]]),
            *message.body.undrlyg[1:],
        ],
    )
    mended = msgspec.structs.replace(message, fito_fi_pmt_cxl_req=body)
    (tmp_path / "fix.xml").write_bytes(xml.to_xml(mended))
    camt056 = sb.stats()["requests"].get("camt056", 0)
    again = run_cli(
        sb,
        "bulk-cancel",
        "fix.xml",
        "--journal",
        "recall.results.journal.sqlite",
        "--new-run",
        "--skip-invalid",
        json_out=True,
    )
    summary = json.loads(again.stdout)
    assert (summary["rejected"], summary["invalid"]) == (1, 1), summary
    assert sb.stats()["requests"].get("camt056", 0) - camt056 == 1
    stored = cancellations_by_e2e(sb)
    assert [stored[e2e] for e2e in ids] == [1, 1, 1]
