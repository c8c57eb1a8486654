"""ISO 20022 / SEPA / service rules for outbound messages, driven by the type aliases."""

from __future__ import annotations

import contextlib
import re
import string
import threading
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal
from functools import cache
from typing import Any, Final, TypeAlias

import msgspec
import msgspec.inspect as mi

from .._errors import Problem, ValidationError
from ._addresses import check_postal_address, drop_cutover_problems, rules_apply
from ._common import encode
from ._registry import BIC_COUNTRIES, CURRENCIES, IBAN_FORMATS
from .camt056 import (
    Camt056,
    CancellationRequest,
    OriginalTransactionReference,
    Originator,
)
from .pacs008 import (
    AccountIdentification,
    ActiveCurrencyAndAmount,
    CreditTransfer,
    FinancialInstitutionIdentification,
    Pacs008,
    PostalAddress,
)

__all__ = [
    "CANCELLATION_REASONS",
    "ISO_4217",
    "RULES",
    "check_iban",
    "encode_validated",
    "find_problems",
    "iban_check_digits_hold",
    "validate",
]

# How it works: each field's type is an alias from ``_types`` whose ``Meta.extra`` names
# its ISO type ("Max35Text", "Iban", ...). A message class is read once with
# ``msgspec.inspect`` into a tree of nodes (``_Scalar``, ``_List``, ``_Struct``), and
# ``find_problems`` walks a message along that tree: required fields, list lengths
# (``min_items``/``max_items`` from ``Meta.extra``), one scalar rule per ISO type from
# ``RULES``, then ``STRUCT_CHECKS`` for rules that span fields of one struct. Paths use the
# wire names (``encode_name``) so they match the JSON the service sees.
#
# The rules are not msgspec constraints checked while decoding: msgspec stops at the first
# broken constraint, and a ``ValidationError`` lists every problem.

Check = Callable[[Any], "str | None"]
"""A scalar rule: returns a message when the value breaks it, else None."""

StructCheck = Callable[[Any, str, list[Problem]], None]
"""A rule over several fields of one struct: appends its problems under the struct's path."""


_SEPA_TEXT = re.compile(r"[A-Za-z0-9/\-?:().,'+ ]+")
_BICFI = re.compile(r"[A-Z0-9]{4}[A-Z]{2}[A-Z0-9]{2}(?:[A-Z0-9]{3})?")
_IBAN = re.compile(r"[A-Z]{2}[0-9]{2}[a-zA-Z0-9]{1,30}")
_UETR = re.compile(r"[a-f0-9]{8}-[a-f0-9]{4}-4[a-f0-9]{3}-[89ab][a-f0-9]{3}-[a-f0-9]{12}")
_CURRENCY = re.compile(r"[A-Z]{3}")
_COUNTRY = re.compile(r"[A-Z]{2}")
_NB_OF_TXS = re.compile(r"[0-9]{1,15}")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
# IBAN letters as numbers (A=10 ... Z=35, either case) for the mod-97 check, indexed by
# code point for str.translate.
_IBAN_DIGITS = tuple(
    str(string.ascii_uppercase.index(chr(i).upper()) + 10) if chr(i).isalpha() else chr(i)
    for i in range(128)
)

ISO_4217: frozenset[str] = CURRENCIES
"""Active ISO 4217 alphabetic codes (funds and metals included; XTS and XXX left out)."""


def _bban_pattern(spec: str, *, lower: bool) -> str:
    """A BBAN format of the IBAN registry (``4!a16!n``: 4 letters, 16 digits) as a pattern.

    ``n`` digits, ``a`` upper-case letters, ``c`` letters or digits (either case when
    ``lower``); ``!`` a fixed length, else up to that many.
    """
    classes = {"n": "[0-9]", "a": "[A-Z]", "c": "[A-Za-z0-9]" if lower else "[A-Z0-9]"}
    out = []
    for count, fixed, kind in re.findall(r"(\d+)(!?)([nac])", spec):
        out.append(f"{classes[kind]}{{{count}}}" if fixed else f"{classes[kind]}{{1,{count}}}")
    return "".join(out)


