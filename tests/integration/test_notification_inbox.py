"""Inbox stores: one contract (fold per id, one worker per item, complete with the mark);
503s. The claiming stores (memory, SQLite) are driven by claims, the shared PostgreSQL
inbox by its jobs (`serve`)."""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import pytest

from payments_async import ConfigurationError
from payments_async._constants import PACS002_PATH
from payments_async.notifications import (
    BasicAuth,
    Inbox,
    InboxError,
    InboxFull,
    InboxItem,
    MemoryInbox,
    Notification,
    NotificationKind,
    NotificationReceiver,
    PostgresInbox,
    SqliteInbox,
)
from tests.factories import credit_transfer
from tests.support.notifications import HOOK_PASSWORD, HOOK_USER, notifying_stack
from tests.support.sandbox import basic


def notice(psid: str, kind: NotificationKind = NotificationKind.PAYMENT) -> Notification:
    return Notification(payments_service_id=psid, kind=kind, payload="short")


@pytest.fixture(params=["memory", "sqlite"])
async def inbox(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Inbox]:
    store: Inbox
    if request.param == "memory":
        store = MemoryInbox(100, 100)
    else:
        store = SqliteInbox(tmp_path / "inbox.db")
    await store.open()
    try:
        yield store
    finally:
        await store.aclose()


async def test_notifications_for_one_id_fold_into_one_item_claimed_once(inbox: Inbox) -> None:
    await inbox.put(notice("a"))
    await inbox.put(notice("a"))
    await inbox.put(notice("a", NotificationKind.CANCELLATION))
    await inbox.put(notice("b"))
    items = await inbox.claim(10)
    assert sorted(i.key for i in items) == [
        ("cancellation", "a"),
        ("payment", "a"),
        ("payment", "b"),
    ]
    assert await inbox.claim(10) == []  # held: nobody else takes them
    status = await inbox.status()
    assert (status.depth, status.failed, status.delivered) == (3, 0, 0)
    assert status.oldest_undone_at is not None


async def test_completion_writes_the_mark_once_and_a_newer_notice_keeps_the_item(
    inbox: Inbox,
) -> None:
    await inbox.put(notice("a"))
    (item,) = await inbox.claim(1)
    await inbox.put(notice("a"))  # arrives while the first is processed
    assert await inbox.complete(item, "payment:a:ACSC")
    (again,) = await inbox.claim(1)  # processed again: the read may predate it
    assert again.seq > item.seq
    assert not await inbox.is_delivered("payment:a:RJCT")
    assert await inbox.is_delivered("payment:a:ACSC")
    assert not await inbox.complete(again, "payment:a:ACSC")  # never a second first
    status = await inbox.status()
    assert (status.depth, status.delivered, status.oldest_undone_at) == (0, 1, None)


async def test_a_failing_item_waits_then_is_parked_and_a_new_notice_revives_it(
    inbox: Inbox,
) -> None:
    await inbox.put(notice("a"))
    (item,) = await inbox.claim(1)
    await inbox.retry(item, delay=0.3, park=False, error="boom 1")
    assert await inbox.claim(1) == []  # not due yet
    await asyncio.sleep(0.4)
    (item,) = await inbox.claim(1)
    assert item.attempts == 1
    await inbox.retry(item, delay=0.0, park=True, error="boom 2")
    assert await inbox.claim(1) == []
    status = await inbox.status()
    assert (status.depth, status.failed, status.last_error) == (0, 1, "boom 2")
    await inbox.put(notice("a"))
    (item,) = await inbox.claim(1)
    assert item.attempts == 0
    assert (await inbox.status()).failed == 0


async def test_a_released_item_is_claimed_again(inbox: Inbox) -> None:
    await inbox.put(notice("a"))
    (item,) = await inbox.claim(1)
    inbox.release(item)
    assert [i.key for i in await inbox.claim(1)] == [item.key]


async def test_what_a_durable_inbox_accepted_is_there_after_reopening(tmp_path: Path) -> None:
    first = SqliteInbox(tmp_path / "inbox.db")
    await first.open()
    await asyncio.gather(*(first.put(notice(f"p{i}")) for i in range(50)))
    assert first.commits < 50  # a burst shares transactions
    (item,) = await first.claim(1)
    await first.complete(item, "payment:p0:ACSC")
    await first.claim(5)  # held when the process "dies": not completed
    await first.aclose()
    second = SqliteInbox(tmp_path / "inbox.db")
    await second.open()
    try:
        assert len(await second.claim(100)) == 49
        assert await second.is_delivered("payment:p0:ACSC")
    finally:
        await second.aclose()


