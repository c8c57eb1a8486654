"""The waiter's chase: one request for status update per quiet period, and no more."""

from __future__ import annotations

import time

import pytest

from payments_async import ApiError, OutcomeUnknownError, PollPolicy, PollTimeoutError
from payments_async._errors import ServerError, TransportError
from payments_async.iso20022 import Outcome
from tests.support.polling import poll_until_final

FAST = PollPolicy(initial=0.005, maximum=0.005, jitter=0.0, not_found_grace=0.05)


def _status(code: str) -> tuple[Outcome, tuple[str, ...]]:
    return {"ACCC": Outcome.ACCEPTED, "PDCR": Outcome.PENDING}[code], (code,)


class Recall:
    """A recall the beneficiary bank answers only once it is chased (as the sandbox does)."""

    def __init__(self, *failures: BaseException, answer: bool = True) -> None:
        self.chases: list[float] = []
        self.reads = 0
        self._failures = list(failures)
        self._answer = answer
        self._chased = False  # a chase got through

    async def fetch(self) -> str:
        self.reads += 1
        return "ACCC" if self._answer and self._chased else "PDCR"

    async def chase(self, remaining: float) -> None:
        assert remaining > 0  # never sent past the wait's deadline
        self.chases.append(time.monotonic())
        if self._failures:
            raise self._failures.pop(0)
        self._chased = True


async def test_one_chase_after_the_quiet_period_then_the_answer() -> None:
    recall = Recall()
    started = time.monotonic()
    result = await poll_until_final(
        recall.fetch,
        _status,
        payments_service_id="cxl-1",
        timeout=10,
        policy=FAST,
        what="t",
        chase=(0.1, recall.chase),
    )
    assert result == "ACCC"
    assert len(recall.chases) == 1
    assert recall.chases[0] - started >= 0.1  # not before the quiet period
    assert recall.reads >= 2  # it polled through the quiet period


async def test_never_more_than_one_chase_per_quiet_period() -> None:
    recall = Recall(answer=False)  # no answer, ever
    started = time.monotonic()
    with pytest.raises(PollTimeoutError):
        await poll_until_final(
            recall.fetch,
            _status,
            payments_service_id="cxl-2",
            timeout=0.5,
            policy=FAST,
            what="t",
            chase=(0.1, recall.chase),
        )
    ended = time.monotonic()
    assert recall.chases  # it did chase
    assert recall.chases[0] - started >= 0.1
    gaps = [b - a for a, b in zip(recall.chases, recall.chases[1:], strict=False)]
    assert all(gap >= 0.1 for gap in gaps), gaps
    assert len(recall.chases) <= (ended - started) / 0.1


async def test_an_answer_within_the_quiet_period_is_never_chased() -> None:
    async def answered() -> str:
        return "ACCC"

    recall = Recall()
    result = await poll_until_final(
        answered,
        _status,
        payments_service_id="cxl-3",
        timeout=5,
        policy=FAST,
        what="t",
        chase=(0.05, recall.chase),
    )
    assert result == "ACCC"
    assert recall.chases == []


@pytest.mark.parametrize(
    "failure",
    [
        ServerError("busy", status=503),
        TransportError("reset"),
        OutcomeUnknownError("no answer", message_id="SRQ-1"),
    ],
    ids=["503", "transport", "unknown"],
)
async def test_a_chase_failing_for_a_passing_reason_is_tried_again_a_period_later(
    failure: BaseException,
) -> None:
    recall = Recall(failure)
    result = await poll_until_final(
        recall.fetch,
        _status,
        payments_service_id="cxl-4",
        timeout=10,
        policy=FAST,
        what="t",
        chase=(0.05, recall.chase),
    )
    assert result == "ACCC"
    assert len(recall.chases) == 2
    assert recall.chases[1] - recall.chases[0] >= 0.05


async def test_a_chase_the_service_refuses_ends_the_wait() -> None:
    recall = Recall(ApiError("no such recall", status=400))
    with pytest.raises(ApiError):
        await poll_until_final(
            recall.fetch,
            _status,
            payments_service_id="cxl-5",
            timeout=10,
            policy=FAST,
            what="t",
            chase=(0.02, recall.chase),
        )
    assert len(recall.chases) == 1


async def test_a_quiet_period_longer_than_the_wait_sends_nothing() -> None:
    recall = Recall(answer=False)
    with pytest.raises(PollTimeoutError):
        await poll_until_final(
            recall.fetch,
            _status,
            payments_service_id="cxl-6",
            timeout=0.2,
            policy=FAST,
            what="t",
            chase=(0.3, recall.chase),
        )
    assert recall.chases == []


async def test_a_chase_the_deadline_left_no_time_to_send_is_not_an_error() -> None:
    unsent = TransportError("the call's deadline passed", request_sent=False, retryable=False)
    recall = Recall(unsent)
    result = await poll_until_final(
        recall.fetch,
        _status,
        payments_service_id="cxl-7",
        timeout=10,
        policy=FAST,
        what="t",
        chase=(0.02, recall.chase),
    )
    assert result == "ACCC"
    assert len(recall.chases) == 2


async def test_a_due_chase_does_not_turn_failed_reads_into_a_busy_loop() -> None:
    """A chase follows a read that answered; while reads fail after it fell due, the wait
    still polls on its schedule (0.1 s here), not as fast as the loop can spin."""
    reads = 0

    async def pending_then_busy() -> str:
        nonlocal reads
        reads += 1
        if reads == 1:
            return "PDCR"  # read before the chase falls due
        raise ServerError("busy", status=503)  # every read after it fails

    recall = Recall()
    policy = PollPolicy(initial=0.1, maximum=0.1, jitter=0.0)
    with pytest.raises(PollTimeoutError):
        await poll_until_final(
            pending_then_busy,
            _status,
            payments_service_id="cxl-8",
            timeout=0.5,
            policy=policy,
            what="t",
            chase=(0.01, recall.chase),
        )
    assert recall.chases == []  # no read answered once it was due
    # about one read per 0.1 s (a loaded machine reads fewer, never more)
    assert reads <= 7, reads
