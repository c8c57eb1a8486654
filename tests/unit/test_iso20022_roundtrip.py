"""Property tests: encode then decode is the identity for every message, digits included."""

from __future__ import annotations

from decimal import Decimal

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from payments_async.iso20022 import (
    Camt029,
    Camt056,
    Pacs002,
    Pacs008,
    decode_camt029,
    decode_camt056,
    decode_pacs002,
    decode_pacs008,
    encode,
)
from payments_async.iso20022 import pacs008 as p08
from tests.support.strategies_iso import any_camt029, any_camt056, any_pacs002, any_pacs008

ROUND_TRIPS = settings(max_examples=60, deadline=None)


@ROUND_TRIPS
@given(any_pacs008)
def test_pacs008_round_trip(msg: Pacs008) -> None:
    wire = encode(msg)
    back = decode_pacs008(wire)
    assert back == msg
    assert encode(back) == wire  # same bytes: Decimal digits kept exactly


@ROUND_TRIPS
@given(any_camt056)
def test_camt056_round_trip(msg: Camt056) -> None:
    wire = encode(msg)
    assert b'"intrBkSttlAmt":' not in wire  # the key, not a value that spells it
    back = decode_camt056(wire)
    assert back == msg
    assert encode(back) == wire


@ROUND_TRIPS
@given(any_pacs002)
def test_pacs002_round_trip(msg: Pacs002) -> None:
    wire = encode(msg)
    back = decode_pacs002(wire)
    assert back == msg
    assert encode(back) == wire


@ROUND_TRIPS
@given(any_camt029)
def test_camt029_round_trip(msg: Camt029) -> None:
    wire = encode(msg)
    back = decode_camt029(wire)
    assert back == msg
    assert encode(back) == wire


@settings(max_examples=100, deadline=None)
@given(st.decimals(allow_nan=False, allow_infinity=False))
def test_amount_goes_out_with_its_exact_digits(value: Decimal) -> None:
    amount = p08.ActiveCurrencyAndAmount(value=value, ccy="EUR")
    wire = encode(amount)
    assert wire == b'{"value":' + str(value).encode() + b',"ccy":"EUR"}'
    back = msgspec.json.decode(wire, type=p08.ActiveCurrencyAndAmount)
    assert str(back.value) == str(value)  # not just equal: the same digits


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("0.10", b"0.10"),
        ("0.1", b"0.1"),
        ("1234.10", b"1234.10"),
        ("999999999.99", b"999999999.99"),
    ],
)
def test_decimal_is_never_a_float_on_the_wire(value: str, text: bytes) -> None:
    wire = encode(p08.ActiveCurrencyAndAmount(value=Decimal(value), ccy="EUR"))
    assert wire == b'{"value":' + text + b',"ccy":"EUR"}'
    assert b"0000000" not in wire
