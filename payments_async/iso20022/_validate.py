"""ISO 20022 / SEPA / service rules for outbound messages, driven by the type aliases."""

from __future__ import annotations

import hashlib
import itertools
import re
import string
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from functools import cache
from typing import Any, TypeAlias

import msgspec
import msgspec.inspect as mi

from .._constants import VALIDATED_DIGESTS_MAX
from .._errors import Problem, ValidationError
from ._common import _ENCODER, encode
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
)

__all__ = [
    "CANCELLATION_REASONS",
    "ISO_4217",
    "RULES",
    "check_iban",
    "encode_validated",
    "fast_fields",
    "find_problems",
    "iban_check_digits_hold",
    "mark_valid",
    "validate",
]

# How it works: each field's type is an alias from ``_types`` whose ``Meta.extra`` names
# its ISO type ("Max35Text", "Iban", ...). For each message class we read the type tree
# once with ``msgspec.inspect`` and generate one walker function for it (see "compiling"
# below): required fields, lists (``min_items``/``max_items`` from ``Meta.extra``), a
# scalar check looked up in ``RULES`` by ISO type name, then ``STRUCT_CHECKS`` for rules
# that span fields of one struct. ``find_problems`` runs it; paths use the wire names
# (``encode_name``) so they match the JSON the service sees.

Check = Callable[[Any], "str | None"]
"""A scalar rule: returns a message when the value breaks it, else None."""

_Path: TypeAlias = "str | tuple[_Path, str]"
"""A JSON path, built as (parent, segment) pairs and joined only when a problem names it."""

StructCheck = Callable[[Any, _Path, list[Problem]], None]


def _render(path: _Path) -> str:
    """The path as text, e.g. ``$.fitoFIPmtCxlReq.assgnmt.id``."""
    parts: list[str] = []
    while isinstance(path, tuple):
        path, segment = path
        parts.append(segment)
    parts.append(path)
    return "".join(reversed(parts))


_SEPA_TEXT = re.compile(r"[A-Za-z0-9/\-?:().,'+ ]+")
_BICFI = re.compile(r"[A-Z0-9]{4}[A-Z]{2}[A-Z0-9]{2}(?:[A-Z0-9]{3})?")
_IBAN = re.compile(r"[A-Z]{2}[0-9]{2}[a-zA-Z0-9]{1,30}")
_UETR = re.compile(r"[a-f0-9]{8}-[a-f0-9]{4}-4[a-f0-9]{3}-[89ab][a-f0-9]{3}-[a-f0-9]{12}")
_CURRENCY = re.compile(r"[A-Z]{3}")
_COUNTRY = re.compile(r"[A-Z]{2}")
_NB_OF_TXS = re.compile(r"[0-9]{1,15}")
# IBAN letters as numbers (A=10 ... Z=35, either case) for the mod-97 check; a tuple indexed
# by code point, because str.translate reads a sequence at half the cost of a dict.
_IBAN_DIGITS = tuple(
    str(string.ascii_uppercase.index(chr(i).upper()) + 10) if chr(i).isalpha() else chr(i)
    for i in range(128)
)

ISO_4217: frozenset[str] = frozenset(
    """
    AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BOV BRL
    BSD BTN BWP BYN BZD CAD CDF CHE CHF CHW CLF CLP CNY COP COU CRC CUC CUP CVE CZK DJF
    DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF
    IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR
    LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MXV MYR MZN NAD NGN NIO
    NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON RSD RUB RWF SAR SBD SCR SDG SEK
    SGD SHP SLE SLL SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD TZS UAH
    UGX USD USN UYI UYU UYW UZS VED VES VND VUV WST XAF XAG XAU XBA XBB XBC XBD XCD XCG
    XDR XOF XPD XPF XPT XSU XUA YER ZAR ZMW ZWG ZWL
    """.split()  # noqa: SIM905 -- a table of codes reads better than 180 quoted strings
)
"""Active ISO 4217 alphabetic codes (funds and metals included; XTS and XXX left out)."""

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
    """Check an IBAN: the ISO 13616 pattern and the mod-97 check digits.

    Args:
        v: the candidate (no spaces).

    Returns:
        A message saying what is wrong, or None when it is a valid IBAN.
    """
    if not isinstance(v, str):
        return f"expected a string, got {type(v).__name__}"
    if _IBAN.fullmatch(v) is None:
        return f"not an IBAN: {v[:40]!r}"
    if not iban_check_digits_hold(v):
        return f"IBAN check digits are wrong (mod-97): {v!r}"
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


