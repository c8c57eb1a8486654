"""The builders' check of their inputs gives exactly the verdict of the full rule walker.

A builder checks only what the caller gave (the parts it makes itself are valid by
construction) and walks the whole message only when that check fails or an input is
outside what it covers. For arbitrary inputs, mostly valid with some broken ones, the
built message must be accepted exactly when the full walk (``find_problems``, independent
of the builders' input check) finds no problem, and a refused one must raise the problems
the walk names, paths and order included.
"""

from __future__ import annotations

import string
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any
from unittest.mock import ANY

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from payments_async import Address, ValidationError
from payments_async.iso20022 import (
    build_cancellation,
    build_credit_transfer,
    builders,
    find_problems,
)
from payments_async.iso20022._validate import RULES
from payments_async.iso20022.builders import _new_uetr, format_utc, new_id
from payments_async.iso20022.pacs008 import PostalAddress
from tests.support.strategies_iso import (
    bic,
    eur_amount,
    iban,
    sepa_id,
    sepa_text,
    uetr,
    valid_address,
)

SEPA = string.ascii_letters + string.digits + "/-?:().,'+ "
# Text near the rules' edges: SEPA characters, slashes, spaces, other characters, lengths.
EDGES = ["", " ", "/", "a/", "/a", "a//b", "a" * 35, "a" * 36, "b" * 70, "b" * 71, "c" * 140]
WORDS = ["c" * 141, "EUR", "eur", "XXX", "USD", "CUST", "cust", "SLEV", "SEPA"]
edgy = st.text(alphabet=SEPA + "/é\n_ÄZ0 ", max_size=40) | st.sampled_from([*EDGES, *WORDS])
junk: st.SearchStrategy[object] = st.sampled_from([None, 0, 1, 1.5, b"x", [], ("a",), Decimal("1")])


@st.composite
def _inputs(
    draw: st.DrawFn,
    valid: dict[str, st.SearchStrategy[Any]],
    broken: dict[str, st.SearchStrategy[Any]],
) -> dict[str, Any]:
    """Valid inputs (in every form the builder tidies), then zero to three of them broken:
    a message with one bad input is where a check that forgot a rule would show it."""
    kw = draw(st.fixed_dictionaries(valid))
    for key in draw(st.lists(st.sampled_from(sorted(broken)), max_size=3, unique=True)):
        kw[key] = draw(broken[key])
    return kw


bics = bic | st.sampled_from(["cobadeffxxx", " BNPAFRPP ", "bnpafrppxxx"])
bad_bics = edgy | junk | st.sampled_from(["COBA", "COBADEFFXX", "COBADE1F", "COBADEFF XXX"])
ibans = iban | st.sampled_from(["fr14 2004 1010 0505 0001 3m02 606", "DE89 3704 0044 0532 0130 00"])
bad_ibans = (
    edgy | junk | st.sampled_from(["DE00370400440532013000", "FR14", "FR1420041010050500013M0260"])
)
ids = st.none() | sepa_id
bad_ids = edgy | junk
amounts = eur_amount | st.sampled_from(["12.30", "1E+2", " 5.000 ", 7, Decimal("0.10"), "0.01"])
bad_amounts = st.decimals(places=None, allow_nan=True, allow_infinity=True) | st.sampled_from(
    ["0.001", "0", "-1.00", "1000000000", "1E+30", "1.2345678901234567890123E+5", "12.345"]
)
moments = st.none() | st.datetimes(
    min_value=datetime(1, 1, 2),
    max_value=datetime(9999, 12, 30),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30))]),
)
addresses = st.none() | valid_address
bad_addresses = (
    st.builds(Address, lines=st.lists(edgy, min_size=1, max_size=3).map(tuple))
    | st.builds(Address, town=st.none() | edgy, country=st.none() | edgy, post_code=edgy)
    | st.builds(
        Address, town=edgy, country=st.just("DE"), lines=st.lists(edgy, max_size=4).map(tuple)
    )
    | edgy
    | junk
    | st.lists(edgy, min_size=1, max_size=2)
)
text140 = sepa_text(140)
text70 = sepa_text(70)
text35 = sepa_text(35)
bad_text = edgy | junk

