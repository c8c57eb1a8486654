"""Print pip/uv constraints that pin every direct dependency to the floor pyproject.toml declares.

Usage: ``python tools/floors.py [EXTRA ...]`` prints one ``name==floor`` line for each
runtime dependency and for each dependency of the named extras (markers kept). ``make
test-min`` installs the package with these constraints, so the floors are what is tested.
A dependency without a ``>=`` floor is an error: every floor must be stated to be tested.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

_PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
_REQUIREMENT = re.compile(
    r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(?P<spec>[^;]*?)\s*"
    r"(?:;\s*(?P<marker>.+))?$"
)
_FLOOR = re.compile(r"(?:^|,)\s*>=\s*(?P<version>[^,\s]+)")


def floors(extras: list[str]) -> list[str]:
    """The constraint lines for the runtime dependencies and those of ``extras``."""
    project = tomllib.loads(_PYPROJECT.read_text(encoding="utf-8"))["project"]
    optional = project.get("optional-dependencies", {})
    unknown = [extra for extra in extras if extra not in optional]
    if unknown:
        raise SystemExit(f"no such extra in pyproject.toml: {', '.join(unknown)}")
    requirements = list(project["dependencies"])
    for extra in extras:
        requirements.extend(optional[extra])
    lines: dict[str, str] = {}
    for requirement in requirements:
        match = _REQUIREMENT.match(requirement)
        if match is None:
            raise SystemExit(f"cannot read the requirement {requirement!r}")
        name = match["name"].lower().replace("_", "-")
        if name == project["name"]:
            continue  # an extra naming other extras: list those extras instead
        floor = _FLOOR.search(match["spec"])
        if floor is None:
            raise SystemExit(f"{requirement!r} declares no floor (>=)")
        marker = f"; {match['marker']}" if match["marker"] else ""
        lines[name] = f"{name}=={floor['version']}{marker}"
    return list(lines.values())


if __name__ == "__main__":
    print("\n".join(floors(sys.argv[1:])))
