"""A griffe extension for the docs: show a default written as a named constant as its value.

The library keeps every default in one place as a named constant (``RETRY_ATTEMPTS``); a
reader of the API reference wants the number. Parameters and attributes whose default is a
bare name or a dotted name that resolves to a module-level constant with a literal value
(a number, a string, ``None``, a tuple of those, arithmetic of them, or ``Decimal(...)``) are
shown with that value; anything else is left as written.
"""

from __future__ import annotations

import ast
from typing import Any

import griffe

_MAX_DEPTH = 8
_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.operator, ast.unaryop,
            ast.Name, ast.Load)  # fmt: skip
_CONSTRUCTORS = frozenset({"Decimal", "frozenset", "tuple"})


def _literal(text: str) -> str | None:
    """The value's text if ``text`` is a literal (or arithmetic of literals), else None."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return None
    try:
        return repr(ast.literal_eval(tree))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    # Arithmetic such as ``1 * 1024 * 1024``, and ``Decimal("1000000.00")``, read well as
    # written.
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if not (isinstance(node.func, ast.Name) and node.func.id in _CONSTRUCTORS):
                return None
        elif not isinstance(node, _ALLOWED):
            return None
    return text


class ConstantDefaults(griffe.Extension):
    """Replace defaults that name a constant by the constant's value."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """Walk the loaded package once every module is there to resolve names in."""
        self._walk(pkg, set())

    def _walk(self, obj: griffe.Object, seen: set[str]) -> None:
        if obj.path in seen:
            return
        seen.add(obj.path)
        for member in list(obj.members.values()):
            if member.is_alias:
                continue
            if member.is_function:
                for parameter in member.parameters:
                    resolved = self._value(parameter.default, 0)
                    if resolved is not None:
                        parameter.default = resolved
            elif member.is_attribute and member.parent is not None and member.parent.is_class:
                resolved = self._value(member.value, 0)
                if resolved is not None:
                    member.value = resolved
            if member.is_module or member.is_class:
                self._walk(member, seen)

    def _value(self, default: object, depth: int) -> str | None:
        if depth > _MAX_DEPTH or not isinstance(default, griffe.ExprName | griffe.ExprAttribute):
            return None
        try:
            target = default.parent.modules_collection.get_member(default.canonical_path)
        except Exception:  # a name griffe cannot follow stays as written
            return None
        while target.is_alias:
            try:
                target = target.final_target
            except Exception:
                return None
        if not target.is_attribute or target.value is None:
            return None
        if isinstance(target.value, griffe.ExprName | griffe.ExprAttribute):
            return self._value(target.value, depth + 1)
        return _literal(str(target.value))