def _nb_of_txs(v: Any) -> str | None:
    if type(v) is int:
        v = str(v)
    if not isinstance(v, str):
        return f"expected a string of digits, got {type(v).__name__}"
    if _NB_OF_TXS.fullmatch(v) is None:
        return f"must be 1..15 digits, got {v[:20]!r}"
    return None


RULES: dict[str, Check] = {
    "Max35Text": _text(35),
    "Max35Id": _text(35, identifier=True),
    "Max70Text": _text(70),
    "Max140Text": _text(140),
    "BicFi": _pattern(_BICFI, "a BICFI (8 or 11 characters, upper case)"),
    "Iban": check_iban,
    "Uetr": _pattern(_UETR, "a lowercase UUID v4"),
    "CurrencyCode": _currency,
    "CountryCode": _pattern(_COUNTRY, "an ISO 3166 alpha-2 country code"),
    "Amount": _amount,
    "UtcDateTime": _date_time(utc=True),
    "IsoDateTime": _date_time(utc=False),
    "NbOfTxs": _nb_of_txs,
    "SettlementMethodCode": _one_of(_SETTLEMENT_METHODS, "a settlement method"),
    "ChargeBearerCode": _one_of(_CHARGE_BEARERS, "a charge bearer code"),
    "CancellationReasonCode": _one_of(CANCELLATION_REASONS, "a SEPA recall reason"),
}
"""Scalar rules keyed by the ``iso_type`` each alias in ``_types`` carries."""


# --- rules that span several fields of one struct ---------------------------------------


def _amount_range(v: ActiveCurrencyAndAmount, path: _Path, out: list[Problem]) -> None:
    value = v.value
    if not isinstance(value, Decimal) or not value.is_finite():
        return  # the scalar rule already said so
    if v.ccy == "EUR":
        if not _EUR_MIN <= value <= _EUR_MAX:
            out.append(
                Problem(f"{_render(path)}.value", f"EUR amount must be 0.01..999999999.99: {value}")
            )
        exponent = value.as_tuple().exponent
        if isinstance(exponent, int) and exponent < -2:
            out.append(
                Problem(f"{_render(path)}.value", f"EUR amount has more than 2 decimals: {value}")
            )
    elif value <= 0:
        out.append(Problem(f"{_render(path)}.value", f"amount must be positive: {value}"))


def _account_id(v: AccountIdentification, path: _Path, out: list[Problem]) -> None:
    if (v.othr is None) == (v.iban is None):
        out.append(Problem(_render(path), "give exactly one of 'othr' and 'iban'"))


def _institution(v: FinancialInstitutionIdentification, path: _Path, out: list[Problem]) -> None:
    if v.bicfi is None and v.clr_sys_mmb_id is None:
        out.append(Problem(_render(path), "give 'bicfi' or 'clrSysMmbId'"))


def _count(value: Any, actual: int, path: _Path, out: list[Problem]) -> None:
    if _nb_of_txs(value) is None and int(value) != actual:
        out.append(
            Problem(_render(path), f"says {value} but the message has {actual} transaction(s)")
        )


def _credit_transfer(v: CreditTransfer, path: _Path, out: list[Problem]) -> None:
    if isinstance(v.cdt_trf_tx_inf, list):
        _count(
            getattr(v.grp_hdr, "nb_of_txs", None),
            len(v.cdt_trf_tx_inf),
            (path, ".grpHdr.nbOfTxs"),
            out,
        )


def _cancellation_request(v: CancellationRequest, path: _Path, out: list[Problem]) -> None:
    if v.ctrl_data is None or not isinstance(v.undrlyg, list):
        return
    lists = (getattr(u, "tx_inf", None) for u in v.undrlyg)
    total = sum(len(t) for t in lists if isinstance(t, list))  # a non-list is named above
    _count(getattr(v.ctrl_data, "nb_of_txs", None), total, (path, ".ctrlData.nbOfTxs"), out)


