"""A delivery survives the inbox failing around it: one callback run per final status."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from payments_async import PaymentsClient, PaymentsError, PaymentStatus
from payments_async._constants import PACS002_PATH
from payments_async.iso20022 import summarize_status_report
from payments_async.notifications import (
    BasicAuth,
    Inbox,
    InboxItem,
    MemoryInbox,
    Notification,
    NotificationEvent,
    NotificationKind,
    NotificationReceiver,
    PostgresInbox,
    Retries,
    SqliteInbox,
    Sweep,
)
from payments_async.sandbox._notify import NotificationFaults
from tests.factories import credit_transfer
from tests.support.notifications import HOOK_PASSWORD, HOOK_USER, Stack, notifying_stack
from tests.support.sandbox import basic

SILENT = NotificationFaults(loss=1.0)  # the sandbox sends nothing: the test notifies


async def settled_payment(st: Stack) -> str:
    """A payment whose final status the service already holds."""
    s = await st.client.submit_credit_transfer(credit_transfer())
    for _ in range(200):
        report = await st.client.get_credit_transfer_status(s.payments_service_id)
        if summarize_status_report(report).is_final:
            return s.payments_service_id
        await asyncio.sleep(0.05)
    raise AssertionError("the payment never settled")


async def notify(st: Stack, psid: str) -> None:
    """The service's short notice for ``psid``, answered 202 by the receiver."""
    body = msgspec.json.encode(
        {
            "paymentsServiceId": psid,
            "statusReportMessage": f"{st.sandbox.url}{PACS002_PATH}/{psid}",
        }
    )
    headers = {"Content-Type": "application/json", "Authorization": basic(HOOK_USER, HOOK_PASSWORD)}
    status, _ = await st.receiver.handle("POST", headers, body)
    assert status == 202


def disk_full(db: sqlite3.Connection) -> None:
    """A write on a full disk, as SQLite reports it."""
    raise sqlite3.OperationalError("database or disk is full")


class FailingCompletions(SqliteInbox):
    """A SQLite inbox whose first ``failures`` completions with a delivered mark fail in
    the write itself (a full disk), as the store reports it."""

    def __init__(self, path: Path, failures: int) -> None:
        super().__init__(path)
        self.failures = failures
        self._fail_next_write = False

    async def complete(self, item: InboxItem, delivered: str | None) -> bool:
        if delivered is not None and self.failures:
            self.failures -= 1
            self._fail_next_write = True
        return await super().complete(item, delivered)

    def _submit(self, op: Callable[[Any], Any]) -> asyncio.Future[Any]:
        if self._fail_next_write:  # the disk fills under the transaction that holds it
            self._fail_next_write = False
            return super()._submit(disk_full)
        return super()._submit(op)


# The receiver says an inbox outage is over at the first success this long after its last
# failure (`NOTIFY_OUTAGE_SETTLE`, made short here; `unit/test_store.py` has the rule).
SETTLE = 0.5


async def _said(caplog: pytest.LogCaptureFixture, text: str) -> None:
    """Until ``text`` was logged (the receiver's chores succeed at least twice a second),
    10 s at most."""
    for _ in range(200):
        if text in caplog.text:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never said: {text}")


async def test_a_completion_that_cannot_be_written_never_runs_the_callback_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("payments_async.notifications._receiver.NOTIFY_OUTAGE_SETTLE", SETTLE)
    calls: list[str] = []

    async def on_status(psid: str, status: PaymentStatus) -> None:
        calls.append(psid)

    inbox = FailingCompletions(tmp_path / "inbox.db", failures=3)
    async with notifying_stack(
        inbox=inbox,
        faults=SILENT,
        on_payment_status=on_status,
        sweep=Sweep(track_submissions=False),
    ) as st:
        psid = await settled_payment(st)
        with caplog.at_level(logging.WARNING, logger="payments_async.notifications"):
            await notify(st, psid)
            await asyncio.wait_for(st.receiver.join(), 10.0)
            await _said(caplog, "the inbox can be used again after")
        assert calls == [psid]  # held while its completion was retried: never run again
        stats = st.receiver.stats
        assert (stats.callbacks, stats.delivered, stats.write_retries) == (1, 1, 3)
        assert inbox.failures == 0
        status = await inbox.status()
        assert (status.depth, status.failed, status.delivered) == (0, 0, 1)
        # One error for the outage, one line when it is over: not one per try.
        assert caplog.text.count("cannot write the delivery") == 1
        assert caplog.text.count("the inbox can be used again after") == 1
        await notify(st, psid)  # a redelivery afterwards finds the mark
        await asyncio.wait_for(st.receiver.join(), 10.0)
        assert calls == [psid]
        assert st.receiver.stats.known_final == 1