_IBAN_BBAN = {
    country: re.compile(_bban_pattern(spec, lower=True))
    for country, (_, spec) in IBAN_FORMATS.items()
}

CANCELLATION_REASONS: frozenset[str] = frozenset({"DUPL", "TECH", "FRAD", "AC03", "AM09", "CUST"})
"""The SEPA recall reason codes a camt.056 may carry (``cxlRsnInf[].rsn.cd``)."""

_SETTLEMENT_METHODS = frozenset({"INDA", "INGA", "COVE", "CLRG"})
_CHARGE_BEARERS = frozenset({"DEBT", "CRED", "SHAR", "SLEV"})
_EUR_MIN = Decimal("0.01")
_EUR_MAX = Decimal("999999999.99")


def _text(max_len: int, *, identifier: bool = False) -> Check:
    def check(v: Any) -> str | None:
        if not isinstance(v, str):
            return f"expected a string, got {type(v).__name__}"
        if not 1 <= len(v) <= max_len:
            return f"must be 1..{max_len} characters, got {len(v)}"
        if _SEPA_TEXT.fullmatch(v) is None:
            bad = sorted({c for c in v if _SEPA_TEXT.fullmatch(c) is None})
            return f"characters outside the SEPA set: {''.join(bad)!r}"
        if identifier and (v.startswith("/") or v.endswith("/") or "//" in v):
            return "an identifier must not start or end with '/' nor contain '//'"
        return None

    return check


def _pattern(regex: re.Pattern[str], what: str) -> Check:
    def check(v: Any) -> str | None:
        if not isinstance(v, str):
            return f"expected a string, got {type(v).__name__}"
        if regex.fullmatch(v) is None:
            return f"not {what}: {v[:40]!r}"
        return None

    return check


def _one_of(codes: frozenset[str], what: str) -> Check:
    listed = ", ".join(sorted(codes))

    def check(v: Any) -> str | None:
        if not isinstance(v, str):
            return f"expected a string, got {type(v).__name__}"
        if v not in codes:
            return f"{v[:40]!r} is not {what} ({listed})"
        return None

    return check


def check_iban(v: Any) -> str | None:
    """Check an IBAN: its country's format in the IBAN registry and the mod-97 check digits.

    The formats (length and account part per country) are ``_registry.IBAN_FORMATS``,
    generated from the ``schwifty`` package's copy of the SWIFT IBAN registry.

    Args:
        v: the candidate (no spaces).

    Returns:
        A message saying what is wrong, or None when it is a valid IBAN.
    """
    if not isinstance(v, str):
        return f"expected a string, got {type(v).__name__}"
    if _IBAN.fullmatch(v) is None:
        return f"not an IBAN: {v[:40]!r}"
    country = v[:2]
    known = IBAN_FORMATS.get(country)
    if known is None:
        return f"{country!r} is not a country of the IBAN registry: {v!r}"
    length, spec = known
    if len(v) != length:
        return f"a {country} IBAN has {length} characters, got {len(v)}: {v!r}"
    if _IBAN_BBAN[country].fullmatch(v, 4) is None:
        return f"the account part of a {country} IBAN has the form {spec}: {v!r}"
    if not iban_check_digits_hold(v):
        return f"IBAN check digits are wrong (mod-97): {v!r}"
    return None


def _bic(v: Any) -> str | None:
    if not isinstance(v, str):
        return f"expected a string, got {type(v).__name__}"
    if _BICFI.fullmatch(v) is None:
        return f"not a BICFI (8 or 11 characters, upper case): {v[:40]!r}"
    if v[4:6] not in BIC_COUNTRIES:
        return f"the country part {v[4:6]!r} of the BIC is not an ISO 3166 country: {v!r}"
    return None


