"""Each ISO/SEPA/service rule: a violation gives one ValidationError naming the wire path."""

from __future__ import annotations

import re
from datetime import UTC, datetime
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
    build_cancellation,
    build_credit_transfer,
    decode_camt056,
    decode_pacs002,
    decode_pacs008,
    encode,
    encode_validated,
    find_problems,
    validate,
)
from payments_async.iso20022._validate import ISO_4217, RULES, check_iban
from payments_async.iso20022.builders import format_utc, new_id
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
    (f"{T}.dbtr.nm", "A" * 141, "1..140 characters"),
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
    (f"{X}.cxlRsnInf[0].orgtr.nm", "N" * 141, "1..140 characters"),
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
    name=sepa_text(140),
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


# --- the builders refuse what the validator refuses; what they make themselves passes ----

_CANCELLATION: dict[str, Any] = {
    "original_end_to_end_id": "E2E-1",
    "amount": Decimal("12.30"),
    "creditor_agent_bic": "BNPAFRPPXXX",
    "creditor_iban": "FR1420041010050500013M02606",
    "assigner_bic": "COBADEFFXXX",
    "assignee_bic": "BNPAFRPPXXX",
    "assignment_id": "ASG-1",
    "cancellation_id": "CXL-1",
    "originator_name": "Alice",
    "reason": "DUPL",
    "service_level": "SEPA",
}
_TRANSFER: dict[str, Any] = {
    "debtor_name": "Alice Example",
    "debtor_iban": "DE89370400440532013000",
    "debtor_agent_id": "37040044",
    "creditor_name": "Bob Example",
    "creditor_iban": "FR1420041010050500013M02606",
    "creditor_agent_id": "20041010",
    "amount": Decimal("12.30"),
    "remittance": "Invoice 1",
    "message_id": "MSG-1",
    "end_to_end_id": "E2E-1",
    "tx_id": "TX-1",
}
BAD_TEXT35 = ["", "a" * 36, "Zoë", "a\nb", "a_b"]
BAD_TEXT140 = ["", "a" * 141, "Zoë", "a\nb", "a_b"]
BAD_ID = [*BAD_TEXT35, "/a", "a/", "a//b"]
BAD_BIC = ["COBADEFF XXX", "COBADEF", "COBADEFFXX", "C0BADEFFXXX1", "COBA1EFFXXX"]
BAD_IBAN = [
    "DE00370400440532013000",
    "FR1520041010050500013M02606",
    "DE8937040044053201300",
    "DE89 3704 0044 0532 0130 0O",
    "D089370400440532013000",
    "DE89",
]
BAD_CANCELLATION = [
    *((key, v) for key in ("original_end_to_end_id", "assignment_id") for v in BAD_ID),
    *(("cancellation_id", v) for v in BAD_ID),
    *((key, v) for key in ("service_level", "reason") for v in BAD_TEXT35),
    *((key, v) for key in ("creditor_agent_bic", "assigner_bic", "assignee_bic") for v in BAD_BIC),
    *(("originator_bic", v) for v in BAD_BIC),
    *(("creditor_iban", v) for v in BAD_IBAN),
    *(("reason", v) for v in ["cust", "AC01", "CUST "]),
    *(("currency", v) for v in ["USD", "eur", None]),
    *(("amount", v) for v in ["0", "0.001", "-1", "1000000000", "NaN"]),
]
BAD_TRANSFER = [
    *((key, v) for key in ("debtor_name", "creditor_name", "remittance") for v in BAD_TEXT140),
    *((key, v) for key in ("debtor_agent_id", "creditor_agent_id") for v in BAD_TEXT35),
    *(("service_level", v) for v in BAD_TEXT35),
    *((key, v) for key in ("message_id", "end_to_end_id", "tx_id") for v in BAD_ID),
    *((key, v) for key in ("debtor_iban", "creditor_iban") for v in BAD_IBAN),
    *(("currency", v) for v in ["XXX", "eur", None]),
    *(("amount", v) for v in ["0", "0.001", "1000000000", "NaN"]),
]


@pytest.mark.parametrize(("key", "bad"), BAD_CANCELLATION)
def test_a_cancellation_builder_refuses_each_bad_input(key: str, bad: Any) -> None:
    build_cancellation(**_CANCELLATION)  # the control: the same inputs, all good
    with pytest.raises(ValidationError) as info:
        build_cancellation(**(_CANCELLATION | {key: bad}))
    assert info.value.paths  # every problem named with its path


@pytest.mark.parametrize(("key", "bad"), BAD_TRANSFER)
def test_a_credit_transfer_builder_refuses_each_bad_input(key: str, bad: Any) -> None:
    build_credit_transfer(**_TRANSFER)
    with pytest.raises(ValidationError) as info:
        build_credit_transfer(**(_TRANSFER | {key: bad}))
    assert info.value.paths


class _Moment(datetime):
    """A datetime subclass (as pandas' Timestamp is one): its text is not trusted."""

    def isoformat(self, sep: str = "T", timespec: str = "auto") -> str:
        return "yesterday+00:00"


