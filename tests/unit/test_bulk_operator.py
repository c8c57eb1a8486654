"""What an operator reads of a run, without a service: the plan's figures, the rows that
need a person, the report's size whatever the run's."""

from __future__ import annotations

import csv
import dataclasses
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from payments_async.bulk import (
    RowOutcome,
    RowState,
    Stage,
    plan_summary,
    read_results,
    run_report,
    write_attention,
)
from payments_async.bulk._attention import attention_reason
from payments_async.bulk._input import check_input, read_input
from payments_async.bulk._report import REPORT_ROWS
from payments_async.bulk._results import write_results
from tests.support.cli import bulk_rows, write_csv, write_jsonl


def _state(line: int, outcome: RowOutcome, **kw: Any) -> RowState:
    stage = {
        RowOutcome.PENDING: Stage.ACKNOWLEDGED,
        RowOutcome.IN_FLIGHT: Stage.SENT,
        RowOutcome.INVALID: Stage.INVALID,
    }.get(outcome, Stage.FINAL)
    return RowState(
        line=line,
        original_end_to_end_id=f"E2E-{line}",
        assignment_id=f"A-{line}",
        cancellation_id=f"C-{line}",
        body=None,
        state=stage,
        outcome=outcome if stage is Stage.FINAL else None,
        **kw,
    )


ROWS = [
    _state(2, RowOutcome.ACCEPTED),
    _state(3, RowOutcome.REJECTED, return_request_needed=True, reason_codes=("CUST",)),
    _state(4, RowOutcome.REJECTED, reason_codes=("NOOR",)),
    _state(5, RowOutcome.REFUSED, error="ApiError: 400 BODY_INVALID"),
    _state(6, RowOutcome.UNKNOWN, reason_text="codes ZZZZ"),
    _state(7, RowOutcome.PENDING),
    _state(8, RowOutcome.IN_FLIGHT),
    _state(9, RowOutcome.NOT_SENT, error="TransportError: refused"),
    _state(10, RowOutcome.INVALID, error="creditor_iban: bad"),
]


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_a_results_file_reads_back_with_json_types(tmp_path: Path, suffix: str) -> None:
    path = write_results(tmp_path / f"r{suffix}", ROWS)
    records = list(read_results(path))
    assert [r["line"] for r in records] == list(range(2, 11))
    assert records[1]["return_request_needed"] is True
    assert records[1]["reason_codes"] == ["CUST"]
    assert records[2]["return_request_needed"] is False
    assert records[0]["attempts"] == 0
    needing = {r["line"]: attention_reason(r) for r in records}
    assert {line for line, why in needing.items() if why} == {3, 5, 6, 9, 10}
    assert "pacs.004" in str(needing[3])
    assert "BODY_INVALID" in str(needing[5])


def test_a_file_that_is_not_a_results_file_is_refused(tmp_path: Path) -> None:
    src = write_csv(tmp_path / "in.csv", bulk_rows(2))
    with pytest.raises(ValueError, match="not a results file"):
        list(read_results(src))


def test_the_attention_file_keeps_the_inputs_columns_and_is_an_input_again(
    tmp_path: Path,
) -> None:
    rows = bulk_rows(9)
    src = write_csv(tmp_path / "in.csv", rows)
    results = write_results(tmp_path / "in.results.csv", ROWS)
    out = write_attention(src, results, tmp_path / "fix.csv")
    assert (out.rows, out.by_outcome) == (
        5,
        {"rejected": 1, "refused": 1, "unknown": 1, "not_sent": 1, "invalid": 1},
    )
    with (tmp_path / "fix.csv").open(newline="") as fh:
        written = list(csv.DictReader(fh))
    assert [r["original_end_to_end_id"] for r in written] == [
        rows[i - 2]["original_end_to_end_id"] for i in (3, 5, 6, 9, 10)
    ]
    assert all(
        r["attention"].startswith(f"line {i}: ")
        for r, i in zip(written, (3, 5, 6, 9, 10), strict=True)
    )
    again = read_input(tmp_path / "fix.csv")  # the attention column is ignored
    assert (len(again.rows), again.errors) == (5, ())


