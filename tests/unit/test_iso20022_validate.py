"""Each ISO/SEPA/service rule: a violation gives one ValidationError naming the wire path."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from payments_async import ValidationError
from payments_async.iso20022 import (
    Camt056,
    Pacs008,
    decode_camt056,
    decode_pacs002,
    decode_pacs008,
    encode,
    find_problems,
    validate,
)
from payments_async.iso20022._validate import check_iban
from tests.support.strategies_iso import bic, eur_amount, iban, sepa_id, sepa_text, uetr

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
P = "$.fitoFICstmrCdtTrf"
T = f"{P}.cdtTrfTxInf[0]"
C = "$.fitoFIPmtCxlReq"
X = f"{C}.undrlyg[0].txInf[0]"


_DOC_DECODER = msgspec.json.Decoder(float_hook=Decimal)  # keep the digits of amounts


def doc(name: str) -> Any:
    return _DOC_DECODER.decode((FIXTURES / name).read_bytes())


def _steps(path: str) -> list[str | int]:
    steps: list[str | int] = []
    for part in path.removeprefix("$.").split("."):
        name, *indexes = re.split(r"\[(\d+)\]", part)
        if name:
            steps.append(name)
        steps.extend(int(i) for i in indexes if i)
    return steps


def mutate(document: Any, path: str, value: Any) -> Any:
    """Set (or with ``...`` delete) the value at a JSON path like ``$.a.b[0].c``."""
    *parents, last = _steps(path)
    node = document
    for step in parents:
        node = node[step]
    if value is ...:
        del node[last]
    else:
        node[last] = value
    return document


def pacs008_with(path: str, value: Any) -> Pacs008:
    return decode_pacs008(encode(mutate(doc("pacs008_credit_transfer.json"), path, value)))


def camt056_with(path: str, value: Any) -> Camt056:
    return decode_camt056(encode(mutate(doc("camt056_cancellation_request.json"), path, value)))


def assert_problem(msg: Pacs008 | Camt056, path: str, fragment: str) -> None:
    with pytest.raises(ValidationError) as info:
        validate(msg)
    messages = [p.message for p in info.value.problems if p.path == path]
    assert messages, f"no problem at {path}; got {info.value.problems}"
    assert any(fragment in m for m in messages), messages
    assert path in str(info.value)


PACS008_RULES = [
    # Max35Text identifiers: length, SEPA characters, slash rules
    (f"{P}.grpHdr.msgId", "M" * 36, "1..35 characters"),
    (f"{P}.grpHdr.msgId", "", "1..35 characters"),
    (f"{P}.grpHdr.msgId", "MSG_1", "outside the SEPA set"),
    (f"{P}.grpHdr.msgId", "/MSG1", "must not start or end with '/'"),
    (f"{T}.pmtId.endToEndId", "E2E1/", "must not start or end with '/'"),
    (f"{T}.pmtId.txId", "TX//1", "'//'"),
    # Max140Text and Max70Text
    (f"{T}.dbtr.nm", "A" * 71, "1..70 characters (EPC SCT inter-PSP implementation"),
    (f"{T}.cdtrAcct.nm", "A" * 71, "1..70 characters"),
    (f"{T}.cdtr.nm", "Zoë Müller", "outside the SEPA set"),
    (f"{T}.rmtInf.ustrd[0]", "R" * 141, "1..140 characters"),
    (f"{T}.dbtr.pstlAdr.adrLine[0]", "L" * 71, "1..70 characters"),
    (f"{T}.cdtr.pstlAdr.adrLine", ["a", "b", "c"], "at most 2"),
    (f"{T}.rmtInf.strd[0].cdtrRefInf.ref", "R" * 36, "1..35 characters"),
    (f"{T}.cdtrAgt.finInstnId.clrSysMmbId.mmbId", "", "1..35 characters"),
    # IBAN (accounts are cdtrAcct.id.othr.id per the spec)
    (f"{T}.cdtrAcct.id.othr.id", "DE00370400440532013000", "mod-97"),
    (f"{T}.dbtrAcct.id.othr.id", "FR1420041010050500013M02607", "mod-97"),
    (f"{T}.dbtrAcct.id.othr.id", "123456", "not an IBAN"),
    (f"{T}.cdtrAcct.id.othr.id", "DE89 3704 0044 0532 0130 00", "not an IBAN"),
    # UETR
    (f"{T}.pmtId.uetr", "2F1C5A3E-7B9D-4C1E-8F2A-6D3B9E0A1C47", "lowercase UUID v4"),
    (f"{T}.pmtId.uetr", "2f1c5a3e-7b9d-11ef-8f2a-6d3b9e0a1c47", "lowercase UUID v4"),
    # currency and amount
    (f"{T}.intrBkSttlmAmt.ccy", "EURO", "ISO 4217"),
    (f"{T}.intrBkSttlmAmt.ccy", "ABC", "ISO 4217"),
    (f"{T}.intrBkSttlmAmt.value", Decimal("0"), "0.01..999999999.99"),
    (f"{T}.intrBkSttlmAmt.value", Decimal("-1.00"), "0.01..999999999.99"),
    (f"{T}.intrBkSttlmAmt.value", Decimal("1000000000.00"), "0.01..999999999.99"),
    (f"{T}.intrBkSttlmAmt.value", Decimal("12.345"), "more than 2 decimals"),
    # creDtTm in UTC
    (f"{P}.grpHdr.creDtTm", "2024-08-01T10:00:00.000+02:00", "UTC"),
    (f"{P}.grpHdr.creDtTm", "2024-08-01T08:00:00", "UTC"),
    (f"{P}.grpHdr.creDtTm", "yesterday", "not an ISO 8601 date-time"),
    # nbOfTxs
    (f"{P}.grpHdr.nbOfTxs", "2", "has 1 transaction"),
    (f"{P}.grpHdr.nbOfTxs", "one", "digits"),
    (f"{P}.grpHdr.nbOfTxs", "1" * 16, "digits"),
    # codes and agents
    (f"{P}.grpHdr.sttlmInf.sttlmMtd", "CASH", "settlement method"),
    (f"{T}.chrgBr", "BOTH", "charge bearer"),
    (f"{T}.cdtrAgt.finInstnId", {}, "'bicfi' or 'clrSysMmbId'"),
    (f"{T}.cdtrAgt.finInstnId.bicfi", "deutdeff", "BICFI"),
    (f"{T}.cdtrAcct.id", {}, "exactly one"),
    (f"{P}.cdtTrfTxInf", [], "at least 1"),
]


@pytest.mark.parametrize(("path", "value", "fragment"), PACS008_RULES)
def test_pacs008_rule(path: str, value: Any, fragment: str) -> None:
    assert_problem(pacs008_with(path, value), path, fragment)


def test_account_with_both_othr_and_iban_is_refused() -> None:
    msg = pacs008_with(f"{T}.dbtrAcct.id.iban", "DE89370400440532013000")
    assert_problem(msg, f"{T}.dbtrAcct.id", "exactly one of 'othr' and 'iban'")


CAMT056_RULES = [
    (f"{C}.assgnmt.id", "A" * 36, "1..35 characters"),
    (f"{C}.assgnmt.id", "ASG/", "must not start or end with '/'"),
    (f"{C}.assgnmt.assgnr.agt.finInstnId.bicfi", "COBA", "BICFI"),
    (f"{C}.assgnmt.assgne.agt.finInstnId.bicfi", "BNPAFRPP1", "BICFI"),
    (f"{C}.assgnmt.creDtTm", "2024-08-01T10:15:00", "offset"),
    (f"{C}.ctrlData.nbOfTxs", "3", "has 1 transaction"),
    (f"{X}.cxlId", "", "1..35 characters"),
    (f"{X}.cxlId", "C//1", "'//'"),
    (f"{X}.orgnlEndToEndId", "E" * 36, "1..35 characters"),
    (f"{X}.cxlRsnInf", [], "at least 1"),
    (f"{X}.cxlRsnInf[0].rsn.cd", "AC01", "SEPA recall reason"),
    (f"{X}.cxlRsnInf[0].orgtr", {}, "originator"),
    (f"{X}.cxlRsnInf[0].orgtr.id.orgId.anyBIC", "cobadeff", "BICFI"),
    (f"{X}.cxlRsnInf[0].orgtr.nm", "N" * 71, "1..70 characters"),
    (f"{X}.orgnlTxRef.intrBkSttlmAmt.ccy", "USD", "must be EUR"),
    (f"{X}.orgnlTxRef.intrBkSttlmAmt.value", Decimal("-5.00"), "positive"),
    (f"{X}.orgnlTxRef.intrBkSttlmAmt.value", Decimal("0"), "positive"),
    (f"{X}.orgnlTxRef.cdtrAcct.id.iban", "FR0020041010050500013M02606", "mod-97"),
    (f"{X}.orgnlTxRef.cdtrAcct.ccy", "eur", "ISO 4217"),
    (f"{X}.orgnlTxRef.cdtrAgt.finInstnId.pstlAdr.ctry", "FRA", "country"),
    (f"{C}.undrlyg", [], "at least 1"),
    (f"{C}.undrlyg[0].txInf", [], "at least 1"),
]


@pytest.mark.parametrize(("path", "value", "fragment"), CAMT056_RULES)
def test_camt056_rule(path: str, value: Any, fragment: str) -> None:
    assert_problem(camt056_with(path, value), path, fragment)


@pytest.mark.parametrize(
    "path",
    [
        f"{C}.assgnmt.id",
        f"{C}.assgnmt.assgnr",
        f"{C}.assgnmt.assgne",
        f"{X}.cxlId",
        f"{X}.cxlRsnInf",
        f"{X}.orgnlTxRef",
    ],
)
def test_camt056_required_field_missing(path: str) -> None:
    # On the wire: decoding refuses it and names the object and the field.
    parent, _, field = path.rpartition(".")
    with pytest.raises(ValidationError) as info:
        camt056_with(path, ...)
    assert info.value.paths == (parent,)
    assert f"`{field}`" in info.value.problems[0].message
    # Built in Python with None: validate() names the field itself.
    msg = decode_camt056((FIXTURES / "camt056_cancellation_request.json").read_bytes())
    *steps, last = _steps(path.removeprefix(f"{C}."))
    node: Any = msg.fito_fi_pmt_cxl_req
    for step in steps:
        node = node[step] if isinstance(step, int) else getattr(node, _snake(step))
    setattr(node, _snake(str(last)), None)
    assert_problem(msg, path, "required field is missing")


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def test_every_problem_is_listed_at_once() -> None:
    document = doc("pacs008_credit_transfer.json")
    mutate(document, f"{P}.grpHdr.msgId", "/bad")
    mutate(document, f"{T}.cdtrAcct.id.othr.id", "DE00370400440532013000")
    mutate(document, f"{T}.intrBkSttlmAmt.value", Decimal("0.001"))
    mutate(document, f"{T}.pmtId.uetr", "not-a-uuid")
    mutate(document, f"{T}.dbtr.nm", "Ærø")
    with pytest.raises(ValidationError) as info:
        validate(decode_pacs008(encode(document)))
    assert set(info.value.paths) == {
        f"{P}.grpHdr.msgId",
        f"{T}.cdtrAcct.id.othr.id",
        f"{T}.intrBkSttlmAmt.value",
        f"{T}.pmtId.uetr",
        f"{T}.dbtr.nm",
    }
    assert str(info.value).startswith("6 validation problems: ")  # value: range + decimals


def test_float_amount_in_a_struct_is_refused() -> None:
    msg = decode_pacs008((FIXTURES / "pacs008_credit_transfer.json").read_bytes())
    msg.fito_fi_cstmr_cdt_trf.cdt_trf_tx_inf[0].intr_bk_sttlm_amt.value = 0.1  # type: ignore[assignment]
    assert_problem(msg, f"{T}.intrBkSttlmAmt.value", "not a float")


def test_wrong_python_types_are_reported_not_crashed_on() -> None:
    msg = decode_pacs008((FIXTURES / "pacs008_credit_transfer.json").read_bytes())
    msg.fito_fi_cstmr_cdt_trf.grp_hdr.msg_id = 12345  # type: ignore[assignment]
    msg.fito_fi_cstmr_cdt_trf.cdt_trf_tx_inf[0].dbtr = "Alice"  # type: ignore[assignment]
    problems = find_problems(msg)
    assert [p.path for p in problems] == [f"{P}.grpHdr.msgId", f"{T}.dbtr"]


def test_valid_fixtures_have_no_problems() -> None:
    pacs008 = decode_pacs008((FIXTURES / "pacs008_credit_transfer.json").read_bytes())
    assert find_problems(pacs008) == []
    assert (
        find_problems(decode_camt056((FIXTURES / "camt056_cancellation_request.json").read_bytes()))
        == []
    )


def test_nb_of_txs_as_a_number_is_accepted_and_sent_as_a_string() -> None:
    msg = pacs008_with(f"{P}.grpHdr.nbOfTxs", 1)
    validate(msg)
    assert b'"nbOfTxs":"1"' in encode(msg)


def test_validate_refuses_inbound_messages() -> None:
    report = decode_pacs002(b'{"fitoFIPmtStsRpt": {}}')
    with pytest.raises(TypeError):
        validate(report)  # type: ignore[arg-type]


@settings(max_examples=100, deadline=None)
@given(iban)
def test_generated_ibans_pass_and_any_single_digit_change_fails(value: str) -> None:
    assert check_iban(value) is None
    digit = value[2]
    changed = value[:2] + str((int(digit) + 1) % 10) + value[3:]
    assert check_iban(changed) is not None


@pytest.mark.parametrize(
    "value",
    [
        "DE89370400440532013000",
        "FR1420041010050500013M02606",
        "GB82WEST12345698765432",
        "NL91ABNA0417164300",
        "BE71096123456769",
    ],
)
def test_published_example_ibans_pass(value: str) -> None:
    assert check_iban(value) is None


@settings(max_examples=50, deadline=None)
@given(
    msg_id=sepa_id,
    name=sepa_text(70),
    debtor=iban,
    creditor=iban,
    agent=bic,
    amount=eur_amount,
    ref=uetr,
)
def test_messages_made_of_valid_parts_pass(
    msg_id: str, name: str, debtor: str, creditor: str, agent: str, amount: Decimal, ref: str
) -> None:
    document = doc("pacs008_credit_transfer.json")
    mutate(document, f"{P}.grpHdr.msgId", msg_id)
    mutate(document, f"{T}.dbtr.nm", name)
    mutate(document, f"{T}.dbtrAcct.id.othr.id", debtor)
    mutate(document, f"{T}.cdtrAcct.id.othr.id", creditor)
    mutate(document, f"{T}.cdtrAgt.finInstnId.bicfi", agent)
    mutate(document, f"{T}.intrBkSttlmAmt.value", amount)
    mutate(document, f"{T}.pmtId.uetr", ref)
    validate(decode_pacs008(encode(document)))


@settings(max_examples=50, deadline=None)
@given(st.text(min_size=1, max_size=35).filter(lambda s: any(c not in SEPA for c in s)))
def test_any_character_outside_the_sepa_set_is_refused(value: str) -> None:
    assert_problem(pacs008_with(f"{T}.pmtId.endToEndId", value), f"{T}.pmtId.endToEndId", "SEPA")


SEPA = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/-?:().,'+ ")