async def test_the_memory_inbox_is_bounded_and_keeps_a_bounded_set_of_marks() -> None:
    inbox = MemoryInbox(capacity=2, delivered_capacity=3)
    await inbox.put(notice("x"))
    await inbox.put(notice("x"))  # folded, but counted: two notifications wait
    with pytest.raises(InboxFull):
        await inbox.put(notice("y"))
    (item,) = await inbox.claim(1)
    await inbox.complete(item, None)

    async def deliver(mark: str) -> bool:
        await inbox.put(notice(mark))
        (item,) = await inbox.claim(1)
        return await inbox.complete(item, mark)

    assert [await deliver(k) for k in "abca"] == [True, True, True, False]
    assert await deliver("d")  # forgets the oldest mark: a
    assert [await inbox.is_delivered(k) for k in "abcd"] == [False, True, True, True]
    assert (await inbox.status()).delivered == 3


async def test_stores_say_what_is_wrong_without_the_password(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(InboxError, match="cannot open inbox"):
        await SqliteInbox(tmp_path / "file" / "inbox.db").open()
    not_an_inbox = tmp_path / "other.db"
    not_an_inbox.write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(InboxError):
        await SqliteInbox(not_an_inbox).open()
    dsn = "postgresql://user:s3cret-pw@127.0.0.1:1/db"
    with pytest.raises(InboxError) as info:
        await PostgresInbox(dsn).open()
    assert "s3cret-pw" not in str(info.value)
    assert "s3cret-pw" not in repr(PostgresInbox(dsn))


async def test_tracked_ids_come_due_after_their_grace_and_leave_once_delivered(
    inbox: Inbox,
) -> None:
    await inbox.track("payment", "a", check_after=0.3)
    await inbox.track("payment", "b", check_after=0.3)
    await inbox.track("payment", "a", check_after=0.0)  # tracked already: unchanged
    assert await inbox.due_tracked(10, recheck=0.3) == []
    assert (await inbox.status()).tracked == 2
    await asyncio.sleep(0.4)
    assert sorted(await inbox.due_tracked(10, recheck=0.3)) == [("payment", "a"), ("payment", "b")]
    assert await inbox.due_tracked(10, recheck=0.3) == []  # each due again only after recheck
    await inbox.put(notice("a"))
    (item,) = await inbox.claim(1)
    await inbox.complete(item, "payment:a:ACSC")  # final: no longer awaited
    await asyncio.sleep(0.4)
    assert await inbox.due_tracked(10, recheck=0.3) == [("payment", "b")]
    assert (await inbox.status()).tracked == 1


class BrokenInbox(MemoryInbox):
    """An inbox whose disk is full."""

    async def put(self, notification: Notification) -> None:
        raise InboxError("disk full")


async def test_a_store_failure_is_answered_503_so_the_service_redelivers() -> None:
    async with notifying_stack(inbox=BrokenInbox(10, 10)) as st:
        s = await st.client.submit_credit_transfer(credit_transfer())
        body = msgspec.json.encode(
            {
                "paymentsServiceId": s.payments_service_id,
                "statusReportMessage": f"{st.sandbox.url}{PACS002_PATH}/{s.payments_service_id}",
            }
        )
        headers = {
            "Content-Type": "application/json",
            "Authorization": basic(HOOK_USER, HOOK_PASSWORD),
        }
        status, answer = await st.receiver.handle("POST", headers, body)
        assert status == 503
        assert b"retry later" in answer
        assert (st.receiver.stats.store_failures, st.receiver.stats.accepted) == (1, 0)


async def test_duplicates_keep_a_failing_items_attempts_and_wait_until_it_is_parked(
    inbox: Inbox,
) -> None:
    await inbox.put(notice("a"))
    (item,) = await inbox.claim(1)
    await inbox.retry(item, delay=0.3, park=False, error="boom 1")
    await inbox.put(notice("a"))  # a duplicate while it waits
    assert await inbox.claim(1) == []  # it does not cut the wait short
    await asyncio.sleep(0.4)
    (item,) = await inbox.claim(1)
    assert item.attempts == 1  # nor start the count over
    await inbox.put(notice("a"))  # one more arrives while the callback runs
    await inbox.retry(item, delay=0.0, park=True, error="boom 2")
    assert await inbox.claim(1) == []  # parked all the same
    status = await inbox.status()
    assert (status.depth, status.failed, status.last_error) == (0, 1, "boom 2")
    await inbox.put(notice("a"))  # one after the parking tries again, from the start
    (item,) = await inbox.claim(1)
    assert item.attempts == 0


async def test_prune_deletes_only_what_is_done_and_past_retention(inbox: Inbox) -> None:
    await inbox.put(notice("done"))
    await inbox.put(notice("parked"))
    await inbox.put(notice("waiting"))
    await inbox.track("payment", "tracked", check_after=60.0)
    items = {i.notification.payments_service_id: i for i in await inbox.claim(3)}
    await inbox.complete(items["done"], "payment:done:ACSC")
    await inbox.retry(items["parked"], delay=0.0, park=True, error="boom")
    inbox.release(items["waiting"])
    assert await inbox.prune(3600.0) == 0  # nothing that old
    await asyncio.sleep(0.05)
    pruned = await inbox.prune(0.01)
    status = await inbox.status()
    assert (status.depth, status.failed, status.tracked) == (1, 1, 1)
    if isinstance(inbox, MemoryInbox):
        assert pruned == 0  # it forgets done items at once and keeps a bounded set of marks
        assert await inbox.is_delivered("payment:done:ACSC")
    else:
        assert pruned == 2  # the done item and its mark
        assert not await inbox.is_delivered("payment:done:ACSC")
        assert status.delivered == 0


async def test_a_receiver_prunes_its_inbox_when_it_starts(tmp_path: Path) -> None:
    path = tmp_path / "inbox.db"
    first = SqliteInbox(path)
    await first.open()
    await first.put(notice("a"))
    (item,) = await first.claim(1)
    await first.complete(item, "payment:a:ACSC")
    await first.aclose()
    await asyncio.sleep(0.05)
    async with notifying_stack(inbox=str(path), retention=math.inf) as st:
        await asyncio.sleep(0.2)
        assert (await st.receiver.inbox.status()).delivered == 1  # kept forever
    async with notifying_stack(inbox=str(path), retention=0.01) as st:
        for _ in range(100):
            if (await st.receiver.inbox.status()).delivered == 0:
                break
            await asyncio.sleep(0.02)
        assert (await st.receiver.inbox.status()).delivered == 0
    with pytest.raises(ConfigurationError, match="retention"):
        NotificationReceiver(st.client, auth=BasicAuth(HOOK_USER, HOOK_PASSWORD), retention=0)


async def test_a_deferred_item_waits_with_its_failed_attempts_unchanged(inbox: Inbox) -> None:
    await inbox.put(notice("a"))
    (item,) = await inbox.claim(1)
    await inbox.retry(item, delay=0.0, park=False, error="boom")  # a failed callback
    (item,) = await inbox.claim(1)
    assert item.attempts == 1
    await inbox.defer(item, delay=0.3)  # a failed confirming read
    assert await inbox.claim(1) == []  # not due yet
    await asyncio.sleep(0.4)
    (item,) = await inbox.claim(1)
    assert item.attempts == 1  # it is no failed callback
    assert (await inbox.status()).depth == 1


# --- the shared PostgreSQL inbox: its items handed out as procrastinate jobs -------------

Decide = Callable[[PostgresInbox, InboxItem], Awaitable[None]]


@dataclass
class Given:
    """What a served inbox gave its worker: each item, when, and how many at once."""

    items: list[tuple[float, InboxItem]] = field(default_factory=list)
    running: dict[tuple[str, str], int] = field(default_factory=dict)
    overlaps: int = 0
    more: asyncio.Event = field(default_factory=asyncio.Event)

    def keys(self) -> list[tuple[str, str]]:
        return [item.key for _, item in self.items]

    async def settle(self, count: int, timeout: float = 15.0) -> None:
        """Until ``count`` items were given (and a little more, for any extra one)."""
        async with asyncio.timeout(timeout):
            while len(self.items) < count:
                self.more.clear()
                await self.more.wait()
        await asyncio.sleep(0.5)


@asynccontextmanager
async def served(
    pg_dsn: str, decide: Decide, *, lease: float = 30.0, workers: int = 8
) -> AsyncIterator[tuple[PostgresInbox, Given]]:
    """An open PostgreSQL inbox whose jobs run ``decide`` (complete, retry, defer) as a
    receiver's workers do."""
    inbox = PostgresInbox(pg_dsn, lease=lease)
    await inbox.open()
    given = Given()

    async def process(item: InboxItem) -> None:
        given.items.append((time.monotonic(), item))
        given.more.set()
        given.running[item.key] = given.running.get(item.key, 0) + 1
        given.overlaps += given.running[item.key] > 1
        try:
            await decide(inbox, item)
        finally:
            given.running[item.key] -= 1

    serving = asyncio.create_task(inbox.serve(process, workers=workers))
    try:
        yield inbox, given
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
        await inbox.aclose()


async def complete(inbox: PostgresInbox, item: InboxItem) -> None:
    await inbox.complete(item, None)


async def test_postgres_items_fold_and_each_is_given_once(pg_dsn: str) -> None:
    async with served(pg_dsn, complete) as (inbox, given):
        await inbox.put(notice("a"))
        await inbox.put(notice("a"))
        await inbox.put(notice("a", NotificationKind.CANCELLATION))
        await inbox.put(notice("b"))
        await given.settle(3)
        # The second "a" is folded into its item: given again only if it came after the
        # first was taken (then its newer notice is processed), never at the same time.
        assert {("payment", "a"), ("cancellation", "a"), ("payment", "b")} == set(given.keys())
        assert given.overlaps == 0
        status = await inbox.status()
        assert (status.depth, status.failed, status.oldest_undone_at) == (0, 0, None)


async def test_postgres_one_item_is_never_processed_by_two_receivers_at_once(
    pg_dsn: str,
) -> None:
    async def slow(inbox: PostgresInbox, item: InboxItem) -> None:
        await asyncio.sleep(0.2)
        await inbox.complete(item, None)

    async with (
        served(pg_dsn, slow, workers=4) as (one, first),
        served(pg_dsn, slow, workers=4) as (two, second),
    ):
        for _ in range(6):  # notices for one id while it is being processed
            await asyncio.gather(one.put(notice("a")), two.put(notice("b")))
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.5)
        spans = sorted((t, item.key) for given in (first, second) for t, item in given.items)
        assert (first.overlaps, second.overlaps) == (0, 0)
        for key in (("payment", "a"), ("payment", "b")):
            starts = [t for t, k in spans if k == key]
            # one at a time across both receivers: each run starts after the last ended
            assert all(b - a >= 0.19 for a, b in itertools.pairwise(starts))
        assert (await one.status()).depth == 0


