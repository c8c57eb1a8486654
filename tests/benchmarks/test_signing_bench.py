"""Smoke test of benchmarks/bench_signing.py: it runs with ``--quick`` and writes its JSON.

The numbers are not checked (a shared machine makes them noise at these counts); what is
checked is that the script still runs against the library and writes the row per signer
with the machine's core count.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each runs benchmark scripts in subprocesses

ROOT = Path(__file__).resolve().parents[2]


def test_bench_signing_writes_a_row_per_signer_with_the_core_count(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "benchmarks/bench_signing.py", "--quick", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Signed POST (camt.056) by signer" in proc.stdout
    data = json.loads((tmp_path / "signing.json").read_text())
    assert data["cores"] == os.cpu_count()
    signers = {row["signer"] for row in data["rows"]}
    assert {"key", "threads"} <= signers
    # The PKCS#11 row is there, or its absence is explained with the install command.
    assert (
        "pkcs11" in signers
        or "apt-get install -y softhsm2" in data["skipped"]["pkcs11"]
        or ("payments-async[pkcs11]" in data["skipped"]["pkcs11"])
    )
    assert all(row["errors"] == 0 for row in data["rows"])
    assert set(data["gil"]) >= {"one_thread_per_s", "two_threads_per_s", "cryptography"}
