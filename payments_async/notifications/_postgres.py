"""The inbox in PostgreSQL (psycopg 3): shared by several receiver processes.

The inbox table keeps what the inbox means: one item per (kind, id) with its latest
notice, whether it is waiting, done or parked (and why), its failed callback attempts, and
the "delivered" marks. Which receiver processes an item, and when again, is procrastinate's
work: every notice is stored with, in the same transaction, a job of the inbox's queue
whose procrastinate ``lock`` is the item's key, so that jobs of one item run one at a time
in whatever receiver takes them (PostgreSQL keeps a second job of that lock from running:
a unique index), and in the order they came. A job reads the item, processes it (see the
receiver's workers) and, when the item must wait (a failed read, a failed callback), is
retried by procrastinate after the wait; a job of a receiver that died is put back in the
queue once its heartbeat is older than the ``lease``. A job that finds its item done (a
notice already handled by an earlier job) ends at once.

Writes are group-committed on one connection, reads go through a second one; both use the
storage kit (`GroupCommit`, `PsycopgBatch`): a database that goes away (or hangs) is said
once per outage, and while it is away the inbox fails at once with
`InboxUnavailableError` (the receiver answers 503 and the sender redelivers) instead of
holding the request. Times are the server's clock. procrastinate comes with the ``scale``
extra, as psycopg does.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from .. import _store as store
from .._errors import ConfigurationError
from .._urls import redact_url
from ._core import Notification
from ._defaults import NOTIFY_INBOX_POLL, NOTIFY_LEASE, NOTIFY_WRITE_WAIT_MAX
from ._items import (
    INBOX_ERRORS,
    InboxError,
    InboxItem,
    InboxStatus,
    decode_notification,
    encode_notification,
)

if TYPE_CHECKING:
    import procrastinate
    import psycopg

__all__ = ["PostgresInbox"]

logger = logging.getLogger("payments_async.notifications")

QUEUE: Final = "payments-notifications"
"""The procrastinate queue of the inbox's jobs (the bulk queue's database may hold it)."""

TASK_NAME: Final = "payments_async.notifications.process"
"""The procrastinate task every job of the inbox runs: process one item."""

_FETCH_LOOPS: Final = 8
"""procrastinate loops per receiver: one loop fetches one job per query, and waits for
the answer before the next; several keep the receiver's workers busy."""

_STALLED_CHECK: Final = 1.0
"""Seconds between a receiver's looks for the jobs of receivers that died."""

_ANALYZE_EVERY: Final = 500
"""Jobs queued by a receiver between two refreshes of the statistics of procrastinate's
table: after a burst, a fetch planned on stale statistics reads every waiting job."""

_NOW: Final = "EXTRACT(EPOCH FROM clock_timestamp())::float8"
# Table names carry a prefix: the database is often shared with the bulk journal's tables.
_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS payments_notify_inbox (
    kind TEXT NOT NULL,
    payments_service_id TEXT NOT NULL,
    notification BYTEA NOT NULL,
    seq BIGINT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    received_at DOUBLE PRECISION NOT NULL,
    error TEXT,
    updated_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (kind, payments_service_id)
);
CREATE INDEX IF NOT EXISTS payments_notify_inbox_due
    ON payments_notify_inbox (state, received_at);