def iban_check_digits_hold(v: str) -> bool:
    """The mod-97 rule of an ASCII-alphanumeric IBAN (the pattern was checked before)."""
    return int((v[4:] + v[:4]).translate(_IBAN_DIGITS)) % 97 == 1


def _currency(v: Any) -> str | None:
    if not isinstance(v, str):
        return f"expected a string, got {type(v).__name__}"
    if _CURRENCY.fullmatch(v) is None or v not in ISO_4217:
        return f"not an ISO 4217 currency code: {v[:10]!r}"
    return None


def _amount(v: Any) -> str | None:
    if isinstance(v, float):
        return "must be a Decimal, not a float (floats lose digits)"
    if not isinstance(v, Decimal):
        return f"expected a Decimal, got {type(v).__name__}"
    if not v.is_finite():
        return f"must be a finite number, got {v}"
    return None


def _date_time(*, utc: bool) -> Check:
    def check(v: Any) -> str | None:
        if not isinstance(v, str):
            return f"expected a string, got {type(v).__name__}"
        try:
            parsed = datetime.fromisoformat(v)
        except ValueError:
            return f"not an ISO 8601 date-time: {v[:40]!r}"
        if "T" not in v:
            return f"not an ISO 8601 date-time (no time part): {v[:40]!r}"
        if utc and not v.endswith("Z"):
            return f"must be in UTC with the designator 'Z': {v[:40]!r}"
        if parsed.tzinfo is None:
            return f"needs a UTC designator or offset: {v[:40]!r}"
        return None

    return check


def _iso_date(v: Any) -> str | None:
    if not isinstance(v, str):
        return f"expected a string, got {type(v).__name__}"
    if _DATE.fullmatch(v) is None:
        return f"not an ISO 8601 date (YYYY-MM-DD): {v[:40]!r}"
    try:
        date.fromisoformat(v)
    except ValueError:
        return f"not a calendar date: {v!r}"
    return None


def _nb_of_txs(v: Any) -> str | None:
    if type(v) is int:
        v = str(v)
    if not isinstance(v, str):
        return f"expected a string of digits, got {type(v).__name__}"
    if _NB_OF_TXS.fullmatch(v) is None:
        return f"must be 1..15 digits, got {v[:20]!r}"
    return None


RULES: dict[str, Check] = {
    "Max4Text": _text(4),
    "Max16Text": _text(16),
    "Max35Text": _text(35),
    "Max35Id": _text(35, identifier=True),
    "Max70Text": _text(70),
    "Max140Text": _text(140),
    "BicFi": _bic,
    "Iban": check_iban,
    "Uetr": _pattern(_UETR, "a lowercase UUID v4"),
    "CurrencyCode": _currency,
    "CountryCode": _pattern(_COUNTRY, "an ISO 3166 alpha-2 country code"),
    "Amount": _amount,
    "UtcDateTime": _date_time(utc=True),
    "IsoDate": _iso_date,
    "IsoDateTime": _date_time(utc=False),
    "NbOfTxs": _nb_of_txs,
    "SettlementMethodCode": _one_of(_SETTLEMENT_METHODS, "a settlement method"),
    "ChargeBearerCode": _one_of(_CHARGE_BEARERS, "a charge bearer code"),
    "CancellationReasonCode": _one_of(CANCELLATION_REASONS, "a SEPA recall reason"),
}
"""Scalar rules keyed by the ``iso_type`` each alias in ``_types`` carries."""


# --- rules that span several fields of one struct ---------------------------------------


def _amount_range(v: ActiveCurrencyAndAmount, path: str, out: list[Problem]) -> None:
    value = v.value
    if not isinstance(value, Decimal) or not value.is_finite():
        return  # the scalar rule already said so
    if v.ccy == "EUR":
        if not _EUR_MIN <= value <= _EUR_MAX:
            out.append(Problem(f"{path}.value", f"EUR amount must be 0.01..999999999.99: {value}"))
        exponent = value.as_tuple().exponent
        if isinstance(exponent, int) and exponent < -2:
            out.append(Problem(f"{path}.value", f"EUR amount has more than 2 decimals: {value}"))
    elif value <= 0:
        out.append(Problem(f"{path}.value", f"amount must be positive: {value}"))


