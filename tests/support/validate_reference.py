"""The rule walker as it was before issue 14 (nested closures), kept as a test oracle.

``_validate`` now generates one flat function per message class; the differential tests
in ``test_validate_fast.py`` check that it reports exactly the problems (paths, messages,
order) this straightforward walker reports, for arbitrary messages.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import msgspec
import msgspec.inspect as mi

from payments_async._errors import Problem
from payments_async.iso20022._validate import RULES, STRUCT_CHECKS, _Path, _render

Check = Callable[[Any], "str | None"]
Walker = Callable[[Any, _Path, list[Problem]], None]


def _compile(t: mi.Type, extra: dict[str, Any] | None = None) -> Walker | None:
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
        return _scalar(RULES[iso_type])
    if isinstance(t, mi.StructType):
        return _struct(t.cls)
    if isinstance(t, mi.ListType):
        return _list(_compile(t.item_type), extra.get("min_items"), extra.get("max_items"))
    return None


def _scalar(check: Check) -> Walker:
    def walk(v: Any, path: _Path, out: list[Problem]) -> None:
        msg = check(v)
        if msg is not None:
            out.append(Problem(_render(path), msg))

    return walk


def _list(item: Walker | None, min_items: int | None, max_items: int | None) -> Walker:
    def walk(v: Any, path: _Path, out: list[Problem]) -> None:
        if not isinstance(v, list):
            out.append(Problem(_render(path), f"expected an array, got {type(v).__name__}"))
            return
        n = len(v)
        if min_items is not None and n < min_items:
            out.append(Problem(_render(path), f"needs at least {min_items} item(s), got {n}"))
        if max_items is not None and n > max_items:
            out.append(Problem(_render(path), f"allows at most {max_items} item(s), got {n}"))
        if item is not None:
            for i, x in enumerate(v):
                if x is None:
                    out.append(Problem(f"{_render(path)}[{i}]", "must not be null"))
                else:
                    item(x, (path, f"[{i}]"), out)

    return walk


@cache
def _struct(cls: type[msgspec.Struct]) -> Walker:
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    fields = tuple((f.name, "." + f.encode_name, f.required, _compile(f.type)) for f in info.fields)
    checks = STRUCT_CHECKS.get(cls, ())
    name = cls.__name__

    def walk(v: Any, path: _Path, out: list[Problem]) -> None:
        if not isinstance(v, cls):
            out.append(Problem(_render(path), f"expected {name}, got {type(v).__name__}"))
            return
        for attr, dotted, required, child in fields:
            x = getattr(v, attr)
            if x is None:
                if required:
                    out.append(Problem(_render(path) + dotted, "required field is missing"))
            elif child is not None:
                child(x, (path, dotted), out)
        for check in checks:
            check(v, path, out)

    return walk


def reference_problems(msg: Any) -> list[Problem]:
    """What the pre-issue-14 walker reports for ``msg``."""
    out: list[Problem] = []
    _struct(type(msg))(msg, "$", out)
    return out
