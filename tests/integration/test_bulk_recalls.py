"""One recall per payment wherever it was recorded: two inputs and ``cancel --journal``
recalling overlapping payments through one journal (a SQLite file, a PostgreSQL database),
each payment recalled once at the sandbox, every refusal naming the first recall."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

from payments_async._constants import SANDBOX_CLIENT_ID
from payments_async.sandbox import SandboxConfig
from tests.support.cli import ThreadedSandbox, bulk_rows, read_results, threaded_sandbox, write_csv

ROOT = Path(__file__).resolve().parents[2]


def _run(sb: ThreadedSandbox, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "payments_async", "--sandbox", "--base-url", sb.url, *args]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def _received(sb: ThreadedSandbox) -> Counter[str]:
    """camt.056 stored by the sandbox, per original payment."""
    stored = [c for c in sb.cancellations() if c.client_id == SANDBOX_CLIENT_ID]
    return Counter(c.original_end_to_end_id for c in stored)


def test_each_payment_is_recalled_once_across_inputs_and_cancel(
    journal_target: str, tmp_path: Path
) -> None:
    payments = bulk_rows(9, prefix="E2E-ONCE")
    ids = [p["original_end_to_end_id"] for p in payments]
    one = write_csv(tmp_path / "one.csv", payments[:6])  # payments 0-5
    two = write_csv(tmp_path / "two.csv", payments[3:])  # payments 3-8: 3, 4, 5 again
    by_hand = tmp_path / "p1.json"  # payment 1 again, and payment 7 first, from cancel
    by_hand.write_text(json.dumps({**payments[1], "assignment_id": "HAND-1"}))
    first_hand = tmp_path / "p7.json"
    first_hand.write_text(json.dumps({**payments[7], "assignment_id": "HAND-7"}))
    # Outcomes never settle: every recall stays "outcome not known yet", rows unfinished.
    with threaded_sandbox(SandboxConfig(processing_delay=3600, settlement_delay=3600)) as sb:
        first = _run(sb, "bulk-cancel", str(one), "--journal", journal_target, "--timeout", "0.2")
        assert first.returncode == 3, first.stderr  # sent, outcomes pending
        assert _received(sb) == Counter(ids[:6])

        again = _run(sb, "cancel", str(by_hand), "--journal", journal_target)
        assert again.returncode == 2, again.stderr
        assert f"payment {ids[1]} is already recalled: camt.056 BC-" in again.stderr
        assert ", line 3), outcome not known yet" in again.stderr  # the first recall
        assert "nothing was sent" in again.stderr

        hand = _run(sb, "cancel", str(first_hand), "--journal", journal_target)
        assert hand.returncode == 0, hand.stderr
        resent = _run(sb, "cancel", str(first_hand), "--journal", journal_target)
        assert resent.returncode == 0, resent.stderr  # the same message: the service's 200
        assert _received(sb)[ids[7]] == 1

        # The second input repeats recalled payments: refused as a whole without --new-run
        refused = _run(sb, "bulk-cancel", str(two), "--journal", journal_target, "--timeout", "0.2")
        assert refused.returncode == 2, refused.stderr
        assert "--new-run" in refused.stderr
        assert "nothing was sent" in refused.stderr
        # ... and with it, its recalled rows are reported, the others sent.
        out = tmp_path / "two.results.csv"
        rest = _run(
            sb,
            "bulk-cancel",
            str(two),
            "--journal",
            journal_target,
            "--results",
            str(out),
            "--new-run",
            "--skip-invalid",
            "--timeout",
            "0.2",
        )
        assert rest.returncode == 3, rest.stderr
        received = _received(sb)
        assert received == Counter(ids)  # each of the nine payments recalled once
        results = {r["original_end_to_end_id"]: r for r in read_results(out)}
        for e2e in ids[3:6]:
            assert results[e2e]["outcome"] == "invalid"
            assert (
                "already has a cancellation recorded in this journal (camt.056 BC-"
                in (results[e2e]["reason"])
            )
        assert results[ids[7]]["outcome"] == "invalid"
        assert "camt.056 HAND-7 (the cancel command)" in results[ids[7]]["reason"]
        assert {results[e]["outcome"] for e in (ids[6], ids[8])} == {"pending"}


def test_a_second_cancel_of_a_payment_is_refused_naming_the_first(
    journal_target: str, tmp_path: Path
) -> None:
    payment = bulk_rows(1, prefix="E2E-AGAIN")[0]
    first = tmp_path / "first.json"
    first.write_text(json.dumps({**payment, "assignment_id": "HAND-A"}))
    second = tmp_path / "second.json"
    second.write_text(json.dumps({**payment, "assignment_id": "HAND-B"}))
    with threaded_sandbox(SandboxConfig(processing_delay=3600, settlement_delay=3600)) as sb:
        assert _run(sb, "cancel", str(first), "--journal", journal_target).returncode == 0
        refused = _run(sb, "--json", "cancel", str(second), "--journal", journal_target)
        assert refused.returncode == 2, refused.stderr
        said = json.loads(refused.stdout)  # --json: the error as data, on stdout
        assert said["exit_code"] == 2
        assert "camt.056 HAND-A (the cancel command), outcome not known yet" in str(said)
        assert _received(sb) == Counter({payment["original_end_to_end_id"]: 1})