async def test_postgres_a_failing_item_waits_then_is_parked_and_a_new_notice_revives_it(
    pg_dsn: str,
) -> None:
    async def fail(inbox: PostgresInbox, item: InboxItem) -> None:
        park = item.attempts >= 1
        await inbox.retry(item, delay=0.5, park=park, error=f"boom {item.attempts + 1}")

    async with served(pg_dsn, fail) as (inbox, given):
        await inbox.put(notice("a"))
        await given.settle(2)
        (t1, first), (t2, second) = given.items
        assert (first.attempts, second.attempts) == (0, 1)
        assert t2 - t1 >= 0.45  # it waited
        status = await inbox.status()
        assert (status.depth, status.failed, status.last_error) == (0, 1, "boom 2")
        await inbox.put(notice("a"))  # a notice after the parking tries again, from 0
        await given.settle(3)
        assert given.items[2][1].attempts == 0


async def test_postgres_a_deferred_item_waits_with_its_attempts_unchanged(pg_dsn: str) -> None:
    async def defer_once(inbox: PostgresInbox, item: InboxItem) -> None:
        if len(given.items) == 1:
            await inbox.defer(item, delay=0.5)
        else:
            await inbox.complete(item, "payment:a:ACSC")

    async with served(pg_dsn, defer_once) as (inbox, given):
        await inbox.put(notice("a"))
        await given.settle(2)
        (t1, first), (t2, second) = given.items
        assert t2 - t1 >= 0.45
        assert second.attempts == first.attempts == 0
        assert await inbox.is_delivered("payment:a:ACSC")
        assert (await inbox.status()).depth == 0


