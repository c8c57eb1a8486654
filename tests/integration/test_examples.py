"""Every file in examples/ works as its README says, against the sandbox over real HTTP."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from payments_async.cli import cli
from payments_async.sandbox import SandboxConfig
from tests.support.cli import ThreadedSandbox, precreate_payments, read_results, threaded_sandbox

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
with (EXAMPLES / "bulk-cancel.csv").open(encoding="utf-8", newline="") as _fh:
    BULK_E2E_IDS = [row["original_end_to_end_id"] for row in csv.DictReader(_fh)]


@pytest.fixture
def slow_sandbox() -> Iterator[ThreadedSandbox]:
    """Payments stay unprocessed for the whole test: their cancellations are accepted."""
    with threaded_sandbox(SandboxConfig(processing_delay=600, settlement_delay=0.1)) as s:
        yield s


@pytest.fixture
def in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_cli(sb: ThreadedSandbox, *args: str) -> Result:
    pre = ["--sandbox", "--base-url", sb.url, "--json"]
    return CliRunner().invoke(cli, [*pre, *args], catch_exceptions=False)


def example_outputs() -> set[str]:
    return {p.name for p in EXAMPLES.iterdir() if ".results" in p.name}


def test_pay_then_cancel_examples_the_cancellation_is_accepted(
    slow_sandbox: ThreadedSandbox,
) -> None:
    paid = run_cli(slow_sandbox, "pay", str(EXAMPLES / "pacs008.json"))
    assert paid.exit_code == 0, paid.output
    payment = json.loads(paid.stdout)
    assert payment["created"] is True
    assert payment["end_to_end_id"] == "EXAMPLE-E2E-0001"

    cancelled = run_cli(slow_sandbox, "cancel", str(EXAMPLES / "camt056.json"), "--wait")
    assert cancelled.exit_code == 0, cancelled.output
    result = json.loads(cancelled.stdout)
    assert result["created"] is True
    assert result["outcome"]["outcome"] == "accepted"
    # It cancelled the example payment itself, found by its end-to-end id.
    (stored,) = slow_sandbox.cancellations()
    assert stored.original_payment_id == payment["payments_service_id"]

    again = run_cli(slow_sandbox, "pay", str(EXAMPLES / "pacs008.json"))
    assert again.exit_code == 0, again.output
    replay = json.loads(again.stdout)
    assert replay["replayed"] is True
    assert replay["payments_service_id"] == payment["payments_service_id"]


def test_the_hybrid_address_example_pays(slow_sandbox: ThreadedSandbox) -> None:
    paid = run_cli(slow_sandbox, "pay", str(EXAMPLES / "pacs008_hybrid.json"))
    assert paid.exit_code == 0, paid.output
    payment = json.loads(paid.stdout)
    assert payment["created"] is True
    assert payment["end_to_end_id"] == "EXAMPLE-E2E-0002"


@pytest.mark.parametrize("name", ["bulk-cancel.csv", "bulk-cancel.jsonl", "bulk-cancel.xml"])
def test_bulk_examples_write_results_to_the_working_directory(
    slow_sandbox: ThreadedSandbox, in_tmp_path: Path, name: str
) -> None:
    precreate_payments(slow_sandbox, BULK_E2E_IDS)
    before = example_outputs()
    result = run_cli(slow_sandbox, "bulk-cancel", str(EXAMPLES / name))
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["accepted"] == len(BULK_E2E_IDS)

    suffix = ".jsonl" if name.endswith(".jsonl") else ".csv"
    results = in_tmp_path / f"bulk-cancel.results{suffix}"
    assert Path(summary["results"]).resolve() == results
    assert (in_tmp_path / "bulk-cancel.results.journal.sqlite").exists()
    if suffix == ".csv":
        rows = read_results(results)
    else:
        rows = [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines()]
    assert sorted(r["original_end_to_end_id"] for r in rows) == sorted(BULK_E2E_IDS)
    assert example_outputs() == before  # nothing written beside the input


def test_bulk_results_beside_the_input_only_when_asked(
    slow_sandbox: ThreadedSandbox, in_tmp_path: Path
) -> None:
    src = in_tmp_path / "in" / "rows.csv"
    src.parent.mkdir()
    src.write_bytes((EXAMPLES / "bulk-cancel.csv").read_bytes())
    asked = src.with_name("rows.results.csv")
    result = run_cli(slow_sandbox, "bulk-cancel", str(src), "--results", str(asked))
    assert result.exit_code == 1, result.output  # no such payments: rejected NOOR
    assert asked.exists()
    assert src.with_name("rows.results.journal.sqlite").exists()
    assert not (in_tmp_path / "rows.results.csv").exists()


def test_gitignore_covers_what_the_examples_write() -> None:
    tracked_ok = subprocess.run(
        ["git", "check-ignore", "-q", "examples/bulk-cancel.csv"],
        cwd=EXAMPLES.parent,
        check=False,
    )
    if tracked_ok.returncode == 128:
        pytest.skip("not a git checkout (an sdist): .gitignore does not apply")
    assert tracked_ok.returncode == 1  # the input itself is not ignored
    for written in (
        "bulk-cancel.results.csv",
        "bulk-cancel.results.jsonl",
        "bulk-cancel.results.journal.sqlite",
        "examples/bulk-cancel.results.csv",
        "examples/bulk-cancel.results.journal.sqlite-wal",
        "payments-notifications.db",
        "payments-notifications.db-wal",
    ):
        ignored = subprocess.run(
            ["git", "check-ignore", "-q", written], cwd=EXAMPLES.parent, check=False
        )
        assert ignored.returncode == 0, f"{written} is not git-ignored"


def run_script(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_submit_and_wait_script_sees_the_payment_accepted(tmp_path: Path) -> None:
    with threaded_sandbox(SandboxConfig(processing_delay=0.3)) as sb:
        done = run_script(str(EXAMPLES / "submit_and_wait.py"), sb.url, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "final status ACCC (accepted)" in done.stdout
        assert sb.stats()["payments_stored"] == 1


def test_bulk_from_code_script_runs_every_row(tmp_path: Path) -> None:
    with threaded_sandbox(SandboxConfig(processing_delay=600, settlement_delay=0.1)) as sb:
        precreate_payments(sb, BULK_E2E_IDS[:2])
        script = str(EXAMPLES / "bulk_from_code.py")
        done = run_script(script, str(EXAMPLES / "bulk-cancel.jsonl"), sb.url, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "accepted  2" in done.stdout
        assert f"rejected  {len(BULK_E2E_IDS) - 2}" in done.stdout
        assert (tmp_path / "bulk-cancel.results.jsonl").exists()
        assert sb.stats()["cancellations_stored"] == len(BULK_E2E_IDS)
