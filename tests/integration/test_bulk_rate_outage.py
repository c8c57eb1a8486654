"""A queued run's shared rate limiter through a database outage (real PostgreSQL): a lost
connection is waited out within the outage window, like the journal's; past it the
limiter stops with `JournalUnavailableError`; any other error is raised as it is."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import psycopg
import pytest

from payments_async import RateLimit
from payments_async.bulk import JournalUnavailableError
from payments_async.bulk._rate import RunRates, ensure_rate_table, store_run_rate
from tests.support.postgres import cut_off, restore


def _rated(dsn: str, run_id: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        ensure_rate_table(conn, 1)
        store_run_rate(conn, run_id, RateLimit(per_second=50, burst=1))


async def test_a_lost_connection_is_waited_out_within_the_window(
    pg_dsn: str, postgres_server: object
) -> None:
    admin: str = postgres_server.get_uri()  # type: ignore[attr-defined]
    _rated(pg_dsn, "R-RATE")
    rates = RunRates(pg_dsn)
    try:
        limiter = await rates.limiter("R-RATE")
        assert limiter is not None
        assert await limiter.acquire(5.0)
        cut_off(pg_dsn, admin)
        back = threading.Timer(1.0, restore, (pg_dsn, admin))
        back.start()
        try:
            start = time.monotonic()
            assert await limiter.acquire(10.0)  # waited for the database, then took a slot
            assert time.monotonic() - start >= 0.9
            cut_off(pg_dsn, admin)
            await asyncio.to_thread(back.join)
            back = threading.Timer(1.0, restore, (pg_dsn, admin))
            back.start()
            await limiter.admit(1.0)
            assert await rates.limiter("R-OTHER") is None
        finally:
            back.join()
            restore(pg_dsn, admin)
    finally:
        await rates.aclose()


async def test_past_the_window_the_limiter_stops_and_other_errors_are_raised_as_they_are(
    pg_dsn: str, postgres_server: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("payments_async.bulk._stores._connect.JOURNAL_OUTAGE_WINDOW", 1.0)
    # The limiter finds the outage when its pool gives up waiting for a connection: short
    # here as the window is, so that the test waits about a second, not five.
    monkeypatch.setattr("payments_async.bulk._rate.CONNECT_TIMEOUT", 0.5)
    admin: str = postgres_server.get_uri()  # type: ignore[attr-defined]
    _rated(pg_dsn, "R-GONE")
    rates = RunRates(pg_dsn)
    try:
        limiter = await rates.limiter("R-GONE")
        assert limiter is not None
        cut_off(pg_dsn, admin)
        try:
            with pytest.raises(JournalUnavailableError, match="cannot be reached since"):
                await limiter.acquire(30.0)
            # A budget shorter than the outage: no slot, nothing raised.
            assert not await limiter.acquire(0.5)
        finally:
            restore(pg_dsn, admin)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("DROP TABLE payments_bulk_rates")
        with pytest.raises(psycopg.errors.UndefinedTable):
            await limiter.acquire(5.0)
    finally:
        await rates.aclose()


async def test_sessions_ended_while_the_server_is_up_are_made_again_without_a_word(
    pg_dsn: str, postgres_server: object, caplog: pytest.LogCaptureFixture
) -> None:
    # Both pooled sessions ended at once (a restart between two jobs): the first use
    # finds one dead, and the retry must not take the other dead one and tell an outage.
    admin: str = postgres_server.get_uri()  # type: ignore[attr-defined]
    _rated(pg_dsn, "R-ENDED")
    rates = RunRates(pg_dsn)
    try:
        limiter = await rates.limiter("R-ENDED")
        assert limiter is not None
        await asyncio.gather(limiter.admit(1.0), rates.limiter("R-NONE"))  # two sessions
        cut_off(pg_dsn, admin)
        restore(pg_dsn, admin)
        with caplog.at_level(logging.WARNING, logger="payments_async"):
            assert await rates.limiter("R-NONE") is None
            assert await limiter.acquire(5.0)
        told = [r for r in caplog.records if r.name.startswith("payments_async")]
        assert not told, caplog.text
    finally:
        await rates.aclose()