CREATE TABLE IF NOT EXISTS payments_notify_delivered (
    key TEXT PRIMARY KEY,
    delivered_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS payments_notify_delivered_age
    ON payments_notify_delivered (delivered_at);
CREATE TABLE IF NOT EXISTS payments_notify_tracked (
    kind TEXT NOT NULL,
    payments_service_id TEXT NOT NULL,
    tracked_at DOUBLE PRECISION NOT NULL,
    next_check DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (kind, payments_service_id)
);
CREATE INDEX IF NOT EXISTS payments_notify_tracked_due ON payments_notify_tracked (next_check);
"""
_SCHEMA_LOCK: Final = 0x70A7_1B0C

_PUT: Final = f"""
INSERT INTO payments_notify_inbox AS i
    (kind, payments_service_id, notification, seq, state, received_at, updated_at)
VALUES (%s, %s, %s, 1, 'pending', {_NOW}, {_NOW})
ON CONFLICT (kind, payments_service_id) DO UPDATE SET
    notification = excluded.notification,
    seq = i.seq + 1,
    received_at = CASE WHEN i.state = 'pending' THEN i.received_at ELSE excluded.received_at END,
    attempts = CASE WHEN i.state = 'pending' THEN i.attempts ELSE 0 END,
    error = CASE WHEN i.state = 'pending' THEN i.error END,
    state = 'pending',
    updated_at = excluded.updated_at
"""  # noqa: S608
_ITEM: Final = """
SELECT notification, seq, attempts, received_at FROM payments_notify_inbox
WHERE kind = %s AND payments_service_id = %s AND state = 'pending'
"""
_DONE: Final = f"""
UPDATE payments_notify_inbox SET
    state = CASE WHEN seq = %s AND state = 'pending' THEN 'done' ELSE state END,
    attempts = 0, error = NULL, updated_at = {_NOW}
WHERE kind = %s AND payments_service_id = %s
"""  # noqa: S608
# A failed attempt counts, and parks, whatever arrived meanwhile: the callback runs only
# for a final status, and a notification folded in since can bring no other.
_RETRY: Final = f"""
UPDATE payments_notify_inbox SET
    attempts = attempts + 1, state = %s, error = %s, updated_at = {_NOW}
WHERE kind = %s AND payments_service_id = %s
"""  # noqa: S608
_DELIVERED: Final = (
    "INSERT INTO payments_notify_delivered (key, delivered_at) "  # noqa: S608
    f"VALUES (%s, {_NOW}) ON CONFLICT (key) DO NOTHING"
)
_STATUS: Final = """
SELECT
    (SELECT COUNT(*) FROM payments_notify_inbox WHERE state = 'pending'),
    (SELECT COUNT(*) FROM payments_notify_inbox WHERE state = 'failed'),
    (SELECT MIN(received_at) FROM payments_notify_inbox WHERE state = 'pending'),
    (SELECT COUNT(*) FROM payments_notify_delivered),
    (SELECT error FROM payments_notify_inbox WHERE state = 'failed'
        ORDER BY updated_at DESC LIMIT 1),
    (SELECT COUNT(*) FROM payments_notify_tracked)
"""
_PRUNE_DONE: Final = (
    "DELETE FROM payments_notify_inbox "  # noqa: S608
    f"WHERE state = 'done' AND updated_at < {_NOW} - %s"
)
_PRUNE_DELIVERED: Final = f"DELETE FROM payments_notify_delivered WHERE delivered_at < {_NOW} - %s"  # noqa: S608
_TRACK: Final = f"""
INSERT INTO payments_notify_tracked (kind, payments_service_id, tracked_at, next_check)
VALUES (%s, %s, {_NOW}, {_NOW} + %s) ON CONFLICT DO NOTHING
"""  # noqa: S608
# Receivers sweeping at once take different ids.
_DUE_TRACKED: Final = f"""
UPDATE payments_notify_tracked AS t SET next_check = {_NOW} + %s
FROM (
    SELECT kind, payments_service_id FROM payments_notify_tracked
    WHERE next_check <= {_NOW} ORDER BY next_check LIMIT %s FOR UPDATE SKIP LOCKED
) AS due
WHERE t.kind = due.kind AND t.payments_service_id = due.payments_service_id
RETURNING t.kind, t.payments_service_id
"""  # noqa: S608


async def _analyze_jobs(cur: psycopg.AsyncCursor[Any]) -> None:
    await cur.execute("ANALYZE procrastinate_jobs")


class _Again(Exception):
    """The job's item waits ``delay`` seconds before its next job run."""

    def __init__(self, delay: float) -> None:
        super().__init__(f"again in {delay:g} s")
        self.delay = delay


class PostgresInbox:
    """The inbox in a PostgreSQL database, shared by any number of receivers.

    Each receiver on it runs a procrastinate worker for the inbox's queue in its process
    (see `serve`): an item is processed by one receiver at a time, and its waits and
    retries are procrastinate jobs scheduled for later.

    Args:
        dsn: the ``postgresql://`` address (its password is never shown).
        lease: seconds after which the items of a receiver that died (or could not reach
            the database, or was paused) go to another one: its worker's heartbeat is
            written every ``lease / 3`` seconds, and a job whose worker's heartbeat is
            older than ``lease`` is put back in the queue (every receiver looks once a
            second). An item whose callback takes longer stays with its receiver while
            it is alive.
    """

    durable = True

    def __init__(self, dsn: str, *, lease: float = NOTIFY_LEASE) -> None:
        if not 0 < lease <= sys.float_info.max:  # also NaN and inf
            raise ConfigurationError("lease must be a positive, finite number of seconds")
        self._dsn = dsn
        self._lease = float(lease)
        # No wait for a database that is away: the receiver answers 503 at once.
        self._writer = store.PsycopgBatch(dsn, errors=INBOX_ERRORS, what="inbox", window=0)
        self._reader = store.PsycopgBatch(dsn, errors=INBOX_ERRORS, what="inbox", window=0)
        self._group = store.GroupCommit(self._writer)
        self._open = False
        self._app: procrastinate.App | None = None
        self._process: Callable[[InboxItem], Awaitable[None]] | None = None
        self._again: dict[tuple[str, str], float] = {}  # item -> wait before its next run
        self._jobs = store.LocalJobs()  # the jobs run and ended here, for retry_stalled
        # The one run of each item in this process, shared by every job of it (see process).
        self._runs: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._queued = 0  # jobs queued since procrastinate's table was last analyzed

    def __repr__(self) -> str:
        return f"PostgresInbox({redact_url(self._dsn)!r})"

    @property
    def commits(self) -> int:
        """Transactions written, for tests and the benchmark."""
        return self._group.commits

    async def open(self) -> None:
        """Connect and create the tables (the inbox's and procrastinate's).

        Raises:
            InboxUnavailableError: the server cannot be reached for now.
            InboxError: psycopg or procrastinate is missing, the address cannot be read,
                or the server refuses us.
        """
        if self._open:
            return
        store.require_procrastinate(INBOX_ERRORS)

        async def schema(cur: psycopg.AsyncCursor[Any]) -> None:
            await cur.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            # Made once, in one transaction: its last index exists only if all of it does.
            # Its CREATE ... IF NOT EXISTS would still take a SHARE lock on each table,
            # which deadlocks with another receiver completing an item (it writes the
            # tables in another order), so a receiver opening an inbox made before runs none.
            await cur.execute("SELECT to_regclass('payments_notify_tracked_due') IS NOT NULL")
            made = await cur.fetchone()
            if not (made and made[0]):
                await cur.execute(_SCHEMA)

        await self._writer([schema])
        await self._reader([])
        app = self._make_app()
        await store.install_jobs_schema(app, self._dsn, INBOX_ERRORS)
        import psycopg

        try:
            await app.open_async()
        except psycopg.Error as exc:
            raise store.connect_error(self._dsn, exc, INBOX_ERRORS) from None
        self._app = app
        self._open = True

    def _make_app(self) -> procrastinate.App:
        """This inbox's procrastinate app, with the task that processes one item."""
        import procrastinate

        class Again(procrastinate.BaseRetryStrategy):
            """Every failed run is tried again: after the item's wait, at once when its
            receiver stopped, else after a pause; never given up (the inbox parks)."""

            def get_retry_decision(
                self, *, exception: BaseException, job: procrastinate.jobs.Job
            ) -> procrastinate.RetryDecision:
                if isinstance(exception, _Again):
                    delay = exception.delay
                elif isinstance(
                    exception, asyncio.CancelledError | procrastinate.exceptions.JobAborted
                ):
                    delay = 0.0
                else:
                    delay = NOTIFY_WRITE_WAIT_MAX
                at = datetime.now(UTC) + timedelta(seconds=delay)
                return procrastinate.RetryDecision(retry_at=at)

        app = procrastinate.App(
            connector=procrastinate.PsycopgConnector(conninfo=self._dsn, min_size=1, max_size=8)
        )

        @app.task(name=TASK_NAME, queue=QUEUE, retry=Again(), pass_context=True)
        async def process(
            context: procrastinate.JobContext, kind: str, payments_service_id: str
        ) -> None:
            with self._jobs.run(context.job):
                await asyncio.shield(self._run_once((kind, payments_service_id)))

        return app

    def _run_once(self, key: tuple[str, str]) -> asyncio.Task[None]:
        """The item's run in this process: a new one, or the one still going.

        A database outage restarts the worker loops, and procrastinate cancels the jobs
        they were running; the item's run is shielded from that and goes on (its reads and
        writes are held until the database is back), and the job retried after the outage
        joins it. Ending that run instead, between its callback and its delivered mark,
        made the retried job call back a second time. Stopping the receiver (`serve`
        cancelled) ends the runs: the documented crash window.
        """
        run = self._runs.get(key)
        if run is None or run.done():
            run = asyncio.create_task(self._run(key))
            self._runs[key] = run
            run.add_done_callback(self._ran)
        return run

    def _ran(self, run: asyncio.Task[None]) -> None:
        for key, known in list(self._runs.items()):
            if known is run:
                del self._runs[key]
        if not run.cancelled():
            run.exception()  # a job cancelled meanwhile no longer awaits it: its retry decides

    async def _run(self, key: tuple[str, str]) -> None:
        """One job: process the item if it is waiting; raise `_Again` when it must wait."""
        rows = await self._read(_ITEM, key)
        if not rows:
            return  # done by an earlier job, or parked
        ((raw, seq, attempts, received_at),) = rows
        item = InboxItem(decode_notification(raw), seq, attempts, received_at)
        if self._process is None:
            raise InboxError("the inbox is not being served")
        self._again.pop(key, None)
        try:
            await self._process(item)
        finally:
            delay = self._again.pop(key, None)
        if delay is not None:
            raise _Again(delay)

    async def serve(self, process: Callable[[InboxItem], Awaitable[None]], *, workers: int) -> None:
        """Process the inbox's items with ``process``, ``workers`` at once, until cancelled
        (then the items being processed go back to the queue at once).

        A database that goes away is waited for (said once, see `through_outages`); the
        jobs of receivers that died are put back in the queue meanwhile.

        Raises:
            InboxError: the inbox is not open.
        """
        app = self._app
        if app is None:
            raise InboxError("the inbox is not open")
        self._process = process
        name = f"payments-notifications-{secrets.token_hex(4)}"
        loops = min(_FETCH_LOOPS, workers)
        names = [f"{name}-{i}" for i in range(loops)]
        every = self._lease / 3
        reaper = asyncio.create_task(
            store.retry_stalled(
                app,
                QUEUE,
                stalled_after=self._lease,
                every=min(every, _STALLED_CHECK),
                jobs=self._jobs,
            )
        )
        try:
            await store.through_outages(
                self._dsn,
                lambda: [
                    app.run_worker_async(
                        queues=[QUEUE],
                        name=names[i],
                        concurrency=workers // loops + (1 if i < workers % loops else 0),
                        wait=True,
                        shutdown_graceful_timeout=0,
                        install_signal_handlers=False,
                        update_heartbeat_interval=every,
                        stalled_worker_timeout=self._lease,
                        fetch_job_polling_interval=NOTIFY_INBOX_POLL,
                        delete_jobs="successful",
                        listen_notify=i == 0,  # the others poll
                    )
                    for i in range(loops)
                ],
                wait=True,
                errors=INBOX_ERRORS,
                what="inbox",
                loggers=[f"procrastinate.worker.{n}" for n in names],
            )
        finally:
            self._process = None
            reaper.cancel()
            runs = list(self._runs.values())
            for run in runs:
                run.cancel()
            await asyncio.gather(reaper, *runs, return_exceptions=True)

    async def aclose(self) -> None:
        """Write what is queued and disconnect."""
        await self._group.drain()
        self._open = False
        app, self._app = self._app, None
        if app is not None:
            await app.close_async()
        await self._reader.aclose()
        await self._writer.aclose()

    def _submit(self, op: Any) -> asyncio.Future[Any]:
        if not self._open:
            raise InboxError("the inbox is not open")
        return self._group.submit(op)

    async def put(self, notification: Notification) -> None:
        """Store it and queue its job, in one transaction; committed on return."""
        import procrastinate

        app = self._app
        if app is None or not self._open:
            raise InboxError("the inbox is not open")
        kind, psid = notification.kind.value, notification.payments_service_id
        params = (kind, psid, encode_notification(notification))
        job = app.tasks[TASK_NAME].configure(lock=f"{kind}:{psid}").job
        job = job.evolve(task_kwargs={"kind": kind, "payments_service_id": psid})

        async def op(cur: psycopg.AsyncCursor[Any]) -> None:
            await cur.execute(_PUT, params)
            try:
                await app.job_manager.defer_job_async(job, connection=cur.connection)
            except procrastinate.exceptions.ConnectorException as exc:
                raise (exc.__cause__ or exc) from None  # psycopg's: the kit's to judge

        await self._submit(op)
        self._queued += 1
        if self._queued >= _ANALYZE_EVERY:
            self._queued = 0
            await self._writer([_analyze_jobs])

    async def _read(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        async def read(cur: psycopg.AsyncCursor[Any]) -> list[Any]:
            await cur.execute(sql, params)
            return await cur.fetchall()

        (rows,) = await self._reader([read])
        result: list[Any] = rows
        return result

    async def is_delivered(self, key: str) -> bool:
        """Read from the database."""
        rows = await self._read("SELECT 1 FROM payments_notify_delivered WHERE key = %s", (key,))
        return bool(rows)

    async def complete(self, item: InboxItem, delivered: str | None) -> bool:
        """Done and delivered, in one transaction (still waiting when a newer notice came
        meanwhile: that notice's job processes it again)."""
        kind, psid = item.key

        async def op(cur: psycopg.AsyncCursor[Any]) -> bool:
            first = False
            if delivered is not None:
                await cur.execute(_DELIVERED, (delivered,))
                first = cur.rowcount == 1
                await cur.execute(
                    "DELETE FROM payments_notify_tracked WHERE kind = %s "
                    "AND payments_service_id = %s",
                    (kind, psid),
                )
            await cur.execute(_DONE, (item.seq, kind, psid))
            return first

        result: bool = await self._submit(op)
        return result

    async def retry(self, item: InboxItem, *, delay: float, park: bool, error: str) -> None:
        """Count the failed callback, or park the item; unparked, its job runs again
        after ``delay``."""
        kind, psid = item.key
        params = ("failed" if park else "pending", error, kind, psid)

        async def op(cur: psycopg.AsyncCursor[Any]) -> None:
            await cur.execute(_RETRY, params)

        await self._submit(op)
        if not park:
            self._again[item.key] = delay

    async def defer(self, item: InboxItem, *, delay: float) -> None:
        """Its job runs again after ``delay``; nothing written (its attempts unchanged)."""
        self._again[item.key] = delay

    async def status(self) -> InboxStatus:
        """Counted by the database."""
        rows = await self._read(_STATUS, ())
        depth, failed, oldest, delivered, last_error, tracked = rows[0]
        return InboxStatus(
            int(depth), int(failed), oldest, int(delivered), last_error, int(tracked)
        )

    async def track(self, kind: str, payments_service_id: str, *, check_after: float) -> None:
        """Remember it in the database (until its final status is delivered)."""
        params = (kind, payments_service_id, check_after)

        async def op(cur: psycopg.AsyncCursor[Any]) -> None:
            await cur.execute(_TRACK, params)

        await self._submit(op)

    async def due_tracked(self, limit: int, *, recheck: float) -> list[tuple[str, str]]:
        """The due ones nobody else is sweeping, each due again after ``recheck``."""
        rows = await self._read(_DUE_TRACKED, (recheck, limit))
        return [(str(k), str(p)) for k, p in rows]

    async def prune(self, older_than: float) -> int:
        """Delete done items and delivered marks older than that, in one transaction."""

        async def op(cur: psycopg.AsyncCursor[Any]) -> int:
            await cur.execute(_PRUNE_DONE, (older_than,))
            done = cur.rowcount
            await cur.execute(_PRUNE_DELIVERED, (older_than,))
            return max(done, 0) + max(cur.rowcount, 0)

        pruned: int = await self._submit(op)
        return pruned
