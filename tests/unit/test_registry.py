"""IBAN, BIC and currency checks by the generated tables, and the tables against the registries."""

from __future__ import annotations

import string
from datetime import UTC, datetime
from decimal import Decimal

import pycountry  # type: ignore[import-untyped]
import pytest
from schwifty import IBAN, exceptions, registry  # type: ignore[import-untyped]

from payments_async import ValidationError
from payments_async.iso20022 import build_cancellation, build_credit_transfer
from payments_async.iso20022._registry import BIC_COUNTRIES, CURRENCIES, IBAN_FORMATS
from payments_async.iso20022._validate import RULES, check_iban

AT = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)

# One IBAN of every country of the SEPA zone, drawn by schwifty (IBAN.random, seeded with
# the country code): right length, account part and check digits.
SEPA_IBANS = (
    "AD287901366390NM27G3DDRI",
    "AT510307057162138861",
    "AX6934698729214875",
    "BE39184273268719",
    "BG84RBYP0417623E6PQEU5",
    "BL856775185078H1N5GICODSC32",
    "CH308757438FLKVVMT04I",
    "CY3643347334BZ9BI8JTIWZCYHUJ",
    "CZ9685023178762585051071",
    "DE56058004808304043406",
    "DK6276922451892201",
    "EE407754815830029874",
    "ES4273099378673049644578",
    "FI9205617115086445",
    "FR649352933462W9VWIFSPO8L60",
    "GB24MEGB13844770666233",
    "GF669551797414I1LOJJ98CVA76",
    "GG81QGNB24210821098073",
    "GI17ECQPVYMHWTVHUUTNZIX",
    "GP197763336731JUISHZNJIUL22",
    "GR547786448UIDLOFOACGFFOUQG",
    "HR5125553661300472531",
    "HU81376613936393010838441676",
    "IE72PYUL06877971409489",
    "IM25VAGI87538750889343",
    "IS960980289992686322407405",
    "IT86Q1938796281SX6WML0QPAIX",
    "JE94HNID62918206314245",
    "LI7550173BOJF1F6ZVXE6",
    "LT330920594021307157",
    "LU28913AR04BRQLJUSSO",
    "LV61BRCPJYC0RUYIWMXDA",
    "MC346287671920VHVSNHINAFH97",
    "MF687470124312FDWDRQUUVYJ99",
    "MQ323913508839IU8KEHTQOKQ93",
    "MT98JBQZ00402OVXIH39GHKIAWYAGRQ",
    "NC052216249323BWMTJNDFYDG64",
    "NL88YRVH4296023853",
    "NO3000578425438",
    "PF832307423529NDCCBKQC82X91",
    "PL25683748826794053318429431",
    "PM110887061928QY0FZNMRAUJ64",
    "PT50865926564389593657818",
    "RE160456544218CJHNDTXQGMG50",
    "RO29LLQQD01GMHEJBPJ7GAFS",
    "SE2516369088120189974568",
    "SI56924629058740993",
    "SK0815512120034361547202",
    "SM85W0045093354IGR1H75M2MVQ",
    "TF873003811840IQSGBAYD5NE76",
    "VA56186861499082371473",
    "WF929980053989XDHLMIDXGY654",
    "YT789134705838ULMO3ERVGAL64",
)


def _registry_countries() -> dict[str, object]:
    specs = {}
    for country in (a + b for a in string.ascii_uppercase for b in string.ascii_uppercase):
        try:
            specs[country] = registry.get_iban_spec(country)
        except exceptions.InvalidCountryCode:
            continue
    return specs


def test_the_tables_hold_the_registries_formats_countries_and_currencies() -> None:
    # The data, not the text: tools/gen_registry.py --check also compares the layout and
    # the versions named in the module's docstring.
    specs = _registry_countries()
    official = {c: (s.iban_length, s.bban_spec) for c, s in specs.items() if not s.aspirational}
    assert official == IBAN_FORMATS
    assert {c.alpha_2 for c in pycountry.countries} | {"XK"} == BIC_COUNTRIES
    assert {c.alpha_3 for c in pycountry.currencies} - {"XTS", "XXX"} == CURRENCIES


def test_the_sepa_table_has_one_iban_of_every_sepa_country() -> None:
    sepa = {c for c, s in _registry_countries().items() if s.in_sepa_zone}
    assert {iban[:2] for iban in SEPA_IBANS} == sepa


@pytest.mark.parametrize("value", SEPA_IBANS)
def test_an_iban_of_every_sepa_country_is_accepted(value: str) -> None:
    IBAN(value)  # the registry's own check agrees
    assert check_iban(value) is None


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("QQ76123456789012", "'QQ' is not a country of the IBAN registry"),
        ("DE5212345678", "a DE IBAN has 22 characters, got 12"),
        ("DE8937040044053201300A", "the account part of a DE IBAN has the form 8!n10!n"),
        ("DE00370400440532013000", "check digits are wrong"),
    ],
)
def test_an_iban_outside_its_countrys_format_is_refused_with_the_reason(
    value: str, reason: str
) -> None:
    with pytest.raises(exceptions.SchwiftyException):
        IBAN(value)
    message = check_iban(value)
    assert message is not None
    assert reason in message


@pytest.mark.parametrize("value", ["QQ76123456789012", "DE5212345678"])
def test_the_builders_refuse_an_iban_of_no_country_or_the_wrong_length(value: str) -> None:
    with pytest.raises(ValidationError) as transfer:
        build_credit_transfer(
            amount=Decimal("10.00"),
            debtor_name="Alice",
            debtor_iban="DE89370400440532013000",
            creditor_name="Bob",
            creditor_iban=value,
            debtor_agent_id="10000000",
            creditor_agent_id="20000000",
            created_at=AT,
        )
    assert [p.path for p in transfer.value.problems] == [
        "$.fitoFICstmrCdtTrf.cdtTrfTxInf[0].cdtrAcct.id.othr.id"
    ]
    with pytest.raises(ValidationError) as cancellation:
        build_cancellation(
            original_end_to_end_id="E2E-1",
            amount=Decimal("10.00"),
            assigner_bic="COBADEFFXXX",
            assignee_bic="BNPAFRPPXXX",
            creditor_agent_bic="BNPAFRPPXXX",
            creditor_iban=value,
            created_at=AT,
        )
    paths = [p.path for p in cancellation.value.problems]
    assert paths == ["$.fitoFIPmtCxlReq.undrlyg[0].txInf[0].orgnlTxRef.cdtrAcct.id.iban"]
    assert value in str(cancellation.value)


@pytest.mark.parametrize(
    ("value", "ok"),
    [("COBADEFFXXX", True), ("RBKOXKPR", True), ("COBAQQFFXXX", False), ("COBAXXFF", False)],
)
def test_a_bic_names_a_country(value: str, ok: bool) -> None:
    message = RULES["BicFi"](value)
    assert (message is None) is ok
    if not ok:
        assert "is not an ISO 3166 country" in str(message)


@pytest.mark.parametrize(("code", "ok"), [("EUR", True), ("XCG", True), ("XTS", False)])
def test_currencies_are_iso_4217_codes_for_money(code: str, ok: bool) -> None:
    assert (RULES["CurrencyCode"](code) is None) is ok
