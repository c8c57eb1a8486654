"""Postal addresses: the `Address` value users build and the EPC address rule."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Final, Literal

import msgspec

from .._errors import Problem
from .pacs008 import PostalAddress

__all__ = [
    "EPC_ADDRESS_CUTOVER",
    "Address",
    "check_postal_address",
    "drop_cutover_problems",
    "rules_apply",
    "to_postal_address",
]

EPC_ADDRESS_CUTOVER: Final = date(2026, 11, 15)
"""From this date a SEPA address needs its town name and country in their own fields.

Source: EPC 153-22 "Provision of Addresses under the EPC Payment Schemes" v2.1 and the
EPC SCT rulebook 2025 v1.1. Before it, an address of lines alone (unstructured) passed.
"""

_SOURCE = "EPC 153-22 v2.1; SCT rulebook 2025 v1.1"
_MAX_LINES = 2

UNSTRUCTURED: Final = (
    "unstructured address (address lines without 'twnNm' and 'ctry') is refused from "
    f"{EPC_ADDRESS_CUTOVER.isoformat()}: give the town name and country in their own "
    f"fields, street and building too where known ({_SOURCE})"
)
MISSING_TOWN_COUNTRY: Final = (
    f"from {EPC_ADDRESS_CUTOVER.isoformat()} an address needs its town name 'twnNm' and "
    f"country 'ctry' ({_SOURCE})"
)
_CUTOVER_MESSAGES = frozenset({UNSTRUCTURED, MISSING_TOWN_COUNTRY})


class Address(msgspec.Struct, frozen=True, kw_only=True):
    """A postal address as users write it; the builders turn it into ISO's ``pstlAdr``.

    Two forms pass the EPC rule in force since `EPC_ADDRESS_CUTOVER`:

    - **structured**: ``street``, ``building``, ``post_code``, ``town``, ``country`` (and
      any other field below) in their own fields, no ``lines``;
    - **hybrid**: at least ``town`` and ``country``, plus at most two ``lines`` of 70
      characters for what has no field of its own.

    ``lines`` alone (no town and country) is an unstructured address: ``validate()``
    refuses it unless told to apply the rules of a date before the cut-over.

    Each field has ISO's length (PostalAddress24): ``department``, ``sub_department``,
    ``street``, ``floor``, ``room`` up to 70 characters; ``building``, ``post_box``,
    ``post_code`` up to 16; ``building_name``, ``town``, ``town_location``,
    ``district``, ``country_sub_division`` up to 35; ``country`` an ISO 3166 alpha-2 code.
    """

    street: str | None = None
    building: str | None = None
    post_code: str | None = None
    town: str | None = None
    country: str | None = None
    lines: tuple[str, ...] = ()
    building_name: str | None = None
    floor: str | None = None
    post_box: str | None = None
    room: str | None = None
    department: str | None = None
    sub_department: str | None = None
    town_location: str | None = None
    district: str | None = None
    country_sub_division: str | None = None

    @property
    def form(self) -> Literal["structured", "hybrid", "unstructured"]:
        """Which EPC form it has: town and country with no lines, with lines, or neither."""
        if self.town is None or self.country is None:
            return "unstructured"
        return "hybrid" if self.lines else "structured"

    @classmethod
    def from_iso(cls, value: PostalAddress) -> Address:
        """The address a ``pstlAdr`` struct holds (from a decoded message, for example)."""
        return cls(
            street=value.strt_nm,
            building=value.bldg_nb,
            post_code=value.pst_cd,
            town=value.twn_nm,
            country=value.ctry,
            lines=tuple(value.adr_line or ()),
            building_name=value.bldg_nm,
            floor=value.flr,
            post_box=value.pst_bx,
            room=value.room,
            department=value.dept,
            sub_department=value.sub_dept,
            town_location=value.twn_lctn_nm,
            district=value.dstrct_nm,
            country_sub_division=value.ctry_sub_dvsn,
        )

    def to_iso(self) -> PostalAddress:
        """The ``pstlAdr`` struct of this address (not validated: ``validate()`` does that)."""
        lines: Any = self.lines
        return PostalAddress(
            dept=self.department,
            sub_dept=self.sub_department,
            strt_nm=self.street,
            bldg_nb=self.building,
            bldg_nm=self.building_name,
            flr=self.floor,
            pst_bx=self.post_box,
            room=self.room,
            pst_cd=self.post_code,
            twn_nm=self.town,
            twn_lctn_nm=self.town_location,
            dstrct_nm=self.district,
            ctry_sub_dvsn=self.country_sub_division,
            ctry=self.country,
            # a tuple or list becomes a list; anything else stays, for validate() to name
            adr_line=(list(lines) or None) if isinstance(lines, tuple | list) else lines,
        )


def to_postal_address(value: object) -> Any:
    """What a builder puts under ``pstlAdr`` for ``value``.

    An `Address` becomes its struct and a ``PostalAddress`` or None stays; anything else
    stays as it is too, so that ``validate()`` names it with its path.
    """
    return value.to_iso() if isinstance(value, Address) else value


def check_postal_address(v: PostalAddress, path: str, out: list[Problem]) -> None:
    """The EPC address rule on one ``pstlAdr`` (ISO's field lengths are the types' rules).

    At most two address lines, whatever the date; from `EPC_ADDRESS_CUTOVER` the town name
    and country in their own fields (`drop_cutover_problems` takes that part away for a
    date before it).
    """
    lines = v.adr_line
    if isinstance(lines, list) and len(lines) > _MAX_LINES:
        out.append(
            Problem(
                f"{path}.adrLine",
                f"allows at most {_MAX_LINES} address lines of 70 characters, got "
                f"{len(lines)}: put street, building, post code and town in their own "
                f"fields ({_SOURCE})",
            )
        )
    if v.twn_nm is None or v.ctry is None:
        out.append(Problem(path, UNSTRUCTURED if lines else MISSING_TOWN_COUNTRY))


def rules_apply(rules_on: date | None) -> bool:
    """True when the EPC address rule of `EPC_ADDRESS_CUTOVER` applies on ``rules_on``.

    None means the rules in force now, which include it; a datetime counts by its date.
    """
    if rules_on is None:
        return True
    if not isinstance(rules_on, date):
        raise TypeError(f"rules_on must be a date, got {type(rules_on).__name__}")
    if isinstance(rules_on, datetime):
        rules_on = rules_on.date()
    return rules_on >= EPC_ADDRESS_CUTOVER


def drop_cutover_problems(problems: list[Problem]) -> list[Problem]:
    """The problems without those of the rule that starts at `EPC_ADDRESS_CUTOVER`."""
    return [p for p in problems if p.message not in _CUTOVER_MESSAGES]
