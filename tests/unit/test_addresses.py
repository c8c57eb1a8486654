"""Postal addresses: ISO PostalAddress24 lengths, the EPC address rule and its cut-over date."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from payments_async import EPC_ADDRESS_CUTOVER, Address, ValidationError, build_credit_transfer
from payments_async.iso20022 import (
    build_cancellation,
    decode_camt056,
    decode_pacs008,
    encode,
    encode_validated,
    find_problems,
    validate,
)
from payments_async.iso20022.pacs008 import Party, PostalAddress, Purpose
from tests.support.strategies_iso import sepa_text, valid_address

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
T = "$.fitoFICstmrCdtTrf.cdtTrfTxInf[0]"
DBTR = f"{T}.dbtr.pstlAdr"
CDTR = f"{T}.cdtr.pstlAdr"
SOURCE = "EPC 153-22 v2.1; SCT rulebook 2025 v1.1"
BEFORE = EPC_ADDRESS_CUTOVER - timedelta(days=1)

TRANSFER: dict[str, Any] = {
    "debtor_name": "Alice Example",
    "debtor_iban": "DE89370400440532013000",
    "debtor_agent_id": "37040044",
    "creditor_name": "Bob Example",
    "creditor_iban": "FR1420041010050500013M02606",
    "creditor_agent_id": "20041010",
    "amount": "12.30",
}
STRUCTURED = Address(
    street="Hauptstrasse", building="1", post_code="10115", town="Berlin", country="DE"
)
HYBRID = Address(town="Paris", country="FR", lines=("1 rue de la Paix", "Batiment B"))
UNSTRUCTURED = Address(lines=("Hauptstrasse 1", "10115 Berlin"))


def test_the_cutover_is_15_november_2026() -> None:
    assert date(2026, 11, 15) == EPC_ADDRESS_CUTOVER


# --- the EPC rule --------------------------------------------------------------------------


def test_an_unstructured_address_is_refused_from_the_cutover() -> None:
    with pytest.raises(ValidationError) as info:
        build_credit_transfer(**TRANSFER, debtor_address=UNSTRUCTURED)
    assert info.value.paths == (DBTR,)
    (problem,) = info.value.problems
    assert "unstructured address" in problem.message
    assert "2026-11-15" in problem.message
    assert SOURCE in problem.message
    for on in (None, EPC_ADDRESS_CUTOVER, date(2030, 1, 1)):
        assert [p.path for p in find_problems(_message(UNSTRUCTURED), rules_on=on)] == [DBTR]


def _message(address: Address) -> Any:
    """A decoded pacs.008 whose debtor has ``address``, whatever the rules say of it."""
    return decode_pacs008(_with_debtor_address(address))


def _with_debtor_address(address: Address) -> bytes:
    msg = build_credit_transfer(**TRANSFER, creditor_address=HYBRID)
    wire = json.loads(encode(msg))
    wire["fitoFICstmrCdtTrf"]["cdtTrfTxInf"][0]["dbtr"]["pstlAdr"] = json.loads(
        encode(address.to_iso())
    )
    return json.dumps(wire).encode()


def test_an_address_without_town_or_country_is_refused_from_the_cutover() -> None:
    for address in (
        Address(street="Hauptstrasse", building="1", post_code="10115", town="Berlin"),
        Address(street="Hauptstrasse", country="DE"),
        Address(),
    ):
        problems = find_problems(_message(address))
        assert [p.path for p in problems] == [DBTR]
        assert "needs its town name 'twnNm' and country 'ctry'" in problems[0].message
        assert SOURCE in problems[0].message


def test_a_hybrid_address_with_three_lines_is_refused_on_any_date() -> None:
    three = Address(town="Paris", country="FR", lines=("a", "b", "c"))
    for on in (None, BEFORE):
        with pytest.raises(ValidationError) as info:
            build_credit_transfer(**TRANSFER, creditor_address=three, rules_on=on)
        assert info.value.paths == (f"{CDTR}.adrLine",)
        assert "at most 2 address lines" in info.value.problems[0].message
        assert SOURCE in info.value.problems[0].message


@pytest.mark.parametrize("address", [STRUCTURED, HYBRID, Address(town="Wien", country="AT")])
def test_structured_and_hybrid_addresses_are_accepted(address: Address) -> None:
    msg = build_credit_transfer(**TRANSFER, debtor_address=address, creditor_address=address)
    assert find_problems(msg) == []
    assert find_problems(msg, rules_on=BEFORE) == []


def test_the_opt_out_accepts_lines_alone_before_the_cutover_only() -> None:
    msg = build_credit_transfer(**TRANSFER, debtor_address=UNSTRUCTURED, rules_on=BEFORE)
    validate(msg, rules_on=BEFORE)
    assert find_problems(msg, rules_on=BEFORE) == []
    with pytest.raises(ValidationError) as info:
        validate(msg, rules_on=EPC_ADDRESS_CUTOVER)
    assert info.value.paths == (DBTR,)
    with pytest.raises(ValidationError):
        validate(msg)


def test_the_opt_out_is_never_silent_when_sending() -> None:
    # valid only under the old rules: encode_validated (what the client sends) checks it
    # under the rules in force now
    msg = build_credit_transfer(**TRANSFER, debtor_address=UNSTRUCTURED, rules_on=BEFORE)
    validate(msg, rules_on=BEFORE)
    with pytest.raises(ValidationError) as info:
        encode_validated(msg)
    assert info.value.paths == (DBTR,)


def test_rules_on_must_be_a_date() -> None:
    msg = build_credit_transfer(**TRANSFER)
    with pytest.raises(TypeError, match="rules_on must be a date"):
        validate(msg, rules_on="2026-11-01")  # type: ignore[arg-type]
    old = build_credit_transfer(**TRANSFER, debtor_address=UNSTRUCTURED, rules_on=BEFORE)
    evening = datetime.combine(BEFORE, time(23, 59), tzinfo=UTC)
    assert find_problems(old, rules_on=evening) == []  # a datetime counts by its date
    assert len(find_problems(old, rules_on=evening + timedelta(minutes=1))) == 1


def test_the_rule_covers_the_creditor_agent_of_a_cancellation() -> None:
    kw: dict[str, Any] = {
        "original_end_to_end_id": "E2E-1",
        "amount": "12.30",
        "creditor_agent_bic": "BNPAFRPPXXX",
        "creditor_iban": "FR1420041010050500013M02606",
        "assigner_bic": "COBADEFFXXX",
        "assignee_bic": "BNPAFRPPXXX",
    }
    build_cancellation(**kw, creditor_agent_address=HYBRID)
    with pytest.raises(ValidationError) as info:
        build_cancellation(**kw, creditor_agent_address=UNSTRUCTURED)
    path = "$.fitoFIPmtCxlReq.undrlyg[0].txInf[0].orgnlTxRef.cdtrAgt.finInstnId.pstlAdr"
    assert info.value.paths == (path,)
    build_cancellation(**kw, creditor_agent_address=UNSTRUCTURED, rules_on=BEFORE)


def test_lines_alone_are_not_an_address_argument() -> None:
    with pytest.raises(ValidationError) as info:
        build_credit_transfer(**TRANSFER, debtor_address=["Hauptstrasse 1", "Berlin"])  # type: ignore[arg-type]
    assert info.value.paths == (DBTR,)
    assert "expected PostalAddress, got list" in info.value.problems[0].message


# --- ISO lengths of the structured fields ------------------------------------------------

FIELDS = [  # Address field, wire name, ISO maximum length
    ("department", "dept", 70),
    ("sub_department", "subDept", 70),
    ("street", "strtNm", 70),
    ("building", "bldgNb", 16),
    ("building_name", "bldgNm", 35),
    ("floor", "flr", 70),
    ("post_box", "pstBx", 16),
    ("room", "room", 70),
    ("post_code", "pstCd", 16),
    ("town", "twnNm", 35),
    ("town_location", "twnLctnNm", 35),
    ("district", "dstrctNm", 35),
    ("country_sub_division", "ctrySubDvsn", 35),
]


@pytest.mark.parametrize(("field", "wire", "limit"), FIELDS)
def test_a_structured_field_longer_than_iso_allows_is_refused(
    field: str, wire: str, limit: int
) -> None:
    base: dict[str, Any] = {"town": "Berlin", "country": "DE"}
    build_credit_transfer(**TRANSFER, debtor_address=Address(**(base | {field: "x" * limit})))
    with pytest.raises(ValidationError) as info:
        build_credit_transfer(
            **TRANSFER, debtor_address=Address(**(base | {field: "x" * (limit + 1)}))
        )
    assert info.value.paths == (f"{DBTR}.{wire}",)
    assert f"1..{limit} characters" in info.value.problems[0].message


def test_country_and_lines_follow_iso() -> None:
    with pytest.raises(ValidationError) as info:
        build_credit_transfer(
            **TRANSFER,
            debtor_address=Address(town="Berlin", country="DEU", lines=("L" * 71,)),
        )
    assert info.value.paths == (f"{DBTR}.ctry", f"{DBTR}.adrLine[0]")


# --- the Address value -------------------------------------------------------------------


def test_the_address_value_maps_to_iso_names_and_back() -> None:
    address = Address(
        **{field: f"v{i}" for i, (field, _, _) in enumerate(FIELDS)}, country="DE", lines=("l",)
    )
    iso = address.to_iso()
    wire = json.loads(encode(iso))
    assert list(wire) == [wire_name for _, wire_name, _ in FIELDS] + ["ctry", "adrLine"]
    assert Address.from_iso(iso) == address
    assert (STRUCTURED.form, HYBRID.form, UNSTRUCTURED.form) == (
        "structured",
        "hybrid",
        "unstructured",
    )


def test_a_postal_address_struct_is_taken_as_it_is() -> None:
    iso = PostalAddress(twn_nm="Berlin", ctry="DE", pst_cd="10115")
    msg = build_credit_transfer(**TRANSFER, debtor_address=iso)
    assert msg.body.cdt_trf_tx_inf[0].dbtr.pstl_adr == iso


# --- the EPC SCT inter-PSP subset of pacs.008 ----------------------------------------------


@pytest.mark.parametrize("name", ["pacs008.json", "pacs008_hybrid.json"])
def test_the_examples_validate_and_round_trip(name: str) -> None:
    raw = (EXAMPLES / name).read_bytes()
    msg = decode_pacs008(raw)
    validate(msg)
    assert decode_pacs008(encode(msg)) == msg
    assert json.loads(encode(msg)) == json.loads(raw)


def test_the_sepa_subset_is_modelled() -> None:
    msg = decode_pacs008((EXAMPLES / "pacs008_hybrid.json").read_bytes())
    hdr = msg.body.grp_hdr
    tx = msg.body.cdt_trf_tx_inf[0]
    assert hdr.intr_bk_sttlm_dt == "2026-11-24"
    assert hdr.instg_agt is not None
    assert hdr.instg_agt.fin_instn_id.bicfi == "BNPAFRPPXXX"
    assert hdr.instd_agt is not None
    assert hdr.instd_agt.fin_instn_id.bicfi == "COBADEFFXXX"
    assert tx.ultmt_dbtr is not None
    assert tx.ultmt_dbtr.nm == "Martin Family Trust"
    assert tx.purp is not None
    assert tx.purp.cd == "GDDS"
    assert tx.rmt_inf is not None
    assert tx.rmt_inf.strd is not None
    ref = tx.rmt_inf.strd[0].cdtr_ref_inf
    assert ref is not None
    assert ref.tp is not None
    assert ref.tp.cd_or_prtry.cd == "SCOR"


def _spoiled(change: Any) -> bytes:
    wire = json.loads((EXAMPLES / "pacs008_hybrid.json").read_bytes())
    change(wire["fitoFICstmrCdtTrf"])
    return json.dumps(wire).encode()


def test_a_field_beyond_the_subset_is_refused_by_name() -> None:
    def add(body: dict[str, Any]) -> None:
        body["cdtTrfTxInf"][0]["dbtr"]["pstlAdr"]["adrTp"] = {"cd": "ADDR"}

    with pytest.raises(ValidationError) as info:
        decode_pacs008(_spoiled(add))
    assert info.value.paths == (DBTR,)
    assert "unknown field `adrTp`" in info.value.problems[0].message


@pytest.mark.parametrize(
    ("where", "value", "path", "fragment"),
    [
        ("grpHdr", "2026-13-01", "$.fitoFICstmrCdtTrf.grpHdr.intrBkSttlmDt", "calendar date"),
        ("grpHdr", "2026-11-24T00:00:00Z", "$.fitoFICstmrCdtTrf.grpHdr.intrBkSttlmDt", "ISO"),
        ("tx", "24.11.2026", f"{T}.intrBkSttlmDt", "YYYY-MM-DD"),
    ],
)
def test_the_settlement_date_is_an_iso_date(
    where: str, value: str, path: str, fragment: str
) -> None:
    def put(body: dict[str, Any]) -> None:
        (body["grpHdr"] if where == "grpHdr" else body["cdtTrfTxInf"][0])["intrBkSttlmDt"] = value

    with pytest.raises(ValidationError) as info:
        validate(decode_pacs008(_spoiled(put)))
    assert info.value.paths == (path,)
    assert fragment in info.value.problems[0].message


def test_sepa_allows_one_unstructured_remittance_line() -> None:
    def two(body: dict[str, Any]) -> None:
        body["cdtTrfTxInf"][0]["rmtInf"] = {"ustrd": ["Invoice 1", "Invoice 2"]}

    with pytest.raises(ValidationError) as info:
        validate(decode_pacs008(_spoiled(two)))
    assert info.value.paths == (f"{T}.rmtInf.ustrd",)
    assert "at most 1 item" in info.value.problems[0].message


def test_a_purpose_code_has_at_most_four_characters() -> None:
    with pytest.raises(ValidationError) as info:
        build_credit_transfer(**TRANSFER, purpose="GOODS")
    assert info.value.paths == (f"{T}.purp.cd",)
    msg = build_credit_transfer(
        **TRANSFER, purpose="SUPP", ultimate_debtor_name="A", ultimate_creditor_name="B"
    )
    tx = msg.body.cdt_trf_tx_inf[0]
    assert tx.purp == Purpose(cd="SUPP")
    assert tx.ultmt_dbtr == Party(nm="A")
    assert tx.ultmt_cdtr == Party(nm="B")


# --- property: every shape the builders make validates and round-trips --------------------

shapes = st.none() | valid_address


@settings(deadline=None)
@given(
    debtor=shapes,
    creditor=shapes,
    remittance=st.none() | sepa_text(140),
    agent=st.none() | valid_address,
)
def test_builder_outputs_validate_and_round_trip(
    debtor: Address | None, creditor: Address | None, remittance: str | None, agent: Any
) -> None:
    msg = build_credit_transfer(
        **TRANSFER, debtor_address=debtor, creditor_address=creditor, remittance=remittance
    )
    assert find_problems(msg) == []
    again = decode_pacs008(encode(msg))
    assert again == msg
    tx = again.body.cdt_trf_tx_inf[0]
    for address, party in ((debtor, tx.dbtr), (creditor, tx.cdtr)):
        got = None if party.pstl_adr is None else Address.from_iso(party.pstl_adr)
        assert got == address
    cancellation = build_cancellation(
        original_end_to_end_id=msg.end_to_end_id,
        amount="12.30",
        creditor_agent_bic="BNPAFRPPXXX",
        creditor_iban="FR1420041010050500013M02606",
        assigner_bic="COBADEFFXXX",
        assignee_bic="BNPAFRPPXXX",
        creditor_agent_address=agent,
    )
    assert find_problems(cancellation) == []
    assert decode_camt056(encode(cancellation)) == cancellation
