"""A PostgreSQL journal's run lock outlives the run's connections: a session of the run
that is ended takes its lock again before the run writes anything more, and when another
session took it meanwhile the run stops with `JournalBusyError`, sending nothing twice."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import Counter
from pathlib import Path

import psycopg
import pytest

from payments_async import Credentials, PaymentsClient
from payments_async._constants import SANDBOX_CLIENT_ID
from payments_async.bulk import JournalBusyError, PlannedRow, bulk_cancel
from payments_async.bulk._stores._postgres import PostgresJournal
from payments_async.sandbox import SandboxConfig
from tests.support.cli import ThreadedSandbox, bulk_rows, threaded_sandbox, write_csv

ROWS = 300
_OTHER_RUN = "payments-async run 4242@1700000000@otherhost"  # how a run names its session

_HELD = """
SELECT l.pid, l.classid::bigint, l.objid::bigint
  FROM pg_locks l JOIN pg_stat_activity a USING (pid)
 WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
   AND a.datname = current_database() AND a.application_name LIKE %s
"""


def _held(dsn: str) -> list[tuple[int, int, int]]:
    """``(pid, classid, objid)`` of every advisory lock this process's runs hold."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        found = conn.execute(_HELD, (f"payments-async run {os.getpid()}@%",)).fetchall()
    return [(int(p), int(c), int(o)) for p, c, o in found]


def _end_sessions(dsn: str, pids: set[int]) -> None:
    """End the sessions (as an administrator would) and wait until they are gone."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for pid in pids:
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        deadline = time.monotonic() + 10
        while conn.execute(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (list(pids),)
        ).fetchone() != (0,):
            assert time.monotonic() < deadline, "the sessions did not end"
            time.sleep(0.01)


def _grab(dsn: str, locks: set[tuple[int, int]]) -> psycopg.Connection[tuple[object, ...]]:
    """Take ``locks`` on a session named like another run's; they last while it is open."""
    conn = psycopg.connect(dsn, autocommit=True, application_name=_OTHER_RUN)
    for classid, objid in locks:
        got = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (classid, objid)).fetchone()
        assert got == (True,)
    return conn


