"""Polling until a final status: the schedule (pure) and one loop shared by both waiters."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from ._config import Timeout
from ._constants import (
    POLL_INITIAL,
    POLL_JITTER,
    POLL_MAX,
    POLL_MULTIPLIER,
    POLL_NOT_FOUND_GRACE,
)
from ._errors import (
    ConfigurationError,
    NotFoundError,
    OutcomeUnknownError,
    PaymentsError,
    PollTimeoutError,
    TransportError,
)
from ._instrument import Call
from ._models import Submission
from ._operation import Operation
from ._pipeline import Pipeline
from ._retry import is_retryable
from .iso20022.codes import Outcome

__all__ = ["Chase", "MessagePoll", "NotificationSource", "Poll", "PollPolicy", "Summary"]

T = TypeVar("T")
M = TypeVar("M")
logger = logging.getLogger("payments_async")


@dataclass(frozen=True, slots=True)
class PollPolicy:
    """How a waiter polls (named defaults in ``_constants``).

    Args:
        initial: the first interval in seconds.
        maximum: the largest interval in seconds.
        multiplier: growth of the interval after each poll.
        jitter: relative jitter applied to each interval (0.1 = +-10%), so thousands of
            waiters started together spread out instead of polling in lockstep.
        not_found_grace: seconds after the wait starts during which a 404 means "not
            visible yet" rather than "unknown id".
    """

    initial: float = POLL_INITIAL
    maximum: float = POLL_MAX
    multiplier: float = POLL_MULTIPLIER
    jitter: float = POLL_JITTER
    not_found_grace: float = POLL_NOT_FOUND_GRACE

    def __post_init__(self) -> None:
        for name in ("initial", "maximum", "multiplier", "jitter", "not_found_grace"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigurationError(
                    f"PollPolicy.{name} must be a number, got {type(value).__name__}"
                )
            if value != value or value in (float("inf"), float("-inf")):
                raise ConfigurationError(f"PollPolicy.{name} must be finite")
        if self.initial <= 0 or self.maximum < self.initial:
            raise ConfigurationError("PollPolicy needs 0 < initial <= maximum")
        if self.multiplier < 1:
            raise ConfigurationError("PollPolicy.multiplier must be >= 1")
        if not 0 <= self.jitter < 1:
            raise ConfigurationError("PollPolicy.jitter must be in [0, 1)")
        if self.not_found_grace < 0:
            raise ConfigurationError("PollPolicy.not_found_grace must be >= 0")

    def intervals(self, rng: random.Random) -> Iterator[float]:
        """The (endless) sequence of sleeps between polls."""
        base = self.initial
        while True:
            interval, base = self._next(base, rng)
            yield interval

    def _next(self, base: float, rng: random.Random) -> tuple[float, float]:
        """The sleep drawn around ``base``, and the base after it."""
        spread = base * self.jitter
        return max(0.0, base + rng.uniform(-spread, spread)), min(
            self.maximum, base * self.multiplier
        )


class NotificationSource(Protocol):
    """What the waiters know of a notification receiver: wake-ups and confirmed results."""

    def watch(self, payments_service_id: str, waiter: asyncio.Future[None]) -> None:
        """Complete ``waiter`` (result None) once a final status of this id is confirmed.

        The source forgets a waiter once it has completed it.
        """
        ...

    def unwatch(self, payments_service_id: str, waiter: asyncio.Future[None]) -> None:
        """Forget a waiter passed to ``watch`` (nothing happens if it is already gone)."""
        ...

    def confirmed(self, payments_service_id: str, kind: str) -> object | None:
        """The confirmed final message (Pacs002 or Camt029) of this id, if known."""
        ...

    async def submitted(self, submission: Submission, path: str) -> None:
        """The client's submission POSTed to ``path`` was accepted; never raises."""
        ...


_NO_OPERATION = contextlib.nullcontext()

