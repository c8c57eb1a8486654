"""Bulk input as an ISO 20022 camt.056 XML document: one row per transaction, nothing dropped."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import msgspec
import pytest

from payments_async.bulk._input import BulkRow, build_row_message, check_input, read_input
from payments_async.bulk._plan import plan_rows
from payments_async.iso20022 import Camt056

xml = pytest.importorskip("payments_async.iso20022.xml")

HEADER = (
    "original_end_to_end_id,amount,currency,creditor_agent_bic,creditor_iban,reason,"
    "assigner_bic,assignee_bic,originator_name,assignment_id,creditor_agent_street,"
    "creditor_agent_building,creditor_agent_post_code,creditor_agent_town,creditor_agent_country"
)
ROWS = (
    "E2E-1,250.00,EUR,COBADEFFXXX,DE89370400440532013000,DUPL,BNPAFRPPXXX,COBADEFFXXX,"
    "Alice Martin,RECALL-1,,,,,",
    "E2E-2,1200.50,EUR,DEUTDEFFXXX,DE02100100109307118603,FRAD,BNPAFRPPXXX,COBADEFFXXX,,"
    "RECALL-2,,,,,",
    "E2E-3,480.00,EUR,COBADEFFXXX,DE89370400440532013000,TECH,BNPAFRPPXXX,COBADEFFXXX,"
    "Bob,RECALL-3,Kaiserstrasse,16,60311,Frankfurt am Main,DE",
)


def _one_document(messages: list[Camt056]) -> bytes:
    """The messages' transactions in one camt.056, as a back office writes it."""
    first = messages[0].body
    body = msgspec.structs.replace(
        first,
        ctrl_data=None,
        undrlyg=[u for m in messages for u in m.body.undrlyg],
    )
    return bytes(xml.to_xml(msgspec.structs.replace(messages[0], fito_fi_pmt_cxl_req=body)))


def _rows_document(rows: tuple[BulkRow, ...]) -> bytes:
    return _one_document(
        [
            build_row_message(r, assignment_id=r.assignment_id, cancellation_id=r.assignment_id)
            for r in rows
        ]
    )


def _csv_rows(tmp_path: Path) -> tuple[BulkRow, ...]:
    p = tmp_path / "in.csv"
    p.write_text("\n".join((HEADER, *ROWS)) + "\n", encoding="utf-8")
    bulk = read_input(p)
    assert bulk.errors == ()
    return bulk.rows


def _write(tmp_path: Path, data: bytes, name: str = "in.xml") -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def test_csv_rows_round_trip_through_one_multi_transaction_document(tmp_path: Path) -> None:
    rows = _csv_rows(tmp_path)
    doc = _write(tmp_path, _rows_document(rows), name="any-name.txt")  # told by its content
    bulk = read_input(doc)
    assert bulk.errors == ()
    assert bulk.xml
    assert [r.line for r in bulk.rows] == [1, 2, 3]  # positions, in document order
    assert bulk.rows == tuple(dataclasses.replace(r, line=n) for n, r in enumerate(rows, start=1))
    assert rows[2].creditor_agent_address is not None


def test_each_row_is_planned_as_its_own_camt056(tmp_path: Path) -> None:
    rows = _csv_rows(tmp_path)
    bulk = read_input(_write(tmp_path, _rows_document(rows)))
    planned = plan_rows(bulk, "RUN1")
    assert [p.assignment_id for p in planned] == ["RECALL-1", "RECALL-2", "RECALL-3"]
    assert [p.original_end_to_end_id for p in planned] == ["E2E-1", "E2E-2", "E2E-3"]
    for p in planned:
        assert p.body is not None
        assert p.body.count(b'"txInf"') == 1


def test_the_digest_is_over_the_files_bytes(tmp_path: Path) -> None:
    import hashlib

    data = _rows_document(_csv_rows(tmp_path))
    checked = check_input(_write(tmp_path, data))
    assert checked.sha256 == hashlib.sha256(data).hexdigest()
    assert checked.valid == 3
    assert checked.xml


def _tamper(data: bytes, position: int, old: bytes, new: bytes) -> bytes:
    """``data`` with ``old`` replaced by ``new`` in the ``position``-th ``<TxInf>`` only."""
    parts = re.split(rb"(?=<TxInf>)", data)
    assert old in parts[position]
    parts[position] = parts[position].replace(old, new, 1)
    return b"".join(parts)