def _original_tx_ref(v: OriginalTransactionReference, path: _Path, out: list[Problem]) -> None:
    amt = v.intr_bk_sttlm_amt
    if not isinstance(amt, ActiveCurrencyAndAmount):
        return
    if amt.ccy != "EUR":
        out.append(Problem(f"{_render(path)}.intrBkSttlmAmt.ccy", f"must be EUR, got {amt.ccy!r}"))
    if isinstance(amt.value, Decimal) and amt.value.is_finite() and amt.value <= 0:
        out.append(
            Problem(f"{_render(path)}.intrBkSttlmAmt.value", f"must be positive: {amt.value}")
        )


def _originator(v: Originator, path: _Path, out: list[Problem]) -> None:
    if v.nm is None and v.id is None:
        out.append(
            Problem(_render(path), "give the originator's name 'nm' or BIC 'id.orgId.anyBIC'")
        )


STRUCT_CHECKS: dict[type[msgspec.Struct], tuple[StructCheck, ...]] = {
    ActiveCurrencyAndAmount: (_amount_range,),
    AccountIdentification: (_account_id,),
    FinancialInstitutionIdentification: (_institution,),
    CreditTransfer: (_credit_transfer,),
    CancellationRequest: (_cancellation_request,),
    OriginalTransactionReference: (_original_tx_ref,),
    Originator: (_originator,),
}


# --- compiling a message class into one flat function ------------------------------------
#
# A message class is read once (``msgspec.inspect``) and turned into the source of ONE
# Python function that walks the whole tree: attribute reads, ``None`` tests and rule
# checks inline, no call per struct and no path object per field. Paths are constant
# strings (plus ``[i]`` inside lists) written only when a problem is reported. Each scalar
# rule first tries a *sufficient* fast test (``_FAST``: a C-level regex match or set
# lookup that only valid values pass); a value that fails it goes to the rule itself
# (``RULES``), which accepts it or says what is wrong, so messages are unchanged.
# ``tests/unit/test_validate_fast.py`` checks the generated walker against the plain
# recursive walker (kept there as an oracle) on arbitrary messages.

_FAST_MAX35 = re.compile(r"[A-Za-z0-9/\-?:().,'+ ]{1,35}").fullmatch
_FAST: dict[str, Callable[[str], object]] = {
    "Max35Text": _FAST_MAX35,
    # no '/' at all, so the identifier slash rules hold; one with a '/' gets the full rule
    "Max35Id": re.compile(r"[A-Za-z0-9\-?:().,'+ ]{1,35}").fullmatch,
    "Max70Text": re.compile(r"[A-Za-z0-9/\-?:().,'+ ]{1,70}").fullmatch,
    "Max140Text": re.compile(r"[A-Za-z0-9/\-?:().,'+ ]{1,140}").fullmatch,
    "BicFi": _BICFI.fullmatch,
    "Uetr": _UETR.fullmatch,
    "CurrencyCode": ISO_4217.__contains__,
    "CountryCode": _COUNTRY.fullmatch,
    "NbOfTxs": _NB_OF_TXS.fullmatch,
    "SettlementMethodCode": _SETTLEMENT_METHODS.__contains__,
    "ChargeBearerCode": _CHARGE_BEARERS.__contains__,
    "CancellationReasonCode": CANCELLATION_REASONS.__contains__,
}
"""For a ``str``: a truthy answer means ``RULES[iso_type]`` accepts it (never the reverse)."""


_TIDY_IBAN = r"[A-Z]{2}[0-9]{2}[A-Z0-9]{1,30}"  # the IBAN pattern, upper case: no mod-97


def fast_fields(*iso_types: str) -> Callable[[str], object]:
    """One fast test for several values joined by newlines, in this order.

    Each part is the ``_FAST`` test of its ISO type (``"Iban"``: the pattern in upper
    case, the check digits left to ``iban_check_digits_hold``). No rule allows a newline,
    so a match splits the text in exactly one way: a truthy answer means each value passes
    its part. A builder joins the caller's values and makes one C call instead of one
    check per value.

    Args:
        *iso_types: the ISO type of each value, in the order they are joined.

    Returns:
        ``fullmatch`` of the joined pattern.
    """
    parts: list[str] = []
    for iso_type in iso_types:
        if iso_type == "Iban":
            parts.append(_TIDY_IBAN)
            continue
        test: Any = _FAST[iso_type]
        if isinstance(test.__self__, re.Pattern):
            parts.append(test.__self__.pattern)
        else:  # a set's __contains__: its codes
            parts.append("|".join(re.escape(code) for code in sorted(test.__self__)))
    return re.compile("\n".join(f"(?:{part})" for part in parts)).fullmatch


