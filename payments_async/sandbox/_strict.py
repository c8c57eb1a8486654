"""The sandbox's strict reading of a request body: what it refuses beyond ``validate()``.

The client's structs decode leniently where the JSON allows two spellings of one value: an
optional field sent as ``null`` decodes as absent, and an amount sent as a JSON string
decodes as a number. The service's tables type amounts as numbers and list optional fields
to be left out, not sent empty, so the sandbox refuses both, naming each field's path, and
refuses a settlement method SEPA does not use. The client's own decoding is unchanged.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Final, TypeAlias

import msgspec
import msgspec.inspect as mi

from .._errors import Problem
from ..iso20022 import Camt056, Pacs008, Pacs028

__all__ = ["SEPA_SETTLEMENT_METHOD", "strict_problems"]

SEPA_SETTLEMENT_METHOD: Final = "CLRG"
"""``grpHdr.sttlmInf.sttlmMtd`` of a SEPA credit transfer: settled through a clearing system."""

_AMOUNT: Final = "amount"
"""The node of a field typed as a number (a ``Decimal``)."""

_Node: TypeAlias = "dict[str, _Node] | tuple[_Node] | str | None"
"""What a JSON value must be: a struct (wire name to node), a list (its item's node),
``_AMOUNT``, or None for a value with no rule here."""


def strict_problems(body: bytes, msg: Pacs008 | Camt056 | Pacs028) -> list[Problem]:
    """The strict rules a request body breaks, each with its JSON path.

    Args:
        body: the raw body, which decoded into ``msg``.
        msg: the decoded pacs.008, camt.056 or pacs.028.

    Returns:
        One problem per ``null`` field, per amount sent as a string and, for a pacs.008,
        for a settlement method other than ``CLRG``; empty when there is none.
    """
    out: list[Problem] = []
    _walk(msgspec.json.decode(body), _node_of(type(msg)), "$", out)
    if isinstance(msg, Pacs008):
        method = msg.body.grp_hdr.sttlm_inf.sttlm_mtd
        if method != SEPA_SETTLEMENT_METHOD:
            out.append(
                Problem(
                    "$.fitoFICstmrCdtTrf.grpHdr.sttlmInf.sttlmMtd",
                    f"SEPA settles through a clearing system: must be "
                    f"{SEPA_SETTLEMENT_METHOD!r}, got {str(method)[:10]!r}",
                )
            )
    return out


def _walk(value: Any, node: _Node, path: str, out: list[Problem]) -> None:
    # The body decoded into the message already, so its shape fits the nodes.
    if isinstance(node, dict) and isinstance(value, dict):
        for key, item in value.items():
            at = f"{path}.{key}"
            if item is None:
                out.append(Problem(at, "must not be null: leave an optional field out"))
            else:
                _walk(item, node.get(key), at, out)
    elif isinstance(node, tuple) and isinstance(value, list):
        for i, item in enumerate(value):
            _walk(item, node[0], f"{path}[{i}]", out)
    elif node == _AMOUNT and isinstance(value, str):
        out.append(Problem(path, f"must be a JSON number, not a string: {value[:20]!r}"))


@cache
def _node_of(cls: type[msgspec.Struct]) -> dict[str, _Node]:
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    return {f.encode_name: _node(f.type) for f in info.fields}


def _node(t: mi.Type) -> _Node:
    while True:
        if isinstance(t, mi.Metadata):
            t = t.type
        elif isinstance(t, mi.UnionType):
            members = [m for m in t.types if not isinstance(m, mi.NoneType)]
            if len(members) != 1:
                return None
            t = members[0]
        else:
            break
    if isinstance(t, mi.StructType):
        return _node_of(t.cls)
    if isinstance(t, mi.ListType):
        return (_node(t.item_type),)
    if isinstance(t, mi.DecimalType):
        return _AMOUNT
    return None
