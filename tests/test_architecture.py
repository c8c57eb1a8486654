"""The import graph of ``payments_async`` read with ``ast``: no cycle, no big module, none upward.

The rules (each test says which it checks):

- **No import cycle** among the package's modules, imports inside functions and under
  ``if TYPE_CHECKING:`` included: a cycle closed by a deferred import is still two modules
  that cannot be read one at a time. A ``from package import name`` counts as an import of
  ``package.name`` when that is a module, else of ``package``. ``KNOWN_CYCLES`` lists the
  ones another room is removing.
- **No module reaches into another module's class**: outside the module that defines it,
  nothing reads, calls or assigns a private member (``x._name``, ``self`` and ``cls``
  aside), and no class installs a function of another module as a member
  (``request = _request``).
- **A module past 1,500 lines is flagged**: split by concern, never by count; a long
  module with one concern is fine until then.
- **Layers, arrows pointing down** (every import counts, deferred ones included):
  0. the foundation: ``iso20022/``, ``_errors``, ``_constants``, and the pure helpers
     ``_urls`` (stdlib only) and ``_serving`` (aiohttp only);
  1. the client: every other module at the package's root, ``signing/``, the root package;
  2. the rooms built on the client: ``notifications/``, ``bulk/``, ``sandbox/``;
  3. the tools for people: ``cli`` (the command line and its demo), ``__main__``,
     ``testing``.
  A module imports only from its own layer or below.
- **The sandbox shares only the foundation with the client**: from the rest of the library
  it imports ``iso20022/``, ``_errors``, ``_constants``, ``_serving``, ``_urls``, the JWT
  verifiers (``_jwt``) and the key check they apply (``_keys``: the same >= 2048-bit rule
  as the client), and the event-loop runner of its program (``loop``). Never the client.
- **Nothing imports the command line** (``payments_async.cli``), except its own modules and
  ``__main__`` (``python -m payments_async`` runs it).
- **The command line uses the library's public names**: from outside ``cli`` it imports
  only the root package and public modules (no path component starting with ``_``), and
  the private modules of ``bulk/`` (``_CLI_MAY_IMPORT``): the commands are that room's
  other front, and what only a command needs (a row's check, the planner, the worker's
  defaults) stays out of the surface a Python user of the runner sees. Never the client's
  private modules.
- **``_telemetry`` does not import the root package** (it is imported while the root is).

Where another room breaks a rule today, ``KNOWN_EXCEPTIONS`` names it, with its issue;
an entry no longer needed fails the test so that the list only shrinks.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest

PACKAGE: Final = "payments_async"
ROOT: Final = Path(__file__).resolve().parents[1] / PACKAGE
MAX_LINES: Final = 1500

# Import cycles still closed by a deferred import, each to be removed; the lead empties
# this list at merge. An entry no longer found fails the test.
KNOWN_CYCLES: Final[list[list[str]]] = []

# (rule, importing module or package prefix, imported module or ""): what may still break
# a rule until the room it belongs to is rebuilt. Each names its issue.
KNOWN_EXCEPTIONS: Final[frozenset[tuple[str, str, str]]] = frozenset()


@dataclass(frozen=True, slots=True)
class Import:
    """One import statement's target, as the module that holds it sees it."""

    importer: str
    imported: str
    line: int
    module_level: bool  # run when the importer is imported (not in a function or TYPE_CHECKING)


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(root: Path = ROOT) -> dict[str, Path]:
    return {_module_name(p, root): p for p in sorted(root.rglob("*.py"))}


MODULES: Final = _modules()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(nodes: Iterable[ast.AST], *, module_level: bool) -> Iterator[tuple[ast.AST, bool]]:
    """Every import node in or under ``nodes``, with whether it runs at import time."""
    for node in nodes:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, module_level
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _walk(ast.iter_child_nodes(node), module_level=False)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _walk(node.body, module_level=False)
            yield from _walk(node.orelse, module_level=module_level)
        else:
            yield from _walk(ast.iter_child_nodes(node), module_level=module_level)


def _resolve(importer: str, node: ast.ImportFrom, modules: dict[str, Path]) -> str:
    if node.level == 0:
        return node.module or ""
    is_package = modules[importer].name == "__init__.py"
    base = importer.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _imports(module: str, modules: dict[str, Path] = MODULES) -> list[Import]:
    package = module.split(".")[0]
    tree = ast.parse(modules[module].read_text(encoding="utf-8"))
    out: list[Import] = []
    for node, module_level in _walk(tree.body, module_level=True):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(module, node, modules)
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                targets.append(submodule if submodule in modules else source)
        for target in targets:
            if target == package or target.startswith(package + "."):
                assert target in modules, f"{module}:{node.lineno} imports unknown {target}"
                out.append(Import(module, target, node.lineno, module_level))
    return out


IMPORTS: Final = [imp for module in MODULES for imp in _imports(module)]


