"""The poll schedule (pure) and the shared poll loop, without any server."""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Awaitable, Callable
from types import SimpleNamespace

import pytest

from payments_async import NotFoundError, PollPolicy, PollTimeoutError, _polling
from payments_async._errors import ApiError, ServerError, TransportError
from payments_async.iso20022 import Outcome
from tests.support.polling import poll_until_final


def test_intervals_grow_geometrically_up_to_the_maximum() -> None:
    policy = PollPolicy(initial=0.5, maximum=4.0, multiplier=2.0, jitter=0.0)
    got = list(itertools.islice(policy.intervals(random.Random(0)), 6))
    assert got == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]


def test_jitter_stays_within_its_share() -> None:
    policy = PollPolicy(initial=1.0, maximum=1.0, jitter=0.1)
    got = list(itertools.islice(policy.intervals(random.Random(1)), 500))
    assert all(0.9 <= g <= 1.1 for g in got)
    assert max(got) - min(got) > 0.15  # it does spread the waiters


FAST = PollPolicy(initial=0.001, maximum=0.001, jitter=0.0, not_found_grace=0.05)


def _scripted(
    *steps: object, then_wait: bool = False
) -> tuple[list[int], Callable[[], Awaitable[str]]]:
    """A read answering ``steps`` in turn, then the last one again; with ``then_wait``, a
    read after the last step first outlasts the tests' 0.2 s deadline (the poller leaves
    bounding a read to the read itself), so that a test of the deadline sees every step
    however slowly the machine polls (a count of polls within 20 ms failed under load)."""
    calls: list[int] = []
    queue = list(steps)

    async def fetch() -> str:
        calls.append(1)
        if then_wait and len(calls) > len(steps):
            await asyncio.sleep(0.25)
        step = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(step, BaseException):
            raise step
        assert isinstance(step, str)
        return step

    return calls, fetch


_OUTCOMES = {"ACCC": Outcome.ACCEPTED, "RJCT": Outcome.REJECTED, "PEND": Outcome.PENDING}


def _status(code: str) -> tuple[Outcome, tuple[str, ...]]:
    codes = tuple(code.split("+")) if code else ()
    outcomes = {_OUTCOMES.get(c, Outcome.UNKNOWN) for c in codes}
    return (outcomes.pop() if len(outcomes) == 1 else Outcome.UNKNOWN), codes


async def test_returns_the_first_final_result() -> None:
    calls, fetch = _scripted("PEND", "PEND", "ACCC")
    result = await poll_until_final(
        fetch, _status, payments_service_id="p", timeout=5, policy=FAST, what="t"
    )
    assert result == "ACCC"
    assert len(calls) == 3


async def test_transient_errors_and_early_404_are_polled_through() -> None:
    calls, fetch = _scripted(
        NotFoundError("not yet", status=404),
        ServerError("blip", status=503),
        TransportError("reset"),
        "RJCT",
    )
    result = await poll_until_final(
        fetch, _status, payments_service_id="p", timeout=5, policy=FAST, what="t"
    )
    assert result == "RJCT"
    assert len(calls) == 4


async def test_a_final_error_stops_at_once() -> None:
    calls, fetch = _scripted(ApiError("bad", status=400))
    with pytest.raises(ApiError):
        await poll_until_final(
            fetch, _status, payments_service_id="p", timeout=5, policy=FAST, what="t"
        )
    assert len(calls) == 1


async def test_404_after_the_grace_period_is_raised() -> None:
    _, fetch = _scripted(NotFoundError("unknown", status=404))
    with pytest.raises(NotFoundError):
        await poll_until_final(
            fetch, _status, payments_service_id="p", timeout=5, policy=FAST, what="t"
        )