def test_a_datetime_whose_text_breaks_the_rule_is_refused_at_its_path() -> None:
    with pytest.raises(ValidationError) as info:
        build_cancellation(**_CANCELLATION, created_at=_Moment(2024, 8, 1, tzinfo=UTC))
    assert info.value.paths == ("$.fitoFIPmtCxlReq.assgnmt.creDtTm",)


@settings(max_examples=100, deadline=None)
@given(moment=st.none() | st.datetimes(timezones=st.just(UTC)))
def test_what_a_builder_makes_itself_is_valid(moment: datetime | None) -> None:
    # generated ids, UETRs and creDtTm texts
    made = build_cancellation(
        **{k: v for k, v in _CANCELLATION.items() if k not in ("assignment_id", "cancellation_id")},
        created_at=moment,
    )
    assert find_problems(made) == []
    transfer = build_credit_transfer(
        **{k: v for k, v in _TRANSFER.items() if k not in ("message_id", "end_to_end_id", "tx_id")},
        created_at=moment,
    )
    assert find_problems(transfer) == []
    for prefix in ("MSG", "E2E", "TX", "CXL", "ASG"):
        assert RULES["Max35Id"](new_id(prefix)) is None
    assert RULES["UtcDateTime"](format_utc(moment)) is None


@settings(max_examples=100, deadline=None)
@given(
    junk=st.sampled_from([1, 1.5, b"x", [], {}, Decimal("NaN"), "x" * 200, None, object()]),
    where=st.integers(0, 6),
)
def test_wrong_types_anywhere_are_reported_at_their_path(junk: object, where: int) -> None:
    msg = build_cancellation(**_CANCELLATION)
    body = msg.body
    tx = body.undrlyg[0].tx_inf[0]
    root = "$.fitoFIPmtCxlReq"
    tx_path = f"{root}.undrlyg[0].txInf[0]"
    targets: list[tuple[Any, str, str]] = [
        (body, "assgnmt", f"{root}.assgnmt"),
        (body, "undrlyg", f"{root}.undrlyg"),
        (body.undrlyg[0], "tx_inf", f"{root}.undrlyg[0].txInf"),
        (tx, "cxl_rsn_inf", f"{tx_path}.cxlRsnInf"),
        (tx.orgnl_tx_ref, "intr_bk_sttlm_amt", f"{tx_path}.orgnlTxRef.intrBkSttlmAmt"),
        (tx.orgnl_tx_ref.intr_bk_sttlm_amt, "value", f"{tx_path}.orgnlTxRef.intrBkSttlmAmt.value"),
        (body.assgnmt, "cre_dt_tm", f"{root}.assgnmt.creDtTm"),
    ]
    obj, attr, path = targets[where]
    setattr(obj, attr, junk)
    got = find_problems(msg)
    # nothing but the changed part is named (ctrlData.nbOfTxs counts the transactions)
    assert all(p.path.startswith(path) or p.path.endswith(".ctrlData.nbOfTxs") for p in got)
    if junk is not None or attr in ("assgnmt", "undrlyg", "tx_inf", "cxl_rsn_inf", "value"):
        assert any(p.path.startswith(path) for p in got)  # every one of these breaks a rule
    # validate() and what the client sends with raise exactly these problems
    for entry in (validate, encode_validated):
        if got:
            with pytest.raises(ValidationError) as info:
                entry(msg)
            assert list(info.value.problems) == got
        else:
            entry(msg)


def test_a_message_changed_after_it_was_built_is_checked_again() -> None:
    msg = build_cancellation(**_CANCELLATION)
    msg.body.undrlyg[0].tx_inf[0].orgnl_tx_ref.intr_bk_sttlm_amt.value = 12.3  # type: ignore[assignment,union-attr]
    with pytest.raises(ValidationError, match="float"):
        encode_validated(msg)


def test_encode_validated_refuses_what_is_not_a_message() -> None:
    with pytest.raises(TypeError, match="no validation rules"):
        encode_validated({"grpHdr": {}})  # type: ignore[arg-type]


def test_every_iso_4217_code_is_three_upper_case_letters() -> None:
    assert all(re.fullmatch("[A-Z]{3}", code) for code in ISO_4217)


def test_a_message_that_passed_is_not_walked_again_until_it_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from payments_async.iso20022 import _validate

    walks: list[object] = []

    def counting(msg: Any, **kwargs: Any) -> Any:
        walks.append(msg)
        return find_problems(msg, **kwargs)

    msg = build_cancellation(**_CANCELLATION)
    monkeypatch.setattr(_validate, "find_problems", counting)
    encode_validated(msg)
    assert walks == []  # the builder validated it; unchanged since
    msg.body.assgnmt.id = "ASG-2"
    encode_validated(msg)
    assert walks == [msg]  # changed: walked once more
    copy = msgspec.structs.replace(msg)
    encode_validated(copy)
    assert walks == [msg, copy]  # another object: walked on its own
