"""A queued run's request rate, kept by every worker of the run together through PostgreSQL.

One row per run holds the rate and the time its next request may go (the generic cell
rate algorithm that ``RateLimit``'s in-process bucket runs). Each request of each worker
reserves the next slot with one atomic ``UPDATE ... RETURNING`` and sleeps until it, so
ten workers on five hosts send N requests per second together. The database's clock
orders the slots; each worker only sleeps the difference it is told.

A lost connection is waited out like the journal's (`Outage`): the limiter reconnects and
asks again, for up to `JOURNAL_OUTAGE_WINDOW` and never past a slot's budget; any other
database error is raised as it is.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from .. import RateLimit, RateLimiter
from .._store import CONNECT_TIMEOUT, is_connection_lost
from ._stores._connect import outage

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

__all__ = ["RunLimiter", "RunRates", "ensure_rate_table", "store_run_rate"]

_TABLE: Final = """
CREATE TABLE IF NOT EXISTS payments_bulk_rates (
    run_id TEXT PRIMARY KEY,
    per_second DOUBLE PRECISION NOT NULL CHECK (per_second > 0),
    burst INTEGER NOT NULL CHECK (burst >= 1),
    next_at TIMESTAMPTZ NOT NULL DEFAULT '-infinity'
)
"""

# The slot of one request: it may go at max(now, next_at - tolerance); next_at moves one
# interval past max(next_at, now). The row's lock orders concurrent workers; a request
# whose slot lies beyond its budget changes nothing and gets no row back.
_TAKE_SLOT: Final = """
UPDATE payments_bulk_rates
   SET next_at = greatest(next_at, now()) + make_interval(secs => 1.0 / per_second)
 WHERE run_id = %(run)s
   AND next_at - make_interval(secs => (burst - 1) / per_second)
       <= now() + make_interval(secs => %(budget)s)
RETURNING extract(epoch FROM greatest(
    now(), next_at - make_interval(secs => burst / per_second)) - now())
"""

_RATE_OF: Final = "SELECT per_second FROM payments_bulk_rates WHERE run_id = %s"
_BOOKED_AHEAD: Final = """
SELECT extract(epoch FROM greatest(next_at, now()) - now())
  FROM payments_bulk_rates WHERE run_id = %s
"""


def ensure_rate_table(conn: psycopg.Connection[Any], lock_id: int) -> None:
    """Create the rates table when missing, under the advisory lock ``lock_id``."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_id,))
        conn.execute(_TABLE)


def store_run_rate(conn: psycopg.Connection[Any], run_id: str, rate: RateLimit) -> None:
    """Set the run's rate and burst (workers obey it from their next request of the run)."""
    conn.execute(
        "INSERT INTO payments_bulk_rates (run_id, per_second, burst) VALUES (%s, %s, %s) "
        "ON CONFLICT (run_id) DO UPDATE SET per_second = EXCLUDED.per_second, "
        "burst = EXCLUDED.burst",
        (run_id, rate.per_second, rate.burst),
    )


async def _ask(
    dsn: str,
    pool: psycopg_pool.AsyncConnectionPool[Any],
    sql: str,
    params: Callable[[], Sequence[object] | Mapping[str, object]],
) -> tuple[Any, ...] | None:
    """The first row ``sql`` returns with ``params()``; while the database cannot be
    reached, reconnect with a growing pause and ask again (`Outage`).

    Raises:
        JournalUnavailableError: the database stayed out of reach for the outage window.
        psycopg.Error: any other failure, as it is.
    """
    import psycopg

    waiting = outage(dsn)
    while True:
        try:
            async with pool.connection() as conn:
                cur = await conn.execute(sql, params())
                rec: tuple[Any, ...] | None = await cur.fetchone()
        except psycopg.Error as exc:
            if not is_connection_lost(exc):
                raise
            if not waiting.failing:
                # The server ended every session (a restart): the pool's other idle
                # sessions are dead too, so the silent retry would meet one and tell an
                # outage that is over. They are tested and made again first.
                await pool.check()
            await asyncio.sleep(waiting.failed(exc))
            continue
        waiting.ended()
        return rec


class RunRates:
    """A worker's view of every run's rate: a limiter per run that has one.

    The slots are taken on connections of their own (two at most, opened on first use,
    commits not waiting for the disk: a slot lost in a server crash costs nothing).

    Args:
        dsn: the queue's database.
    """

    def __init__(self, dsn: str) -> None:
        from psycopg_pool import AsyncConnectionPool

        self._dsn = dsn

        self._pool: psycopg_pool.AsyncConnectionPool[Any] = AsyncConnectionPool(
            dsn,
            min_size=1,
            max_size=2,
            timeout=CONNECT_TIMEOUT,  # a database out of reach is told, not waited for
            open=False,
            kwargs={"autocommit": True, "options": "-c synchronous_commit=off"},
        )
        self._opened = False
        self._limiters: dict[str, RunLimiter] = {}

    async def limiter(self, run_id: str) -> RunLimiter | None:
        """The run's limiter, or None when the run has no rate.

        A run's limiter is kept once found (it reads the run's rate with every slot, so
        a changed rate is obeyed from the next request). A run without a rate is looked
        up again on every call (once per job), so a rate given to it later, by queueing
        the run again with one, is obeyed from this worker's next job of the run.
        """
        found = self._limiters.get(run_id)
        if found is None:
            if not self._opened:
                await self._pool.open()
                self._opened = True
            if await _ask(self._dsn, self._pool, _RATE_OF, lambda: (run_id,)) is None:
                return None
            found = self._limiters[run_id] = RunLimiter(self._dsn, self._pool, run_id)
        return found

    async def aclose(self) -> None:
        """Close the connections."""
        if self._opened:
            await self._pool.close()


class RunLimiter(RateLimiter):
    """The slots of one run, shared through its row."""

    def __init__(self, dsn: str, pool: psycopg_pool.AsyncConnectionPool[Any], run_id: str) -> None:
        self._dsn = dsn
        self._pool = pool
        self._run_id = run_id
        self._admitting = asyncio.Lock()  # rows ask one at a time: one query, not one per row

    async def admit(self, backlog: float) -> None:
        """Wait until the run's slots are booked at most ``backlog`` seconds ahead, by
        every worker; this worker's rows ask one at a time."""
        async with self._admitting:
            while True:
                rec = await _ask(self._dsn, self._pool, _BOOKED_AHEAD, lambda: (self._run_id,))
                ahead = 0.0 if rec is None else float(rec[0])
                if ahead <= backlog:
                    return
                await asyncio.sleep(ahead - backlog)

    async def acquire(self, budget: float) -> bool:
        """Reserve the run's next slot and sleep until it; False when none is in ``budget``
        (a database that cannot be reached within it included).

        Raises:
            JournalUnavailableError: the database stayed out of reach for the outage
                window (shorter than the budget); nothing was reserved.
        """
        deadline = time.monotonic() + budget

        def slot() -> dict[str, object]:  # the budget left when the slot is asked for
            return {"run": self._run_id, "budget": max(deadline - time.monotonic(), 0.0)}

        try:
            async with asyncio.timeout(budget):
                rec = await _ask(self._dsn, self._pool, _TAKE_SLOT, slot)
        except TimeoutError:
            return False
        if rec is None:
            return False
        delay = float(rec[0])
        if delay > 0:
            await asyncio.sleep(delay)
        return True