_Node: TypeAlias = "tuple[str, Any] | tuple[str, Any, int | None, int | None] | None"
"""What a field holds: ("scalar", iso_type), ("struct", cls), ("list", item, min, max)."""


def _classify(t: mi.Type, extra: dict[str, Any] | None = None) -> _Node:
    extra = dict(extra or {})
    while True:
        if isinstance(t, mi.Metadata):
            extra.update(t.extra or {})
            t = t.type
        elif isinstance(t, mi.UnionType):
            members = [m for m in t.types if not isinstance(m, mi.NoneType)]
            if len(members) != 1 or "iso_type" in extra:
                break
            t = members[0]
        else:
            break
    iso_type = extra.get("iso_type")
    if iso_type is not None:
        if iso_type not in RULES:
            raise KeyError(f"no rule for ISO type {iso_type!r}")
        return ("scalar", iso_type)
    if isinstance(t, mi.StructType):
        return ("struct", t.cls)
    if isinstance(t, mi.ListType):
        return ("list", _classify(t.item_type), extra.get("min_items"), extra.get("max_items"))
    return None


_PathParts: TypeAlias = "tuple[str, ...]"
"""A path at generation time: constant text and, as ``{name}``, loop index variables."""


def _path_expr(parts: _PathParts) -> str:
    """Python source that evaluates to the path's text (``$.a.b[3].c``)."""
    pieces: list[str] = []
    text = ""
    for part in parts:
        if part.startswith("{"):
            if text:
                pieces.append(repr(text))
                text = ""
            pieces.append(f"str({part[1:-1]})")
        else:
            text += part
    if text:
        pieces.append(repr(text))
    return " + ".join(pieces)


class _Generator:
    """Writes the source of one message class's walker (see the comment above)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.env: dict[str, Any] = {"Problem": Problem, "Decimal": Decimal}
        self._names: dict[int, str] = {}
        self._count = 0

    def fresh(self, stem: str) -> str:
        self._count += 1
        return f"{stem}{self._count}"

    def ref(self, obj: Any, stem: str) -> str:
        """A name in the generated function's globals bound to ``obj``."""
        key = id(obj)
        if key not in self._names:
            self._names[key] = name = self.fresh(stem)
            self.env[name] = obj
        return self._names[key]

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def problem(self, depth: int, path: _PathParts, message: str) -> None:
        self.emit(depth, f"out.append(Problem({_path_expr(path)}, {message}))")

    def node(self, node: _Node, v: str, path: _PathParts, depth: int) -> None:
        """Code checking the non-None value in variable ``v`` against ``node``."""
        assert node is not None
        if node[0] == "scalar":
            self.scalar(node[1], v, path, depth)
        elif node[0] == "struct":
            cls = node[1]
            c = self.ref(cls, "cls")
            self.emit(depth, f"if not isinstance({v}, {c}):")
            self.problem(depth + 1, path, f"f'expected {cls.__name__}, got {{type({v}).__name__}}'")
            self.emit(depth, "else:")
            self.struct(cls, v, path, depth + 1)
        else:
            self.list(node, v, path, depth)

    def scalar(self, iso_type: str, v: str, path: _PathParts, depth: int) -> None:
        check = self.ref(RULES[iso_type], "rule")
        fast = _FAST.get(iso_type)
        if iso_type == "Amount":
            self.emit(depth, f"if type({v}) is not Decimal or not {v}.is_finite():")
            depth += 1
        elif fast is not None:
            self.emit(depth, f"if type({v}) is not str or not {self.ref(fast, 'fast')}({v}):")
            depth += 1
        self.emit(depth, f"m = {check}({v})")
        self.emit(depth, "if m is not None:")
        self.problem(depth + 1, path, "m")

    def list(self, node: Any, v: str, path: _PathParts, depth: int) -> None:
        _, item, min_items, max_items = node
        self.emit(depth, f"if not isinstance({v}, list):")
        self.problem(depth + 1, path, f"f'expected an array, got {{type({v}).__name__}}'")
        self.emit(depth, "else:")
        depth += 1
        self.emit(depth, "pass")
        if min_items is not None:
            self.emit(depth, f"if len({v}) < {min_items}:")
            msg = f"f'needs at least {min_items} item(s), got {{len({v})}}'"
            self.problem(depth + 1, path, msg)
        if max_items is not None:
            self.emit(depth, f"if len({v}) > {max_items}:")
            msg = f"f'allows at most {max_items} item(s), got {{len({v})}}'"
            self.problem(depth + 1, path, msg)
        if item is None:
            return
        i, x = self.fresh("i"), self.fresh("x")
        at = (*path, "[", "{" + i + "}", "]")
        self.emit(depth, f"for {i}, {x} in enumerate({v}):")
        self.emit(depth + 1, f"if {x} is None:")
        self.problem(depth + 2, at, "'must not be null'")
        self.emit(depth + 1, "else:")
        self.node(item, x, at, depth + 2)

    def struct(self, cls: type[msgspec.Struct], v: str, path: _PathParts, depth: int) -> None:
        """Code for the fields of the ``cls`` instance in ``v``, then its cross-field rules."""
        info = mi.type_info(cls)
        assert isinstance(info, mi.StructType)
        self.emit(depth, "pass")
        for f in info.fields:
            node = _classify(f.type)
            if node is None and not f.required:
                continue
            x = self.fresh("x")
            at = (*path, "." + f.encode_name)
            self.emit(depth, f"{x} = {v}.{f.name}")
            if f.required:
                self.emit(depth, f"if {x} is None:")
                self.problem(depth + 1, at, "'required field is missing'")
                if node is not None:
                    self.emit(depth, "else:")
                    self.node(node, x, at, depth + 1)
            else:
                self.emit(depth, f"if {x} is not None:")
                self.node(node, x, at, depth + 1)
        for check in STRUCT_CHECKS.get(cls, ()):  # they tolerate parts that failed above
            self.emit(depth, f"{self.ref(check, 'check')}({v}, {_path_expr(path)}, out)")


