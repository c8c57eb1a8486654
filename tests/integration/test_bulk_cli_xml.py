"""``bulk-cancel`` reading an ISO 20022 camt.056 XML document, against the sandbox."""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner, Result

from payments_async import iso20022
from payments_async.bulk._input import BulkRow, build_row_message
from payments_async.cli import cli
from payments_async.sandbox import SandboxConfig
from tests.support.cli import (
    ThreadedSandbox,
    bulk_rows,
    precreate_payments,
    read_results,
    threaded_sandbox,
)

xml = pytest.importorskip("payments_async.iso20022.xml")

CAMT056_XSD = Path(__file__).parent.parent / "fixtures" / "xsd" / "camt.056.001.08.xsd"


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


def document(prefix: str, *, refused: int | None = None) -> tuple[bytes, list[str]]:
    """A camt.056 with three transactions (the ``refused``-th with two reasons)."""
    rows = [
        BulkRow(
            line=n,
            original_end_to_end_id=r["original_end_to_end_id"],
            amount=Decimal(r["amount"]),
            currency="EUR",
            creditor_agent_bic=r["creditor_agent_bic"],
            creditor_iban=r["creditor_iban"],
            reason=r["reason"],
            assigner_bic=r["assigner_bic"],
            assignee_bic=r["assignee_bic"],
            originator_name=r["originator_name"] or None,
        )
        for n, r in enumerate(bulk_rows(3, prefix=prefix), start=1)
    ]
    messages = [
        build_row_message(r, assignment_id=f"{prefix}-A{n}", cancellation_id=f"{prefix}-C{n}")
        for n, r in enumerate(rows, start=1)
    ]
    body = msgspec.structs.replace(
        messages[0].body,
        ctrl_data=None,
        undrlyg=[u for m in messages for u in m.body.undrlyg],
    )
    data = bytes(xml.to_xml(msgspec.structs.replace(messages[0], fito_fi_pmt_cxl_req=body)))
    if refused is not None:
        parts = re.split(rb"(?=<TxInf>)", data)
        reason = re.search(rb"<CxlRsnInf>.*?</CxlRsnInf>", parts[refused], re.S)
        assert reason is not None
        parts[refused] = parts[refused].replace(reason.group(0), reason.group(0) * 2)
        data = b"".join(parts)
    return data, [r.original_end_to_end_id for r in rows]


def test_each_transaction_is_a_row_and_one_with_two_reasons_is_refused(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    data, ids = document("E2E-XML", refused=2)
    src = tmp_path / "recall.xml"
    src.write_bytes(data)
    precreate_payments(sb, ids)

    requests = camt056_requests(sb)
    refused = bulk(sb, str(src))
    assert refused.exit_code == 2, refused.output
    assert (
        f"{src}: line 2: $.fitoFIPmtCxlReq.undrlyg[1].txInf[0].cxlRsnInf: 2 reasons: "
        "a bulk row carries exactly one"
    ) in refused.stderr
    assert "nothing was sent" in refused.stderr
    assert camt056_requests(sb) == requests

    skipped = bulk(sb, str(src), "--skip-invalid", "--xsd", str(CAMT056_XSD))
    assert skipped.exit_code == 0, skipped.output
    assert camt056_requests(sb) == requests + 2
    outcomes = {int(r["line"]): r["outcome"] for r in read_results(tmp_path / "recall.results.csv")}
    assert outcomes == {1: "accepted", 2: "invalid", 3: "accepted"}
    with sqlite3.connect(tmp_path / "recall.results.journal.sqlite") as db:
        bodies = dict(db.execute("SELECT line, body FROM rows WHERE body IS NOT NULL").fetchall())
    assert sorted(bodies) == [1, 3]
    for line, body in bodies.items():  # one camt.056 per request, its id the document's cxlId
        request = json.loads(body)["fitoFIPmtCxlReq"]
        assert request["assgnmt"]["id"] == f"E2E-XML-C{line}"
        [underlying] = request["undrlyg"]
        [tx] = underlying["txInf"]
        assert tx["orgnlEndToEndId"] == ids[line - 1]

    again = bulk(sb, str(src), "--skip-invalid")  # the journal knows the document's bytes
    assert again.exit_code == 0, again.output
    assert camt056_requests(sb) == requests + 2


def test_xsd_problems_stop_the_run_before_anything_is_sent(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    data, _ = document("E2E-XSD")
    src = tmp_path / "bad.xml"
    src.write_bytes(data.replace(b"<Cd>DUPL</Cd>", b"<Cd>DUPLICATE</Cd>", 1))
    requests = camt056_requests(sb)
    result = bulk(sb, str(src), "--xsd", str(CAMT056_XSD))
    assert result.exit_code == 2, result.output
    assert "not a valid camt.056.001.08 document" in result.stderr
    assert "cxlRsnInf.rsn.cd: value length" in result.stderr
    assert camt056_requests(sb) == requests

    csv_input = tmp_path / "in.csv"
    csv_input.write_text("original_end_to_end_id\n", encoding="utf-8")
    result = bulk(sb, str(csv_input), "--xsd", str(CAMT056_XSD))
    assert result.exit_code == 2, result.output
    assert "is not XML" in result.stderr


def test_without_the_extra_the_cli_says_what_to_install(
    sb: ThreadedSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, _ = document("E2E-NOX")
    src = tmp_path / "recall.xml"
    src.write_bytes(data)
    monkeypatch.setitem(sys.modules, "xmlschema", None)
    monkeypatch.delitem(sys.modules, "payments_async.iso20022.xml", raising=False)
    monkeypatch.delattr(iso20022, "xml", raising=False)
    result = bulk(sb, str(src))
    assert result.exit_code == 2, result.output
    assert "pip install 'payments-async[xml]'" in result.stderr
    assert "Traceback" not in result.output
