"""``poll_until_final``: the poll loop over callables, for tests of ``Poll.run`` alone."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from payments_async._models import Submission
from payments_async._polling import Chase, Poll, PollPolicy
from payments_async.iso20022.codes import Outcome

T = TypeVar("T")


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class _CallablePoll(Poll[T]):
    """A ``Poll`` whose read, classification and peek are callables."""

    __slots__ = ("_fetch", "_peek", "_status_of")

    def __init__(
        self,
        fetch: Callable[[], Awaitable[T]],
        status_of: Callable[[T], tuple[Outcome, tuple[str, ...]]],
        peek: Callable[[], T | None] | None,
        payments_service_id: str,
        **options: Any,
    ) -> None:
        super().__init__(payments_service_id, **options)
        self._fetch = fetch
        self._status_of = status_of
        self._peek = peek

    def fetch(self) -> Awaitable[T]:
        return self._fetch()

    def status_of(self, result: T) -> tuple[Outcome, tuple[str, ...]]:
        return self._status_of(result)

    def peek(self) -> T | None:
        return self._peek() if self._peek is not None else None


class _EventSource:
    """A ``NotificationSource`` over one ``asyncio.Event`` (``poll_until_final``'s ``wake``).

    A set event wakes the sleeping waiter and is cleared; one set before the sleep ends
    the sleep at once.
    """

    __slots__ = ("_event", "_relay")

    def __init__(self, event: asyncio.Event) -> None:
        self._event = event
        self._relay: asyncio.Task[None] | None = None

    def watch(self, payments_service_id: str, waiter: asyncio.Future[None]) -> None:
        if self._event.is_set():
            self._event.clear()
            waiter.set_result(None)
        else:
            self._relay = asyncio.ensure_future(self._wake(waiter))

    async def _wake(self, waiter: asyncio.Future[None]) -> None:
        await self._event.wait()
        self._event.clear()
        _expire(waiter)

    def unwatch(self, payments_service_id: str, waiter: asyncio.Future[None]) -> None:
        relay, self._relay = self._relay, None
        if relay is not None:
            relay.cancel()

    def confirmed(self, payments_service_id: str, kind: str) -> object | None:
        return None

    async def submitted(self, submission: Submission, path: str) -> None:
        return None


async def poll_until_final(
    fetch: Callable[[], Awaitable[T]],
    status_of: Callable[[T], tuple[Outcome, tuple[str, ...]]],
    *,
    payments_service_id: str,
    timeout: float,
    policy: PollPolicy,
    what: str,
    rng: random.Random | None = None,
    wake: asyncio.Event | None = None,
    peek: Callable[[], T | None] | None = None,
    chase: Chase | None = None,
) -> T:
    """``Poll.run`` with the read and its classification given as callables.

    Args:
        fetch: one read of the status (it applies its own retries).
        status_of: ``(outcome, raw codes)`` of a result, the group code first.
        payments_service_id: the id polled, for errors and logs.
        timeout: overall deadline in seconds.
        policy: the interval schedule.
        what: a word for logs ("cancellation outcome").
        rng: random source for the jitter.
        wake: set when this id's final status is confirmed; with it, the first poll waits
            one interval (polling is then the safety net) and every wait ends early when
            it is set (then it is cleared).
        peek: a final result known without a read (a confirmed notification), or None.
        chase: ``(quiet period, send)``: what the wait sends after each quiet period.

    Raises:
        PollTimeoutError: the deadline passed first; carries every raw code seen.
    """
    poll = _CallablePoll(
        fetch,
        status_of,
        peek,
        payments_service_id,
        timeout=timeout,
        policy=policy,
        what=what,
        rng=rng,
        source=_EventSource(wake) if wake is not None else None,
        chase=chase,
    )
    return await poll.run()
