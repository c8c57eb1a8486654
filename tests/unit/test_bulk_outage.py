"""The storage kit's outage policy as a process sees it: said once when the database goes,
once when it is back, whoever of the process's connections meets it; a passing refusal is
waited out, a lasting one is not."""

from __future__ import annotations

import logging

import pytest

from payments_async.bulk import JournalError, JournalUnavailableError
from payments_async.bulk._stores._connect import connect_error, outage

DSN = "postgresql://app:s3cret@db.example:5432/payments"


class Lost(Exception):
    pass


def test_a_connection_lost_while_the_server_is_up_is_made_again_at_once_silently(
    caplog: pytest.LogCaptureFixture,
) -> None:
    waiting = outage(DSN, window=30)
    with caplog.at_level(logging.WARNING, "payments_async.store"):
        assert waiting.failed(Lost("terminating connection")) == 0
        waiting.ended()
    assert caplog.records == []


def test_every_connection_of_a_process_says_an_outage_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    writer, reader, rates = (outage(DSN, window=30) for _ in range(3))
    with caplog.at_level(logging.WARNING, "payments_async.store"):
        for each in (writer, reader, rates):
            each.failed(Lost("terminating connection"))
        for each in (writer, reader, rates):  # the reconnections fail: it is away
            assert each.failed(Lost("connection refused")) > 0
        reader.ended()
        writer.ended()
        rates.ended()
        stale = outage(DSN, window=30)  # a pooled connection the outage ended
        assert stale.failed(Lost("terminating connection")) == 0
        stale.ended()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    away, back = lines
    assert "cannot be reached (Lost: connection refused)" in away
    assert "db.example:5432/payments" in away
    assert "s3cret" not in away
    assert back.startswith("the PostgreSQL database postgresql://***@db.example")
    assert "is back after" in back


def test_past_its_window_the_outage_stops_the_command() -> None:
    waiting = outage(DSN, window=0)
    waiting.failed(Lost("gone"))
    with pytest.raises(JournalUnavailableError, match="run the same command again"):
        waiting.failed(Lost("gone"))
    outage(DSN).ended()  # nothing to end for another connection
    waiting.ended()


@pytest.mark.parametrize(
    "said",
    [
        'FATAL:  database "payments" is not currently accepting connections',
        "FATAL:  the database system is starting up",
        "FATAL:  the database system is in recovery mode",
        "FATAL:  the database system is not yet accepting connections",
        "FATAL:  the database system is shutting down",
        "FATAL:  sorry, too many clients already",
        "connection refused",
    ],
)
def test_a_database_restarting_recovering_closed_or_full_is_waited_out(said: str) -> None:
    err = connect_error(DSN, Exception(f"connection failed: {said}"))
    assert isinstance(err, JournalUnavailableError)
    assert "s3cret" not in str(err)


@pytest.mark.parametrize(
    "said",
    [
        'FATAL:  password authentication failed for user "app"',
        'FATAL:  database "payments" does not exist',
    ],
)
def test_a_refusal_that_lasts_is_not_waited_out(said: str) -> None:
    err = connect_error(DSN, Exception(f"connection failed: {said}"))
    assert type(err) is JournalError
