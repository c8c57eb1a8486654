"""Smoke test of ``benchmarks/bench_telemetry.py``: it runs with ``--smoke`` and writes JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each runs benchmark scripts in subprocesses

ROOT = Path(__file__).resolve().parents[2]


def test_bench_telemetry_runs_and_writes_its_rows(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_telemetry.py"),
            "--smoke",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads((tmp_path / "telemetry.json").read_text())
    rows = {row["variant"]: row for row in data["rows"]}
    assert set(rows) == {"off", "api-noop", "sdk"}
    for row in rows.values():
        assert row["errors"] == 0
        assert row["cpu_us_per_req"] > 0