def test_the_attention_file_of_a_jsonl_input_keeps_its_fields_and_numbers(tmp_path: Path) -> None:
    rows: list[dict[str, Any]] = [dict(r) for r in bulk_rows(9)]
    for r in rows:
        r["amount"] = float(r["amount"])  # JSON numbers stay numbers
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    # A JSONL input has no header: its rows are lines 1 to 9.
    shifted = [dataclasses.replace(r, line=r.line - 1) for r in ROWS]
    results = write_results(tmp_path / "in.results.jsonl", shifted)
    out = write_attention(src, results, tmp_path / "fix.jsonl")
    written = [json.loads(x) for x in (tmp_path / "fix.jsonl").read_text().splitlines()]
    assert out.rows == len(written) == 5
    assert written[0]["amount"] == rows[1]["amount"]
    assert list(written[0])[: len(rows[1])] == list(rows[1])
    assert read_input(tmp_path / "fix.jsonl").errors == ()


def test_an_input_changed_since_the_run_is_refused(tmp_path: Path) -> None:
    src = write_csv(tmp_path / "in.csv", bulk_rows(3))
    results = write_results(tmp_path / "r.csv", ROWS)
    with pytest.raises(ValueError, match="does not hold every line"):
        write_attention(src, results, tmp_path / "fix.csv")
    assert not (tmp_path / "fix.csv").exists()


def test_the_plan_adds_up_amounts_and_reasons_and_lists_the_refused_rows(tmp_path: Path) -> None:
    rows = bulk_rows(5)
    rows[2]["reason"] = "FRAD"
    rows[3]["amount"] = "-1"
    src = write_csv(tmp_path / "in.csv", rows)
    plan = plan_summary(check_input(src))
    valid = [rows[i] for i in (0, 1, 2, 4)]
    assert (plan.rows, plan.to_send, plan.refused_rows) == (5, 4, 1)
    assert plan.amounts == {"EUR": sum(Decimal(r["amount"]) for r in valid)}
    assert plan.reasons == {"DUPL": 3, "FRAD": 1}
    assert {e.line for e in plan.refused} == {5}
    assert plan.estimated_seconds(None) is None
    assert plan.estimated_seconds(8) == 1.0
    assert plan.as_dict(8)["amounts"]["EUR"] == str(plan.amounts["EUR"])


def _records(n: int) -> list[dict[str, Any]]:
    kinds = [
        {"outcome": "accepted"},
        {"outcome": "rejected", "return_request_needed": True, "reason_codes": ["CUST"]},
        {"outcome": "rejected", "reason_codes": ["NOOR"]},
        {"outcome": "pending"},
        {"outcome": "refused", "reason": "ApiError: 400"},
    ]
    return [
        {
            "line": i + 2,
            "original_end_to_end_id": f"E2E-{i}",
            "attempts": 1 + i % 3,
            **kinds[i % len(kinds)],
        }
        for i in range(n)
    ]


@pytest.mark.slow
def test_a_report_lists_a_bounded_number_of_rows_whatever_the_runs_size() -> None:
    # Each listed kind has 400 rows in the small run (past REPORT_ROWS: its page is
    # already at the cap) and 10,000 in the large one: a page listing every row would be
    # some 25 times the small page and past a megabyte, so the bounds below fail.
    pytest.importorskip("matplotlib")
    small = run_report(_records(2_000), "small")
    large = run_report(_records(50_000), "large")
    assert len(small.return_request_rows) == len(small.pending_rows) == REPORT_ROWS
    assert large.totals.rows == 50_000
    assert large.totals.counts[RowOutcome.REJECTED] == 20_000
    assert large.totals.return_requests == 10_000
    assert len(large.return_request_rows) == len(large.pending_rows) == REPORT_ROWS
    page = large.to_html(attention_hint="bulk-results --needs-attention in.csv")
    assert "<script" not in page
    assert "bulk-results --needs-attention in.csv" in page
    assert len(page) < 1.1 * len(small.to_html())  # the page does not grow with the run
    assert len(page) < 1_000_000
    assert json.dumps(large.as_dict())  # JSON as it stands


def test_without_matplotlib_the_report_gives_tables_and_says_how_to_get_charts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # an import of it fails
    page = run_report(_records(10), "t").to_html()
    assert "<svg" not in page
    assert "payments-async[report]" in page