Chase = tuple[float, Callable[[float], Awaitable[object]]]
"""A waiter's chase: the quiet period in seconds, and what one chase sends, given the
seconds left to the wait's deadline."""


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class Poll(Generic[T]):
    """One waiter: the state of its poll loop.

    Each sleep is one future, completed by a timer or by the notification source (if
    any), whichever comes first. Subclasses give ``fetch``, ``status_of`` and, with a
    source, ``peek``.

    Args:
        payments_service_id: the id polled, for errors and logs (and the source).
        timeout: overall deadline in seconds.
        policy: the interval schedule.
        what: a word for logs ("cancellation outcome").
        rng: random source for the jitter (a new ``random.Random`` when needed, if None).
        source: a notification receiver; with it, the first poll waits one interval
            (polling is then the safety net) and each wait ends early when the source
            confirms a final status for the id.
        chase: ``(quiet period, send)``: after each quiet period without a final
            outcome, ``send`` is awaited once (see `run`); None: never.
    """

    __slots__ = ("_chase", "_id", "_policy", "_rng", "_source", "_timeout", "_what")

    def __init__(
        self,
        payments_service_id: str,
        *,
        timeout: float,
        policy: PollPolicy,
        what: str,
        rng: random.Random | None = None,
        source: NotificationSource | None = None,
        chase: Chase | None = None,
    ) -> None:
        self._chase = chase
        self._id = payments_service_id
        self._timeout = timeout
        self._policy = policy
        self._what = what
        self._rng = rng
        self._source = source

    def fetch(self) -> Awaitable[T]:
        """One read of the status (it applies its own retries)."""
        raise NotImplementedError

    def status_of(self, result: T) -> tuple[Outcome, tuple[str, ...]]:
        """``(outcome, raw codes)`` of a result, the group code first."""
        raise NotImplementedError

    def peek(self) -> T | None:
        """A final result known without a read (a confirmed notification), or None."""
        return None

    def operation(self) -> AbstractContextManager[object]:
        """Entered around the whole wait (the instruments' operation scope); none here."""
        return _NO_OPERATION

    def settled(self, result: T) -> T:
        """``result``, the wait's answer, as it is returned (subclasses record it)."""
        return result

    async def run(self) -> T:
        """Call ``fetch`` until its outcome is settled, or raise when the timeout passes.

        Settled means ACCEPTED or REJECTED, or UNKNOWN (codes that cannot be classified, or
        that contradict each other) read twice in a row with the same codes: such an answer
        is returned at once for the caller to see, not polled to the deadline. An answer
        without any code counts as pending.

        Transient errors (the same ones a request retries on) and a 404 within the grace
        period are logged and polled again; any other error propagates at once. Cancelling
        the awaiting task stops polling immediately: the only await points are the fetch,
        the chase and the sleep, all cancellable.

        With a chase, a read that is not final once the quiet period has passed since the
        start (or since the last chase) is followed by one chase, and the next one is due
        a quiet period later: never more than one per quiet period, and none once the
        deadline has passed. A chase failing for a passing reason (retryable, an unknown
        outcome, or not sent at all) is logged; any other error propagates.

        Raises:
            PollTimeoutError: the deadline passed first; carries every raw code seen.
        """
        with self.operation():
            policy = self._policy
            source = self._source
            start = time.monotonic()
            deadline = start + self._timeout
            last_status: str | None = None
            seen: dict[str, None] | None = None  # every raw code, in the order first seen
            unknown: tuple[str, ...] | None = None  # the codes of the previous read, if UNKNOWN
            failed: PaymentsError | None = None  # the last read's error, until one is answered
            polls = 0
            base = policy.initial  # the schedule's next base interval (``PollPolicy.intervals``)
            first_sleeps = source is not None  # with a source, polling is the safety net
            chase = self._chase
            chase_at = start + chase[0] if chase is not None else float("inf")
            while True:
                interval, base = policy._next(base, self._jitter())
                early = self.peek()
                if early is not None:
                    return self.settled(early)
                if first_sleeps:
                    first_sleeps = False
                    pause = min(interval, self._timeout)
                else:
                    polls += 1
                    try:
                        result = await self.fetch()
                    except NotFoundError:
                        if time.monotonic() - start > policy.not_found_grace:
                            raise
                        failed = None
                        logger.debug("poll %s %s: not visible yet", self._what, self._id)
                    except Exception as exc:
                        # A read the wait's deadline left no time to send ends the wait
                        # as the deadline does (below); other errors as they are.
                        unsent = isinstance(exc, TransportError) and not exc.request_sent
                        if not is_retryable(exc) and not (unsent and time.monotonic() >= deadline):
                            raise
                        failed = exc if isinstance(exc, PaymentsError) else None
                        logger.debug("poll %s %s: transient %s", self._what, self._id, exc)
                    else:
                        failed = None
                        outcome, codes = self.status_of(result)
                        if codes:
                            if seen is None:
                                seen = {}
                            seen.update(dict.fromkeys(codes))
                        last_status = codes[0] if codes else None
                        logger.debug(
                            "poll %s %s: #%d codes=%s outcome=%s",
                            self._what,
                            self._id,
                            polls,
                            codes,
                            outcome.value,
                        )
                        if outcome.is_final:
                            return self.settled(result)
                        if outcome is Outcome.UNKNOWN and codes:
                            if codes == unknown:
                                # the same unclassifiable answer twice: surface it
                                return self.settled(result)
                            unknown = codes
                        else:
                            unknown = None
                        del result  # not kept while sleeping
                        if chase is not None and chase_at <= time.monotonic() < deadline:
                            await self._chase_once(chase[1], deadline)
                            chase_at = time.monotonic() + chase[0]
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    if source is not None:
                        early = self.peek()  # confirmed while the read was in flight
                        if early is not None:
                            return self.settled(early)
                    pause = min(interval, remaining)
                    # Wake for a chase when it falls due. One already due waits for the
                    # next read that answers (it follows a read): the schedule holds.
                    if chase is not None and (due := chase_at - time.monotonic()) > 0:
                        pause = min(pause, due)
                # One future, completed by the timer or by the source, whichever comes first.
                loop = asyncio.get_running_loop()
                waiter: asyncio.Future[None] = loop.create_future()
                timer = loop.call_later(pause, _expire, waiter)
                if source is not None:
                    source.watch(self._id, waiter)
                try:
                    await waiter
                finally:
                    timer.cancel()
                    if source is not None:
                        source.unwatch(self._id, waiter)
            raise PollTimeoutError(
                f"no final {self._what} after {self._timeout:g}s and {polls} polls",
                payments_service_id=self._id,
                last_status=last_status,
                statuses=tuple(seen) if seen is not None else (),
                last_error=failed,
            )

    async def _chase_once(
        self, send: Callable[[float], Awaitable[object]], deadline: float
    ) -> None:
        try:
            await send(deadline - time.monotonic())
        except PaymentsError as exc:
            unsent = isinstance(exc, TransportError) and not exc.request_sent
            if not (isinstance(exc, OutcomeUnknownError) or is_retryable(exc) or unsent):
                raise
            logger.warning(
                "chase of %s %s failed, to be tried again: %s", self._what, self._id, exc
            )
        else:
            logger.info("chased %s %s with a request for status update", self._what, self._id)

    def _jitter(self) -> random.Random:
        if self._rng is None:
            self._rng = random.Random()
        return self._rng


