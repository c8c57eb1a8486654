"""The storage kit's shared parts: one writer per SQLite file, one group commit, one
mapping of a full disk."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from payments_async._store import (
    GroupCommit,
    Spell,
    SqliteBatch,
    lock_file,
    open_sqlite,
    sqlite_error,
)
from payments_async.bulk import JournalBusyError, JournalError, JournalUnavailableError
from payments_async.bulk._errors import JOURNAL_ERRORS
from payments_async.notifications import InboxBusyError
from payments_async.notifications._items import INBOX_ERRORS


@pytest.mark.parametrize(
    ("errors", "busy"), [(JOURNAL_ERRORS, JournalBusyError), (INBOX_ERRORS, InboxBusyError)]
)
def test_a_second_writer_is_refused_naming_the_holder(
    tmp_path: Path, errors: object, busy: type[Exception]
) -> None:
    store = tmp_path / "sub" / "store.db"
    held = lock_file(store, errors, what="store")  # type: ignore[arg-type]
    with pytest.raises(busy, match=f"pid {os.getpid()} on "):
        lock_file(store, errors, what="store")  # type: ignore[arg-type]
    held.release()
    lock_file(store, errors, what="store").release()  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "exc",
    [
        sqlite3.OperationalError("database or disk is full"),
        OSError(errno.ENOSPC, "No space left on device"),
    ],
)
def test_a_full_disk_is_the_stores_outage_in_one_line(exc: Exception) -> None:
    err = sqlite_error("write", "journal", Path("j.db"), exc, JOURNAL_ERRORS)
    assert isinstance(err, JournalUnavailableError)
    assert str(err) == (
        "cannot write journal 'j.db': the disk is full; every change made before is kept: "
        "free some space, then run the same command again"
    )


def test_another_sqlite_failure_is_the_stores_error() -> None:
    err = sqlite_error(
        "read", "journal", Path("j.db"), sqlite3.DatabaseError("bad"), JOURNAL_ERRORS
    )
    assert type(err) is JournalError
    assert str(err) == "cannot read journal 'j.db': bad"


async def test_changes_queued_together_share_one_transaction(tmp_path: Path) -> None:
    db = open_sqlite(tmp_path / "g.db", synchronous="NORMAL")
    db.execute("CREATE TABLE t (n INTEGER)")
    group = GroupCommit(SqliteBatch(lambda: db, tmp_path / "g.db", "journal", JOURNAL_ERRORS))
    await asyncio.gather(
        *(
            group.submit(lambda c, n=n: c.execute("INSERT INTO t VALUES (?)", (n,)))
            for n in range(100)
        )
    )
    assert group.commits == 1
    assert db.execute("SELECT COUNT(*) FROM t").fetchone() == (100,)
    bad = group.submit(lambda c: c.execute("INSERT INTO missing VALUES (1)"))
    with pytest.raises(JournalError, match="cannot write journal"):
        await bad  # the whole transaction rolled back, its callers told
    db.close()


def test_psycopg_repeating_a_told_failure_stays_off_stderr(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import logging

    from payments_async._store import quiet_psycopg

    quiet_psycopg()
    quiet_psycopg()  # once is enough, twice changes nothing
    log = logging.getLogger("psycopg")
    with caplog.at_level(logging.WARNING, "psycopg"):
        log.warning("error ignored terminating %r: %s", "<AsyncPipeline [BAD]>", "lost")
        log.warning("query cancellation interrupted (%s): closing connection", "AdminShutdown")
        log.warning("something psycopg has not said before")
    assert [r.getMessage() for r in caplog.records] == ["something psycopg has not said before"]


def test_a_hang_found_at_its_bound_is_told_from_when_it_began(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import logging
    import time

    from payments_async._store import Outage

    dsn = "postgresql://u:secret@db.example/hang"
    outage = Outage(dsn, window=60, errors=JOURNAL_ERRORS, what="journal")
    began = time.monotonic() - 15  # the transaction hung this long before its bound
    with caplog.at_level(logging.WARNING, logger="payments_async.store"):
        assert outage.failed(TimeoutError(), began=began) == 0.0  # once more at once
        outage.failed(TimeoutError())  # the reconnection fails too: told already
        outage.ended()
    told = [r.getMessage() for r in caplog.records]
    assert len(told) == 2
    assert "cannot be reached" in told[0]
    assert float(told[1].split("is back after ")[1].split(" s")[0]) >= 15
    assert "secret" not in caplog.text


def test_a_hang_found_at_its_bound_is_told_even_when_the_next_try_gets_through(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A transaction that began during a hang and ended at its bound, with the database
    back by the reconnection: the hang still lasted the bound, so it is told."""
    import logging
    import time

    from payments_async._store import Outage

    dsn = "postgresql://u:secret@db.example/hang-ends"
    outage = Outage(dsn, window=60, errors=JOURNAL_ERRORS, what="journal")
    with caplog.at_level(logging.WARNING, logger="payments_async.store"):
        assert outage.failed(TimeoutError(), began=time.monotonic() - 15) == 0.0
        outage.ended()  # the reconnection reached it
    told = [r.getMessage() for r in caplog.records]
    assert len(told) == 2, told
    assert "cannot be reached" in told[0]
    assert float(told[1].split("is back after ")[1].split(" s")[0]) >= 15


