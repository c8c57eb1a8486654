"""Names a bank can send: the SEPA character set, transliteration, the 70-character name."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from payments_async import Address, ValidationError
from payments_async.iso20022 import outside_sepa_set, transliterate
from tests.factories import cancellation, credit_transfer

_SEPA = re.compile(r"[A-Za-z0-9/\-?:().,'+ ]*")


@pytest.mark.parametrize(
    ("name", "converted"),
    [
        ("Müller & Söhne", "Muller + Sohne"),
        ("Zoë Núñez", "Zoe Nunez"),
        ("Straße", "Strasse"),
        ("Łódź", "Lodz"),
        ("Zürich", "Zurich"),
        ("Köln", "Koln"),
        ("São Paulo", "Sao Paulo"),
        ("Dvořák Čeněk", "Dvorak Cenek"),
        ("Ærøskøbing", "AEroskobing"),
        ("Þórður Guðmundsson", "THordur Gudmundsson"),
        ("Đorđe", "Dorde"),
        ("Œuvre d’art", "OEuvre d'art"),
        ("Kraków–Gdańsk", "Krakow-Gdansk"),
        ("Åsa Öberg", "Asa Oberg"),
        ("José", "Jose"),
        (unicodedata.normalize("NFD", "José"), "Jose"),
        ("a@b", "a.b"),
    ],
)
def test_european_names_convert_to_the_sepa_set(name: str, converted: str) -> None:
    assert transliterate(name) == (converted, True)


def test_text_in_the_set_is_returned_unchanged() -> None:
    assert transliterate("Alice (Ltd.) +49/30-12:34?'") == ("Alice (Ltd.) +49/30-12:34?'", False)


@given(st.text(max_size=60))
def test_any_text_converts_into_the_set_and_stays_there(text: str) -> None:
    converted, changed = transliterate(text)
    assert _SEPA.fullmatch(converted)
    assert changed == (converted != text)
    assert transliterate(converted) == (converted, False)
    assert outside_sepa_set(converted) == ""


def test_a_decomposed_name_is_judged_as_its_composed_form() -> None:
    decomposed = unicodedata.normalize("NFD", "José")
    assert len(decomposed) == 5
    assert outside_sepa_set(decomposed) == "é"
    with pytest.raises(ValidationError) as info:
        credit_transfer(debtor_name=decomposed)
    (problem,) = info.value.problems
    assert problem.path.endswith(".dbtr.nm")
    assert "characters outside the SEPA set: 'é'" in problem.message  # not a lone accent
    assert "transliterate=True" in problem.message


def test_the_refusal_names_each_character_and_the_way_out() -> None:
    with pytest.raises(ValidationError) as info:
        credit_transfer(debtor_name="Müller & Söhne", creditor_name="Łódź Zoë")
    messages = {p.path.rsplit(".", 2)[-2]: p.message for p in info.value.problems}
    assert "'&öü'" in messages["dbtr"]
    assert "'ëóŁź'" in messages["cdtr"]  # in code point order
    assert all("the builders' transliterate=True" in m for m in messages.values())


def test_an_identifier_outside_the_set_is_not_offered_a_conversion() -> None:
    with pytest.raises(ValidationError) as info:
        cancellation("E2E-ü")
    (problem,) = info.value.problems
    assert "outside the SEPA set: 'ü'" in problem.message
    assert "transliterate" not in problem.message


@pytest.mark.parametrize("length", [70, 71, 140])
def test_a_name_longer_than_70_characters_is_refused_with_the_rule(length: int) -> None:
    if length == 70:
        assert credit_transfer(debtor_name="N" * 70).body.cdt_trf_tx_inf[0].dbtr.nm == "N" * 70
        return
    with pytest.raises(ValidationError) as info:
        credit_transfer(debtor_name="N" * length)
    (problem,) = info.value.problems
    assert problem.path == "$.fitoFICstmrCdtTrf.cdtTrfTxInf[0].dbtr.nm"
    assert "must be 1..70 characters (EPC SCT inter-PSP implementation guidelines" in (
        problem.message
    )
    assert problem.message.endswith(f"got {length}")


def test_an_originator_name_longer_than_70_characters_is_refused() -> None:
    with pytest.raises(ValidationError) as info:
        cancellation("E2E-1", originator_name="O" * 71)
    (problem,) = info.value.problems
    assert problem.path.endswith(".cxlRsnInf[0].orgtr.nm")
    assert "1..70 characters" in problem.message


def test_the_builders_transliterate_names_and_addresses_and_report_each_change() -> None:
    msg = credit_transfer(
        debtor_name="Müller & Söhne",
        creditor_name="Bob",
        remittance="Rechnung Nr. 7 – Straße",
        debtor_address=Address(street="Königstraße", town="Köln", country="DE"),
        transliterate=True,
    )
    tx = msg.body.cdt_trf_tx_inf[0]
    assert tx.dbtr.nm == "Muller + Sohne"
    assert tx.cdtr.nm == "Bob"
    assert tx.dbtr.pstl_adr is not None
    assert (tx.dbtr.pstl_adr.strt_nm, tx.dbtr.pstl_adr.twn_nm) == ("Konigstrasse", "Koln")
    assert [str(c) for c in msg.transliterations] == [
        "debtor_name: 'Müller & Söhne' -> 'Muller + Sohne'",
        "remittance: 'Rechnung Nr. 7 – Straße' -> 'Rechnung Nr. 7 - Strasse'",
        "debtor_address.street: 'Königstraße' -> 'Konigstrasse'",
        "debtor_address.town: 'Köln' -> 'Koln'",
    ]
    assert credit_transfer().transliterations == ()


def test_transliteration_never_touches_identifiers() -> None:
    with pytest.raises(ValidationError) as info:
        cancellation("E2E-ü", originator_name="Zoë Núñez", transliterate=True)
    (problem,) = info.value.problems
    assert problem.path.endswith(".orgnlEndToEndId")
    recall = cancellation("E2E-1", originator_name="Zoë Núñez", transliterate=True)
    assert recall.body.undrlyg[0].tx_inf[0].cxl_rsn_inf[0].orgtr is not None
    assert [tuple(c) for c in recall.transliterations] == [
        ("originator_name", "Zoë Núñez", "Zoe Nunez")
    ]