def test_a_second_reason_is_refused_with_the_transactions_position_and_path(
    tmp_path: Path,
) -> None:
    data = _rows_document(_csv_rows(tmp_path))
    reason = re.search(rb"<CxlRsnInf>.*?</CxlRsnInf>", data.split(b"<TxInf>")[2], re.S)
    assert reason is not None
    data = _tamper(data, 2, reason.group(0), reason.group(0) * 2)
    bulk = read_input(_write(tmp_path, data))
    assert [r.line for r in bulk.rows] == [1, 3]
    assert bulk.invalid_lines == (2,)
    assert not bulk.fatal  # the other transactions can still run (--skip-invalid)
    assert [str(e) for e in bulk.errors] == [
        "line 2: $.fitoFIPmtCxlReq.undrlyg[1].txInf[0].cxlRsnInf: "
        "2 reasons: a bulk row carries exactly one"
    ]


def test_an_originator_bic_other_than_the_assigners_is_refused_not_dropped(
    tmp_path: Path,
) -> None:
    data = _rows_document(_csv_rows(tmp_path))
    data = _tamper(data, 1, b"<AnyBIC>BNPAFRPPXXX</AnyBIC>", b"<AnyBIC>INGBNL2AXXX</AnyBIC>")
    bulk = read_input(_write(tmp_path, data))
    assert bulk.invalid_lines == (1,)
    assert [(e.line, e.column) for e in bulk.errors] == [
        (1, "$.fitoFIPmtCxlReq.undrlyg[0].txInf[0].cxlRsnInf[0].orgtr.id.orgId.anyBIC")
    ]
    assert "cannot be carried by a bulk row" in bulk.errors[0].message


def test_a_sepa_rule_is_named_by_its_path_in_the_document(tmp_path: Path) -> None:
    data = _rows_document(_csv_rows(tmp_path))
    data = _tamper(data, 3, b"<Ctry>DE</Ctry>", b"<Ctry>DE</Ctry><AdrLine>a</AdrLine>" * 1)
    data = _tamper(data, 3, b"<IBAN>DE89370400440532013000</IBAN>", b"<IBAN>DE5212345678</IBAN>")
    bulk = read_input(_write(tmp_path, data))
    assert bulk.invalid_lines == (3,)
    columns = {e.column for e in bulk.errors}
    assert "$.fitoFIPmtCxlReq.undrlyg[2].txInf[0].orgnlTxRef.cdtrAcct.id.iban" in columns


def test_two_transactions_for_one_payment_are_refused(tmp_path: Path) -> None:
    data = _rows_document(_csv_rows(tmp_path))
    data = _tamper(data, 2, b"E2E-2", b"E2E-1")
    bulk = read_input(_write(tmp_path, data))
    assert [str(e) for e in bulk.errors] == [
        "line 2: $.fitoFIPmtCxlReq.undrlyg[1].txInf[0].orgnlEndToEndId: same as transaction 1"
    ]


def test_a_document_that_is_not_a_camt056_is_fatal(tmp_path: Path) -> None:
    bulk = read_input(_write(tmp_path, b"<?xml version='1.0'?><Document xmlns='urn:x'/>"))
    assert bulk.fatal
    assert bulk.rows == ()
    assert all(e.line == 0 for e in bulk.errors)
    assert [str(e) for e in bulk.errors] == [
        "document: not a pacs.008.001.10, camt.056.001.08 or pacs.028.001.03 document (root "
        "'Document' in namespace 'urn:x')"
    ]


def test_a_wrong_transaction_count_is_fatal(tmp_path: Path) -> None:
    rows = _csv_rows(tmp_path)
    messages = [
        build_row_message(r, assignment_id=r.assignment_id, cancellation_id=r.assignment_id)
        for r in rows
    ]
    body = msgspec.structs.replace(
        messages[0].body, undrlyg=[u for m in messages for u in m.body.undrlyg]
    )  # ctrlData still says 1
    data = xml.to_xml(msgspec.structs.replace(messages[0], fito_fi_pmt_cxl_req=body))
    bulk = read_input(_write(tmp_path, data))
    assert bulk.fatal
    assert [str(e) for e in bulk.errors] == [
        "document: $.fitoFIPmtCxlReq.ctrlData.nbOfTxs: says 1 transaction(s), holds 3"
    ]