def test_a_connection_lost_once_is_made_again_silently(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from payments_async._store import Outage

    outage = Outage("postgresql://db.example/lost", window=60, errors=JOURNAL_ERRORS, what="x")
    with caplog.at_level(logging.WARNING, logger="payments_async.store"):
        assert outage.failed(ConnectionResetError()) == 0.0
        outage.ended()
    assert caplog.records == []


def test_an_outage_given_up_at_once_is_said_back_by_the_next_connection_that_answers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A receiver's store waits 0 s (it answers 503 and is tried again later): each try
    is a new `Outage`. The outage is said once, its error marked as said (the receiver's
    parts stay quiet), and the first try that reaches the database says it is back."""
    import logging

    from payments_async._store import Outage, told

    dsn = "postgresql://u:secret@db.example/inbox"
    with caplog.at_level(logging.WARNING, logger="payments_async.store"):
        for _ in range(3):
            outage = Outage(dsn, window=0, errors=JOURNAL_ERRORS, what="inbox")
            with pytest.raises(JournalUnavailableError) as raised:
                _fail_twice(outage)  # the first failure alone is a lost connection
            assert told(raised.value)
        Outage(dsn, window=0, errors=JOURNAL_ERRORS, what="inbox").ended()  # answered
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2, said
    assert "cannot be reached" in said[0]
    assert "is back after" in said[1]
    assert not told(JournalUnavailableError("not from an outage"))


def _fail_twice(outage: Any) -> None:
    outage.failed(ConnectionRefusedError())
    outage.failed(ConnectionRefusedError())


def test_a_spell_with_a_settle_is_said_once_however_the_disk_flickers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A nearly full disk lets a small write pass between failed ones: with a settle, the
    spell is one error line and one end line, its duration counted to the success that
    began the quiet stretch; without one, each passing write ends a spell."""
    now = [0.0]
    log = logging.getLogger("tests.spell")
    settled = Spell(log, settle=5.0, clock=lambda: now[0])
    plain = Spell(log, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="tests.spell"):
        for t, ok in [(0, False), (0.1, True), (1, False), (3, True), (4, False), (6, True)]:
            now[0] = t
            for spell in (settled, plain):
                if ok:
                    spell.ended("back")
                else:
                    spell.failed("down")
        assert settled.failing  # 2 s since the last failure: not over yet
        now[0] = 9.0
        settled.ended("back")
        now[0] = 20.0
        settled.ended("back")  # a spell is over once
    said = [(r.name, r.getMessage()) for r in caplog.records]
    assert not settled.failing
    assert said.count(("tests.spell", "down")) == 4  # 1 for the settled spell, 3 plain
    assert said.count(("tests.spell", "back after 6.0 s (3 attempts met it)")) == 1
    assert said.count(("tests.spell", "back after 0.1 s (1 attempts met it)")) == 1
