"""Fixtures written from the spec's tables and quirks decode; outbound ones re-encode as-is."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import msgspec
import pytest

from payments_async.iso20022 import (
    Outcome,
    decode_camt029,
    decode_camt056,
    decode_error_envelope,
    decode_pacs002,
    decode_pacs008,
    decode_submission,
    decode_token_response,
    encode,
    summarize_resolution,
    summarize_status_report,
    validate,
)
from payments_async.iso20022.pacs008 import PostalAddress

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def raw(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def compact(data: bytes) -> bytes:
    """The same JSON without whitespace; numbers keep their exact text."""
    return msgspec.json.format(data, indent=-1)


def test_pacs008_fixture_decodes_every_field_of_the_spec_table() -> None:
    msg = decode_pacs008(raw("pacs008_credit_transfer.json"))
    body = msg.fito_fi_cstmr_cdt_trf
    tx = body.cdt_trf_tx_inf[0]
    assert msg.message_id == "MSG-20240801-0001"
    assert msg.end_to_end_id == "E2E-20240801-0001"
    assert body.grp_hdr.cre_dt_tm == "2024-08-01T08:00:00.000Z"
    assert body.grp_hdr.nb_of_txs == "1"
    assert body.grp_hdr.sttlm_inf.sttlm_mtd == "CLRG"
    assert tx.pmt_id.tx_id == "TX-20240801-0001"
    assert tx.pmt_id.uetr == "2f1c5a3e-7b9d-4c1e-8f2a-6d3b9e0a1c47"
    assert tx.pmt_tp_inf is not None
    assert tx.pmt_tp_inf.svc_lvl is not None
    assert tx.pmt_tp_inf.svc_lvl[0].prtry == "SEPA"
    assert tx.pmt_tp_inf.lcl_instrm is not None
    assert tx.pmt_tp_inf.lcl_instrm.prtry == "INST"
    assert tx.intr_bk_sttlm_amt.value == Decimal("1234.10")
    assert str(tx.intr_bk_sttlm_amt.value) == "1234.10"
    assert tx.intr_bk_sttlm_amt.ccy == "EUR"
    assert tx.chrg_br == "SLEV"
    assert tx.dbtr.nm == "Alice Example"
    assert tx.dbtr.pstl_adr is not None
    assert tx.dbtr.pstl_adr == PostalAddress(
        strt_nm="Hauptstrasse",
        bldg_nb="1",
        pst_cd="10115",
        twn_nm="Berlin",
        ctry="DE",
        adr_line=["Hinterhaus, 2. Etage"],
    )
    assert tx.cdtr.pstl_adr == PostalAddress(
        pst_cd="75002", twn_nm="Paris", ctry="FR", adr_line=["1 rue de la Paix"]
    )
    assert tx.dbtr_acct.id.othr is not None
    assert tx.dbtr_acct.id.othr.id == "DE89370400440532013000"
    assert tx.dbtr_acct.nm == "Alice current account"
    assert tx.dbtr_agt.fin_instn_id.clr_sys_mmb_id is not None
    assert tx.dbtr_agt.fin_instn_id.clr_sys_mmb_id.mmb_id == "37040044"
    assert tx.cdtr_agt.fin_instn_id.clr_sys_mmb_id is not None
    assert tx.cdtr_agt.fin_instn_id.clr_sys_mmb_id.mmb_id == "20041"
    assert tx.cdtr.nm == "Bob Example SARL"
    assert tx.cdtr_acct.id.othr is not None
    assert tx.cdtr_acct.id.othr.id == "FR1420041010050500013M02606"
    assert tx.rmt_inf is not None
    assert tx.rmt_inf.ustrd == ["Invoice 2024-42"]
    assert tx.rmt_inf.strd is not None
    assert tx.rmt_inf.strd[0].cdtr_ref_inf is not None
    assert tx.rmt_inf.strd[0].cdtr_ref_inf.ref == "RF18539007547034"
    assert tx.rmt_inf.strd[0].addtl_rmt_inf == ["August delivery"]
    validate(msg)  # the fixture is a valid SEPA message


def test_camt056_fixture_decodes_every_field_of_the_spec_table() -> None:
    msg = decode_camt056(raw("camt056_cancellation_request.json"))
    body = msg.fito_fi_pmt_cxl_req
    tx = body.undrlyg[0].tx_inf[0]
    assert msg.message_id == "ASG-20240801-0001"
    assert msg.original_end_to_end_id == "E2E-20240801-0001"
    assert body.assgnmt.assgnr.agt.fin_instn_id.bicfi == "COBADEFFXXX"
    assert body.assgnmt.assgne.agt.fin_instn_id.bicfi == "BNPAFRPP"
    assert body.assgnmt.cre_dt_tm == "2024-08-01T10:15:00.000+02:00"
    assert body.ctrl_data is not None
    assert body.ctrl_data.nb_of_txs == "1"
    assert tx.cxl_id == "CXL-20240801-0001"
    reason = tx.cxl_rsn_inf[0]
    assert reason.rsn.cd == "DUPL"
    assert reason.orgtr is not None
    assert reason.orgtr.nm == "Alice Example"
    assert reason.orgtr.id is not None
    assert reason.orgtr.id.org_id.any_bic == "COBADEFFXXX"
    ref = tx.orgnl_tx_ref
    assert ref.intr_bk_sttlm_amt is not None
    assert str(ref.intr_bk_sttlm_amt.value) == "1234.10"
    assert ref.pmt_tp_inf is not None
    assert ref.pmt_tp_inf.svc_lvl is not None
    assert ref.pmt_tp_inf.svc_lvl[0].prtry == "SEPA"
    assert ref.cdtr_agt is not None
    assert ref.cdtr_agt.fin_instn_id.bicfi == "BNPAFRPP"
    assert ref.cdtr_agt.fin_instn_id.pstl_adr is not None
    assert ref.cdtr_agt.fin_instn_id.pstl_adr.twn_nm == "Paris"
    assert ref.cdtr_agt.fin_instn_id.pstl_adr.ctry == "FR"
    assert ref.cdtr_acct is not None
    assert ref.cdtr_acct.id.iban == "FR1420041010050500013M02606"
    assert ref.cdtr_acct.ccy == "EUR"
    validate(msg)


@pytest.mark.parametrize(
    ("name", "decode"),
    [
        ("pacs008_credit_transfer.json", decode_pacs008),
        ("camt056_cancellation_request.json", decode_camt056),
        ("camt029_resolution.json", decode_camt029),  # the sandbox builds and sends these
        ("pacs002_pend.json", decode_pacs002),
        ("pacs002_accc.json", decode_pacs002),
    ],
)
def test_fixture_re_encodes_to_the_same_json(name: str, decode: object) -> None:
    data = raw(name)
    assert callable(decode)
    assert encode(decode(data)) == compact(data)


def test_camt056_field_list_spelling_is_read_and_sample_spelling_is_written() -> None:
    data = raw("camt056_field_list_spelling.json")
    assert b'"intrBkSttlAmt"' in data
    msg = decode_camt056(data)
    ref = msg.fito_fi_pmt_cxl_req.undrlyg[0].tx_inf[0].orgnl_tx_ref
    assert ref.intr_bk_sttlm_amt is not None
    assert str(ref.intr_bk_sttlm_amt.value) == "0.10"
    assert ref.intr_bk_sttl_amt is None
    assert msg.original_end_to_end_id is None
    wire = encode(msg)
    expected = compact(data).replace(b'"intrBkSttlAmt"', b'"intrBkSttlmAmt"')
    # the fixture lists rsn before orgtr; our encoder writes struct order (orgtr, rsn)
    assert msgspec.json.decode(wire) == msgspec.json.decode(expected)
    assert b'"intrBkSttlmAmt":{"value":0.10,"ccy":"EUR"}' in wire
    validate(msg)


def test_submission_result_in_data_with_payment_id() -> None:
    result = decode_submission(raw("camt056_submission_result.json"))
    assert result.payments_service_id == "7f3e2c1a-0b4d-4e5f-9a8b-1c2d3e4f5a6b"
    assert result.payment_id == "ASG-20240801-0001"
    assert result.status == "PENDING"
    assert result.creation_date_time == "2024-08-01T08:00:00.000"


def test_token_response_with_quoted_expires_in() -> None:
    token = decode_token_response(raw("token_response.json"))
    assert token.expires_in == 3599.0
    assert token.token_type == "bearer"
    assert token.scope == "makePayments"


def test_error_envelope() -> None:
    env = decode_error_envelope(raw("error_envelope.json"))
    assert env is not None
    assert [e.code for e in env.errors] == ["BAD_REQUEST"]
    assert env.errors[0].level == "ERROR"


def test_camt029_cncl_with_accr_and_null_additional_info() -> None:
    msg = decode_camt029(raw("camt029_resolution.json"))
    body = msg.rsltn_of_invstgtn
    assert body.sts is not None
    assert body.sts.conf == "CNCL"
    assert body.assgnmt is not None
    assert body.assgnmt.id == "ASG-RES-0001"
    details = body.cxl_dtls
    assert details is not None
    assert details[0].orgnl_grp_inf_and_sts is not None
    assert details[0].orgnl_grp_inf_and_sts.orgnl_msg_nm_id == "camt.056.001.08"
    assert details[0].orgnl_pmt_inf_and_sts is not None
    orig = details[0].orgnl_pmt_inf_and_sts[0]
    assert orig.orgnl_pmt_inf_id == "MSG-20240801-0001"
    assert orig.tx_inf_and_sts is not None
    assert orig.tx_inf_and_sts[0].orgnl_end_to_end_id == "E2E-20240801-0001"
    txs = details[0].tx_inf_and_sts
    assert txs is not None
    assert txs[0].cxl_sts_id == "CXLSTS-0001"
    assert txs[0].tx_cxl_sts == "ACCR"
    assert txs[0].cxl_sts_rsn_inf is not None
    assert txs[0].cxl_sts_rsn_inf[0].addtl_inf == ["Cancelled as requested", None]
    summary = summarize_resolution(msg)
    assert summary.outcome is Outcome.ACCEPTED
    assert summary.status == "CNCL"
    assert summary.tx_statuses == ("ACCR",)
    assert summary.reason_texts == ("Cancelled as requested",)
    assert summary.is_final


@pytest.mark.parametrize(
    ("name", "status", "outcome", "codes", "texts"),
    [
        ("pacs002_pend.json", "PEND", Outcome.PENDING, (), ()),
        (
            "pacs002_accc.json",
            "ACCC",
            Outcome.ACCEPTED,
            (),
            ("0000", "Accepted without qualification"),
        ),
        ("pacs002_rjct.json", "RJCT", Outcome.REJECTED, ("AC04",), ("Account closed",)),
    ],
)
def test_pacs002_fixtures(
    name: str,
    status: str,
    outcome: Outcome,
    codes: tuple[str, ...],
    texts: tuple[str, ...],
) -> None:
    report = decode_pacs002(raw(name))
    assert isinstance(report.fito_fi_pmt_sts_rpt.tx_inf_and_sts, list)
    assert len(report.fito_fi_pmt_sts_rpt.tx_inf_and_sts) == 1
    summary = summarize_status_report(report)
    assert summary.status == status
    assert summary.outcome is outcome
    assert summary.reason_codes == codes
    assert summary.reason_texts == texts
    assert summary.is_final is (outcome is not Outcome.PENDING)


def test_pacs002_pend_fixture_carries_the_original_ids() -> None:
    report = decode_pacs002(raw("pacs002_pend.json"))
    body = report.fito_fi_pmt_sts_rpt
    assert body.grp_hdr is not None
    assert body.grp_hdr.msg_id == "STS-20240801-0001"
    assert body.orgnl_grp_inf_and_sts is not None
    assert body.orgnl_grp_inf_and_sts.orgnl_msg_nm_id == "pacs.008.001.10"
    tx = body.tx_inf_and_sts[0]
    assert tx.orgnl_uetr == "2f1c5a3e-7b9d-4c1e-8f2a-6d3b9e0a1c47"
    assert tx.orgnl_tx_id == "TX-20240801-0001"
    assert summarize_status_report(report).end_to_end_id == "E2E-20240801-0001"


def test_pacs002_rjct_fixture_other_root_spelling_single_object_unknown_fields() -> None:
    data = raw("pacs002_rjct.json")
    assert b'"fIToFIPmtStsRpt"' in data
    report = decode_pacs002(data)
    tx = report.fito_fi_pmt_sts_rpt.tx_inf_and_sts[0]
    assert tx.accptnc_dt_tm == "2024-08-01T08:00:09.000Z"
    assert encode(report).startswith(b'{"fitoFIPmtStsRpt":{"txInfAndSts":[{')
