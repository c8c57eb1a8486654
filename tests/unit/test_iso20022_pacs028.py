"""pacs.028: the request for status update on a recall, built, checked, JSON and XML."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import msgspec
import pytest
from hypothesis import given, settings

import payments_async
from payments_async import ValidationError
from payments_async.iso20022 import (
    RECALL_MESSAGE_NAME,
    Pacs028,
    build_status_request,
    decode_pacs028,
    encode,
    encode_validated,
    find_problems,
    validate,
)
from payments_async.iso20022.xml import NAMESPACES, from_xml, to_xml
from tests.factories import AMOUNT, ASSIGNEE_BIC, ASSIGNER_BIC, cancellation
from tests.support.strategies_iso import bic, sepa_id

R = "$.fitoFIPmtStsReq"


def test_built_from_a_camt056_it_names_the_recall_and_the_payment() -> None:
    recall = cancellation("E2E-ORIGINAL-1", assignment_id="ASSGN-1", cancellation_id="CXL-1")
    request = build_status_request(
        recall,
        message_id="SRQ-1",
        status_request_id="SRI-1",
        created_at=datetime(2026, 11, 28, 9, 30, tzinfo=UTC),
        original_settlement_date=date(2026, 11, 20),
    )
    validate(request)
    assert msgspec.json.decode(encode(request)) == {
        "fitoFIPmtStsReq": {
            "grpHdr": {
                "msgId": "SRQ-1",
                "creDtTm": "2026-11-28T09:30:00.000Z",
                "instgAgt": {"finInstnId": {"bicfi": ASSIGNER_BIC}},
                "instdAgt": {"finInstnId": {"bicfi": ASSIGNEE_BIC}},
            },
            "txInf": [
                {
                    "stsReqId": "SRI-1",
                    "orgnlGrpInf": {
                        "orgnlMsgId": "ASSGN-1",
                        "orgnlMsgNmId": "camt.056.001.08",
                        "orgnlCreDtTm": recall.body.assgnmt.cre_dt_tm,
                    },
                    "orgnlInstrId": "CXL-1",
                    "orgnlEndToEndId": "E2E-ORIGINAL-1",
                    "orgnlTxRef": {
                        "intrBkSttlmAmt": {"value": float(AMOUNT), "ccy": "EUR"},
                        "intrBkSttlmDt": "2026-11-20",
                    },
                }
            ],
        }
    }
    assert request.message_id == "SRQ-1"
    assert request.original_message_id == "ASSGN-1"
    assert RECALL_MESSAGE_NAME == "camt.056.001.08"


def test_built_from_the_ids_of_a_submission_alone() -> None:
    request = payments_async.build_status_request(assignment_id="ASSGN-2")
    validate(request)
    tx = request.body.tx_inf[0]
    assert tx.orgnl_grp_inf.orgnl_msg_id == "ASSGN-2"
    assert tx.orgnl_grp_inf.orgnl_msg_nm_id == "camt.056.001.08"
    assert tx.orgnl_instr_id is None
    assert tx.orgnl_tx_ref is None
    assert request.body.grp_hdr.instg_agt is None
    # fresh ids each time: a new request is a new message
    again = build_status_request(assignment_id="ASSGN-2")
    assert again.message_id != request.message_id
    assert again.body.tx_inf[0].sts_req_id != tx.sts_req_id


def test_without_the_recall_or_its_id_nothing_is_built() -> None:
    with pytest.raises(ValueError, match="assignment id"):
        build_status_request()


def test_bad_ids_are_refused_with_their_paths() -> None:
    request = build_status_request(
        assignment_id="/ASSGN", message_id="M" * 36, status_request_id="Ü", cancellation_id=""
    )
    with pytest.raises(ValidationError) as info:
        validate(request)
    paths = {p.path for p in info.value.problems}
    assert paths == {
        f"{R}.grpHdr.msgId",
        f"{R}.txInf[0].stsReqId",
        f"{R}.txInf[0].orgnlGrpInf.orgnlMsgId",
        f"{R}.txInf[0].orgnlInstrId",
    }
    with pytest.raises(ValidationError):
        encode_validated(request)


def test_decoding_is_strict_and_counts_the_transactions() -> None:
    body = encode(build_status_request(assignment_id="ASSGN-3"))
    assert encode(decode_pacs028(body)) == body
    with pytest.raises(ValidationError, match=r"invalid pacs\.028 message"):
        decode_pacs028(body.replace(b'"grpHdr"', b'"grpHdr2"'))
    two = msgspec.json.decode(body)
    two["fitoFIPmtStsReq"]["txInf"] *= 2
    problems = find_problems(decode_pacs028(msgspec.json.encode(two)))
    assert [p.path for p in problems] == [f"{R}.txInf"]


def test_the_xml_names_the_recall_and_reads_back() -> None:
    # No official pacs.028.001.03 XSD is in the repository (see tests/fixtures/xsd): the
    # document is checked for its tags and read back through the structs.
    recall = cancellation("E2E-X", amount=Decimal("1234.56"))
    request = build_status_request(recall, original_settlement_date=date(2026, 11, 2))
    data = to_xml(request)
    assert NAMESPACES[Pacs028].encode() in data
    assert b"<FIToFIPmtStsReq>" in data
    assert b"<OrgnlMsgNmId>camt.056.001.08</OrgnlMsgNmId>" in data
    assert b'<IntrBkSttlmAmt Ccy="EUR">1234.56</IntrBkSttlmAmt>' in data
    back = from_xml(data)
    assert isinstance(back, Pacs028)
    assert encode(back) == encode(request)


@settings(max_examples=40, deadline=None)
@given(ids=sepa_id, assigner=bic, assignee=bic)
def test_any_valid_request_validates_and_round_trips(
    ids: str, assigner: str, assignee: str
) -> None:
    request = build_status_request(
        assignment_id=ids,
        cancellation_id=ids,
        original_end_to_end_id=ids,
        instructing_agent_bic=assigner,
        instructed_agent_bic=assignee,
    )
    assert find_problems(request) == []
    assert from_xml(to_xml(request)) == request
