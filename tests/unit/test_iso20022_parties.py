"""Organisation identification on parties: LEI, AnyBIC and one other identifier."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from payments_async import ValidationError
from payments_async.iso20022 import (
    Pacs008,
    check_lei,
    decode_pacs008,
    encode,
    find_problems,
    validate,
)
from payments_async.iso20022.xml import from_xml, to_xml
from tests.factories import credit_transfer

PACS008_XSD = Path(__file__).resolve().parents[1] / "fixtures" / "xsd" / "pacs.008.001.10.xsd"
DBTR = "$.fitoFICstmrCdtTrf.cdtTrfTxInf[0].dbtr"

# Published LEIs (GLEIF): Deutsche Bank AG, Deutsche Boerse AG.
LEI = "7LTWFZYICNSX8D621K86"
OTHER_LEI = "529900T8BM49AURSDO55"


def with_debtor_id(org_id: Any) -> Pacs008:
    document = msgspec.json.decode(encode(credit_transfer()))
    document["fitoFICstmrCdtTrf"]["cdtTrfTxInf"][0]["dbtr"]["id"] = {"orgId": org_id}
    return decode_pacs008(msgspec.json.encode(document))


def problems_at(msg: Pacs008, prefix: str) -> list[str]:
    return [f"{p.path}: {p.message}" for p in find_problems(msg) if p.path.startswith(prefix)]


@pytest.mark.parametrize("lei", [LEI, OTHER_LEI])
def test_a_published_lei_passes(lei: str) -> None:
    assert check_lei(lei) is None


@pytest.mark.parametrize(
    ("lei", "fragment"),
    [
        ("7LTWFZYICNSX8D621K87", "check digits are wrong (ISO 17442, mod-97)"),
        ("7LTWFZYICNSX8D621K68", "check digits are wrong"),
        # 1 modulo 97 like the right digits (97), but ISO 7064 never computes 00
        ("5493001KJTIIGC8Y1V00", "check digits are wrong"),
        ("7ltwfzyicnsx8d621k86", "not an LEI"),
        ("7LTWFZYICNSX8D621K8", "not an LEI"),
        ("7LTWFZYICNSX8D621KAB", "not an LEI"),
    ],
)
def test_a_wrong_lei_is_refused_with_its_reason(lei: str, fragment: str) -> None:
    message = check_lei(lei)
    assert message is not None
    assert fragment in message


@given(st.from_regex(r"[A-Z0-9]{18}", fullmatch=True), st.integers(0, 99))
def test_exactly_one_pair_of_check_digits_holds(prefix: str, digits: int) -> None:
    # ISO 7064 mod 97-10: the check digits are 98 - (prefix + "00" mod 97)
    number = int("".join(str(int(c, 36)) for c in prefix + "00"))
    right = 98 - number % 97
    assert (check_lei(f"{prefix}{digits:02d}") is None) == (digits == right)


def test_lei_anybic_and_one_other_identifier_together_pass_and_round_trip_through_xml() -> None:
    msg = with_debtor_id(
        {
            "anyBIC": "DEUTDEFFXXX",
            "lei": LEI,
            "othr": [{"id": "HRB 30000", "schmeNm": {"cd": "COID"}, "issr": "Amtsgericht"}],
        }
    )
    validate(msg)
    data = to_xml(msg, xsd=PACS008_XSD)  # raises unless the official XSD accepts it
    assert b"<LEI>7LTWFZYICNSX8D621K86</LEI>" in data
    assert b"<AnyBIC>DEUTDEFFXXX</AnyBIC>" in data
    back = from_xml(data, xsd=PACS008_XSD)
    assert encode(back) == encode(msg)
    validate(back)  # type: ignore[arg-type]


def test_a_wrong_lei_check_digit_is_refused_at_its_path() -> None:
    msg = with_debtor_id({"lei": "7LTWFZYICNSX8D621K87"})
    with pytest.raises(ValidationError) as info:
        validate(msg)
    (problem,) = info.value.problems
    assert problem.path == f"{DBTR}.id.orgId.lei"
    assert "LEI check digits are wrong" in problem.message


@pytest.mark.parametrize(
    ("org_id", "fragment"),
    [
        ({}, "give at least one of 'anyBIC', 'lei' and 'othr'"),
        ({"othr": [{"id": "A"}, {"id": "B"}]}, "allows at most 1 item(s), got 2"),
        ({"anyBIC": "deutdeff"}, "not a BICFI"),
        ({"othr": [{"id": "A", "schmeNm": {}}]}, "give exactly one of 'cd' and 'prtry'"),
        (
            {"othr": [{"id": "A", "schmeNm": {"cd": "COID", "prtry": "X"}}]},
            "give exactly one of 'cd' and 'prtry'",
        ),
        ({"othr": [{"id": "Ä" * 3}]}, "outside the SEPA set"),
    ],
)
def test_organisation_identification_rules(org_id: Any, fragment: str) -> None:
    found = problems_at(with_debtor_id(org_id), f"{DBTR}.id")
    assert any(fragment in p for p in found), found


def test_a_party_without_an_id_encodes_as_before() -> None:
    document = msgspec.json.decode(encode(credit_transfer()))
    assert "id" not in document["fitoFICstmrCdtTrf"]["cdtTrfTxInf"][0]["dbtr"]