def _in(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _excepted(used: set[tuple[str, str, str]], rule: str, importer: str, imported: str) -> bool:
    for entry in KNOWN_EXCEPTIONS:
        kind, who, what = entry
        if kind == rule and _in(importer, who) and what == imported:
            used.add(entry)
            return True
    return False


def _unused(used: set[tuple[str, str, str]], rule: str) -> list[tuple[str, str, str]]:
    return sorted(e for e in KNOWN_EXCEPTIONS if e[0] == rule and e not in used)


_FOUNDATION: Final = tuple(
    f"{PACKAGE}.{name}"
    for name in ("iso20022", "_errors", "_constants", "_profile", "_urls", "_serving")
)
_ROOMS: Final = tuple(f"{PACKAGE}.{name}" for name in ("notifications", "bulk", "sandbox"))
_TOOLS: Final = tuple(f"{PACKAGE}.{name}" for name in ("cli", "__main__", "testing"))
_SANDBOX_MAY_IMPORT: Final = (
    *_FOUNDATION,
    f"{PACKAGE}.sandbox",
    f"{PACKAGE}._jwt",
    f"{PACKAGE}._keys",
    f"{PACKAGE}.loop",
)


def layer(module: str) -> int:
    """0 foundation, 1 client, 2 rooms on the client, 3 tools for people."""
    if any(_in(module, p) for p in _FOUNDATION):
        return 0
    if any(_in(module, p) for p in _ROOMS):
        return 2
    if any(_in(module, p) for p in _TOOLS):
        return 3
    return 1


def test_the_graph_is_read() -> None:
    # A parser that found nothing would pass every rule below.
    assert len(MODULES) > 50
    assert any(
        (i.importer, i.imported, i.module_level)
        == ("payments_async.sandbox._app", "payments_async.sandbox._config", True)
        for i in IMPORTS
    )
    deferred = [i for i in IMPORTS if not i.module_level]
    assert any(i.importer == "payments_async.sandbox._notify" for i in deferred)  # TYPE_CHECKING


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (or a self-import)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in edges.get(v, ()):
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def import_cycles(root: Path) -> list[list[str]]:
    """Every import cycle of the package at ``root``, deferred imports included."""
    modules = _modules(root)
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for module in modules:
        for imp in _imports(module, modules):
            edges[imp.importer].add(imp.imported)
    return _cycles(edges)


def test_no_import_cycle() -> None:
    found = import_cycles(ROOT)
    assert [c for c in found if c not in KNOWN_CYCLES] == []
    assert [c for c in KNOWN_CYCLES if c not in found] == [], "gone: delete from KNOWN_CYCLES"


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def test_a_cycle_closed_inside_a_function_or_under_type_checking_is_found(
    tmp_path: Path,
) -> None:
    root = _tree(
        tmp_path,
        {
            "_a.py": "from ._b import B\n",
            "_b.py": "def f():\n    from ._a import A\n",
            "_c.py": "from typing import TYPE_CHECKING\nfrom ._d import D\n",
            "_d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._c import C\n",
            "_e.py": "from ._a import A\n",
        },
    )
    assert import_cycles(root) == [["pkg._a", "pkg._b"], ["pkg._c", "pkg._d"]]


def private_reaches(root: Path) -> list[str]:
    """Where a module reads, calls or assigns a private member of another module's class
    (``x._name`` with ``x`` not ``self`` or ``cls``, ``_name`` defined by no class of this
    module), or installs another module's function as a class member."""
    found: list[str] = []
    for module, path in _modules(root).items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        own: set[str] = set()  # private members the classes of this module define
        imported: set[str] = set()  # names this module imports
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for item in ast.walk(node):
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                        own.add(item.name)
                    elif isinstance(item, ast.Attribute) and isinstance(item.ctx, ast.Store):
                        own.add(item.attr)
                    elif isinstance(item, ast.Name) and isinstance(item.ctx, ast.Store):
                        own.add(item.id)
                    elif isinstance(item, ast.Constant) and isinstance(item.value, str):
                        own.add(item.value)  # __slots__ entries
            elif isinstance(node, ast.ImportFrom | ast.Import):
                imported.update(alias.asname or alias.name for alias in node.names)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                name = node.attr
                if not name.startswith("_") or name.startswith("__") or name in own:
                    continue
                base = node.value
                if isinstance(base, ast.Name) and base.id in ("self", "cls"):
                    continue
                if isinstance(base, ast.Call) and getattr(base.func, "id", None) == "super":
                    continue
                found.append(f"{module}:{node.lineno} .{name}")
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if (
                        isinstance(item, ast.Assign)
                        and isinstance(item.value, ast.Name)
                        and item.value.id in imported
                        and callable_name(item.value.id)
                    ):
                        found.append(f"{module}:{item.lineno} installs {item.value.id}")
    return found


def callable_name(name: str) -> bool:
    """A name spelt as a function's (lower case), not a class's or a constant's."""
    return name.lstrip("_")[:1].islower()


# Private reaches in other rooms today, by module, to be removed by their owners; the
# lead empties this list as their branches merge. An entry no longer found fails.
KNOWN_REACHES: Final[frozenset[str]] = frozenset(
    {f"{PACKAGE}.sandbox._main"}  # argparse._ActionsContainer, a type annotation
)


def test_no_module_reaches_into_another_modules_class() -> None:
    found = private_reaches(ROOT)
    modules = {entry.split(":")[0] for entry in found}
    assert [e for e in found if e.split(":")[0] not in KNOWN_REACHES] == []
    assert sorted(KNOWN_REACHES - modules) == [], "gone: delete from KNOWN_REACHES"


def test_the_private_reach_rule_finds_a_reach_and_an_installed_function(
    tmp_path: Path,
) -> None:
    root = _tree(
        tmp_path,
        {
            "_client.py": """
                from ._request import request as _request


                class Client:
                    def __init__(self):
                        self._token = None

                    request = _request

                    def _read(self):
                        return self._token
            """,
            "_request.py": """
                def request(client):
                    return client._token
            """,
            "_poll.py": """
                class Poll:
                    def __init__(self, client):
                        self._client = client

                    async def run(self):
                        return await self._client._read()
            """,
        },
    )
    assert private_reaches(root) == [
        "pkg._client:9 installs _request",
        "pkg._poll:7 ._read",
        "pkg._request:3 ._token",
    ]


def oversized(root: Path, limit: int = MAX_LINES) -> dict[str, int]:
    """The modules longer than ``limit`` lines."""
    sizes = {m: len(p.read_text(encoding="utf-8").splitlines()) for m, p in _modules(root).items()}
    return {m: n for m, n in sizes.items() if n > limit}


def test_no_module_past_1500_lines() -> None:
    assert oversized(ROOT) == {}, "split by concern (never by count)"


def test_the_size_rule_flags_a_long_module(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"_long.py": "x = 1\n" * (MAX_LINES + 1), "_ok.py": "x = 1\n"})
    assert oversized(root) == {"pkg._long": MAX_LINES + 1}