def _queue_for(
    dsn: str, locks: set[tuple[int, int]]
) -> tuple[list[psycopg.Connection[tuple[object, ...]]], list[threading.Thread]]:
    """Wait for ``locks`` on sessions named like another run's (one per lock, each asking
    in a thread of its own), and return once every request is queued in the server."""
    conns, waits = [], []
    for classid, objid in locks:
        conn = psycopg.connect(dsn, autocommit=True, application_name=_OTHER_RUN)
        wait = threading.Thread(
            target=conn.execute, args=("SELECT pg_advisory_lock(%s, %s)", (classid, objid))
        )
        wait.start()
        conns.append(conn)
        waits.append(wait)
    with psycopg.connect(dsn, autocommit=True) as probe:
        deadline = time.monotonic() + 10
        while probe.execute(
            "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        ).fetchone() != (len(locks),):
            assert time.monotonic() < deadline, "the requests were never queued"
            time.sleep(0.01)
    return conns, waits


def _state(dsn: str, line: int) -> tuple[str, int]:
    with psycopg.connect(dsn) as conn:
        rec = conn.execute(
            "SELECT state, attempts FROM payments_bulk_rows WHERE line = %s", (line,)
        ).fetchone()
    assert rec is not None
    return str(rec[0]), int(rec[1])


def _planned_journal(dsn: str) -> PostgresJournal:
    journal = PostgresJournal.open(dsn, input_sha256="c" * 64, new_run_id="R-LOCK")
    journal.plan(PlannedRow(i, f"E2E-L-{i}", f"BL-{i}", f"CL-{i}", b"{}") for i in range(1, 4))
    return journal


async def test_an_ended_session_takes_the_run_lock_again_before_the_next_write(
    pg_dsn: str,
) -> None:
    journal = _planned_journal(pg_dsn)
    try:
        await journal.mark_sent(1)
        before = _held(pg_dsn)
        assert before, "the run holds no lock"
        _end_sessions(pg_dsn, {pid for pid, _, _ in before})

        await journal.mark_sent(2)
        assert _held(pg_dsn), "the run writes without its lock"
        assert _state(pg_dsn, 2) == ("sent", 1)
        journal.state_counts()  # a read reconnects the reading session too
        after = _held(pg_dsn)
        assert {(c, o) for _, c, o in after} == {(c, o) for _, c, o in before}
        assert not {pid for pid, _, _ in after} & {pid for pid, _, _ in before}
    finally:
        await journal.aclose()


async def test_a_lock_taken_by_another_session_meanwhile_stops_the_run(pg_dsn: str) -> None:
    journal = _planned_journal(pg_dsn)
    try:
        await journal.mark_sent(1)
        before = _held(pg_dsn)
        _end_sessions(pg_dsn, {pid for pid, _, _ in before})
        other = _grab(pg_dsn, {(c, o) for _, c, o in before})
        try:
            with pytest.raises(JournalBusyError) as caught:
                await journal.mark_sent(2)
            said = str(caught.value)
            assert "taken by another run (pid 4242 on otherhost, since 2023-11-14" in said
            assert "this run stopped and every change it made is kept" in said
            assert "nothing was sent" not in said
            assert caught.value.holder.startswith("pid 4242 on otherhost")
            assert _state(pg_dsn, 2) == ("planned", 0)  # nothing written without the lock
            with pytest.raises(JournalBusyError):
                journal.state_counts()
        finally:
            other.close()
    finally:
        await journal.aclose()


class _TakeOver(threading.Thread):
    """Once ``n`` rows are stored, end the run's locking sessions and take their locks
    from another session, kept until `release`."""

    def __init__(self, sb: ThreadedSandbox, dsn: str, n: int) -> None:
        super().__init__()
        self._args = (sb, dsn, n)
        self.error: BaseException | None = None
        self._others: list[psycopg.Connection[tuple[object, ...]]] = []

    def run(self) -> None:
        sb, dsn, n = self._args
        try:
            deadline = time.monotonic() + 60
            while sb.stats()["cancellations_stored"] < n:
                assert time.monotonic() < deadline, "the run never got going"
                time.sleep(0.01)
            held = _held(dsn)
            assert held, "the run holds no lock"
            # Queued behind the run's sessions, the other run's get the locks as those end,
            # before the run, which reconnects at once, asks for them again.
            self._others, waits = _queue_for(dsn, {(c, o) for _, c, o in held})
            _end_sessions(dsn, {pid for pid, _, _ in held})
            for wait in waits:
                wait.join(10)
                assert not wait.is_alive(), "the other run never got the lock"
        except BaseException as exc:  # raised again by the test
            self.error = exc

    async def finished(self) -> None:
        await asyncio.to_thread(self.join, 30)
        if self.error is not None:
            raise self.error

    def release(self) -> None:
        for other in self._others:
            other.close()


async def test_a_run_whose_lock_was_taken_mid_run_stops_and_sends_nothing_twice(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = SandboxConfig(processing_delay=3600, settlement_delay=1.5)
    with threaded_sandbox(config) as sb:
        src = write_csv(tmp_path / "taken.csv", bulk_rows(ROWS, prefix="E2E-PGTAKEN"))
        takeover = _TakeOver(sb, pg_dsn, ROWS // 3)
        takeover.start()
        try:
            async with PaymentsClient(Credentials.sandbox(), base_url=sb.url) as client:
                with pytest.raises(JournalBusyError) as caught:
                    await bulk_cancel(client, src, journal_path=pg_dsn, concurrency=8)
                await takeover.finished()
                assert "pid 4242 on otherhost" in str(caught.value)
                stopped_at = sb.stats()["cancellations_stored"]
                assert stopped_at < ROWS
                takeover.release()
                again = await bulk_cancel(client, src, journal_path=pg_dsn, concurrency=8)
        finally:
            takeover.release()
        assert again.resumed
        assert again.complete
        assert again.totals["rejected"] == ROWS
        stored = [c for c in sb.cancellations() if c.client_id == SANDBOX_CLIENT_ID]
        per_payment = Counter(c.original_end_to_end_id for c in stored)
        assert len(per_payment) == ROWS
        assert max(per_payment.values()) == 1
        assert sb.stats()["replays_changed_body"] == 0


async def test_a_lock_its_own_lost_session_still_holds_is_taken_back(pg_dsn: str) -> None:
    # The server has not noticed the run's old connection is gone (a network reset): its
    # session still holds the locks under this process's name. A reconnect ends it and
    # takes them; a first open (not a reconnect) is still refused.
    from payments_async.bulk._stores._run_lock import lock_run, lock_writer

    run_id = "lost-session-run"
    old = psycopg.connect(pg_dsn, autocommit=True)
    old_async = await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True)
    new = psycopg.connect(pg_dsn, autocommit=True)
    new_async = await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True)
    try:
        lock_run(old, run_id)
        await lock_writer(old_async, run_id)
        with pytest.raises(JournalBusyError):
            lock_run(new, run_id)  # not a reconnect: another session of ours may run it
        lost = {pid for pid, _, _ in _held(pg_dsn)}
        assert len(lost) == 2
        lock_run(new, run_id, again=True)
        await lock_writer(new_async, run_id, again=True)
        held = {pid for pid, _, _ in _held(pg_dsn)}
        assert held == {new.info.backend_pid, new_async.info.backend_pid}
        with pytest.raises(psycopg.OperationalError):
            old.execute("SELECT 1")  # its session was ended
    finally:
        for conn in (old, new):
            conn.close()
        for aconn in (old_async, new_async):
            await aconn.close()


def test_a_lock_another_run_holds_is_not_taken_on_a_reconnect(pg_dsn: str) -> None:
    from payments_async.bulk._stores._run_lock import RUN_LOCK, _key, lock_run

    other = _grab(pg_dsn, {(RUN_LOCK, _key("other-run"))})
    mine = psycopg.connect(pg_dsn, autocommit=True)
    try:
        with pytest.raises(JournalBusyError, match="4242"):
            lock_run(mine, "other-run", again=True)
        assert other.execute("SELECT 1").fetchone() == (1,)  # left alone
    finally:
        mine.close()
        other.close()
