"""``bulk-cancel`` against a service answering 202 (with and without a body) to 30 % of POSTs.

A 202 is a success: no row may end ``unknown``, and every payment is recalled exactly once
at the sandbox (counted in its own records). ``PAYMENTS_ASYNC_ACCEPTED_ROWS`` sets the scale
(1,000 rows by default).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from payments_async._constants import SANDBOX_CLIENT_ID
from payments_async.cli import cli
from payments_async.sandbox import FaultConfig, SandboxConfig
from tests.support.cli import (
    bulk_rows,
    precreate_payments,
    read_results,
    threaded_sandbox,
    write_csv,
)

pytestmark = pytest.mark.slow  # seconds: 1,000 rows through the CLI and the sandbox

ROWS = int(os.environ.get("PAYMENTS_ASYNC_ACCEPTED_ROWS", "1000"))


def test_202_to_30_percent_of_posts_leaves_no_row_unknown_and_recalls_each_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    faults = FaultConfig(accepted_202=0.15, accepted_202_empty=0.15, seed=40)
    # Payments stay unprocessed (their recalls are accepted); outcomes settle at once.
    config = SandboxConfig(processing_delay=3600, settlement_delay=0.0, faults=faults)
    with threaded_sandbox(config) as sb:
        rows = bulk_rows(ROWS, prefix="E2E-202")
        precreate_payments(sb, [r["original_end_to_end_id"] for r in rows])
        src = write_csv(tmp_path / "accepted.csv", rows)
        result = CliRunner().invoke(
            cli,
            [
                "--sandbox",
                "--base-url",
                sb.url,
                "--json",
                "bulk-cancel",
                str(src),
                "--concurrency",
                "250",
            ],
            catch_exceptions=False,
        )
        stats = sb.stats()
        recalls = Counter(
            c.original_end_to_end_id for c in sb.cancellations() if c.client_id == SANDBOX_CLIENT_ID
        )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["accepted"] == ROWS
    results = read_results(tmp_path / "accepted.results.csv")
    assert Counter(r["outcome"] for r in results) == {"accepted": ROWS}  # 0 unknown
    # every payment recalled once at the sandbox, no more
    assert len(recalls) == ROWS
    assert set(recalls.values()) == {1}
    assert stats["cancellations_stored"] == ROWS
    # the service did answer 202 to about 30 % of the first POSTs, both ways
    answered_202 = stats["faults"]["accepted_202"] + stats["faults"]["accepted_202_empty"]
    assert stats["faults"]["accepted_202"] > 0
    assert stats["faults"]["accepted_202_empty"] > 0
    assert 0.2 * ROWS < answered_202 < 0.4 * ROWS
    # each 202 without a body was followed by a resubmission answered 200 with the id
    assert stats["replays_answered"] >= stats["faults"]["accepted_202_empty"]
