"""The advisory locks of a PostgreSQL journal's run: one run at a time, and no writes
from a run that has lost its lock.

A run holds two session advisory locks keyed by its id. The *run lock* is taken by the
session that opens the run (a second run is refused before it plans or sends anything);
the *writer lock* by the session that records the rows' states, before its first write.
A session lock ends with its session: each session takes its lock again when it
reconnects, before it reads or writes anything more, and when another session holds it
by then the run stops with `JournalBusyError`. Every state change is written by the
session holding the writer lock, so a run that lost it cannot mark a row sent, and
never sends a row another run sends. The workers of a queued run take neither lock.

Each locking session's ``application_name`` names its process, so a refused run can say
who holds the lock. On a reconnect, a lock still held under this process's own name is
its lost session's (the server has not noticed the connection is gone, as after a
network reset): that session is ended and the lock taken again.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import os
import time
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, Final

from ..._store import holder_text, run_holder
from .._errors import JournalBusyError

if TYPE_CHECKING:
    import psycopg

__all__ = ["RUN_LOCK", "WRITER_LOCK", "lock_run", "lock_writer"]

RUN_LOCK: Final = 0x70A7_B01D
"""The namespace (first key) of the run locks."""
WRITER_LOCK: Final = 0x70A7_B01E
"""The namespace (first key) of the writer locks."""

_HOLDER_PREFIX: Final = "payments-async run "
_TRY: Final = "SELECT pg_try_advisory_lock(%s, %s)"
_NAME: Final = "SELECT set_config('application_name', %s, false)"
_HOLDER: Final = (
    "SELECT a.application_name, a.pid FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
    "WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s AND l.objid = %s "
    "AND l.objsubid = 2"
)


_END: Final = "SELECT pg_terminate_backend(%s)"
# Ending this process's lost session: the lock is free once that backend has exited.
_END_TRIES: Final = 50
_END_PAUSE: Final = 0.1


def _our_lost(record: tuple[Any, ...] | None, me: str, again: bool) -> int | None:
    """The backend pid holding the lock under this process's own name, on a reconnect."""
    if again and record is not None and record[0] == me:
        return int(record[1])
    return None


def _key(run_id: str) -> int:
    return int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:4], "big") >> 1


def _session_name() -> str:
    """This process's name on its sessions: the same on every session it opens, so that a
    reconnect knows its own lost session (a forked child, another pid, has its own)."""
    return _process_session_name(os.getpid())


@functools.cache
def _process_session_name(pid: int) -> str:
    me = run_holder()
    # At most 63 characters are kept: the host goes last, so only it can be cut short.
    return f"{_HOLDER_PREFIX}{pid}@{int(me['started'])}@{me['host']}"[:63]


def _busy(run_id: str, record: tuple[Any, ...] | None, *, again: bool) -> JournalBusyError:
    holder = ""
    if record is not None and str(record[0]).startswith(_HOLDER_PREFIX):
        pid, _, rest = str(record[0]).removeprefix(_HOLDER_PREFIX).partition("@")
        started, _, host = rest.partition("@")
        with contextlib.suppress(ValueError):
            holder = holder_text({"pid": pid, "host": host, "started": float(started)})
    return JournalBusyError(f"run {run_id}", holder, lost=again)


_Step = tuple[str, tuple[Any, ...]] | None
"""A query of the locking steps and its parameters, or None: pause `_END_PAUSE`."""


def _locking(lock: int, run_id: str, again: bool) -> Generator[_Step, Any, None]:
    """The steps of taking a lock, written once for a synchronous and an asyncio session:
    each query is sent back its first record (see `lock_run`)."""
    key, me = _key(run_id), _session_name()
    yield _NAME, (me,)
    ended = False
    holder = None
    for _ in range(_END_TRIES):
        got = yield _TRY, (lock, key)
        if got is not None and got[0]:
            return
        holder = yield _HOLDER, (lock, key)
        pid = _our_lost(holder, me, again)
        if pid is None and (holder is not None or not ended):  # another's, or no lost one
            raise _busy(run_id, holder, again=again)
        if pid is not None:
            yield _END, (pid,)
            ended = True
        yield None  # the lock is released as the ended backend exits
    raise _busy(run_id, holder, again=again)


def lock_run(conn: psycopg.Connection[Any], run_id: str, *, again: bool = False) -> None:
    """Hold the run lock on this session (until it closes): one run at a time.

    Args:
        conn: an autocommit connection.
        run_id: the run.
        again: the run had it on a session that was lost (it may have sent rows).

    Raises:
        JournalBusyError: another session holds it.
    """
    steps = _locking(RUN_LOCK, run_id, again)
    reply = None
    with contextlib.suppress(StopIteration):
        while True:
            step = steps.send(reply)
            if step is None:
                time.sleep(_END_PAUSE)
                reply = None
            else:
                reply = conn.execute(*step).fetchone()


async def lock_writer(
    aconn: psycopg.AsyncConnection[Any], run_id: str, *, again: bool = False
) -> None:
    """Hold the run's writer lock on this asyncio session (until it closes).

    Args:
        aconn: an autocommit connection.
        run_id: the run.
        again: the run had it on a session that was lost (it may have sent rows).

    Raises:
        JournalBusyError: another session holds it.
    """
    steps = _locking(WRITER_LOCK, run_id, again)
    reply = None
    with contextlib.suppress(StopIteration):
        while True:
            step = steps.send(reply)
            if step is None:
                await asyncio.sleep(_END_PAUSE)
                reply = None
            else:
                reply = await (await aconn.execute(*step)).fetchone()
