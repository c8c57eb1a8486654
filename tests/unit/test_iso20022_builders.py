"""Builders: short, safe, valid; ids unique and SEPA-safe; floats refused."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings

from payments_async import ValidationError
from payments_async.iso20022 import (
    build_cancellation,
    build_credit_transfer,
    decode_camt056,
    decode_pacs008,
    encode,
    find_problems,
)
from payments_async.iso20022.builders import format_utc, new_id
from tests.support.strategies_iso import eur_amount, iban, sepa_text

UETR_V4 = re.compile(r"[a-f0-9]{8}-[a-f0-9]{4}-4[a-f0-9]{3}-[89ab][a-f0-9]{3}-[a-f0-9]{12}")
SAFE_ID = re.compile(r"[A-Za-z0-9]{1,35}")
P = "$.fitoFICstmrCdtTrf"
T = f"{P}.cdtTrfTxInf[0]"
X = "$.fitoFIPmtCxlReq.undrlyg[0].txInf[0]"

TRANSFER: dict[str, Any] = {
    "debtor_name": "Alice Example",
    "debtor_iban": "DE89 3704 0044 0532 0130 00",
    "debtor_agent_id": "37040044",
    "creditor_name": "Bob Example SARL",
    "creditor_iban": "fr1420041010050500013m02606",
    "creditor_agent_id": "20041",
    "amount": "1234.10",
    "remittance": "Invoice 2024-42",
}
CANCELLATION: dict[str, Any] = {
    "original_end_to_end_id": "E2E-20240801-0001",
    "amount": Decimal("1234.10"),
    "creditor_agent_bic": "bnpafrpp",
    "creditor_iban": "FR1420041010050500013M02606",
    "assigner_bic": "COBADEFFXXX",
    "assignee_bic": "BNPAFRPP",
}


def test_credit_transfer_is_complete_and_valid() -> None:
    before = datetime.now(UTC)
    msg = build_credit_transfer(**TRANSFER)
    assert find_problems(msg) == []
    body = msg.fito_fi_cstmr_cdt_trf
    tx = body.cdt_trf_tx_inf[0]
    assert body.grp_hdr.nb_of_txs == "1"
    assert body.grp_hdr.sttlm_inf.sttlm_mtd == "CLRG"
    assert body.grp_hdr.cre_dt_tm.endswith("Z")
    created = datetime.fromisoformat(body.grp_hdr.cre_dt_tm)
    assert before - timedelta(seconds=1) <= created <= datetime.now(UTC)
    assert tx.pmt_tp_inf is not None
    assert tx.pmt_tp_inf.svc_lvl is not None
    assert tx.pmt_tp_inf.svc_lvl[0].prtry == "SEPA"
    assert tx.pmt_id.uetr is not None
    assert UETR_V4.fullmatch(tx.pmt_id.uetr)
    assert tx.intr_bk_sttlm_amt.value == Decimal("1234.10")
    assert tx.intr_bk_sttlm_amt.ccy == "EUR"
    assert tx.chrg_br == "SLEV"
    assert tx.dbtr_acct.id.othr is not None
    assert tx.dbtr_acct.id.othr.id == "DE89370400440532013000"  # spaces removed
    assert tx.cdtr_acct.id.othr is not None
    assert tx.cdtr_acct.id.othr.id == "FR1420041010050500013M02606"  # upper-cased
    assert tx.rmt_inf is not None
    assert tx.rmt_inf.ustrd == ["Invoice 2024-42"]
    assert msg.message_id == body.grp_hdr.msg_id
    assert msg.end_to_end_id == tx.pmt_id.end_to_end_id
    wire = encode(msg)
    assert b'"value":1234.10' in wire
    assert decode_pacs008(wire) == msg


def test_generated_ids_are_unique_short_and_sepa_safe() -> None:
    ids: list[str] = []
    for _ in range(300):
        msg = build_credit_transfer(**TRANSFER)
        tx = msg.fito_fi_cstmr_cdt_trf.cdt_trf_tx_inf[0]
        assert tx.pmt_id.tx_id is not None
        ids += [msg.message_id, msg.end_to_end_id, tx.pmt_id.tx_id]
        cxl = build_cancellation(**CANCELLATION)
        ids += [cxl.message_id, cxl.fito_fi_pmt_cxl_req.undrlyg[0].tx_inf[0].cxl_id]
    assert len(set(ids)) == len(ids)
    assert all(SAFE_ID.fullmatch(i) for i in ids), [i for i in ids if not SAFE_ID.fullmatch(i)]
    assert len(new_id("MSG")) == 35


def test_given_ids_and_time_are_kept() -> None:
    moment = datetime(2024, 8, 1, 10, 0, tzinfo=timezone(timedelta(hours=2)))
    msg = build_credit_transfer(
        **TRANSFER,
        message_id="MSG-1",
        end_to_end_id="E2E-1",
        tx_id="TX-1",
        uetr="2f1c5a3e-7b9d-4c1e-8f2a-6d3b9e0a1c47",
        created_at=moment,
    )
    body = msg.fito_fi_cstmr_cdt_trf
    assert (msg.message_id, msg.end_to_end_id) == ("MSG-1", "E2E-1")
    assert body.cdt_trf_tx_inf[0].pmt_id.uetr == "2f1c5a3e-7b9d-4c1e-8f2a-6d3b9e0a1c47"
    assert body.grp_hdr.cre_dt_tm == "2024-08-01T08:00:00.000Z"


@pytest.mark.parametrize("amount", [1234.1, 0.1, True])
def test_float_and_bool_amounts_are_refused(amount: Any) -> None:
    with pytest.raises(ValidationError) as info:
        build_credit_transfer(**{**TRANSFER, "amount": amount})
    assert info.value.paths == (f"{T}.intrBkSttlmAmt.value",)
    with pytest.raises(ValidationError) as info:
        build_cancellation(**{**CANCELLATION, "amount": amount})
    assert info.value.paths == (f"{X}.orgnlTxRef.intrBkSttlmAmt.value",)


@pytest.mark.parametrize(
    ("amount", "wire"),
    [
        ("12.300", b"12.30"),
        (Decimal("5.000"), b"5.00"),
        ("1E+2", b"100"),
        (7, b"7"),
        (" 0.10 ", b"0.10"),
        ("999999999.99", b"999999999.99"),
    ],
)
def test_amount_forms_that_are_exact_are_accepted(amount: Any, wire: bytes) -> None:
    msg = build_credit_transfer(**{**TRANSFER, "amount": amount})
    assert b'"intrBkSttlmAmt":{"value":' + wire + b',"ccy":"EUR"}' in encode(msg)


@pytest.mark.parametrize(
    ("amount", "fragment"),
    [
        ("abc", "not a decimal number"),
        ("0.001", "more than 2 decimals"),
        ("0", "0.01..999999999.99"),
        ("1000000000", "0.01..999999999.99"),
        ("NaN", "finite"),
    ],
)
def test_bad_amounts_name_the_path(amount: str, fragment: str) -> None:
    with pytest.raises(ValidationError) as info:
        build_credit_transfer(**{**TRANSFER, "amount": amount})
    assert f"{T}.intrBkSttlmAmt.value" in info.value.paths
    assert fragment in str(info.value)


def test_builder_reports_every_bad_input_at_once() -> None:
    with pytest.raises(ValidationError) as info:
        build_credit_transfer(
            **{
                **TRANSFER,
                "creditor_iban": "DE00370400440532013000",
                "debtor_name": "Zoë",
                "remittance": "R" * 141,
                "message_id": "/MSG",
            }
        )
    assert set(info.value.paths) == {
        f"{T}.cdtrAcct.id.othr.id",
        f"{T}.dbtr.nm",
        f"{T}.rmtInf.ustrd[0]",
        f"{P}.grpHdr.msgId",
    }


def test_naive_datetime_is_refused() -> None:
    with pytest.raises(ValidationError) as info:
        build_credit_transfer(**TRANSFER, created_at=datetime(2024, 8, 1, 8, 0))
    assert info.value.paths == (f"{P}.grpHdr.creDtTm",)


def test_cancellation_is_complete_and_valid() -> None:
    msg = build_cancellation(**CANCELLATION, originator_name="Alice Example")
    assert find_problems(msg) == []
    body = msg.fito_fi_pmt_cxl_req
    tx = body.undrlyg[0].tx_inf[0]
    assert msg.original_end_to_end_id == "E2E-20240801-0001"
    assert msg.message_id == body.assgnmt.id
    assert body.assgnmt.assgnr.agt.fin_instn_id.bicfi == "COBADEFFXXX"
    assert body.assgnmt.assgne.agt.fin_instn_id.bicfi == "BNPAFRPP"
    assert body.assgnmt.cre_dt_tm is not None
    assert body.assgnmt.cre_dt_tm.endswith("Z")
    assert body.ctrl_data is not None
    assert body.ctrl_data.nb_of_txs == "1"
    reason = tx.cxl_rsn_inf[0]
    assert reason.rsn.cd == "CUST"
    assert reason.orgtr is not None
    assert reason.orgtr.nm == "Alice Example"
    assert reason.orgtr.id is not None
    assert reason.orgtr.id.org_id.any_bic == "COBADEFFXXX"  # defaults to the assigner
    ref = tx.orgnl_tx_ref
    assert ref.intr_bk_sttlm_amt is not None
    assert ref.intr_bk_sttlm_amt.value == Decimal("1234.10")
    assert ref.cdtr_agt is not None
    assert ref.cdtr_agt.fin_instn_id.bicfi == "BNPAFRPP"  # upper-cased
    assert ref.cdtr_acct is not None
    assert ref.cdtr_acct.id.iban == "FR1420041010050500013M02606"
    wire = encode(msg)
    assert b'"intrBkSttlmAmt":{"value":1234.10,"ccy":"EUR"}' in wire
    assert decode_camt056(wire) == msg


@pytest.mark.parametrize("reason", ["DUPL", "TECH", "FRAD", "AC03", "AM09", "CUST"])
def test_cancellation_accepts_every_sepa_recall_reason(reason: str) -> None:
    msg = build_cancellation(**CANCELLATION, reason=reason)
    assert msg.fito_fi_pmt_cxl_req.undrlyg[0].tx_inf[0].cxl_rsn_inf[0].rsn.cd == reason


@pytest.mark.parametrize(
    ("changes", "path", "fragment"),
    [
        ({"reason": "AC01"}, f"{X}.cxlRsnInf[0].rsn.cd", "SEPA recall reason"),
        ({"currency": "USD"}, f"{X}.orgnlTxRef.intrBkSttlmAmt.ccy", "must be EUR"),
        ({"amount": "-1.00"}, f"{X}.orgnlTxRef.intrBkSttlmAmt.value", "positive"),
        ({"assigner_bic": "COBA"}, "$.fitoFIPmtCxlReq.assgnmt.assgnr.agt.finInstnId.bicfi", "BIC"),
        ({"creditor_iban": "FR14"}, f"{X}.orgnlTxRef.cdtrAcct.id.iban", "IBAN"),
        ({"assignment_id": "A" * 36}, "$.fitoFIPmtCxlReq.assgnmt.id", "1..35"),
    ],
)
def test_cancellation_rules(changes: dict[str, Any], path: str, fragment: str) -> None:
    with pytest.raises(ValidationError) as info:
        build_cancellation(**{**CANCELLATION, **changes})
    assert path in info.value.paths
    assert fragment in str(info.value)


def test_cancellation_without_amount_leaves_it_out() -> None:
    msg = build_cancellation(**{**CANCELLATION, "amount": None})
    assert b"intrBkSttlmAmt" not in encode(msg)


@settings(max_examples=40, deadline=None)
@given(
    debtor=iban, creditor=iban, amount=eur_amount, name=sepa_text(140), remittance=sepa_text(140)
)
def test_builder_output_is_always_valid_and_round_trips(
    debtor: str, creditor: str, amount: Decimal, name: str, remittance: str
) -> None:
    msg = build_credit_transfer(
        **{
            **TRANSFER,
            "debtor_iban": debtor,
            "creditor_iban": creditor,
            "amount": amount,
            "creditor_name": name,
            "remittance": remittance,
        }
    )
    assert find_problems(msg) == []
    assert decode_pacs008(encode(msg)) == msg


def test_a_generated_uetr_is_a_lowercase_uuid4() -> None:
    transfer = build_credit_transfer(**TRANSFER)
    text = transfer.fito_fi_cstmr_cdt_trf.cdt_trf_tx_inf[0].pmt_id.uetr
    parsed = uuid.UUID(text)
    assert str(parsed) == text  # lowercase, canonical form
    assert parsed.version == 4


def test_format_utc_writes_milliseconds_and_z_for_any_zone() -> None:
    cet = timezone(timedelta(hours=1))
    assert format_utc(datetime(2024, 8, 1, 9, 0, 0, 123999, tzinfo=cet)) == (
        "2024-08-01T08:00:00.123Z"
    )
    assert format_utc(datetime(2024, 8, 1, tzinfo=UTC)) == "2024-08-01T00:00:00.000Z"
    assert format_utc(datetime(999, 1, 2, 3, 4, 5, tzinfo=UTC)) == "0999-01-02T03:04:05.000Z"
    now = format_utc()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", now)
    assert abs(datetime.fromisoformat(now) - datetime.now(UTC)) < timedelta(minutes=1)
    with pytest.raises(ValueError, match="naive"):
        format_utc(datetime(2024, 8, 1))
