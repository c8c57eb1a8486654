"""The slim waiter: one ``Poll`` object, one future registered with the source, one timer.

No timing is asserted: these check what a sleeping waiter holds and that every way out of
a sleep (a wake, a timer, a cancellation) leaves nothing registered behind.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections import Counter
from typing import Any

import pytest

from payments_async import Credentials, PaymentsClient, PollPolicy
from payments_async._polling import Poll
from payments_async.iso20022 import Outcome
from payments_async.notifications import BasicAuth, NotificationReceiver

SLOW = PollPolicy(initial=20, maximum=20, jitter=0.0)


class Source:
    """A ``NotificationSource`` that records what the waiters register."""

    def __init__(self) -> None:
        self.watching: dict[str, list[asyncio.Future[None]]] = {}
        self.calls: list[tuple[str, str, asyncio.Future[None]]] = []
        self.final: dict[str, object] = {}

    def watch(self, payments_service_id: str, waiter: asyncio.Future[None]) -> None:
        self.calls.append(("watch", payments_service_id, waiter))
        self.watching.setdefault(payments_service_id, []).append(waiter)

    def unwatch(self, payments_service_id: str, waiter: asyncio.Future[None]) -> None:
        self.calls.append(("unwatch", payments_service_id, waiter))
        waiters = self.watching.get(payments_service_id, [])
        if waiter in waiters:
            waiters.remove(waiter)
        if not waiters:
            self.watching.pop(payments_service_id, None)

    def confirmed(self, payments_service_id: str, kind: str) -> object | None:
        return self.final.get(payments_service_id)

    def confirm(self, payments_service_id: str, result: object) -> None:
        self.final[payments_service_id] = result
        for waiter in self.watching.pop(payments_service_id, []):
            waiter.set_result(None)


class Read:
    """A status read (weak-referenceable, to see who keeps it)."""

    def __init__(self, code: str) -> None:
        self.code = code


class ScriptedPoll(Poll[Read]):
    __slots__ = ("entered", "gate", "reads", "source")

    def __init__(self, source: Source | None, **options: Any) -> None:
        options.setdefault("policy", SLOW)
        super().__init__("x", timeout=60, what="test", source=source, **options)
        self.source = source
        self.reads: list[weakref.ref[Read]] = []
        self.gate: asyncio.Event | None = None
        self.entered = asyncio.Event()

    async def fetch(self) -> Read:
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        read = Read("PEND")
        self.reads.append(weakref.ref(read))
        return read

    def status_of(self, result: Read) -> tuple[Outcome, tuple[str, ...]]:
        return (Outcome.ACCEPTED if result.code == "ACCC" else Outcome.PENDING), (result.code,)

    def peek(self) -> Read | None:
        if self.source is None:
            return None
        found = self.source.confirmed("x", "cancellation")
        return found if isinstance(found, Read) else None


def _timers_of(waiter: asyncio.Future[None]) -> list[asyncio.TimerHandle]:
    loop = asyncio.get_running_loop()
    return [h for h in loop._scheduled if waiter in h._args]  # type: ignore[attr-defined]


async def _until(predicate: Any) -> None:
    for _ in range(100):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError("never happened")


async def test_a_sleeping_waiter_is_one_future_at_the_source_and_one_timer() -> None:
    source = Source()
    poll = ScriptedPoll(source)
    task = asyncio.create_task(poll.run())
    await _until(lambda: source.watching)
    (waiter,) = source.watching["x"]
    (timer,) = _timers_of(waiter)
    assert not timer.cancelled()
    source.confirm("x", final := Read("ACCC"))
    assert await task is final
    assert poll.reads == []  # woken with a confirmed result: no read at all
    assert source.calls == [("watch", "x", waiter), ("unwatch", "x", waiter)]
    assert timer.cancelled()  # the safety-net timer does not outlive the wake


async def test_a_status_confirmed_during_a_read_is_returned_without_sleeping() -> None:
    source = Source()
    poll = ScriptedPoll(source, policy=PollPolicy(initial=0.001, maximum=20, multiplier=1e4))
    poll.gate = asyncio.Event()
    task = asyncio.create_task(poll.run())
    # the first (short) sleep ends by its timer; the read then waits at the gate
    await asyncio.wait_for(poll.entered.wait(), 5)
    source.final["x"] = final = Read("ACCC")  # confirmed meanwhile, nobody registered
    poll.gate.set()
    assert await asyncio.wait_for(task, 5) is final  # not after the 20 s interval
    assert [c[0] for c in source.calls] == ["watch", "unwatch"]


async def test_cancelling_a_sleeping_waiter_unregisters_it_at_once() -> None:
    source = Source()
    task = asyncio.create_task(ScriptedPoll(source).run())
    await _until(lambda: source.watching)
    (waiter,) = source.watching["x"]
    (timer,) = _timers_of(waiter)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert source.watching == {}
    assert source.calls[-1] == ("unwatch", "x", waiter)
    assert timer.cancelled()


async def test_a_polling_waiter_does_not_keep_its_last_read_while_it_sleeps() -> None:
    poll = ScriptedPoll(None)
    task = asyncio.create_task(poll.run())
    await _until(lambda: poll.reads)
    await asyncio.sleep(0)
    assert poll.reads[0]() is None  # only its codes are kept (for the timeout error)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_the_receiver_wakes_every_waiter_of_an_id_and_forgets_them() -> None:
    client = PaymentsClient(Credentials.sandbox(), base_url="http://127.0.0.1:9")
    try:
        receiver = NotificationReceiver(client, auth=BasicAuth("u", "a-long-password"))
        loop = asyncio.get_running_loop()
        a, b, c, other = (loop.create_future() for _ in range(4))
        receiver.watch("x", a)
        receiver.watch("x", b)
        receiver.watch("x", c)
        receiver.watch("y", other)
        receiver.unwatch("x", b)
        receiver.waiters.wake("x")
        assert a.done()
        assert c.done()
        assert not b.done()  # unwatched before the wake
        assert not other.done()
        assert len(receiver.waiters) == 1  # only "y" sleeps
        receiver.unwatch("x", a)  # a woken waiter unwatching finds nothing: no error
        receiver.unwatch("y", other)
        assert len(receiver.waiters) == 0
    finally:
        await client.aclose()


async def test_a_waiter_with_a_receiver_holds_a_dozen_tracked_objects() -> None:
    # With a receiver attached a waiter starts by sleeping (no request is sent), so what
    # it holds can be counted without a server: the collector's work per waiter.
    client = PaymentsClient(Credentials.sandbox(), base_url="http://127.0.0.1:9")
    receiver = NotificationReceiver(client, auth=BasicAuth("u", "a-long-password"))
    await receiver.start()
    n = 1000
    try:
        gc.collect()
        before = Counter(type(o).__qualname__ for o in gc.get_objects())
        tasks = [
            asyncio.create_task(client.wait_for_cancellation_outcome(f"cxl-{i:04d}"))
            for i in range(n)
        ]
        await _until(lambda: len(receiver.waiters) == n)
        gc.collect()
        after = Counter(type(o).__qualname__ for o in gc.get_objects())
        grown = after - before
        per_waiter = sum(grown.values()) / n
        # the Task, its context and weak reference included; it was 35 with closures,
        # cells, an Event, a schedule generator and five nested coroutines
        assert per_waiter <= 16, grown.most_common(12)
        for kind in ("cell", "function", "generator", "Event", "Timeout", "deque", "set"):
            assert grown[kind] < n // 10, (kind, grown[kind])
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert len(receiver.waiters) == 0
    finally:
        await receiver.aclose()
        await client.aclose()