def _account_id(v: AccountIdentification, path: str, out: list[Problem]) -> None:
    if (v.othr is None) == (v.iban is None):
        out.append(Problem(path, "give exactly one of 'othr' and 'iban'"))


def _institution(v: FinancialInstitutionIdentification, path: str, out: list[Problem]) -> None:
    if v.bicfi is None and v.clr_sys_mmb_id is None:
        out.append(Problem(path, "give 'bicfi' or 'clrSysMmbId'"))


def _count(value: Any, actual: int, path: str, out: list[Problem]) -> None:
    if _nb_of_txs(value) is None and int(value) != actual:
        out.append(Problem(path, f"says {value} but the message has {actual} transaction(s)"))


def _credit_transfer(v: CreditTransfer, path: str, out: list[Problem]) -> None:
    if isinstance(v.cdt_trf_tx_inf, list):
        count = getattr(v.grp_hdr, "nb_of_txs", None)
        _count(count, len(v.cdt_trf_tx_inf), f"{path}.grpHdr.nbOfTxs", out)


def _cancellation_request(v: CancellationRequest, path: str, out: list[Problem]) -> None:
    if v.ctrl_data is None or not isinstance(v.undrlyg, list):
        return
    lists = (getattr(u, "tx_inf", None) for u in v.undrlyg)
    total = sum(len(t) for t in lists if isinstance(t, list))  # a non-list is named above
    _count(getattr(v.ctrl_data, "nb_of_txs", None), total, f"{path}.ctrlData.nbOfTxs", out)


def _original_tx_ref(v: OriginalTransactionReference, path: str, out: list[Problem]) -> None:
    amt = v.intr_bk_sttlm_amt
    if not isinstance(amt, ActiveCurrencyAndAmount):
        return
    if amt.ccy != "EUR":
        out.append(Problem(f"{path}.intrBkSttlmAmt.ccy", f"must be EUR, got {amt.ccy!r}"))
    if isinstance(amt.value, Decimal) and amt.value.is_finite() and amt.value <= 0:
        out.append(Problem(f"{path}.intrBkSttlmAmt.value", f"must be positive: {amt.value}"))


def _originator(v: Originator, path: str, out: list[Problem]) -> None:
    if v.nm is None and v.id is None:
        out.append(Problem(path, "give the originator's name 'nm' or BIC 'id.orgId.anyBIC'"))


STRUCT_CHECKS: dict[type[msgspec.Struct], tuple[StructCheck, ...]] = {
    ActiveCurrencyAndAmount: (_amount_range,),
    AccountIdentification: (_account_id,),
    FinancialInstitutionIdentification: (_institution,),
    CreditTransfer: (_credit_transfer,),
    CancellationRequest: (_cancellation_request,),
    OriginalTransactionReference: (_original_tx_ref,),
    Originator: (_originator,),
    PostalAddress: (check_postal_address,),
}


# --- the walk ------------------------------------------------------------------------------


_Node: TypeAlias = "_Scalar | _List | _Struct"


class _Scalar:
    """A value with an ISO type: its rule from ``RULES``."""

    __slots__ = ("rule",)

    def __init__(self, iso_type: str) -> None:
        self.rule = RULES[iso_type]

    def walk(self, value: Any, path: str, out: list[Problem]) -> None:
        message = self.rule(value)
        if message is not None:
            out.append(Problem(path, message))


