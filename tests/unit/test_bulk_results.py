"""The results file: one line per input row, CSV or JSONL, outcome and advice."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from payments_async.bulk import RESULT_COLUMNS, RowState
from payments_async.bulk._results import write_results

ROWS = [
    RowState(
        2,
        "E2E-1",
        "BC-R-2",
        "CX-R-2",
        b"{}",
        "final",
        payments_service_id="cxl-1",
        created=True,
        attempts=1,
        outcome="accepted",
        status="ACCC",
    ),
    RowState(
        3,
        "E2E-2",
        "BC-R-3",
        "CX-R-3",
        b"{}",
        "final",
        payments_service_id="cxl-2",
        created=False,
        attempts=2,
        outcome="rejected",
        status="RJTC",
        reason_codes=("ARDT",),
        reason_text="already processed",
        return_request_needed=True,
    ),
    RowState(4, "E2E-3", "BC-R-4", "CX-R-4", b"{}", "sent", attempts=1, error="ServerError"),
    RowState(5, "E2E-4", "BC-R-5", "CX-R-5", b"{}", "planned"),
    RowState(6, None, None, None, None, "invalid", error="amount: not a decimal number"),
    RowState(
        7,
        "E2E-7",
        "BC-R-7",
        "CX-R-7",
        b"{}",
        "final",
        attempts=1,
        outcome="refused",
        error="ApiError: POST /payments/camt056/v08: -> 400: duplicate [DUPLICATE_MESSAGE_ID]",
    ),
    RowState(
        8,
        "E2E-8",
        "BC-R-8",
        "CX-R-8",
        b"{}",
        "planned",
        attempts=1,
        error="ServerError: POST /oauth/token: -> 503",
    ),
    RowState(9, "E2E-9", "BC-R-9", "CX-R-9", b"{}", "acknowledged", payments_service_id="c-9"),
]


def test_csv_results(tmp_path: Path) -> None:
    path = write_results(tmp_path / "out" / "r.csv", ROWS)
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        assert tuple(reader.fieldnames or ()) == RESULT_COLUMNS
        got = list(reader)
    # A refused row says so; a row that never left is "not_sent", one that
    # left without an answer "in_flight", an acknowledged one "pending".
    assert [r["outcome"] for r in got] == [
        "accepted",
        "rejected",
        "in_flight",
        "not_sent",
        "invalid",
        "refused",
        "not_sent",
        "pending",
    ]
    assert "DUPLICATE_MESSAGE_ID" in got[5]["reason"]
    assert got[6]["reason"] == "ServerError: POST /oauth/token: -> 503"
    assert got[1]["return_request_needed"] == "true"
    assert got[1]["replayed"] == "true"
    assert got[1]["reason_codes"] == "ARDT"
    assert got[1]["reason"] == "already processed"
    assert got[2]["reason"] == "ServerError"
    assert got[4]["reason"] == "amount: not a decimal number"
    assert not list(tmp_path.joinpath("out").glob(".*.tmp"))


def test_jsonl_results(tmp_path: Path) -> None:
    path = write_results(tmp_path / "r.jsonl", ROWS)
    got = [json.loads(line) for line in path.read_text().splitlines()]
    assert got[0]["payments_service_id"] == "cxl-1"
    assert got[0]["replayed"] is False
    assert got[1]["reason_codes"] == ["ARDT"]
    assert got[1]["return_request_needed"] is True
    assert got[3]["replayed"] is None
