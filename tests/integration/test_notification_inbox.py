"""Inbox stores: one contract (fold per id, claim once, complete with the mark); 503s."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
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
    MemoryInbox,
    Notification,
    NotificationKind,
    NotificationReceiver,
    PostgresInbox,
    SqliteInbox,
    open_inbox,
)
from tests.factories import credit_transfer
from tests.support.notifications import HOOK_PASSWORD, HOOK_USER, notifying_stack
from tests.support.sandbox import basic


def notice(psid: str, kind: NotificationKind = NotificationKind.PAYMENT) -> Notification:
    return Notification(payments_service_id=psid, kind=kind, payload="short")


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def inbox(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Inbox]:
    store: Inbox
    if request.param == "memory":
        store = MemoryInbox(100, 100)
    elif request.param == "sqlite":
        store = open_inbox(tmp_path / "inbox.db")
    else:
        store = open_inbox(request.getfixturevalue("pg_dsn"), lease=30.0)
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
    if isinstance(inbox, PostgresInbox):
        pytest.skip("a shared inbox lets go of its items on close or lease expiry")
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


async def test_postgres_receivers_never_hold_the_same_item(pg_dsn: str) -> None:
    one, two = PostgresInbox(pg_dsn, lease=0.5), PostgresInbox(pg_dsn, lease=0.5)
    await one.open()
    await two.open()
    try:
        for i in range(20):
            await one.put(notice(f"p{i}"))
        a, b = await asyncio.gather(one.claim(15), two.claim(15))
        keys = [i.key for i in a] + [i.key for i in b]
        assert len(keys) == len(set(keys)) == 20
        await asyncio.sleep(0.7)  # past the lease: both are alive and renew what they hold
        assert await two.claim(40) == []
        # What a dead receiver held comes back once its lease expires: see
        # test_notification_inbox_faults.py, with a receiver process that really dies.
    finally:
        await one.aclose()
        await two.aclose()


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
        assert [i.key for i in await inbox.claim(5)] == [("payment", "a")]
        admin_dsn: str = postgres_server.get_uri()  # type: ignore[attr-defined]
        cut_off(pg_dsn, admin_dsn)  # the database away: refused at once, 503 meanwhile
        with pytest.raises(InboxUnavailableError, match="cannot be reached"):
            await inbox.put(notice("b"))
        with pytest.raises(InboxUnavailableError):
            await inbox.claim(5)
        restore(pg_dsn, admin_dsn)
        await inbox.put(notice("b"))
        assert [i.key for i in await inbox.claim(5)] == [("payment", "b")]
    finally:
        await inbox.aclose()


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


@pytest.mark.parametrize("lease", [0, -1.0, math.inf, math.nan])
def test_a_postgres_lease_is_a_positive_finite_number(lease: float) -> None:
    # Renewed every lease / 3: an infinite one would never expire a dead receiver's items.
    with pytest.raises(ConfigurationError, match="lease must be a positive, finite number"):
        PostgresInbox("postgresql://127.0.0.1:1/none", lease=lease)


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