def test_no_upward_import() -> None:
    upward = [
        f"{i.importer}:{i.line} (layer {layer(i.importer)}) imports {i.imported} "
        f"(layer {layer(i.imported)})"
        for i in IMPORTS
        if layer(i.imported) > layer(i.importer)
    ]
    assert upward == []


def test_the_sandbox_shares_only_the_foundation_with_the_client() -> None:
    outside = [
        f"{i.importer}:{i.line} imports {i.imported}"
        for i in IMPORTS
        if _in(i.importer, f"{PACKAGE}.sandbox")
        and not any(_in(i.imported, allowed) for allowed in _SANDBOX_MAY_IMPORT)
    ]
    assert outside == []


def test_nothing_imports_the_command_line() -> None:
    cli = f"{PACKAGE}.cli"
    importers = [
        f"{i.importer}:{i.line}"
        for i in IMPORTS
        if _in(i.imported, cli) and not _in(i.importer, cli) and i.importer != f"{PACKAGE}.__main__"
    ]
    assert importers == []


def _private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split(".")[1:])


# The five bulk modules docs/architecture.md names, not the whole room: a new reach into
# bulk's privates (its runner, its journal) is a decision to make here, not a default.
_CLI_MAY_IMPORT: Final = tuple(
    f"{PACKAGE}.bulk.{module}" for module in ("_control", "_defaults", "_input", "_plan", "_stores")
)


@pytest.mark.parametrize("cli", [f"{PACKAGE}.cli"])
def test_the_command_line_uses_public_names(cli: str) -> None:
    used: set[tuple[str, str, str]] = set()
    private = sorted(
        {
            i.imported
            for i in IMPORTS
            if _in(i.importer, cli)
            and not _in(i.imported, cli)
            and _private(i.imported)
            and not any(_in(i.imported, room) for room in _CLI_MAY_IMPORT)
            and not _excepted(used, "cli-public", i.importer, i.imported)
        }
    )
    assert private == []
    stale = [e for e in _unused(used, "cli-public") if _in(e[1], cli)]
    assert stale == [], "no longer needed: delete from KNOWN_EXCEPTIONS"


def test_telemetry_does_not_import_the_root_package() -> None:
    used: set[tuple[str, str, str]] = set()
    telemetry = f"{PACKAGE}._telemetry"
    root = [
        f"{i.importer}:{i.line}"
        for i in IMPORTS
        if i.importer == telemetry
        and i.imported == PACKAGE
        and not _excepted(used, "telemetry-root", i.importer, i.imported)
    ]
    assert root == []
    assert _unused(used, "telemetry-root") == [], "no longer needed: delete from KNOWN_EXCEPTIONS"