@cache
def _walker(cls: type[msgspec.Struct]) -> Callable[[Any, list[Problem]], None]:
    """The generated walker for a message class: ``walk(msg, out)`` appends problems."""
    gen = _Generator()
    gen.emit(0, "def walk(v0, out):")
    gen.struct(cls, "v0", ("$",), 1)
    source = "\n".join(gen.lines) + "\n"
    namespace = dict(gen.env)
    exec(compile(source, f"<validate {cls.__name__}>", "exec"), namespace)  # noqa: S102
    walk: Callable[[Any, list[Problem]], None] = namespace["walk"]
    walk.__doc__ = source  # readable when debugging: print(_walker(Camt056).__doc__)
    return walk


def find_problems(msg: Pacs008 | Camt056) -> list[Problem]:
    """Every ISO/SEPA/service rule the message breaks, each with its JSON path.

    Args:
        msg: a pacs.008 or camt.056 message (built here or decoded from a request).

    Returns:
        The problems in document order; empty when the message is valid.

    Raises:
        TypeError: ``msg`` is not a message with validation rules.
    """
    if not isinstance(msg, Pacs008 | Camt056):
        raise TypeError(f"no validation rules for {type(msg).__name__}")
    out: list[Problem] = []
    _walker(type(msg))(msg, out)
    return out


def validate(msg: Pacs008 | Camt056) -> None:
    """Check a message against every ISO 20022 / SEPA / service rule before it is sent.

    Rules: Max35/70/140Text lengths and the SEPA character set, slash rules on
    identifiers, BICFI, IBAN (pattern and mod-97; pacs.008 accounts ``…Acct.id.othr.id``
    included), lowercase UUID v4 UETR, ISO 4217 currency, ``grpHdr.creDtTm`` in UTC with
    ``Z``, EUR amounts 0.01..999,999,999.99 with at most 2 decimals (floats refused),
    ``nbOfTxs`` digits and equal to the number of transactions, required fields present;
    for camt.056 also currency EUR, positive amount and a SEPA recall reason code.

    Args:
        msg: a pacs.008 or camt.056 message.

    Raises:
        ValidationError: listing every problem with its JSON path, e.g.
            ``$.fitoFICstmrCdtTrf.cdtTrfTxInf[0].cdtrAcct.id.othr.id: ...``.
        TypeError: ``msg`` is not a message with validation rules.
    """
    problems = find_problems(msg)
    if problems:
        raise ValidationError(problems)
    _remember(type(msg), hashlib.sha256(encode(msg)).digest())