class _List:
    """An array: its length bounds, then each item (``None`` when items are unchecked)."""

    __slots__ = ("item", "max_items", "min_items")

    def __init__(self, item: _Node | None, min_items: int | None, max_items: int | None) -> None:
        self.item = item
        self.min_items = min_items
        self.max_items = max_items

    def walk(self, value: Any, path: str, out: list[Problem]) -> None:
        if not isinstance(value, list):
            out.append(Problem(path, f"expected an array, got {type(value).__name__}"))
            return
        n = len(value)
        if self.min_items is not None and n < self.min_items:
            out.append(Problem(path, f"needs at least {self.min_items} item(s), got {n}"))
        if self.max_items is not None and n > self.max_items:
            out.append(Problem(path, f"allows at most {self.max_items} item(s), got {n}"))
        if self.item is None:
            return
        for i, item in enumerate(value):
            at = f"{path}[{i}]"
            if item is None:
                out.append(Problem(at, "must not be null"))
            else:
                self.item.walk(item, at, out)


class _Struct:
    """A struct: each field (missing required ones named), then its cross-field rules."""

    __slots__ = ("checks", "cls", "fields")

    def __init__(self, cls: type[msgspec.Struct]) -> None:
        info = mi.type_info(cls)
        assert isinstance(info, mi.StructType)
        self.cls = cls
        self.fields = tuple(
            (f.name, "." + f.encode_name, f.required, _node(f.type)) for f in info.fields
        )
        self.checks = STRUCT_CHECKS.get(cls, ())

    def walk(self, value: Any, path: str, out: list[Problem]) -> None:
        if not isinstance(value, self.cls):
            message = f"expected {self.cls.__name__}, got {type(value).__name__}"
            out.append(Problem(path, message))
            return
        for attr, wire_name, required, node in self.fields:
            field = getattr(value, attr)
            if field is None:
                if required:
                    out.append(Problem(path + wire_name, "required field is missing"))
            elif node is not None:
                node.walk(field, path + wire_name, out)
        for check in self.checks:  # they tolerate parts that failed above
            check(value, path, out)


def _node(t: mi.Type) -> _Node | None:
    """What checks a value of type ``t``; None for a type without rules."""
    extra: dict[str, Any] = {}
    while True:
        if isinstance(t, mi.Metadata):
            extra.update(t.extra or {})
            t = t.type
        elif isinstance(t, mi.UnionType) and "iso_type" not in extra:
            members = [m for m in t.types if not isinstance(m, mi.NoneType)]
            if len(members) != 1:
                break
            t = members[0]
        else:
            break
    if "iso_type" in extra:
        return _Scalar(extra["iso_type"])
    if isinstance(t, mi.StructType):
        return _struct(t.cls)
    if isinstance(t, mi.ListType):
        return _List(_node(t.item_type), extra.get("min_items"), extra.get("max_items"))
    return None


_MESSAGES = (Pacs008, Camt056)
"""The message classes with validation rules."""


@cache
def _struct(cls: type[msgspec.Struct]) -> _Struct:
    """The node of a struct type, read once per type."""
    return _Struct(cls)


def find_problems(msg: Pacs008 | Camt056, *, rules_on: date | None = None) -> list[Problem]:
    """Every ISO/SEPA/service rule the message breaks, each with its JSON path.

    Args:
        msg: a pacs.008 or camt.056 message (built here or decoded from a request).
        rules_on: apply the rules in force on this date; None: the rules in force now.
            A date before ``EPC_ADDRESS_CUTOVER`` leaves out the EPC rule that an
            address names its town and country.

    Returns:
        The problems in document order; empty when the message is valid.

    Raises:
        TypeError: ``msg`` is not a message with validation rules, or ``rules_on``
            is not a date.
    """
    if not isinstance(msg, _MESSAGES):
        raise TypeError(f"no validation rules for {type(msg).__name__}")
    out: list[Problem] = []
    _struct(type(msg)).walk(msg, "$", out)
    if not rules_apply(rules_on):
        return drop_cutover_problems(out)
    return out


