"""Rules for parties: the EPC's name length, the LEI, an organisation's identifiers."""

from __future__ import annotations

import re
import string
from typing import Any, Final

from .._errors import Problem
from .pacs008 import PartyOrganisationIdentification

__all__ = [
    "NAME_LIMIT",
    "NAME_RULE",
    "check_lei",
    "check_organisation_id",
    "lei_check_digits_hold",
]

NAME_LIMIT: Final = 70
"""The longest name a SEPA message may carry."""

NAME_RULE: Final = (
    "EPC SCT inter-PSP implementation guidelines (EPC115-06 2025): a name is limited to "
    f"{NAME_LIMIT} characters"
)
"""Where the limit comes from, for messages."""

_LEI: Final = re.compile(r"[A-Z0-9]{18}[0-9]{2}")
# Letters as numbers (A=10 ... Z=35) for the ISO 7064 mod 97-10 check, by code point.
_DIGITS: Final = {ord(c): str(i + 10) for i, c in enumerate(string.ascii_uppercase)}


def lei_check_digits_hold(lei: str) -> bool:
    """The ISO 17442 check: the LEI read as a number (letters 10..35) is 1 modulo 97, and
    its check digits are what ISO 7064 mod 97-10 computes (``98 - n mod 97``: 02 to 98).

    A remainder of 1 alone would also accept 00 or 01 where 97 or 98 is right (the two
    are equal modulo 97); no LEI is issued with them.

    Args:
        lei: 20 upper-case letters and digits (the pattern was checked before).

    Returns:
        True when the two check digits are right.
    """
    return 2 <= int(lei[18:]) <= 98 and int(lei.translate(_DIGITS)) % 97 == 1


def check_lei(v: Any) -> str | None:
    """Check a Legal Entity Identifier (ISO 17442): its pattern and its check digits.

    Args:
        v: the candidate.

    Returns:
        A message saying what is wrong, or None when it is a valid LEI.
    """
    if not isinstance(v, str):
        return f"expected a string, got {type(v).__name__}"
    if _LEI.fullmatch(v) is None:
        return (
            f"not an LEI (ISO 17442: 18 upper-case letters or digits, then 2 check digits): "
            f"{v[:40]!r}"
        )
    if not lei_check_digits_hold(v):
        return f"LEI check digits are wrong (ISO 17442, mod-97): {v!r}"
    return None


def check_organisation_id(
    v: PartyOrganisationIdentification, path: str, out: list[Problem]
) -> None:
    """``orgId`` names at least one identifier; each ``othr`` names one scheme at most.

    Args:
        v: the organisation identification.
        path: its JSON path.
        out: where problems are appended.
    """
    if v.any_bic is None and v.lei is None and not v.othr:
        out.append(Problem(path, "give at least one of 'anyBIC', 'lei' and 'othr'"))
    for i, other in enumerate(v.othr if isinstance(v.othr, list) else ()):
        scheme = getattr(other, "schme_nm", None)
        if scheme is not None and (scheme.cd is None) == (scheme.prtry is None):
            out.append(Problem(f"{path}.othr[{i}].schmeNm", "give exactly one of 'cd' and 'prtry'"))