async def test_postgres_a_duplicate_does_not_cut_a_wait_short(pg_dsn: str) -> None:
    async def fail_then_complete(inbox: PostgresInbox, item: InboxItem) -> None:
        if item.attempts == 0:
            await inbox.put(notice("a"))  # a duplicate while the callback runs
            await inbox.retry(item, delay=0.6, park=False, error="boom")
        else:
            await inbox.complete(item, None)

    async with served(pg_dsn, fail_then_complete) as (inbox, given):
        await inbox.put(notice("a"))
        await given.settle(2)
        (t1, _), (t2, second) = given.items[:2]
        assert t2 - t1 >= 0.55  # the duplicate's job waits behind the waiting one
        assert second.attempts == 1  # nor starts the count over
        assert (await inbox.status()).depth == 0


async def test_postgres_tracked_ids_and_prune(pg_dsn: str) -> None:
    async def decide(inbox: PostgresInbox, item: InboxItem) -> None:
        psid = item.notification.payments_service_id
        if psid == "done":
            await inbox.complete(item, "payment:done:ACSC")
        else:
            await inbox.retry(item, delay=0.0, park=True, error="boom")

    async with served(pg_dsn, decide) as (inbox, given):
        await inbox.track("payment", "done", check_after=0.0)
        await inbox.track("payment", "tracked", check_after=60.0)
        assert await inbox.due_tracked(10, recheck=60.0) == [("payment", "done")]
        assert await inbox.due_tracked(10, recheck=60.0) == []
        await inbox.put(notice("done"))
        await inbox.put(notice("parked"))
        await given.settle(2)
        assert await inbox.prune(3600.0) == 0
        await asyncio.sleep(0.05)
        assert await inbox.prune(0.01) == 2  # the done item and its mark
        status = await inbox.status()
        assert (status.depth, status.failed, status.tracked, status.delivered) == (0, 1, 1, 0)


