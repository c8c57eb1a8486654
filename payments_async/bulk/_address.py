"""The creditor agent's postal address in a bulk row: CSV columns or a JSONL object."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from ..iso20022 import Address

__all__ = [
    "ADDRESS_COLUMNS",
    "ADDRESS_FIELDS",
    "ADDRESS_KEY",
    "LINE_SEPARATOR",
    "address_column_of",
    "address_from_columns",
    "address_from_object",
    "object_column",
]

ADDRESS_KEY: Final = "creditor_agent_address"
"""The JSONL key of the creditor agent's address: an object with `Address`'s field names."""

ADDRESS_FIELDS: Final = tuple(f.name for f in msgspec.structs.fields(Address))
"""`Address`'s field names, in its order: the keys of the JSONL object."""

_PREFIX: Final = "creditor_agent_"

ADDRESS_COLUMNS: Final = tuple(_PREFIX + name for name in ADDRESS_FIELDS)
"""The CSV columns of the creditor agent's address, one per `Address` field."""

LINE_SEPARATOR: Final = "|"
"""Separates the address lines in the CSV column ``creditor_agent_lines``.

SEPA text never holds ``|``, so no line loses one to the split.
"""


def _iso_names() -> dict[str, str]:
    """ISO's ``pstlAdr`` key -> `Address` field, read from `Address.to_iso` itself."""
    marked: Any = {name: (name,) if name == "lines" else name for name in ADDRESS_FIELDS}
    iso = msgspec.to_builtins(Address(**marked).to_iso())
    return {key: value[0] if isinstance(value, list) else value for key, value in iso.items()}


_ISO_TO_FIELD: Final = _iso_names()
_ISO_KEY: Final = re.compile(r"\.pstlAdr(?:\.(\w+))?")


def address_column_of(path: str) -> str | None:
    """The input column a validation problem's path names, if it is in the address.

    ``creditor_agent_<field>`` for one field (``creditor_agent_post_code``),
    ``creditor_agent_address`` for the address as a whole (unstructured, say).
    """
    found = _ISO_KEY.search(path)
    if found is None:
        return None
    field = _ISO_TO_FIELD.get(found.group(1) or "")
    return _PREFIX + field if field else ADDRESS_KEY


def object_column(column: str | None) -> str | None:
    """A CSV address column as a JSONL row names it (``creditor_agent_address.town``)."""
    if column in ADDRESS_COLUMNS:
        assert column is not None
        return f"{ADDRESS_KEY}.{column.removeprefix(_PREFIX)}"
    return column


def _address(values: dict[str, Any]) -> Address:
    if "country" in values:
        values["country"] = values["country"].upper()
    return Address(**values)


def address_from_columns(record: Mapping[str, object]) -> Address | None:
    """The address a CSV record's ``creditor_agent_*`` cells hold, or None when all are empty.

    Cells are stripped; ``creditor_agent_lines`` is split at `LINE_SEPARATOR` (empty
    parts dropped); the country is upper-cased. Nothing is validated here.
    """
    values: dict[str, Any] = {}
    for name, column in zip(ADDRESS_FIELDS, ADDRESS_COLUMNS, strict=True):
        cell = record.get(column)
        text = cell.strip() if isinstance(cell, str) else ""
        if not text:
            continue
        if name == "lines":
            values[name] = tuple(p.strip() for p in text.split(LINE_SEPARATOR) if p.strip())
        else:
            values[name] = text
    return _address(values) if values else None


def address_from_object(value: object) -> tuple[Address | None, list[tuple[str, str]]]:
    """The address a JSONL row's ``creditor_agent_address`` holds, and its problems.

    ``null`` is no address. Every key must be an `Address` field; each value text, except
    ``lines``, a list of text. Texts are stripped (an empty one counts as absent); the
    country is upper-cased. Nothing else is validated here.

    Returns:
        The address (None when absent or unreadable) and ``(column, message)`` problems.
    """
    if value is None:
        return None, []
    known = ", ".join(ADDRESS_FIELDS)
    if not isinstance(value, dict):
        return None, [(ADDRESS_KEY, f"expected an object with the fields {known}")]
    problems: list[tuple[str, str]] = []
    values: dict[str, Any] = {}
    for key, item in value.items():
        column = f"{ADDRESS_KEY}.{key}"
        if key not in ADDRESS_FIELDS:
            problems.append((ADDRESS_KEY, f"unknown field {key[:40]!r} (known: {known})"))
        elif key == "lines":
            if not isinstance(item, list) or not all(isinstance(x, str) for x in item):
                problems.append((column, "expected a list of text"))
            elif lines := tuple(x.strip() for x in item if x.strip()):
                values[key] = lines
        elif item is not None and not isinstance(item, str):
            problems.append((column, f"expected text, got {type(item).__name__}"))
        elif item is not None and item.strip():
            values[key] = item.strip()
    if problems:
        return None, problems
    return _address(values), []