class Summary(Protocol):
    """The classification of a status message a waiter polls (pacs.002 or camt.029)."""

    @property
    def outcome(self) -> Outcome: ...

    @property
    def codes(self) -> tuple[str, ...]: ...

    @property
    def status(self) -> str | None: ...


S = TypeVar("S", bound=Summary)


class MessagePoll(Poll[tuple[M, S]]):
    """One ``wait_for_*`` call: what its poll loop reads.

    ``fetch`` is one ``Pipeline.read`` of ``path`` (with its retries) within the client's
    ``timeouts.total`` and never past the wait's deadline; ``peek`` takes a final message
    the notification source has confirmed, when it is of the awaited type.
    """

    __slots__ = (
        "_call",
        "_deadline",
        "_decoder",
        "_kind",
        "_path",
        "_pipeline",
        "_summarize",
        "_timeouts",
        "_type",
    )

    def __init__(
        self,
        pipeline: Pipeline,
        path: str,
        decoder: Callable[[bytes], M],
        summarize: Callable[[M], S],
        message_type: type[M],
        kind: str,
        timeouts: Timeout,
        call: Call | None,
        payments_service_id: str,
        **options: Any,
    ) -> None:
        super().__init__(payments_service_id, **options)
        self._call = call
        self._pipeline = pipeline
        self._path = path
        self._decoder = decoder
        self._summarize = summarize
        self._type = message_type
        self._kind = kind
        self._timeouts = timeouts
        self._deadline = time.monotonic() + self._timeout

    def fetch(self) -> Coroutine[Any, Any, tuple[M, S]]:
        # The read's own coroutine, decoding into (message, summary): no frame of ours
        # stays alive under the wait's while the read is in flight.
        deadline = min(self._deadline, time.monotonic() + self._timeouts.total)
        op = Operation("GET", self._path, self._timeouts)
        return self._pipeline.read(op, self._decode, deadline)

    def _decode(self, body: bytes) -> tuple[M, S]:
        message = self._decoder(body)
        return message, self._summarize(message)

    def status_of(self, result: tuple[M, S]) -> tuple[Outcome, tuple[str, ...]]:
        summary = result[1]
        return summary.outcome, summary.codes

    def operation(self) -> AbstractContextManager[object]:
        return self._pipeline.instruments.operation(self._call)

    def settled(self, result: tuple[M, S]) -> tuple[M, S]:
        if self._call is not None:
            summary = result[1]
            self._call.succeeded(summary.outcome.value, **{"payments.status": summary.status})
        return result

    def peek(self) -> tuple[M, S] | None:
        source = self._source
        if source is None:
            return None
        # A receiver's confirmed final message: the waiter returns without a read.
        message = source.confirmed(self._id, self._kind)
        if isinstance(message, self._type):
            return message, self._summarize(message)
        return None