@pytest.mark.parametrize("lease", [0, -1.0, math.inf, math.nan])
def test_a_postgres_lease_is_a_positive_finite_number(lease: float) -> None:
    # Renewed every lease / 3: an infinite one would never expire a dead receiver's items.
    with pytest.raises(ConfigurationError, match="lease must be a positive, finite number"):
        PostgresInbox("postgresql://127.0.0.1:1/none", lease=lease)


async def test_a_postgres_inbox_works_again_once_the_server_is_back(
    pg_dsn: str, postgres_server: object
) -> None:
    import psycopg

    from payments_async.notifications import InboxUnavailableError
    from tests.support.postgres import cut_off, restore

    inbox = PostgresInbox(pg_dsn)
    await inbox.open()
    try:
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        # Sessions ended while the server stays up: made again at once, nothing refused.
        await inbox.put(notice("a"))
        assert (await inbox.status()).depth == 1
        admin_dsn: str = postgres_server.get_uri()  # type: ignore[attr-defined]
        cut_off(pg_dsn, admin_dsn)  # the database away: refused at once, 503 meanwhile
        with pytest.raises(InboxUnavailableError, match="cannot be reached"):
            await inbox.put(notice("b"))
        with pytest.raises(InboxUnavailableError):
            await inbox.status()
        restore(pg_dsn, admin_dsn)
        await inbox.put(notice("b"))
        assert (await inbox.status()).depth == 2
    finally:
        await inbox.aclose()


async def test_a_receiver_opens_an_inbox_made_before_while_another_writes_to_it(
    pg_dsn: str,
) -> None:
    """Opening an existing PostgreSQL inbox takes no table lock: its schema's CREATE ...
    IF NOT EXISTS would take a SHARE lock on each table, wait for a receiver writing them
    and, as that receiver completes an item in another table order, deadlock with it (a
    restarted receiver then exited before serving)."""
    import psycopg

    first = PostgresInbox(pg_dsn)
    await first.open()
    await first.aclose()
    with psycopg.connect(pg_dsn) as writer:  # a transaction holding each table, not committed
        writer.execute("INSERT INTO payments_notify_delivered VALUES ('k', 0)")
        writer.execute("UPDATE payments_notify_inbox SET attempts = attempts")
        writer.execute("UPDATE payments_notify_tracked SET next_check = next_check")
        second = PostgresInbox(pg_dsn)
        # A lock wait would last as long as the writer's transaction: here, for ever.
        await asyncio.wait_for(second.open(), timeout=30)
        await second.aclose()
        writer.rollback()