async def test_a_duplicates_completion_that_cannot_be_written_is_held_not_looped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[str] = []

    async def on_status(psid: str, status: PaymentStatus) -> None:
        calls.append(psid)

    inbox = FailingCompletions(tmp_path / "inbox.db", failures=0)
    async with notifying_stack(
        inbox=inbox,
        faults=SILENT,
        on_payment_status=on_status,
        sweep=Sweep(track_submissions=False),
    ) as st:
        psid = await settled_payment(st)
        await notify(st, psid)
        await asyncio.wait_for(st.receiver.join(), 10.0)
        inbox.failures = 2  # the duplicate's completion (mark already there) fails twice
        with caplog.at_level(logging.WARNING, logger="payments_async.notifications"):
            await notify(st, psid)
            await asyncio.wait_for(st.receiver.join(), 10.0)
        assert calls == [psid]
        stats = st.receiver.stats
        assert (stats.known_final, stats.write_retries) == (1, 2)
        # Held and written again, not released and claimed again (a traceback per pass).
        assert "could not be processed" not in caplog.text
        assert (await inbox.status()).depth == 0


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def inbox_store(request: pytest.FixtureRequest, tmp_path: Path) -> Inbox:
    if request.param == "memory":
        return MemoryInbox(100, 100)
    if request.param == "sqlite":
        return SqliteInbox(tmp_path / "inbox.db")
    return PostgresInbox(request.getfixturevalue("pg_dsn"), lease=30.0)


