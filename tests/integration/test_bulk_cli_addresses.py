"""``bulk-cancel`` with the creditor agent's address in its rows, against the sandbox."""

from __future__ import annotations

import json
import sqlite3
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
    read_results,
    threaded_sandbox,
    write_csv,
    write_jsonl,
)

STRUCTURED = {
    "street": "Kaiserstrasse",
    "building": "16",
    "post_code": "60311",
    "town": "Frankfurt am Main",
    "country": "DE",
}
HYBRID = {"town": "Paris", "country": "FR", "lines": ["12 rue des Lilas", "Batiment B"]}
UNSTRUCTURED = {"lines": ["Hauptstrasse 1", "10115 Berlin"]}


@pytest.fixture(scope="module")
def sb() -> Iterator[ThreadedSandbox]:
    # Payments stay unprocessed for the whole module: their cancellations are accepted.
    with threaded_sandbox(SandboxConfig(processing_delay=600, settlement_delay=0.1)) as s:
        yield s


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def bulk(sb: ThreadedSandbox, *args: str) -> Result:
    pre = ["--sandbox", "--base-url", sb.url]
    return CliRunner().invoke(cli, [*pre, "bulk-cancel", *args], catch_exceptions=False)


def camt056_requests(sb: ThreadedSandbox) -> int:
    return int(sb.stats()["requests"].get("camt056", 0))


def sent_addresses(journal: Path) -> dict[int, object]:
    """Each sent row's ``cdtrAgt.finInstnId.pstlAdr``, from the bytes the journal recorded."""
    with sqlite3.connect(journal) as db:
        bodies = db.execute("SELECT line, body FROM rows WHERE body IS NOT NULL").fetchall()
    out: dict[int, object] = {}
    for line, body in bodies:
        tx = json.loads(body)["fitoFIPmtCxlReq"]["undrlyg"][0]["txInf"][0]
        out[line] = tx["orgnlTxRef"]["cdtrAgt"]["finInstnId"].get("pstlAdr")
    return out


def csv_address(address: dict[str, object]) -> dict[str, str]:
    return {
        f"creditor_agent_{k}": "|".join(v) if isinstance(v, list) else str(v)
        for k, v in address.items()
    }


def results(path: Path) -> list[dict[str, str]]:
    if path.suffix == ".csv":
        return read_results(path)
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_address_rows_are_sent_with_their_address_and_an_unstructured_one_is_not(
    sb: ThreadedSandbox, tmp_path: Path, fmt: str
) -> None:
    rows: list[dict[str, object]] = list(bulk_rows(4, prefix=f"E2E-ADR-{fmt.upper()}"))
    precreate_payments(sb, [str(r["original_end_to_end_id"]) for r in rows])
    addresses = [STRUCTURED, HYBRID, UNSTRUCTURED, None]
    if fmt == "csv":
        columns = {c: "" for a in addresses if a for c in csv_address(a)}
        for row, address in zip(rows, addresses, strict=True):
            row.update(columns | (csv_address(address) if address else {}))
        src = write_csv(tmp_path / "in.csv", rows)  # type: ignore[arg-type]
    else:
        for row, address in zip(rows, addresses, strict=True):
            if address:
                row["creditor_agent_address"] = address
        src = write_jsonl(tmp_path / "in.jsonl", rows)
    first = 2 if fmt == "csv" else 1  # a CSV's line 1 is its header

    requests = camt056_requests(sb)
    refused = bulk(sb, str(src))
    assert refused.exit_code == 2, refused.output
    assert f"{src}: line {first + 2}: creditor_agent_address: unstructured" in refused.stderr
    assert "nothing was sent" in refused.stderr
    assert camt056_requests(sb) == requests

    skipped = bulk(sb, str(src), "--skip-invalid")
    assert camt056_requests(sb) == requests + 3, skipped.output
    assert skipped.exit_code == 0, skipped.output  # every row sent was accepted
    outcomes = {int(r["line"]): r["outcome"] for r in results(tmp_path / f"in.results.{fmt}")}
    assert outcomes == {
        first: "accepted",
        first + 1: "accepted",
        first + 2: "invalid",
        first + 3: "accepted",
    }
    sent = sent_addresses(tmp_path / "in.results.journal.sqlite")
    assert sent == {
        first: {
            "strtNm": "Kaiserstrasse",
            "bldgNb": "16",
            "pstCd": "60311",
            "twnNm": "Frankfurt am Main",
            "ctry": "DE",
        },
        first + 1: {"twnNm": "Paris", "ctry": "FR", "adrLine": ["12 rue des Lilas", "Batiment B"]},
        first + 3: None,
    }


def test_cancel_takes_a_row_object_with_an_address_and_refuses_an_unstructured_one(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    ok, bad = bulk_rows(2, prefix="E2E-ADR-ONE")
    precreate_payments(sb, [ok["original_end_to_end_id"]])
    good_file = tmp_path / "ok.json"
    good_file.write_text(json.dumps(ok | {"creditor_agent_address": STRUCTURED}))
    bad_file = tmp_path / "bad.json"
    bad_file.write_text(json.dumps(bad | {"creditor_agent_address": UNSTRUCTURED}))
    pre = ["--sandbox", "--base-url", sb.url]

    requests = camt056_requests(sb)
    refused = CliRunner().invoke(cli, [*pre, "cancel", str(bad_file)])
    assert refused.exit_code == 2, refused.output
    assert "creditor_agent_address: unstructured address" in refused.stderr
    assert camt056_requests(sb) == requests

    sent = CliRunner().invoke(cli, [*pre, "--json", "cancel", str(good_file), "--wait"])
    assert sent.exit_code == 0, sent.output
    assert json.loads(sent.stdout)["outcome"]["outcome"] == "accepted"
    assert camt056_requests(sb) == requests + 1
