"""The README's first example, async and blocking, runs as written: extracted by its marker,
run as a file."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ["first-payment", "first-payment-sync"]


def readme_example(name: str) -> str:
    """The ```python block right after the marker ``name``, exactly as a reader copies it."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    marker = f"<!-- readme-example: {name} ("
    _, found, after = text.partition(marker)
    assert found, f"README.md lost its {marker!r} marker"
    # The marker's comment, then ruff's "fmt: off" (two arguments a line keep it short).
    block = re.match(r"[^\n]*-->\n<!-- fmt: off -->\n```python\n(.*?)\n```\n", after, re.S)
    assert block, "the README's marker is not followed by a ```python block"
    return block.group(1) + "\n"


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_first_example_is_short(name: str) -> None:
    assert len(readme_example(name).splitlines()) <= 20


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_first_example_runs_as_written(tmp_path: Path, name: str) -> None:
    script = tmp_path / "first_payment.py"
    script.write_text(readme_example(name), encoding="utf-8")
    # Run from a directory of its own, as a user's file would be; the package comes from the
    # environment (PYTHONPATH when a worktree is tested), never from the script's directory.
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    e2e_id, status = done.stdout.split()
    assert e2e_id.startswith("E2E")
    assert status == "ACCC"