async def test_failed_confirming_reads_do_not_count_toward_parking_a_callback(
    inbox_store: Inbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    async def flaky(psid: str, status: PaymentStatus) -> None:
        calls.append(psid)
        if len(calls) == 1:
            raise RuntimeError("user bug, once")

    async with notifying_stack(
        inbox=inbox_store,
        faults=SILENT,
        on_payment_status=flaky,
        retries=Retries(callback_attempts=2, wait=0.05),
        sweep=Sweep(track_submissions=False),
    ) as st:
        psid = await settled_payment(st)
        read = st.client.get_credit_transfer_status
        reads_to_fail = [3]

        async def failing_read(payments_service_id: str) -> Any:
            if reads_to_fail[0]:
                reads_to_fail[0] -= 1
                raise PaymentsError("the service is unavailable")
            return await read(payments_service_id)

        monkeypatch.setattr(st.client, "get_credit_transfer_status", failing_read)
        await notify(st, psid)
        await asyncio.wait_for(st.receiver.join(), 10.0)
        stats = st.receiver.stats
        assert stats.confirm_failures == 3
        # One failed callback attempt of two: retried, not parked.
        assert calls == [psid, psid]
        assert (stats.callback_errors, stats.parked, stats.callbacks) == (1, 0, 1)
        status = await st.receiver.inbox.status()
        assert (status.depth, status.failed, status.delivered) == (0, 0, 1)


async def test_a_callback_slower_than_the_lease_runs_once_across_two_receivers(
    pg_dsn: str,
) -> None:
    lease = 0.6
    calls: list[str] = []

    async def slow(psid: str, status: PaymentStatus) -> None:
        calls.append(psid)
        await asyncio.sleep(lease * 4)  # the lease is renewed meanwhile

    async with notifying_stack(
        inbox=PostgresInbox(pg_dsn, lease=lease),
        faults=SILENT,
        on_payment_status=slow,
        sweep=Sweep(track_submissions=False),
    ) as st:
        assert st.sandbox.credentials is not None
        async with (
            PaymentsClient(st.sandbox.credentials, base_url=st.sandbox.url) as client,
            NotificationReceiver(
                client,
                auth=BasicAuth(HOOK_USER, HOOK_PASSWORD),
                inbox=PostgresInbox(pg_dsn, lease=lease),
                on_payment_status=slow,
                sweep=Sweep(track_submissions=False),
            ) as other,
        ):
            psid = await settled_payment(st)
            await notify(st, psid)
            await asyncio.wait_for(asyncio.gather(st.receiver.join(), other.join()), 15.0)
            await asyncio.sleep(lease * 2)  # nothing left for either to take
            assert calls == [psid]
            assert st.receiver.stats.delivered + other.stats.delivered == 1
            status = await st.receiver.inbox.status()
            assert (status.depth, status.delivered) == (0, 1)


# A receiver process that is given items and dies processing them: its worker's heartbeat
# stops, nothing lets its jobs go.
_DIES_PROCESSING = """
import asyncio, os, sys
from payments_async.notifications import PostgresInbox

async def main() -> None:
    inbox = PostgresInbox(sys.argv[1], lease=float(sys.argv[2]))
    await inbox.open()
    given = 0

    async def process(item) -> None:
        nonlocal given
        given += 1
        if given == int(sys.argv[3]):
            print(given, flush=True)
            os._exit(0)
        await asyncio.Event().wait()

    await inbox.serve(process, workers=int(sys.argv[3]))

asyncio.run(main())
"""


async def dies_processing(dsn: str, lease: float, count: int) -> int:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _DIES_PROCESSING, dsn, str(lease), str(count),
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), 30.0)
    assert proc.returncode == 0
    return int(out)


async def test_a_dead_receivers_items_go_to_a_live_one_once_its_heartbeat_is_stale(
    pg_dsn: str,
) -> None:
    lease = 1.0
    inbox = PostgresInbox(pg_dsn, lease=lease)
    await inbox.open()
    given: list[tuple[str, str]] = []
    all_given = asyncio.Event()

    async def process(item: InboxItem) -> None:
        given.append(item.key)
        await inbox.complete(item, None)
        if len(given) >= 20:
            all_given.set()

    try:
        for i in range(20):
            await inbox.put(Notification(f"p{i}", NotificationKind.PAYMENT, "short"))
        assert await dies_processing(pg_dsn, lease, 15) == 15
        serving = asyncio.create_task(inbox.serve(process, workers=40))
        try:
            await asyncio.wait_for(all_given.wait(), 20.0)
        finally:
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)
        # The 5 it never took, and the 15 it died with, each once.
        assert (await inbox.status()).depth == 0
        assert sorted(given) == sorted(("payment", f"p{i}") for i in range(20))
    finally:
        await inbox.aclose()


class FullDisk(SqliteInbox):
    """A SQLite inbox on a disk that is full while ``full`` is set: every write fails as
    SQLite reports it."""

    full = False

    def _submit(self, op: Callable[[Any], Any]) -> asyncio.Future[Any]:
        return super()._submit(disk_full if self.full else op)


