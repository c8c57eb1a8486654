"""The SEPA character set: judging text against it, and converting text into it.

The EPC's implementation guidelines allow, unless banks agree otherwise, only the Latin
characters ``a-z A-Z 0-9 / - ? : ( ) . , ' +`` and space. The EPC's best practice for
other characters ("SEPA Requirements for an Extended Character Set (UNICODE Subset)",
EPC217-08) converts each to its nearest character of the set: a letter with a diacritic
to its base letter (``é`` -> ``e``, ``ü`` -> ``u``), a letter that does not decompose to
its usual Latin spelling (``ß`` -> ``ss``, ``Ł`` -> ``L``, ``Æ`` -> ``AE``, ``Ø`` -> ``O``),
and a character without a meaningful replacement to a full stop.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final, NamedTuple

__all__ = [
    "SEPA_CHARACTERS",
    "TRANSLITERATIONS",
    "Transliteration",
    "outside_sepa_set",
    "transliterate",
]

TRANSLITERATIONS: Final = "_transliterations"
"""The key under which a built message keeps its `Transliteration` records."""

SEPA_CHARACTERS: Final = "a-z A-Z 0-9 / - ? : ( ) . , ' + and space"
"""The SEPA character set in words, for messages."""

_SEPA: Final = re.compile(r"[A-Za-z0-9/\-?:().,'+ ]*")
_SEPA_CHAR: Final = re.compile(r"[A-Za-z0-9/\-?:().,'+ ]")

# Letters that Unicode does not decompose into a base letter plus marks, and punctuation
# with a close equivalent in the set. Everything else outside the set becomes ".".
_TABLE: Final[dict[str, str]] = {
    "ß": "ss",
    "ẞ": "SS",
    "Æ": "AE",
    "æ": "ae",
    "Œ": "OE",
    "œ": "oe",
    "Ø": "O",
    "ø": "o",
    "Ł": "L",
    "ł": "l",
    "Đ": "D",
    "đ": "d",
    "Ð": "D",
    "ð": "d",
    "Þ": "TH",
    "þ": "th",
    "Ħ": "H",
    "ħ": "h",
    "ı": "i",
    "Ŀ": "L",
    "ŀ": "l",
    "Ŧ": "T",
    "ŧ": "t",
    "ĸ": "k",
    "Ŋ": "N",
    "ŋ": "n",
    "&": "+",
    '"': "'",
    "`": "'",
    "´": "'",
    "‘": "'",
    "’": "'",
    "‚": "'",
    "“": "'",
    "”": "'",
    "„": "'",
    "«": "'",
    "»": "'",
    "_": "-",
    "‐": "-",
    "‑": "-",
    "‒": "-",
    "–": "-",
    "—": "-",
    "\t": " ",
    "\n": " ",
    "\r": " ",
}


def outside_sepa_set(text: str) -> str:
    """The characters of ``text`` outside the SEPA set, sorted and each once.

    The text is judged in Unicode normal form C, so a decomposed ``José`` (``e`` plus a
    combining acute accent) is judged as ``José``: the answer is ``"é"``, not a lone accent.

    Args:
        text: any text.

    Returns:
        The offending characters joined; empty when the text is in the set.
    """
    if _SEPA.fullmatch(text):
        return ""
    composed = unicodedata.normalize("NFC", text)
    return "".join(sorted({c for c in composed if _SEPA_CHAR.fullmatch(c) is None}))


def _convert(char: str) -> str:
    if _SEPA_CHAR.fullmatch(char):
        return char
    mapped = _TABLE.get(char)
    if mapped is not None:
        return mapped
    decomposed = unicodedata.normalize("NFKD", char)
    base = "".join(c for c in decomposed if not unicodedata.combining(c))
    if base and _SEPA.fullmatch(base):
        return base
    if base and all(c in _TABLE or _SEPA_CHAR.fullmatch(c) for c in base):
        return "".join(_TABLE.get(c, c) for c in base)
    if unicodedata.category(char).startswith("Z"):
        return " "  # any other space
    return "."


def transliterate(text: str) -> tuple[str, bool]:
    """Convert text to the SEPA character set, as the EPC's conversion best practice does.

    Letters with diacritics lose them (``Zoë Núñez`` -> ``Zoe Nunez``, ``São Paulo`` ->
    ``Sao Paulo``); letters that do not decompose get their usual Latin spelling (``ß`` ->
    ``ss``, ``Łódź`` -> ``Lodz``, ``Æ`` -> ``AE``, ``Ø`` -> ``O``); ``&`` becomes ``+``,
    typographic quotes ``'`` and dashes ``-``; any other character a full stop. Text
    already in the set is returned unchanged. The result may be longer than the input
    (``ß`` -> ``ss``): length limits are checked on the result.

    Meant for names, addresses and remittance text. Never apply it to identifiers (IBAN,
    BIC, message and transaction ids): those must be sent exactly as the bank knows them.

    Args:
        text: any text.

    Returns:
        The converted text, and whether it differs from ``text``.
    """
    if _SEPA.fullmatch(text):
        return text, False
    composed = unicodedata.normalize("NFC", text)
    converted = "".join(_convert(c) for c in composed)
    return converted, converted != text


class Transliteration(NamedTuple):
    """One field a builder converted to the SEPA set (``transliterate=True``).

    Attributes:
        field: the builder's argument, e.g. ``"debtor_name"`` or ``"debtor_address.town"``.
        old: the text given.
        new: the text sent.
    """

    field: str
    old: str
    new: str

    def __str__(self) -> str:
        return f"{self.field}: {self.old!r} -> {self.new!r}"
