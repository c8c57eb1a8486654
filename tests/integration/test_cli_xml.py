"""The command line with ISO 20022 XML: XML input files, ``status``/``outcome --xml``."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from payments_async import iso20022
from payments_async.cli import cli
from payments_async.cli._context import Settings
from payments_async.cli._xml import is_xml, print_xml
from payments_async.iso20022 import (
    Address,
    build_cancellation,
    build_credit_transfer,
    decode_pacs002,
)
from payments_async.iso20022.xml import to_xml
from payments_async.sandbox import SandboxConfig
from tests.support.cli import ThreadedSandbox, threaded_sandbox

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
XSD = FIXTURES / "xsd"
CREDITOR_IBAN = "DE89370400440532013000"
PACS002_NS = "urn:iso:std:iso:20022:tech:xsd:pacs.002.001.12"
CAMT029_NS = "urn:iso:std:iso:20022:tech:xsd:camt.029.001.09"


@pytest.fixture(scope="module")
def sb() -> Iterator[ThreadedSandbox]:
    with threaded_sandbox(SandboxConfig(processing_delay=0.5, settlement_delay=0.1)) as sandbox:
        yield sandbox


def run(sb: ThreadedSandbox, *args: str) -> Result:
    return CliRunner().invoke(
        cli, ["--base-url", sb.url, "--sandbox", *args], catch_exceptions=False
    )


def _pay_xml(tmp_path: Path) -> tuple[Path, str]:
    msg = build_credit_transfer(
        debtor_name="Alice Martin",
        debtor_iban="FR1420041010050500013M02606",
        debtor_agent_id="30004",
        creditor_name="Bob Schmidt",
        creditor_iban=CREDITOR_IBAN,
        creditor_agent_id="37040044",
        amount=Decimal("42.00"),
        debtor_address=Address(
            street="rue de la Paix", building="1", post_code="75002", town="Paris", country="FR"
        ),
    )
    path = tmp_path / "pay.xml"
    # Detected by content, after white space (which XML allows only without a declaration).
    path.write_bytes(b"\n  " + to_xml(msg).partition(b"?>")[2].lstrip())
    return path, msg.end_to_end_id


def _psid(result: Result) -> str:
    for line in result.stdout.splitlines():
        if "payments service id" in line.lower() or "paymentsserviceid" in line.lower():
            return line.split()[-1]
    raise AssertionError(result.stdout)


def test_is_xml_looks_at_the_first_byte_that_is_not_white_space() -> None:
    assert is_xml(b"<?xml version='1.0'?><Document/>")
    assert is_xml(b"\xef\xbb\xbf \n\t<Document/>")
    assert not is_xml(b'  {"fitoFICstmrCdtTrf": {}}')
    assert not is_xml(b"")


def test_pay_an_xml_file_then_read_the_status_as_xml(sb: ThreadedSandbox, tmp_path: Path) -> None:
    path, e2e = _pay_xml(tmp_path)
    result = run(sb, "--json", "pay", str(path), "--xsd", str(XSD / "pacs.008.001.10.xsd"))
    assert result.exit_code == 0, result.output
    assert f'"end_to_end_id":"{e2e}"' in result.stdout
    psid = result.stdout.split('"payments_service_id":"')[1].split('"')[0]

    shown = run(sb, "status", psid, "--wait", "--timeout", "20", "--xml")
    assert shown.exit_code == 0, shown.output
    root = ET.fromstring(shown.stdout.encode())
    assert root.tag == f"{{{PACS002_NS}}}Document"
    assert root.findtext(".//{*}TxInfAndSts/{*}TxSts") == "ACCC"

    assert root.find("{*}FIToFIPmtStsRpt/{*}GrpHdr/{*}MsgId") is not None
    assert shown.stderr == ""


def test_an_incomplete_answer_is_printed_with_notes_of_what_it_lacks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The spec's pacs.002 sample has no group header: printed all the same, then noted.
    report = decode_pacs002((FIXTURES / "pacs002_accc.json").read_bytes())
    print_xml(Settings(), report, XSD / "pacs.002.001.12-reduced.xsd")
    out, err = capsys.readouterr()
    assert ET.fromstring(out.encode()).tag == f"{{{PACS002_NS}}}Document"
    assert "note: $.fitoFIPmtStsRpt: missing grpHdr (GrpHdr) before txInfAndSts" in err
    print_xml(Settings(), report, None)
    assert capsys.readouterr().err == ""


def test_cancel_an_xml_file_then_read_the_outcome_as_xml(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    path, e2e = _pay_xml(tmp_path)
    assert run(sb, "pay", str(path)).exit_code == 0
    msg = build_cancellation(
        original_end_to_end_id=e2e,
        amount=Decimal("42.00"),
        creditor_agent_bic="COBADEFFXXX",
        creditor_iban=CREDITOR_IBAN,
        reason="DUPL",
        assigner_bic="BNPAFRPPXXX",
        assignee_bic="COBADEFFXXX",
    )
    cxl = tmp_path / "cancel.xml"
    cxl.write_bytes(to_xml(msg))
    result = run(sb, "--json", "cancel", str(cxl), "--wait", "--timeout", "20")
    assert result.exit_code == 0, result.output
    psid = result.stdout.split('"payments_service_id":"')[1].split('"')[0]

    shown = run(sb, "outcome", psid, "--xml")
    assert shown.exit_code == 0, shown.output
    root = ET.fromstring(shown.stdout.encode())
    assert root.tag == f"{{{CAMT029_NS}}}Document"
    assert root.find("{*}RsltnOfInvstgtn") is not None


def test_the_wrong_message_in_xml_is_refused_before_sending(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    msg = build_cancellation(
        original_end_to_end_id="E2E-1",
        amount=None,
        creditor_agent_bic="COBADEFFXXX",
        creditor_iban=CREDITOR_IBAN,
        assigner_bic="BNPAFRPPXXX",
        assignee_bic="COBADEFFXXX",
    )
    path = tmp_path / "camt.xml"
    path.write_bytes(to_xml(msg))
    before = sb.stats()["payments_stored"]
    result = run(sb, "pay", str(path))
    assert result.exit_code == 2
    assert "holds a Camt056, not a pacs.008" in result.stderr
    broken = tmp_path / "broken.xml"
    broken.write_bytes(b"<Document><oops></Document>")
    result = run(sb, "cancel", str(broken))
    assert result.exit_code == 2
    assert "malformed XML" in result.stderr
    assert "Traceback" not in result.output
    assert sb.stats()["payments_stored"] == before


def test_without_the_extra_the_cli_says_what_to_install(
    sb: ThreadedSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = _pay_xml(tmp_path)
    monkeypatch.setitem(sys.modules, "xmlschema", None)
    monkeypatch.delitem(sys.modules, "payments_async.iso20022.xml", raising=False)
    monkeypatch.delattr(iso20022, "xml", raising=False)
    for args in (["pay", str(path)], ["status", "PSID-1", "--xml"]):
        result = run(sb, *args)
        assert result.exit_code == 2, result.output
        assert "pip install 'payments-async[xml]'" in result.stderr
        assert "Traceback" not in result.output