def test_a_count_written_with_leading_zeros_is_the_same_count(tmp_path: Path) -> None:
    rows = _csv_rows(tmp_path)
    messages = [
        build_row_message(r, assignment_id=r.assignment_id, cancellation_id=r.assignment_id)
        for r in rows
    ]
    body = msgspec.structs.replace(
        messages[0].body, undrlyg=[u for m in messages for u in m.body.undrlyg]
    )
    data = xml.to_xml(msgspec.structs.replace(messages[0], fito_fi_pmt_cxl_req=body))
    data = data.replace(b"<NbOfTxs>1</NbOfTxs>", f"<NbOfTxs>0{len(rows)}</NbOfTxs>".encode())
    assert f"<NbOfTxs>0{len(rows)}</NbOfTxs>".encode() in data  # the schema allows it
    bulk = read_input(_write(tmp_path, data))
    assert not bulk.fatal, [str(e) for e in bulk.errors]


def test_a_payment_type_other_than_sepa_is_refused_not_dropped(tmp_path: Path) -> None:
    data = _rows_document(_csv_rows(tmp_path))
    data = _tamper(data, 1, b"<Prtry>SEPA</Prtry>", b"<Prtry>URGP</Prtry>")
    bulk = read_input(_write(tmp_path, data))
    assert bulk.invalid_lines == (1,)
    assert [e.column for e in bulk.errors] == [
        "$.fitoFIPmtCxlReq.undrlyg[0].txInf[0].orgnlTxRef.pmtTpInf.svcLvl[0].prtry"
    ]


def test_a_document_over_the_cap_is_refused_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from payments_async.bulk import _xml_input

    data = _rows_document(_csv_rows(tmp_path))
    monkeypatch.setattr(_xml_input, "XML_INPUT_MAX_BYTES", len(data) - 1)
    bulk = read_input(_write(tmp_path, data))
    assert bulk.fatal
    assert bulk.rows == ()
    assert [e.line for e in bulk.errors] == [0]
    assert "an XML input holds at most" in bulk.errors[0].message


def test_a_transaction_s_settlement_date_is_the_row_s_and_judges_its_recall_window(
    tmp_path: Path,
) -> None:
    import datetime as dt

    day = dt.date(2026, 11, 27)
    rows = tuple(
        dataclasses.replace(r, original_settlement_date=settled)
        for r, settled in zip(
            _csv_rows(tmp_path),
            (dt.date(2026, 11, 13), dt.date(2026, 11, 20), dt.date(2026, 11, 12)),
            strict=True,
        )
    )
    document = _one_document(
        [
            build_row_message(
                r,
                assignment_id=r.assignment_id,
                cancellation_id=r.assignment_id,
                today=dt.date(2026, 11, 20),
            )
            for r in rows
        ]
    )
    src = _write(tmp_path, document)
    checked = check_input(src, today=day)
    # E2E-1 (DUPL) due today, E2E-2 (FRAD) within 13 months, E2E-3 (TECH) due yesterday.
    assert checked.valid == 2
    (late,) = checked.late
    assert late.line == 3
    assert late.column == "$.fitoFIPmtCxlReq.undrlyg[2].txInf[0].orgnlTxRef.intrBkSttlmDt"
    assert late.deadline == dt.date(2026, 11, 26)
    assert checked.earliest_recall_deadline == day
    read = read_input(src, today=dt.date(2026, 11, 20))
    assert read.errors == ()  # the date is carried, not reported as dropped
    assert [r.original_settlement_date for r in read.rows] == [
        r.original_settlement_date for r in rows
    ]


def test_a_transaction_s_settlement_date_that_is_no_date_is_named(tmp_path: Path) -> None:
    (row,) = _csv_rows(tmp_path)[:1]
    msg = build_row_message(row, assignment_id=row.assignment_id, cancellation_id="C1")
    data = _one_document([msg]).replace(
        b"<CdtrAcct>", b"<IntrBkSttlmDt>2026-13-01</IntrBkSttlmDt><CdtrAcct>", 1
    )
    bulk = read_input(_write(tmp_path, data))
    assert bulk.rows == ()
    assert any("IntrBkSttlmDt" in str(e) or "intrBkSttlmDt" in str(e) for e in bulk.errors), (
        bulk.errors
    )
