"""Smoke test of ``bench_sync.py``: it runs with ``--smoke`` and writes the JSON it promises."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a benchmark script in a subprocess

ROOT = Path(__file__).resolve().parents[2]


def test_bench_sync_compares_both_clients_on_post_and_get(tmp_path: Path) -> None:
    script = ROOT / "benchmarks" / "bench_sync.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--smoke", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "sync / async" in proc.stdout
    data = json.loads((tmp_path / "sync.json").read_text())
    variants = {(m["variant"], m["concurrency"]) for m in data["medians"]}
    for c in (1, 8):
        assert {(f"{w}-{op}", c) for w in ("sync", "async") for op in ("post", "get")} <= variants
    assert all(m["errors"] == 0 for m in data["medians"])
    assert data["server_refused"] == 0  # every SCA token used once
    assert set(data["ratios"]) == {"post/c1", "get/c1", "post/c8", "get/c8"}
    assert data["worst_sync_cpu_over_async_cpu"] is not None