async def test_an_inbox_that_cannot_be_written_is_said_once_per_outage_not_per_delivery(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("payments_async.notifications._receiver.NOTIFY_OUTAGE_SETTLE", SETTLE)
    inbox = FullDisk(tmp_path / "inbox.db")
    async with notifying_stack(
        inbox=inbox, faults=SILENT, sweep=Sweep(track_submissions=False)
    ) as st:
        psid = await settled_payment(st)
        body = msgspec.json.encode(
            {
                "paymentsServiceId": psid,
                "statusReportMessage": f"{st.sandbox.url}{PACS002_PATH}/{psid}",
            }
        )
        headers = {
            "Content-Type": "application/json",
            "Authorization": basic(HOOK_USER, HOOK_PASSWORD),
        }
        with caplog.at_level(logging.WARNING, logger="payments_async.notifications"):
            inbox.full = True
            for _ in range(50):  # the service redelivering while the disk is full
                status, _ = await st.receiver.handle("POST", headers, body)
                assert status == 503
            inbox.full = False
            await notify(st, psid)
            await asyncio.wait_for(st.receiver.join(), 10.0)
            await _said(caplog, "the inbox can be used again after")
        assert st.receiver.stats.store_failures == 50
        assert caplog.text.count("cannot store notifications") == 1
        assert caplog.text.count("the inbox can be used again after") == 1
        assert "(50 attempts met it)" in caplog.text
        assert (await inbox.status()).delivered == 1


class StopsAtTheMark(SqliteInbox):
    """A SQLite inbox where a "delivered" mark is never written: the process is stopped
    while it waits for it (as a kill or a stop at that instant leaves it)."""

    async def complete(self, item: InboxItem, delivered: str | None) -> bool:
        if delivered is not None:
            await asyncio.Event().wait()  # until the receiver is stopped
        return await super().complete(item, delivered)


async def test_the_first_final_event_is_handed_out_before_its_mark_and_again_after_a_stop(
    tmp_path: Path,
) -> None:
    """`listen` prints the first final event: a process stopped between it and the
    "delivered" mark prints it again after its restart (the documented window), never
    not at all."""
    events: list[NotificationEvent] = []

    async def on_event(event: NotificationEvent) -> None:
        events.append(event)

    path = tmp_path / "inbox.db"
    async with notifying_stack(
        inbox=StopsAtTheMark(path),
        faults=SILENT,
        on_event=on_event,
        sweep=Sweep(track_submissions=False),
    ) as st:
        psid = await settled_payment(st)
        await notify(st, psid)
        for _ in range(200):
            if events:
                break
            await asyncio.sleep(0.05)
        assert [(e.final, e.first) for e in events] == [(True, True)]
        await st.receiver.aclose()  # stopped between the event and the mark
        assert (await _status_of(path)).depth == 1  # no mark: it is handed out again
        again = NotificationReceiver(
            st.client,
            auth=BasicAuth(HOOK_USER, HOOK_PASSWORD),
            on_event=on_event,
            inbox=SqliteInbox(path),
            sweep=Sweep(track_submissions=False),
        )
        async with again:
            await asyncio.wait_for(again.join(), 10.0)
    assert [(e.final, e.first) for e in events] == [(True, True), (True, True)]
    status = await _status_of(path)
    assert (status.depth, status.delivered) == (0, 1)


async def _status_of(path: Path) -> Any:
    inbox = SqliteInbox(path)
    await inbox.open()
    try:
        return await inbox.status()
    finally:
        await inbox.aclose()


async def test_a_receiver_paused_past_its_lease_never_takes_its_own_items_again(
    pg_dsn: str,
) -> None:
    lease = 0.6
    inbox = PostgresInbox(pg_dsn, lease=lease)
    await inbox.open()
    given: list[tuple[str, str]] = []
    done = asyncio.Event()

    async def process(item: InboxItem) -> None:
        given.append(item.key)
        # The whole process stops (SIGSTOP, a VM pause): no heartbeat, no timer runs.
        time.sleep(lease * 3)  # noqa: ASYNC251 (the pause itself: the loop must not run)
        # Back: its heartbeat is stale, and its own look for dead receivers' jobs runs.
        await asyncio.sleep(lease * 2)
        await inbox.complete(item, None)
        done.set()

    serving = asyncio.create_task(inbox.serve(process, workers=4))
    try:
        await inbox.put(Notification("p0", NotificationKind.PAYMENT, "short"))
        await asyncio.wait_for(done.wait(), 20.0)
        await asyncio.sleep(lease * 2)  # a second run, were there one, would show by now
        assert given == [("payment", "p0")]
        assert (await inbox.status()).depth == 0
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
        await inbox.aclose()