class _Passed:
    """The messages that passed validation under today's rules: their encodings by
    identity, the most recent ``size`` of them.

    Validity is a pure function of a message's content, and its encoding states that
    content in full: a message whose encoding equals the one that passed has not changed
    since (a list changed deep inside included), so the client does not walk it again. A
    message changed since, or another one that got the same ``id()`` after the first was
    freed, encodes differently and is checked.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._bodies: dict[int, bytes] = {}
        self._lock = threading.Lock()

    def holds(self, msg: object, body: bytes) -> bool:
        return self._bodies.get(id(msg)) == body

    def add(self, msg: object, body: bytes) -> None:
        with self._lock:
            bodies = self._bodies
            bodies.pop(id(msg), None)
            bodies[id(msg)] = body
            if len(bodies) > self._size:
                del bodies[next(iter(bodies))]


_PASSED: Final = _Passed(4096)


def validate(msg: Pacs008 | Camt056, *, rules_on: date | None = None) -> None:
    """Check a message against every ISO 20022 / SEPA / service rule before it is sent.

    Rules: Max35/70/140Text lengths and the SEPA character set, slash rules on
    identifiers, BICFI (its country an ISO 3166 one), IBAN (its country's format in the
    IBAN registry and mod-97; pacs.008 accounts ``…Acct.id.othr.id`` included), lowercase
    UUID v4 UETR, ISO 4217 currency, ``grpHdr.creDtTm`` in UTC with ``Z``, EUR amounts
    0.01..999,999,999.99 with at most 2 decimals (floats refused),
    ``nbOfTxs`` digits and equal to the number of transactions, required fields present,
    ``intrBkSttlmDt`` an ISO date, one ``rmtInf.ustrd`` line (SEPA); for camt.056 also
    currency EUR, positive amount and a SEPA recall reason code. Postal addresses: ISO's
    field lengths and the EPC address rule (at most two address lines; from
    ``EPC_ADDRESS_CUTOVER``, 15 November 2026, town name and country in their own fields,
    so lines alone are refused; EPC 153-22 v2.1, SCT rulebook 2025 v1.1).

    A message that passes under the rules in force now is not walked again by
    `encode_validated` (and so by the client) unless it has changed since.

    Args:
        msg: a pacs.008 or camt.056 message.
        rules_on: apply the rules in force on this date instead of today's: a date before
            ``EPC_ADDRESS_CUTOVER`` accepts an address of lines alone (for messages of
            that time, in tests). None: the rules in force now.

    Raises:
        ValidationError: listing every problem with its JSON path, e.g.
            ``$.fitoFICstmrCdtTrf.cdtTrfTxInf[0].cdtrAcct.id.othr.id: ...``.
        TypeError: ``msg`` is not a message with validation rules.
    """
    problems = find_problems(msg, rules_on=rules_on)
    if problems:
        raise ValidationError(problems)
    if rules_on is None:
        with contextlib.suppress(TypeError, ValueError, msgspec.EncodeError):
            _PASSED.add(msg, encode(msg))


def encode_validated(msg: Pacs008 | Camt056) -> bytes:
    """Encode a message for sending, validated under the rules in force now.

    The client calls this for every POST: the bytes it returns are the ones signed and
    sent. A message that passed `validate` (a builder's does) and has not changed since
    is not walked again.

    Args:
        msg: a pacs.008 or camt.056 message.

    Returns:
        The JSON bytes to send.

    Raises:
        ValidationError: the message breaks a rule (see `validate`), or cannot be encoded.
        TypeError: ``msg`` is not a message with validation rules.
    """
    if not isinstance(msg, _MESSAGES):
        raise TypeError(f"no validation rules for {type(msg).__name__}")
    try:
        body = encode(msg)
    except (TypeError, ValueError, msgspec.EncodeError) as exc:
        validate(msg)  # names the field that cannot be encoded, with its path
        raise ValidationError.single("$", f"cannot be encoded: {exc}") from exc
    if not _PASSED.holds(msg, body):
        problems = find_problems(msg)
        if problems:
            raise ValidationError(problems)
        _PASSED.add(msg, body)
    return body
