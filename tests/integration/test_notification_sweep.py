"""The reconciling sweep: an outcome whose notification never comes still reaches the callback."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from payments_async.notifications import BasicAuth, InboxError, NotificationReceiver, Sweep
from payments_async.sandbox._notify import NotificationFaults
from tests.factories import cancellation_for, credit_transfer
from tests.support.notifications import HOOK_PASSWORD, HOOK_USER, notifying_stack, settle

GRACE = 0.8


@pytest.mark.parametrize("durable", [False, True])
async def test_an_id_never_notified_is_read_by_the_sweep_after_its_grace(
    tmp_path: Path, durable: bool
) -> None:
    inbox = str(tmp_path / "inbox.db") if durable else None
    faults = NotificationFaults(loss=1.0)  # the service sends nothing at all
    async with notifying_stack(
        faults=faults,
        sweep=Sweep(grace=GRACE),
        processing_delay=0.1,
        settlement_delay=0.1,
        inbox=inbox,
    ) as st:
        p = credit_transfer()
        s = await st.client.submit_credit_transfer(p)
        x = await st.client.request_cancellation(cancellation_for(p))
        tracked_at = time.monotonic()
        await st.receiver.track(s.payments_service_id, "payment")
        await st.receiver.track(x.payments_service_id, "cancellation")
        for _ in range(500):
            if len(st.payments) + len(st.outcomes) >= 2:
                break
            await asyncio.sleep(0.02)
        took = time.monotonic() - tracked_at
        # the grace, the sweep's idle step (at most half the grace) and one read each
        assert took < GRACE * 1.5 + 1.0, took
        assert took >= GRACE
        await settle(st)
        await asyncio.sleep(GRACE * 1.5)  # a second sweep finds nothing left to read
        assert [psid for psid, _ in st.payments] == [s.payments_service_id]
        assert [o.payments_service_id for o in st.outcomes] == [x.payments_service_id]
        assert st.sent()["faults"]["loss"] == 2
        assert (await st.receiver.inbox.status()).tracked == 0
        assert st.receiver.stats.confirm_reads == 2


async def test_tracking_needs_a_started_receiver_and_a_known_kind() -> None:
    async with notifying_stack() as st:
        idle = NotificationReceiver(st.client, auth=BasicAuth(HOOK_USER, HOOK_PASSWORD))
        with pytest.raises(InboxError):
            await idle.track("pay-1", "payment")
        with pytest.raises(ValueError, match="refund"):
            await st.receiver.track("pay-1", "refund")


@pytest.mark.parametrize("durable", [False, True])
async def test_submissions_through_the_attached_client_are_tracked_without_a_call(
    tmp_path: Path, durable: bool
) -> None:
    inbox = str(tmp_path / "inbox.db") if durable else None
    faults = NotificationFaults(loss=1.0)  # the service drops every notification
    async with notifying_stack(
        faults=faults,
        sweep=Sweep(grace=GRACE),
        processing_delay=0.1,
        settlement_delay=0.1,
        inbox=inbox,
    ) as st:
        p = credit_transfer()
        s = await st.client.submit_credit_transfer(p)
        # tracked (committed, with a durable inbox) before the submission came back
        assert (await st.receiver.inbox.status()).tracked == 1
        x = await st.client.request_cancellation(cancellation_for(p))
        submitted_at = time.monotonic()
        assert (await st.receiver.inbox.status()).tracked == 2
        assert (st.receiver.stats.tracked, st.receiver.stats.track_failures) == (2, 0)
        replay = await st.client.submit_credit_transfer(p)  # a replay is tracked once
        assert not replay.created
        assert (await st.receiver.inbox.status()).tracked == 2
        for _ in range(500):
            if len(st.payments) + len(st.outcomes) >= 2:
                break
            await asyncio.sleep(0.02)
        took = time.monotonic() - submitted_at
        # the grace, the sweep's idle step (at most half the grace) and one read each
        assert GRACE <= took < GRACE * 1.5 + 1.0, took
        await settle(st)
        assert [psid for psid, _ in st.payments] == [s.payments_service_id]
        assert [o.payments_service_id for o in st.outcomes] == [x.payments_service_id]
        assert st.sent()["faults"]["loss"] == 2
        assert (await st.receiver.inbox.status()).tracked == 0


async def test_a_receiver_told_not_to_track_submissions_leaves_them_to_track() -> None:
    async with notifying_stack(sweep=Sweep(track_submissions=False)) as st:
        await st.client.submit_credit_transfer(credit_transfer())
        assert (await st.receiver.inbox.status()).tracked == 0
        assert st.receiver.stats.tracked == 0


async def test_a_stopped_receiver_no_longer_tracks_the_clients_submissions() -> None:
    async with notifying_stack() as st:
        await st.receiver.aclose()
        await st.client.submit_credit_transfer(credit_transfer())
        assert st.receiver.stats.tracked == 0


async def test_a_submission_stands_when_the_inbox_cannot_track_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with notifying_stack() as st:

        async def refuse(kind: str, payments_service_id: str, *, check_after: float) -> None:
            raise InboxError("disk full")

        st.receiver.inbox.track = refuse  # type: ignore[method-assign]
        s = await st.client.submit_credit_transfer(credit_transfer())
        assert s.created
        assert (st.receiver.stats.tracked, st.receiver.stats.track_failures) == (0, 1)
        assert f"submission {s.payments_service_id} not tracked: disk full" in caplog.text
