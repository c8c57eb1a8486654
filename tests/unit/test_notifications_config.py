"""The receiver's configuration values refuse what would misbehave, before anything runs."""

from __future__ import annotations

import math

import pytest

from payments_async import ConfigurationError, Credentials, PaymentsClient
from payments_async.notifications import (
    BasicAuth,
    NotificationReceiver,
    ReceiverLimits,
    Retries,
    Sweep,
)


@pytest.mark.parametrize(
    "build",
    [
        lambda: ReceiverLimits(workers=0),
        lambda: ReceiverLimits(max_body_bytes=0),
        lambda: ReceiverLimits(queue_size=-1),
        lambda: ReceiverLimits(seen_capacity=True),
        lambda: ReceiverLimits(workers=1.5),
        lambda: Retries(callback_attempts=0),
        lambda: Retries(not_found_reads=0),
        lambda: Retries(wait=-1),
        lambda: Retries(wait=61),
        lambda: Retries(not_found_wait=math.inf),
        lambda: Retries(not_found_wait=math.nan),
        lambda: Sweep(grace=0),
        lambda: Sweep(rate=math.inf),
        lambda: Sweep(grace=math.nan),
    ],
)
def test_a_value_that_would_misbehave_is_refused_when_built(build: object) -> None:
    with pytest.raises(ConfigurationError):
        build()  # type: ignore[operator]


def test_retries_back_off_twice_as_long_each_time_within_their_bounds() -> None:
    retries = Retries(wait=1.0, not_found_wait=2.0)
    assert [retries.backoff(n) for n in (1, 2, 3, 7, 8)] == [1.0, 2.0, 4.0, 60.0, 60.0]
    assert [retries.not_found_backoff(n) for n in (1, 2)] == [2.0, 4.0]


async def test_the_receiver_takes_its_bounds_from_its_values() -> None:
    async with PaymentsClient(Credentials.sandbox(), base_url="http://127.0.0.1:9") as client:
        receiver = NotificationReceiver(
            client,
            auth=BasicAuth("u", "a-long-password"),
            limits=ReceiverLimits(max_body_bytes=1234),
        )
        assert receiver.max_body_bytes == 1234
        assert receiver.sweep == Sweep()
        with pytest.raises(ConfigurationError, match="retention"):
            NotificationReceiver(client, auth=BasicAuth("u", "a-long-password"), retention=0)