async def test_deadline_raises_with_the_last_status_seen() -> None:
    _, fetch = _scripted("PEND", then_wait=True)
    with pytest.raises(PollTimeoutError) as info:
        await poll_until_final(
            fetch, _status, payments_service_id="p-9", timeout=0.2, policy=FAST, what="t"
        )
    assert info.value.last_status == "PEND"
    assert info.value.statuses == ("PEND",)
    assert info.value.payments_service_id == "p-9"


async def test_deadline_names_the_last_read_error_when_every_read_fails() -> None:
    refused = TransportError("connection refused", request_sent=False, method="GET", path="/x")
    _, fetch = _scripted("PEND", refused, then_wait=True)
    with pytest.raises(PollTimeoutError) as info:
        await poll_until_final(
            fetch, _status, payments_service_id="p-9", timeout=0.2, policy=FAST, what="t"
        )
    assert info.value.last_error is refused
    assert info.value.last_status == "PEND"
    assert str(info.value).endswith("; the last read failed: GET /x: connection refused")


async def test_an_answered_read_clears_the_last_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # The wait's clock is driven: its deadline passes as the answer is read, never sooner
    # (a real 0.2 s deadline on a loaded machine passed before the second read).
    late = [0.0]
    monkeypatch.setattr(
        _polling, "time", SimpleNamespace(monotonic=lambda: time.monotonic() + late[0])
    )
    steps: list[object] = [TransportError("reset"), "PEND"]

    async def fetch() -> str:
        step = steps.pop(0)
        if isinstance(step, BaseException):
            raise step
        late[0] = 3600.0
        assert isinstance(step, str)
        return step

    with pytest.raises(PollTimeoutError) as info:
        await poll_until_final(
            fetch, _status, payments_service_id="p", timeout=60, policy=FAST, what="t"
        )
    assert not steps  # both read: the error, then the answer that cleared it
    assert info.value.last_error is None
    assert "last read failed" not in str(info.value)


async def test_unknown_codes_return_on_the_second_matching_poll() -> None:
    calls, fetch = _scripted("PEND", "ACCC+RJCT", "ACCC+RJCT", "ACCC")
    result = await poll_until_final(
        fetch, _status, payments_service_id="p", timeout=5, policy=FAST, what="t"
    )
    assert result == "ACCC+RJCT"
    assert len(calls) == 3


async def test_a_transient_unknown_read_is_confirmed_before_it_is_returned() -> None:
    calls, fetch = _scripted("XXXX", "PEND", "XXXX", "ACCC")
    result = await poll_until_final(
        fetch, _status, payments_service_id="p", timeout=5, policy=FAST, what="t"
    )
    assert result == "ACCC"
    assert len(calls) == 4


async def test_an_answer_without_codes_is_pending() -> None:
    calls, fetch = _scripted("", "", "", then_wait=True)
    with pytest.raises(PollTimeoutError) as info:
        await poll_until_final(
            fetch, _status, payments_service_id="p", timeout=0.2, policy=FAST, what="t"
        )
    assert len(calls) >= 3  # answers without codes were polled past, not taken as final
    assert info.value.statuses == ()


async def test_timeout_carries_every_code_seen_in_order() -> None:
    _, fetch = _scripted("PEND", "PEND+XXXX", "PEND", then_wait=True)
    with pytest.raises(PollTimeoutError) as info:
        await poll_until_final(
            fetch, _status, payments_service_id="p", timeout=0.2, policy=FAST, what="t"
        )
    assert info.value.statuses == ("PEND", "XXXX")
    assert "PEND, XXXX" in str(info.value)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"initial": 0},
        {"initial": -1},
        {"maximum": 0},
        {"multiplier": 0.5},
        {"jitter": 1.5},
        {"not_found_grace": -1},
        {"initial": "1"},
        {"initial": True},
        {"maximum": float("nan")},
    ],
)
def test_nonsense_poll_policies_are_refused(kwargs: dict[str, object]) -> None:
    from payments_async import ConfigurationError

    with pytest.raises(ConfigurationError):
        PollPolicy(**kwargs)  # type: ignore[arg-type]
