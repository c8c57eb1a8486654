"""Print pip/uv constraints that pin every direct dependency to the floor pyproject.toml declares.

Usage: ``python tools/floors.py [EXTRA ...]`` prints one ``name==floor`` line for each
runtime dependency and for each dependency of the named extras (markers kept). ``make
test-min`` installs the package with these constraints, so the floors are what is tested.
A dependency without a ``>=`` floor is an error: every floor must be stated to be tested
(a cap such as ``aiohttp<3.14`` on a dependency whose floor is already listed is skipped).

``python tools/floors.py --check [EXTRA ...]``, run by the interpreter of the environment
that was installed, exits non-zero unless each of those dependencies is installed at
exactly its floor (dependencies whose marker excludes this platform are skipped).
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
        if floor is None and name in lines:
            continue  # a cap on a dependency whose floor is already listed
        if floor is None:
            raise SystemExit(f"{requirement!r} declares no floor (>=)")
        marker = f"; {match['marker']}" if match["marker"] else ""
        lines[name] = f"{name}=={floor['version']}{marker}"
    return list(lines.values())


def check(extras: list[str]) -> list[str]:
    """The floors of ``extras`` that this interpreter's environment does not hold exactly."""
    from importlib.metadata import PackageNotFoundError, version

    from packaging.markers import Marker
    from packaging.version import Version

    wrong = []
    for line in floors(extras):
        requirement, _, marker = line.partition(";")
        if marker and not Marker(marker.strip()).evaluate():
            continue
        name, _, floor = requirement.partition("==")
        try:
            installed = version(name)
        except PackageNotFoundError:
            installed = "nothing"
        if installed == "nothing" or Version(installed) != Version(floor):
            wrong.append(f"{name}: floor {floor}, installed {installed}")
        else:
            print(f"{name}=={installed}")
    return wrong


if __name__ == "__main__":
    if sys.argv[1:2] == ["--check"]:
        mismatches = check(sys.argv[2:])
        if mismatches:
            raise SystemExit("not at the declared floor:\n  " + "\n  ".join(mismatches))
    else:
        print("\n".join(floors(sys.argv[1:])))
