"""Operators' faults around ``bulk-cancel``: runs racing on one journal, an edited input
after a kill; each proven from the sandbox's own records."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

from payments_async._constants import SANDBOX_CLIENT_ID
from payments_async.sandbox import SandboxConfig
from tests.support.cli import ThreadedSandbox, bulk_rows, threaded_sandbox, write_csv


def _command(sb: ThreadedSandbox, src: Path, *more: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "payments_async",
        "--sandbox",
        "--base-url",
        sb.url,
        "bulk-cancel",
        str(src),
        "--timeout",
        "60",
        *more,
    ]


def _stored_per_payment(sb: ThreadedSandbox) -> Counter[str]:
    stored = [c for c in sb.cancellations() if c.client_id == SANDBOX_CLIENT_ID]
    return Counter(c.original_end_to_end_id for c in stored)


def test_three_runs_on_one_journal_one_runs_two_exit_2_naming_it(tmp_path: Path) -> None:
    rows = 300
    # The outcomes settle after 3 s: the first run still holds the journal when the
    # others reach it, whichever of the three gets there first.
    with threaded_sandbox(SandboxConfig(processing_delay=3600, settlement_delay=3)) as sb:
        src = write_csv(tmp_path / "c3.csv", bulk_rows(rows, prefix="E2E-LOCK"))
        cmd = _command(sb, src)
        procs = [
            subprocess.Popen(
                cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            for _ in range(3)
        ]
        done = [(p.wait(timeout=120), *p.communicate()) for p in procs]
        codes = sorted(code for code, _, _ in done)
        assert codes == [1, 2, 2], done  # the unpaid payments' cancellations are rejected
        for code, _, err in done:
            assert "Traceback" not in err
            if code == 2:
                assert "is in use by another run (pid " in err, err
                assert "nothing was sent" in err
        stats = sb.stats()
        assert stats["cancellations_stored"] == rows
        assert stats["replays_answered"] == 0  # no POST sent twice
        per_payment = _stored_per_payment(sb)
        assert len(per_payment) == rows
        assert max(per_payment.values()) == 1
        assert not (tmp_path / "c3.results.journal.sqlite.lock").exists()