cancellation_inputs = _inputs(
    {
        "original_end_to_end_id": ids,
        "amount": st.none() | amounts,
        "creditor_agent_bic": bics,
        "creditor_iban": ibans,
        "assigner_bic": bics,
        "assignee_bic": bics,
        "reason": st.sampled_from(["DUPL", "TECH", "FRAD", "AC03", "AM09", "CUST"]),
        "originator_name": st.none() | text70,
        "originator_bic": st.none() | st.just("") | bics,
        "assignment_id": ids,
        "cancellation_id": ids,
        "currency": st.just("EUR"),
        "service_level": st.just("SEPA") | text35,
        "creditor_agent_address": st.none() | valid_address,
        "created_at": moments,
    },
    {
        "original_end_to_end_id": bad_ids,
        "amount": bad_amounts,
        "creditor_agent_bic": bad_bics,
        "creditor_iban": bad_ibans,
        "assigner_bic": bad_bics,
        "assignee_bic": bad_bics,
        "reason": edgy | junk,
        "originator_name": bad_text,
        "originator_bic": bad_bics,
        "assignment_id": bad_ids,
        "cancellation_id": bad_ids,
        "currency": st.sampled_from(["USD", "GBP", "eur", "XXX"]) | edgy | junk,
        "service_level": bad_text,
        "creditor_agent_address": bad_addresses
        | st.builds(PostalAddress, twn_nm=st.none() | edgy, ctry=st.none() | edgy),
    },
)

transfer_inputs = _inputs(
    {
        "debtor_name": text70,
        "debtor_iban": ibans,
        "debtor_agent_id": text35,
        "creditor_name": text70,
        "creditor_iban": ibans,
        "creditor_agent_id": text35,
        "amount": amounts,
        "currency": st.just("EUR"),
        "remittance": st.none() | text140,
        "message_id": ids,
        "end_to_end_id": ids,
        "tx_id": ids,
        "uetr": st.none() | uetr,
        "debtor_address": addresses,
        "creditor_address": addresses,
        "debtor_account_name": st.none() | text70,
        "creditor_account_name": st.none() | text70,
        "creditor_reference": st.none() | text35,
        "charge_bearer": st.sampled_from(["SLEV", "DEBT", "CRED", "SHAR", None]),
        "service_level": st.just("SEPA") | text35,
        "local_instrument": st.none() | st.just("") | text35,
        "created_at": moments,
    },
    {
        "debtor_name": bad_text,
        "debtor_iban": bad_ibans,
        "debtor_agent_id": bad_text,
        "creditor_name": bad_text,
        "creditor_iban": bad_ibans,
        "creditor_agent_id": bad_text,
        "amount": bad_amounts,
        "currency": st.sampled_from(["USD", "JPY", "eur", "XXX", "EURO"]) | junk,
        "remittance": bad_text,
        "message_id": bad_ids,
        "end_to_end_id": bad_ids,
        "tx_id": bad_ids,
        "uetr": edgy | junk | st.just("2F1C5A3E-7B9D-4C1E-8F2A-6D3B9E0A1C47"),
        "debtor_address": bad_addresses,
        "creditor_address": bad_addresses,
        "debtor_account_name": bad_text,
        "creditor_account_name": bad_text,
        "creditor_reference": bad_text,
        "charge_bearer": edgy | junk,
        "service_level": bad_text,
        "local_instrument": bad_text,
    },
)


def _built(build: Any, kw: dict[str, Any]) -> tuple[Any, bool] | None:
    """The message the builder made and the verdict of its input check (None: it refused
    the inputs before any message existed, as it always did for floats and junk)."""
    seen: list[tuple[Any, bool]] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(builders, "_accept", lambda msg, ok, rules_on: seen.append((msg, ok)))
        try:
            build(**kw)
        except ValidationError:
            assert not seen
            return None
    return seen[0]


def _agrees(build: Any, kw: dict[str, Any], *, covered: bool) -> None:
    made = _built(build, kw)
    if made is None:
        return
    msg, inputs_ok = made
    problems = find_problems(msg)
    if inputs_ok:
        assert problems == []  # the check is sufficient: it never passes an invalid message
    if covered:
        assert inputs_ok == (problems == [])  # and inside its cover it passes every valid one
    if problems:
        with pytest.raises(ValidationError) as info:
            build(**kw)
        assert list(info.value.problems) == problems
    else:
        build(**kw)


def _plain_moment(kw: dict[str, Any]) -> bool:
    return kw["created_at"] is None or type(kw["created_at"]) is datetime


@settings(deadline=None)  # examples: the profile's (tests/conftest.py)
@given(kw=cancellation_inputs)
def test_cancellation_check_gives_the_walkers_verdict(kw: dict[str, Any]) -> None:
    covered = kw["creditor_agent_address"] is None and _plain_moment(kw)
    _agrees(build_cancellation, kw, covered=covered)


@settings(deadline=None)  # examples: the profile's (tests/conftest.py)
@given(kw=transfer_inputs)
def test_credit_transfer_check_gives_the_walkers_verdict(kw: dict[str, Any]) -> None:
    # an address is outside the input check's cover: the builder walks the message
    no_address = kw["debtor_address"] is None and kw["creditor_address"] is None
    _agrees(build_credit_transfer, kw, covered=_plain_moment(kw) and no_address)


class _Moment(datetime):
    """A datetime subclass (as pandas' Timestamp is one): its text is not trusted."""

    def isoformat(self, sep: str = "T", timespec: str = "auto") -> str:
        return "yesterday+00:00"


