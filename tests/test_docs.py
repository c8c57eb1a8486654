"""The documentation keeps up with the code: every public name, command and option is in it.

``make docs`` (``mkdocs build --strict``) catches broken links and references to names
that no longer exist; these tests catch what it cannot: a public name, a command or an
option that was added but never documented.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import payments_async

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PUBLIC_MODULES = (
    "iso20022",
    "bulk",
    "notifications",
    "testing",
    "sandbox",
    "cli",
    "loop",
    "sync",
)


def api_references() -> set[str]:
    refs: set[str] = set()
    for page in (DOCS / "api").glob("*.md"):
        refs.update(re.findall(r"^::: (payments_async[\w.]*)\s*$", page.read_text(), re.M))
    return refs


def test_every_public_name_has_a_reference_entry() -> None:
    refs = api_references()
    missing = [n for n in payments_async.__all__ if f"payments_async.{n}" not in refs]
    assert not missing, f"add these to a page in docs/api/: {missing}"


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_every_public_module_has_a_reference_page(module: str) -> None:
    assert f"payments_async.{module}" in api_references()


def test_no_page_links_outside_the_repository() -> None:
    pages = [*DOCS.rglob("*.md"), ROOT / "README.md", ROOT / "examples" / "README.md"]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "shared/spec" not in text, page
        for target in re.findall(r"\]\(([^)#\s]+)", text):
            if re.match(r"[a-z]+://", target):
                continue  # a web address, not a file
            resolved = (page.parent / target).resolve()
            assert resolved.is_relative_to(ROOT), f"{page.name} links outside: {target}"
            assert resolved.exists(), f"{page.name} links to a missing file: {target}"


def cli_reference() -> str:
    return (DOCS / "cli.md").read_text(encoding="utf-8")


def test_every_command_and_option_is_in_the_cli_reference() -> None:
    click = pytest.importorskip("click")  # the cli extra; installed with the test extras
    from payments_async.cli import cli

    text = cli_reference()
    ctx = click.Context(cli)
    for opt in (o for p in cli.params for o in p.opts if o.startswith("--")):
        assert f"`{opt}" in text, f"global option {opt} is not in docs/cli.md"
    for name in cli.list_commands(ctx):
        assert f"### `{name}" in text, f"command {name} has no section in docs/cli.md"
        command = cli.get_command(ctx, name)
        assert command is not None
        for opt in (o for p in command.params for o in getattr(p, "opts", ())):
            if opt.startswith("--") and opt != "--help":
                assert f"`{opt}" in text, f"{name} {opt} is not in docs/cli.md"


def test_every_sandbox_option_is_in_the_cli_reference() -> None:
    from payments_async.sandbox._main import build_parser

    text = cli_reference()
    for action in build_parser()._actions:
        for opt in action.option_strings:
            if opt.startswith("--") and opt != "--help":
                assert f"`{opt}" in text, f"sandbox {opt} is not in docs/cli.md"
