"""Check the built docs site for what Markdown or mkdocstrings left unrendered.

Usage: ``python tools/check_site.py SITE_DIR`` (``make docs`` runs it after the build).
It reads every HTML page's text and fails, naming page and snippet, on:

- a backslash before a bar (``\\|``): a table escape shown as written;
- a paragraph that is only ``::``: a reStructuredText literal-block marker in a docstring;
- a reStructuredText role (``:func:`` before a name): docstrings here are Markdown;
- a signature default written as a constant's name (``= RETRY_ATTEMPTS``) instead of its
  value: the griffe extension in ``docs/_ext/`` did not resolve it.
"""

from __future__ import annotations

import html
import re
import sys
from pathlib import Path

_TAG = re.compile(r"<[^>]+>")
_SIGNATURE = re.compile(r'<div class="doc-signature.*?</div>', re.S)
_CONSTANT_DEFAULT = re.compile(r"=\s*([A-Z][A-Z0-9]*_[A-Z0-9_]+)\s*[,)]")
_LITERAL_MARKER = re.compile(r"<p>\s*::\s*</p>")
_ROLE = re.compile(r":(?:func|class|meth|attr|mod|data|exc|obj):(?=\w)")


def problems(page: Path, root: Path) -> list[str]:
    """What is wrong with one page, each as ``page: kind: snippet``."""
    source = page.read_text(encoding="utf-8")
    name = page.relative_to(root).as_posix()
    text = html.unescape(_TAG.sub("", source))
    found = [
        f"{name}: escaped bar shown: {match.group(0).strip()!r}"
        for match in re.finditer(r".{0,30}\\\|.{0,30}", text)
    ]
    if _LITERAL_MARKER.search(source):
        found.append(f"{name}: a reST '::' paragraph (use a Markdown fence)")
    found.extend(f"{name}: a reST role shown: {role}" for role in _ROLE.findall(text))
    found.extend(
        f"{name}: default shown as a constant's name: {match.group(1)}"
        for signature in _SIGNATURE.findall(source)
        for match in _CONSTANT_DEFAULT.finditer(html.unescape(_TAG.sub("", signature)))
    )
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: check_site.py SITE_DIR", file=sys.stderr)
        return 2
    root = Path(argv[1])
    pages = sorted(root.rglob("*.html"))
    if not pages:
        print(f"no HTML pages under {root}", file=sys.stderr)
        return 2
    found = [line for page in pages for line in problems(page, root)]
    for line in found:
        print(line, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