def test_a_datetime_subclass_gets_the_full_walk() -> None:
    moment = _Moment(2024, 8, 1, tzinfo=UTC)
    made = _built(build_cancellation, _CANCELLATION | {"created_at": moment})
    assert made is not None
    assert made[1] is False
    with pytest.raises(ValidationError) as info:
        build_cancellation(**_CANCELLATION, created_at=moment)
    assert info.value.paths == ("$.fitoFIPmtCxlReq.assgnmt.creDtTm",)


_CANCELLATION: dict[str, Any] = {
    "original_end_to_end_id": "E2E-1",
    "amount": Decimal("12.30"),
    "creditor_agent_bic": "BNPAFRPPXXX",
    "creditor_iban": "FR1420041010050500013M02606",
    "assigner_bic": "COBADEFFXXX",
    "assignee_bic": "BNPAFRPPXXX",
}


@settings(max_examples=300, deadline=None)
@given(moment=moments)
def test_what_a_builder_makes_itself_is_valid(moment: datetime | None) -> None:
    # The input check trusts these: generated ids, UETRs and creDtTm texts.
    made = _built(build_cancellation, _CANCELLATION | {"created_at": moment})
    assert made is not None
    assert made[1] is True
    assert find_problems(made[0]) == []
    for prefix in ("MSG", "E2E", "TX", "CXL", "ASG"):
        assert builders._ID(new_id(prefix))
    assert builders._UETR_OK(_new_uetr())
    text = format_utc(moment)
    assert RULES["UtcDateTime"](text) is None


# One bad value among tidy ones: the inputs the joined fast test sees (see
# builders._CANCELLATION_FAST), so each part of it and what it leaves to later checks (the
# IBAN check digits, the identifier slash rules, lengths) is tried on its own.
BAD_TEXT = ["", " a", "a" * 36, "a" * 71, "a" * 141, "/a", "a/", "a//b", "Zoë", "a\nb", "a_b"]
BAD_BIC = ["COBADEFF XXX", "COBADEF", "COBADEFFXX", "C0BADEFFXXX1", "cobadeffxxx ", "COBA1EFFXXX"]
BAD_IBAN = [
    "DE00370400440532013000",
    "FR1520041010050500013M02606",
    "DE8937040044053201300",
    "DE89 3704 0044 0532 0130 0O",
    "D089370400440532013000",
    "DE89",
]
TIDY_CANCELLATION: dict[str, Any] = _CANCELLATION | {
    "assignment_id": "ASG-1",
    "cancellation_id": "CXL-1",
    "originator_name": "Alice",
    "reason": "DUPL",
    "service_level": "SEPA",
}
TIDY_TRANSFER: dict[str, Any] = {
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
BAD_CANCELLATION = [
    *((key, v) for key in ("original_end_to_end_id", "assignment_id") for v in BAD_TEXT),
    *((key, v) for key in ("cancellation_id", "service_level", "reason") for v in BAD_TEXT),
    *((key, v) for key in ("creditor_agent_bic", "assigner_bic", "assignee_bic") for v in BAD_BIC),
    *(("originator_bic", v) for v in BAD_BIC),
    *(("creditor_iban", v) for v in BAD_IBAN),
    *(("reason", v) for v in ["cust", "AC01", "CUST "]),
    *(("currency", v) for v in ["USD", "eur", None]),
    *(("amount", v) for v in ["0", "0.001", "-1", "1000000000", "NaN"]),
]
BAD_TRANSFER = [
    *((key, v) for key in ("debtor_name", "creditor_name", "remittance") for v in BAD_TEXT),
    *((key, v) for key in ("debtor_agent_id", "creditor_agent_id") for v in BAD_TEXT),
    *((key, v) for key in ("service_level", "message_id", "end_to_end_id") for v in BAD_TEXT),
    *(("tx_id", v) for v in BAD_TEXT),
    *((key, v) for key in ("debtor_iban", "creditor_iban") for v in BAD_IBAN),
    *(("currency", v) for v in ["XXX", "eur", None]),
    *(("amount", v) for v in ["0", "0.001", "1000000000", "NaN"]),
]


@pytest.mark.parametrize(("key", "bad"), BAD_CANCELLATION)
def test_one_bad_cancellation_input_among_tidy_ones(key: str, bad: Any) -> None:
    assert _built(build_cancellation, TIDY_CANCELLATION) == (ANY, True)
    _agrees(build_cancellation, TIDY_CANCELLATION | {key: bad}, covered=True)


@pytest.mark.parametrize(("key", "bad"), BAD_TRANSFER)
def test_one_bad_transfer_input_among_tidy_ones(key: str, bad: Any) -> None:
    assert _built(build_credit_transfer, TIDY_TRANSFER) == (ANY, True)
    _agrees(build_credit_transfer, TIDY_TRANSFER | {key: bad}, covered=True)