# --- validate once ---------------------------------------------------------------------------
#
# Validity is a pure function of a message's content, and its encoding states that content
# in full: bytes equal to the encoding of a valid message of the same type are valid. So the
# SHA-256 digests of encodings that passed ``validate()`` are kept (a bounded, oldest-first
# table) and ``encode_validated`` checks the rules again only for bytes it has not seen. A
# message changed after it was validated encodes to other bytes and is checked again.

# Two generations, each at most half of VALIDATED_DIGESTS_MAX: a digest goes into the young
# one; when it is full it becomes the old one and the previous old one is forgotten at
# once. Remembering is a dict store and a length test (no scan, no copy, no lock: a race
# can only forget a digest, and a forgotten message is validated again, which is safe).
_VALID: dict[tuple[type, bytes], None] = {}
_VALID_OLD: dict[tuple[type, bytes], None] = {}


def _remember(kind: type, digest: bytes) -> None:
    global _VALID, _VALID_OLD
    young = _VALID
    young[(kind, digest)] = None
    if len(young) >= max(1, VALIDATED_DIGESTS_MAX // 2):
        _VALID_OLD, _VALID = young, {}


# What a builder made, by the message's identity: its type and encoding. The client's
# encoding of the same object, unchanged, is equal to it: found without hashing the bytes,
# and the builder did not hash them either. The bytes are the proof, not the identity: an
# object changed since (nested lists included) encodes otherwise, and an id reused by
# another object counts only if that object encodes to these very bytes, i.e. has the same
# content. At most VALIDATED_DIGESTS_MAX // 8 entries; the oldest eighth of them moves to
# the digest table (hashed then) when it is full, so a copy of a builder's message, made
# by decoding its bytes as the bulk runner does, is still found by its digest. An entry
# stays when the client finds it (a resubmission finds it again): the id of a message
# that is freed is soon reused by a new one, whose entry replaces it. Dropping entries on
# a hit and remembering their digests instead was measured: 0.9 us more per message.
_BUILT: dict[int, tuple[type, bytes]] = {}


def mark_valid(msg: Pacs008 | Camt056) -> None:
    """Remember a message as validated without checking it: for the builders only.

    A builder calls it for a message whose inputs it checked with the same rules (the
    parts it made itself are valid by construction); see ``builders._accept``.
    """
    built = _BUILT
    built[id(msg)] = (type(msg), _ENCODER.encode(msg))
    limit = max(1, VALIDATED_DIGESTS_MAX // 8)
    if len(built) > limit:
        # list() of the slice runs in one call: no other thread changes the dict meanwhile
        for key in list(itertools.islice(built, max(1, limit // 8))):
            entry = built.pop(key, None)
            if entry is not None:
                _remember(entry[0], hashlib.sha256(entry[1]).digest())


def encode_validated(msg: Pacs008 | Camt056) -> tuple[bytes, bytes]:
    """Encode a message for sending, validating it unless these exact bytes passed before.

    The client calls this for every POST: a message that ``validate()`` (or a builder)
    accepted and that was not changed since is not checked a second time; any other
    message is checked before its bytes are returned.

    Args:
        msg: a pacs.008 or camt.056 message.

    Returns:
        The JSON bytes to send and their SHA-256 digest.

    Raises:
        ValidationError: the message breaks a rule (see ``validate``).
        TypeError: ``msg`` is not a message with validation rules.
    """
    kind = type(msg)
    if kind is not Camt056 and kind is not Pacs008 and not isinstance(msg, Pacs008 | Camt056):
        raise TypeError(f"no validation rules for {kind.__name__}")
    try:
        body = _ENCODER.encode(msg)  # encode(), without its frame
    except (TypeError, ValueError, msgspec.EncodeError) as exc:
        validate(msg)  # names the field that cannot be encoded, with its path
        raise ValidationError.single("$", f"cannot be encoded: {exc}") from exc
    digest = hashlib.sha256(body).digest()
    built = _BUILT.get(id(msg))
    if built is not None and built[1] == body and built[0] is kind:
        return body, digest  # a builder's message, unchanged (see _BUILT)
    key = (kind, digest)
    if key not in _VALID and key not in _VALID_OLD:
        problems = find_problems(msg)
        if problems:
            raise ValidationError(problems)
        _remember(kind, digest)
    return body, digest
