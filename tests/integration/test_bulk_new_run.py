"""``--new-run`` means one thing for every journal store: an input edited after a stop,
rerun against the same journal (a SQLite file or a PostgreSQL database), is refused with
the advice, and ``new_run`` never sends a second cancellation for a payment; each proven
from the sandbox's own records."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

import psycopg
import pytest

from payments_async import Credentials, PaymentsClient
from payments_async._constants import SANDBOX_CLIENT_ID
from payments_async.bulk import BulkInputError, JournalError, bulk_cancel
from payments_async.bulk._stores import is_postgres_url
from payments_async.sandbox import SandboxConfig
from tests.support.cli import (
    ThreadedSandbox,
    bulk_rows,
    read_results,
    threaded_sandbox,
    write_csv,
)

ROWS = 200


def _stored_per_payment(sb: ThreadedSandbox) -> Counter[str]:
    stored = [c for c in sb.cancellations() if c.client_id == SANDBOX_CLIENT_ID]
    return Counter(c.original_end_to_end_id for c in stored)


async def _stop_when_stored(sb: ThreadedSandbox, n: int, stop: asyncio.Event) -> None:
    deadline = time.monotonic() + 60
    while sb.stats()["cancellations_stored"] < n:
        assert time.monotonic() < deadline, "the run never got going"
        await asyncio.sleep(0.02)
    stop.set()


def _runs(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        got = conn.execute("SELECT COUNT(*) FROM payments_bulk_runs").fetchone()
    assert got is not None
    return int(got[0])


async def test_an_edited_input_is_refused_and_new_run_never_cancels_twice(
    journal_target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    # Outcomes never settle: the stopped run leaves rows sent or acknowledged, unfinished.
    config = SandboxConfig(processing_delay=3600, settlement_delay=3600)
    with threaded_sandbox(config) as sb:
        data = bulk_rows(ROWS, prefix="E2E-PGEDIT")
        src = write_csv(tmp_path / "edit.csv", data)
        out = tmp_path / "edit.results.csv"
        async with PaymentsClient(Credentials.sandbox(), base_url=sb.url) as client:
            stop = asyncio.Event()
            watch = asyncio.create_task(_stop_when_stored(sb, ROWS // 2, stop))
            first = await bulk_cancel(
                client, src, results_path=out, journal_path=journal_target, concurrency=8, stop=stop
            )
            await watch
            assert first.interrupted
            sent_before = set(_stored_per_payment(sb))
            assert ROWS // 2 <= len(sent_before) < ROWS

            data[7]["amount"] = "99.99"  # the operator edits the file...
            data.append(bulk_rows(1, prefix="E2E-PGNEW")[0])  # ...and adds a payment
            write_csv(src, data)
            with pytest.raises(JournalError) as caught:
                await bulk_cancel(
                    client, src, results_path=out, journal_path=journal_target, timeout=1
                )
            said = str(caught.value)
            # The journal records every row sent, which includes those the sandbox stored
            # (a row marked sent just before the stop may never have reached it).
            recorded = int(said.split(" payment(s) of this input already have a ")[0])
            assert recorded >= len(sent_before)
            assert "--new-run" in said
            assert "nothing was sent" in said
            if is_postgres_url(journal_target):
                assert _runs(journal_target) == 1  # the refused run is not left behind
            assert set(_stored_per_payment(sb)) == sent_before

            # The explicit new run lists every payment already cancelled; nothing is sent.
            with pytest.raises(BulkInputError) as listed:
                await bulk_cancel(
                    client,
                    src,
                    results_path=out,
                    journal_path=journal_target,
                    new_run=True,
                    timeout=1,
                )
            assert len(listed.value.row_errors) == recorded
            listed_out = {
                data[e.line - 2]["original_end_to_end_id"] for e in listed.value.row_errors
            }
            assert listed_out >= sent_before
            assert all(
                "already has a cancellation recorded in this journal" in e.message
                for e in listed.value.row_errors
            )
            assert set(_stored_per_payment(sb)) == sent_before

            # With skip_invalid the others are sent and those are reported, not resent.
            rest = await bulk_cancel(
                client,
                src,
                results_path=out,
                journal_path=journal_target,
                new_run=True,
                skip_invalid=True,
                timeout=1,
            )
        assert not rest.resumed
        per_payment = _stored_per_payment(sb)
        assert max(per_payment.values()) == 1  # 0 second cancellations for any payment
        results = read_results(out)
        kept_out = {r["original_end_to_end_id"] for r in results if r["outcome"] == "invalid"}
        assert kept_out == listed_out
        every = {r["original_end_to_end_id"] for r in data}
        # The others, and the added one, were sent; those kept out were sent only if the
        # first run's request reached the sandbox.
        assert set(per_payment) == every - (kept_out - sent_before)


async def test_another_input_with_other_payments_uses_the_same_database(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = SandboxConfig(processing_delay=3600, settlement_delay=0)
    with threaded_sandbox(config) as sb:
        one = write_csv(tmp_path / "one.csv", bulk_rows(20, prefix="E2E-PGONE"))
        two = write_csv(tmp_path / "two.csv", bulk_rows(20, prefix="E2E-PGTWO"))
        async with PaymentsClient(Credentials.sandbox(), base_url=sb.url) as client:
            first = await bulk_cancel(client, one, journal_path=pg_dsn, concurrency=8)
            second = await bulk_cancel(client, two, journal_path=pg_dsn, concurrency=8)
        assert first.complete
        assert second.complete
        assert not second.resumed
        assert len(_stored_per_payment(sb)) == 40
        assert _runs(pg_dsn) == 2


def test_an_edited_input_queued_again_is_refused_before_anything_is_queued(
    pg_dsn: str, tmp_path: Path
) -> None:
    """A queued run's rows are planned, not yet sent (no worker): an edited copy of its
    input would give its payments new ids; it is refused and nothing of it is queued."""
    from tests.integration.test_bulk_queue import _cli, _run

    with threaded_sandbox(SandboxConfig(processing_delay=3600)) as sb:
        rows = bulk_rows(30, prefix="E2E-QEDIT")
        first = _run(
            _cli(
                sb,
                "bulk-cancel",
                str(write_csv(tmp_path / "a.csv", rows)),
                "--queue",
                pg_dsn,
                "--no-wait",
            )
        )
        assert first.returncode == 0, first.stderr
        rows[3]["amount"] = "99.99"
        edited = _run(
            _cli(
                sb,
                "bulk-cancel",
                str(write_csv(tmp_path / "b.csv", rows)),
                "--queue",
                pg_dsn,
                "--no-wait",
            )
        )
        assert edited.returncode == 2, edited.stderr
        assert "already have a cancellation recorded" in edited.stderr
        assert "nothing was queued" in edited.stderr
        again = _run(
            _cli(sb, "bulk-cancel", str(tmp_path / "a.csv"), "--queue", pg_dsn, "--no-wait")
        )
        assert again.returncode == 0, again.stderr  # the original file resumes its run
    with psycopg.connect(pg_dsn) as conn:
        runs = conn.execute("SELECT count(*) FROM payments_bulk_runs").fetchone()
    assert runs == (1,)  # the refused run left nothing behind


def test_only_a_lost_connection_is_waited_out_not_an_answer() -> None:
    from payments_async._store import is_connection_lost

    assert is_connection_lost(psycopg.OperationalError("server closed the connection"))
    assert is_connection_lost(psycopg.errors.AdminShutdown())
    assert is_connection_lost(psycopg.InterfaceError("the connection is closed"))
    assert not is_connection_lost(psycopg.errors.DiskFull())
    assert not is_connection_lost(psycopg.errors.QueryCanceled())
    assert not is_connection_lost(psycopg.errors.DeadlockDetected())
