"""The rule walk on arbitrary messages: fast tests, agreement of the entry points, paths.

``_validate`` tries a fast sufficient test before each scalar rule. For arbitrary
messages (mostly invalid: any text, any decimal, missing parts, wrong types) and for
valid ones, ``find_problems``, ``validate`` and ``encode_validated`` must agree, and each
problem must name where it is.
"""

from __future__ import annotations

import re
import string
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from payments_async import Address, ValidationError
from payments_async.iso20022 import (
    build_cancellation,
    build_credit_transfer,
    encode_validated,
    find_problems,
    validate,
)
from payments_async.iso20022._validate import _FAST, ISO_4217, RULES
from tests.support.strategies_iso import any_camt056, any_pacs008

SEPA = string.ascii_letters + string.digits + "/-?:().,'+ "
# Text near every rule's edges: SEPA characters, slashes, other characters, 0..150 long.
edgy_text = st.text(alphabet=SEPA + "/é\n_*ÄZ0", max_size=150) | st.sampled_from(
    [
        "",
        "/",
        "a/",
        "/a",
        "a//b",
        "a" * 35,
        "a" * 36,
        "b" * 70,
        "b" * 71,
        "c" * 140,
        "c" * 141,
        "EUR",
        "eur",
        "XXX",
        "COBADEFFXXX",
        "COBADEFF",
        "cobadeffxxx",
        "0123456789ABCDE",
        "0123456789ABCDEF",
        "CLRG",
        "SLEV",
        "CUST",
        "DE",
        "2024-08-01T08:00:00.000Z",
    ]
)


@settings(max_examples=300, deadline=None)
@given(iso_type=st.sampled_from(sorted(_FAST)), value=edgy_text)
def test_a_fast_test_only_passes_values_its_rule_accepts(iso_type: str, value: str) -> None:
    if _FAST[iso_type](value):
        assert RULES[iso_type](value) is None


def test_every_iso_4217_code_is_three_upper_case_letters() -> None:
    # the fast test for CurrencyCode is set membership alone
    assert all(re.fullmatch("[A-Z]{3}", c) for c in ISO_4217)


def _agree(msg: Any, root: str) -> None:
    """validate() and encode_validated() raise exactly find_problems(), or both pass."""
    problems = find_problems(msg)
    assert all(p.path.startswith(root) for p in problems)
    assert all(p.message for p in problems)
    assert find_problems(msg) == problems  # the walk changes nothing
    if not problems:
        validate(msg)
        encode_validated(msg)
        return
    with pytest.raises(ValidationError) as by_validate:
        validate(msg)
    assert list(by_validate.value.problems) == problems
    with pytest.raises(ValidationError) as by_encode:
        encode_validated(msg)
    if by_encode.value.paths != ("$",):  # "$": a value msgspec cannot encode
        assert list(by_encode.value.problems) == problems


@settings(max_examples=300, deadline=None)
@given(msg=any_pacs008)
def test_pacs008_problems_are_the_same_from_every_entry_point(msg: Any) -> None:
    _agree(msg, "$.fitoFICstmrCdtTrf")


@settings(max_examples=300, deadline=None)
@given(msg=any_camt056)
def test_camt056_problems_are_the_same_from_every_entry_point(msg: Any) -> None:
    _agree(msg, "$.fitoFIPmtCxlReq")


@settings(max_examples=100, deadline=None)
@given(
    junk=st.sampled_from([1, 1.5, b"x", [], {}, Decimal("NaN"), "x" * 200, None, object()]),
    where=st.integers(0, 6),
)
def test_wrong_types_anywhere_are_reported_at_their_path(junk: object, where: int) -> None:
    msg = build_cancellation(
        original_end_to_end_id="E2E-1",
        amount=Decimal("12.30"),
        creditor_agent_bic="BNPAFRPPXXX",
        creditor_iban="FR1420041010050500013M02606",
        assigner_bic="COBADEFFXXX",
        assignee_bic="BNPAFRPPXXX",
        originator_name="Alice",
    )
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
    _agree(msg, root)


def test_builder_messages_have_no_problems() -> None:
    transfer = build_credit_transfer(
        debtor_name="Alice Example",
        debtor_iban="DE89 3704 0044 0532 0130 00",
        debtor_agent_id="37040044",
        creditor_name="Bob Example",
        creditor_iban="FR1420041010050500013M02606",
        creditor_agent_id="20041010",
        amount="12.30",
        remittance="Invoice 1/2024",
        debtor_address=Address(town="Town", country="DE", lines=("Street 1",)),
        creditor_reference="RF18539007547034",
        local_instrument="INST",
    )
    assert find_problems(transfer) == []
