"""Kill ``bulk-cancel`` mid-run (SIGKILL, then Ctrl-C), resume it, and prove from the sandbox's
own state that every row has exactly one cancellation and one final outcome."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from payments_async._constants import SANDBOX_CLIENT_ID
from payments_async.bulk import journal_counts
from payments_async.sandbox import FaultConfig, SandboxConfig
from tests.support.cli import (
    ThreadedSandbox,
    bulk_rows,
    precreate_payments,
    read_results,
    threaded_sandbox,
    write_csv,
)

ROWS = 800  # a kill after 200 rows leaves three quarters of the run to resume
FAULTS = FaultConfig(
    error_500=0.03,
    error_503=0.03,
    drop_before=0.02,
    commit_then_drop=0.04,  # stored, then the answer is lost: the retry must get a 200
    seed=7,
)


def _command(sb: ThreadedSandbox, src: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "payments_async",
        "--sandbox",
        "--base-url",
        sb.url,
        "--json",
        "bulk-cancel",
        str(src),
        "--concurrency",
        "32",
        "--timeout",
        "60",
    ]


def _workdir(cmd: list[str]) -> Path:
    """Run where the input is: results and journal go to the working directory."""
    return Path(cmd[cmd.index("bulk-cancel") + 1]).parent


def _start(cmd: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        cmd, cwd=_workdir(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _wait_for(journal: Path, proc: subprocess.Popen[str], done: int, deadline: float) -> None:
    """Until the journal shows ``done`` rows acknowledged or final (read-only reads)."""
    while time.monotonic() < deadline:
        assert proc.poll() is None, "bulk-cancel ended before it could be interrupted"
        if journal.exists():
            counts = journal_counts(journal)
            if counts.get("acknowledged", 0) + counts.get("final", 0) >= done:
                return
        time.sleep(0.02)
    raise AssertionError(f"the journal never showed {done} rows acknowledged")


def _run_to_completion(cmd: list[str]) -> tuple[int, list[dict[str, object]]]:
    """Run the same command again until it no longer asks to be rerun (exit 3), at most 3x."""
    summaries = []
    for _ in range(3):
        proc = subprocess.run(cmd, cwd=_workdir(cmd), capture_output=True, text=True, timeout=120)
        assert "Traceback" not in proc.stderr, proc.stderr
        summaries.append(json.loads(proc.stdout))
        if proc.returncode != 3:
            return proc.returncode, summaries
    return proc.returncode, summaries


def _check_exactly_once(sb: ThreadedSandbox, results_path: Path, paid: set[str]) -> None:
    stored = [c for c in sb.cancellations() if c.client_id == SANDBOX_CLIENT_ID]
    per_payment = Counter(c.original_end_to_end_id for c in stored)
    rows = read_results(results_path)
    e2e_ids = [r["original_end_to_end_id"] for r in rows]
    # none lost: every row has a cancellation in the service and a line in the results
    assert len(rows) == ROWS
    assert len(set(e2e_ids)) == ROWS
    assert set(per_payment) == set(e2e_ids)
    # none duplicated: exactly one cancellation per payment, one stored per assignment id
    assert max(per_payment.values()) == 1
    assert len(stored) == ROWS
    assert sb.stats()["cancellations_stored"] == ROWS
    by_id = {c.payments_service_id: c for c in stored}
    for r in rows:
        record = by_id[r["payments_service_id"]]  # the id in the results is the stored one
        assert record.assignment_id == r["assignment_id"]
        assert r["outcome"] == ("accepted" if record.accepted else "rejected")
        assert r["outcome"] == ("accepted" if r["original_end_to_end_id"] in paid else "rejected")


def test_sigkill_midway_then_resume_sends_each_row_exactly_once(tmp_path: Path) -> None:
    config = SandboxConfig(processing_delay=3600, settlement_delay=0.2, faults=FAULTS)
    with threaded_sandbox(config) as sb:
        rows = bulk_rows(ROWS, prefix="E2E-KILL")
        paid = {r["original_end_to_end_id"] for r in rows[::2]}
        precreate_payments(sb, sorted(paid))
        src = write_csv(tmp_path / "kill.csv", rows)
        journal = tmp_path / "kill.results.journal.sqlite"
        cmd = _command(sb, src)

        proc = _start(cmd)
        try:
            _wait_for(journal, proc, done=200, deadline=time.monotonic() + 60)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.kill()
            proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        at_kill = journal_counts(journal)
        assert at_kill.get("final", 0) < ROWS, at_kill  # it really was cut short
        assert sum(at_kill.values()) == ROWS  # the whole plan was committed first

        code, summaries = _run_to_completion(cmd)
        assert code == 1, summaries  # all final; the unpaid half rejected (NOOR)
        first = summaries[0]
        assert first["resumed"] is True
        assert first["already_final"] == at_kill.get("final", 0)
        assert summaries[-1]["accepted"] == ROWS // 2
        assert summaries[-1]["rejected"] == ROWS // 2
        _check_exactly_once(sb, tmp_path / "kill.results.csv", paid)
        stats = sb.stats()
        print(
            f"at kill: {at_kill}; resumed runs: {[x['this_run'] for x in summaries]}; "
            f"faults {stats['faults_total']}, replays {stats['replays_answered']}"
        )
        assert stats["faults_total"] > 0  # the faults did fire
        assert stats["replays_answered"] > 0  # resends were answered 200, not stored again
        assert stats["replays_changed_body"] == 0  # every resend was the very same message


def test_ctrl_c_stops_cleanly_says_how_to_resume_and_resume_finishes(tmp_path: Path) -> None:
    config = SandboxConfig(processing_delay=3600, settlement_delay=0.5)
    with threaded_sandbox(config) as sb:
        src = write_csv(tmp_path / "int.csv", bulk_rows(300, prefix="E2E-INT"))
        journal = tmp_path / "int.results.journal.sqlite"
        cmd = [c for c in _command(sb, src) if c != "--json"]
        proc = _start(cmd)
        _wait_for(journal, proc, done=50, deadline=time.monotonic() + 60)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, (out, err)
        assert "Traceback" not in err
        assert "interrupted; to resume, run the same command again:" in err
        assert "bulk-cancel" in err
        assert str(src) in err
        results = read_results(tmp_path / "int.results.csv")  # written even when stopped
        assert len(results) == 300
        assert {r["outcome"] for r in results} <= {"rejected", "pending", "in_flight", "not_sent"}

        again = subprocess.run(cmd, cwd=_workdir(cmd), capture_output=True, text=True, timeout=120)
        assert again.returncode == 1, again.stderr
        assert {r["outcome"] for r in read_results(tmp_path / "int.results.csv")} == {"rejected"}
        stored = [c for c in sb.cancellations() if c.client_id == SANDBOX_CLIENT_ID]
        assert len(stored) == 300
        assert len({c.original_end_to_end_id for c in stored}) == 300
