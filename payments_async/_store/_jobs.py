"""procrastinate under every room that runs jobs on PostgreSQL: its schema installed once,
its workers' fetch loops carried through database outages, and the jobs of workers that
died put back in the queue.

Bulk runs (one job per batch of rows) and the shared notification inbox (one job per
notification received) both use these; each room keeps its own app, task and queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
import zlib
from collections.abc import Callable, Coroutine, Iterator, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from ._errors import StoreErrors
from ._outage import Outage, quiet_psycopg
from ._postgres import connect, connect_error, require_module

if TYPE_CHECKING:
    import procrastinate

__all__ = [
    "LocalJobs",
    "advisory_lock_id",
    "all_loops",
    "install_jobs_schema",
    "require_procrastinate",
    "retry_stalled",
    "through_outages",
]

logger = logging.getLogger("payments_async.store")


def require_procrastinate(errors: StoreErrors, extra: str = "scale") -> None:
    """Raise ``errors.error`` naming the extra when procrastinate is not installed."""
    require_module("procrastinate", errors, "jobs on PostgreSQL need procrastinate", extra)


def advisory_lock_id(name: str) -> int:
    """A PostgreSQL advisory lock's key for ``name`` (the same in every process)."""
    return zlib.crc32(name.encode()) & 0x7FFF_FFFF


async def install_jobs_schema(app: procrastinate.App, dsn: str, errors: StoreErrors) -> None:
    """Create procrastinate's tables when missing: once, under an advisory lock, so that
    processes starting together (workers, receivers, an enqueueing command) never race.

    Raises:
        Exception: ``errors.error`` or ``errors.unavailable`` (see `connect_error`).
    """
    import psycopg

    conn = await asyncio.to_thread(connect, dsn, errors)
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (advisory_lock_id("procrastinate"),))
            rec = conn.execute("SELECT to_regclass('procrastinate_jobs') IS NOT NULL").fetchone()
            if not (rec and rec[0]):
                conn.execute(app.schema_manager.get_schema())
    except psycopg.OperationalError as exc:
        raise connect_error(dsn, exc, errors) from None
    finally:
        conn.close()


class LocalJobs:
    """The jobs this process runs, and those it ran to their end and when: what
    `retry_stalled` needs beside the heartbeats. A room's task runs each job's work inside
    `run`; one instance per process (or per worker of a process), shared by its tasks and
    its `retry_stalled`.

    Args:
        clock: seconds that only go forward (`time.monotonic`, the default).
    """

    __slots__ = ("_clock", "_ended", "_running")

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._running: set[int] = set()
        # job id -> (the worker that ran it, the clock at its end), in the order they ended
        self._ended: dict[int, tuple[int, float]] = {}

    def __contains__(self, job_id: object) -> bool:
        """True while this process runs the job ``job_id``."""
        return job_id in self._running

    @contextlib.contextmanager
    def run(self, job: procrastinate.jobs.Job) -> Iterator[None]:
        """Mark ``job`` (a fetched job, with its id and worker) running here for the
        block, and ended here, now, once the block is left by any way."""
        job_id = job.id
        if job_id is None:
            raise ValueError("a job that was never stored has no id")
        self._running.add(job_id)
        try:
            yield
        finally:
            self._running.discard(job_id)
            if job.worker_id is not None:
                self._ended.pop(job_id, None)  # in end order, even when run again here
                self._ended[job_id] = (job.worker_id, self._clock())

    async def unwritten_ends(self, app: procrastinate.App, stalled_after: float) -> list[int]:
        """The jobs that ended here ``stalled_after`` seconds ago or more and that the
        worker which ran them still holds (``doing``): their end was never written (the
        database was away then, and the worker lived on, so no heartbeat check finds
        them). Each ended job is looked at once, then forgotten (unless it ends here
        again meanwhile).

        Raises:
            procrastinate.exceptions.ConnectorException: the database cannot be read.
        """
        before = self._clock() - stalled_after
        due = dict(itertools.takewhile(lambda e: e[1][1] <= before, self._ended.items()))
        if not due:
            return []
        rows = await app.connector.execute_query_all_async(
            "SELECT id, worker_id FROM procrastinate_jobs "
            "WHERE status = 'doing' AND id = ANY(%(ids)s)",
            ids=list(due),
        )
        for job_id, end in due.items():
            if self._ended.get(job_id) == end:  # not run again here meanwhile
                del self._ended[job_id]
        return [int(row["id"]) for row in rows if row["worker_id"] == due[row["id"]][0]]


async def retry_stalled(
    app: procrastinate.App,
    queue: str,
    *,
    stalled_after: float,
    every: float,
    jobs: LocalJobs | None = None,
) -> None:
    """Forever: put the jobs of workers whose heartbeat stopped (killed processes, lost
    hosts, a database outage longer than ``stalled_after``) back in ``queue``, and the
    jobs whose end this process could not write; any worker then runs them again.

    Args:
        app: the room's procrastinate app (open).
        queue: the room's queue.
        stalled_after: a worker whose heartbeat is older than this, in seconds, is dead;
            a job still held by its worker this long after it ended here never had its
            end written (see `LocalJobs.unwritten_ends`).
        every: seconds between two looks.
        jobs: the jobs this process runs and ran (None: none are run here). Those it
            runs are never put back, even when its own heartbeat is stale (the process
            was paused, or cut off from the database): it would take them again and run
            them twice at once.
    """
    import procrastinate

    here = LocalJobs() if jobs is None else jobs
    while True:
        await asyncio.sleep(every)
        try:
            stalled = await app.job_manager.get_stalled_jobs(
                queue=queue, seconds_since_heartbeat=stalled_after
            )
            unwritten = await here.unwritten_ends(app, stalled_after)
        except procrastinate.exceptions.ConnectorException as exc:
            logger.debug("cannot look for stalled jobs: %s", exc)  # the outage is told
            continue
        for job_id in [job.id for job in stalled] + unwritten:
            if job_id is None or job_id in here:
                continue
            try:
                await app.job_manager.retry_job_by_id_async(job_id, datetime.now(UTC))
            except procrastinate.exceptions.ConnectorException:
                continue  # another worker put it back first
            logger.info("job %s of a stopped worker put back in the queue", job_id)


async def through_outages(
    dsn: str,
    loops: Callable[[], list[Coroutine[Any, Any, None]]],
    *,
    wait: bool,
    errors: StoreErrors,
    what: str,
    loggers: Sequence[str] = (),
) -> None:
    """Run the fetch loops; when the database goes away, wait for it and start them again.

    A worker never exits for a database outage (a restart, a failover): it waits,
    reconnecting with a growing pause, logged once when the database goes and once when
    it is back. A fetch loop that procrastinate stops by itself (it does so when the
    loop's heartbeat or listener fails: the database went away) is no reason to exit
    either: the loops start again once the database answers. The worker's rows are put
    back in the queue by the stalled-job check (this worker's or another's) and resent
    with their recorded ids. With ``wait=False`` the outage's error is raised instead.

    ``loggers``: the names of loggers made only once the loops run (each procrastinate
    worker's own), kept as quiet about the outage as procrastinate's and psycopg's.
    ``errors`` and ``what``: the room's errors, and what its database holds for it.
    """
    import procrastinate

    loop = asyncio.get_running_loop()
    handler = loop.get_exception_handler()

    def quiet(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        # procrastinate's job tasks whose end could not be recorded during an outage:
        # said once by `Outage`, not one traceback each.
        if isinstance(context.get("exception"), procrastinate.exceptions.ConnectorException):
            logger.debug("%s: %s", context.get("message"), context.get("exception"))
        elif handler is not None:
            handler(loop, context)
        else:
            loop.default_exception_handler(context)

    # A logger's filters see only its own records, not its children's: every one, and
    # those of modules imported only once the loops run (procrastinate's worker module,
    # whose own logger says a failed abort poll with its traceback).
    logs = [
        logging.getLogger(name)
        for name in {*logging.Logger.manager.loggerDict, *loggers, *_MADE_LATER}
        if name.split(".")[0] in ("procrastinate", "psycopg") or name in loggers
    ]
    quiet_psycopg()
    loop.set_exception_handler(quiet)
    for log in logs:
        log.addFilter(_not_outage)
    try:
        await _until_loops_end(dsn, loops, wait=wait, errors=errors, what=what)
    finally:
        loop.set_exception_handler(handler)
        for log in logs:
            log.removeFilter(_not_outage)


_MADE_LATER: Final = ("procrastinate.worker",)
"""Loggers of modules procrastinate imports only when a worker starts."""

_OUTAGE_WORDS: Final = (
    "error connecting in",
    "discarding closed connection",
    "discarding broken connection",
)


def _not_outage(record: logging.LogRecord) -> bool:
    """False for what psycopg's pool and procrastinate log about a database that is away
    (every failed connection, every failed query, with its traceback): `Outage` says
    it once per outage."""
    import procrastinate
    import psycopg

    if str(record.msg).startswith(_OUTAGE_WORDS):
        return False
    exc = record.exc_info[1] if record.exc_info else None
    lost = (procrastinate.exceptions.ConnectorException, psycopg.OperationalError)
    return not isinstance(exc, lost)


async def _until_loops_end(
    dsn: str,
    loops: Callable[[], list[Coroutine[Any, Any, None]]],
    *,
    wait: bool,
    errors: StoreErrors,
    what: str,
) -> None:
    import procrastinate
    import psycopg

    while True:
        lost: Exception | None = None
        try:
            await all_loops(loops(), stop_on_end=wait)
        except (procrastinate.exceptions.ConnectorException, psycopg.OperationalError) as exc:
            if not wait:
                raise
            lost = exc
        if not wait:
            return
        # Serving the queue, a loop ends only when it fails or procrastinate stops it
        # after its heartbeat or listener failed: both mean the database went away.
        await _until_reachable(dsn, lost, errors=errors, what=what)
        await asyncio.sleep(_RESTART_PAUSE)


_RESTART_PAUSE: Final = 0.5
"""Seconds between the database answering and the fetch loops starting again: loops that
fail for another reason do not spin."""


async def _until_reachable(
    dsn: str, lost: Exception | None, *, errors: StoreErrors, what: str
) -> None:
    """Wait until a connection to the database can be made (no time limit).

    Args:
        lost: the failure that ended the loops, when there was one.
    """
    outage = Outage(dsn, window=float("inf"), errors=errors, what=what)
    if lost is not None:
        await asyncio.sleep(outage.failed(lost))
    while True:
        try:
            conn = await asyncio.to_thread(connect, dsn, errors)
        except errors.error as err:
            await asyncio.sleep(outage.failed(err))
            continue
        conn.close()
        outage.ended()
        return


async def all_loops(loops: list[Coroutine[Any, Any, None]], *, stop_on_end: bool = False) -> None:
    """Run the fetch loops until every one of them has ended, whatever ends first.

    With ``stop_on_end``, a loop that returns stops the others as a failure does (a
    worker serving the queue has no loop that ends by itself).

    When the worker stops, an idle loop ends at once while a busy one still gives its row
    the grace period and puts it back in the queue; the app and client they share are
    closed only after this returns, so it never returns while a loop runs. Each loop is
    cancelled at most once (a second cancel would cut its grace): when this coroutine is
    cancelled (once or more), or when a loop fails or ends cancelled on its own, the
    others are stopped and awaited. Then the cancellation of this coroutine is raised if
    there was one, else the first loop's failure.
    """
    tasks = [asyncio.ensure_future(loop) for loop in loops]
    stopped: set[asyncio.Future[None]] = set()
    cancelled = False

    def stop_all() -> None:
        for task in tasks:
            if task not in stopped and not task.done():
                stopped.add(task)
                task.cancel()

    pending = set(tasks)
    while pending:
        try:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            cancelled = True  # remembered, raised once every loop has ended
            stop_all()
            continue
        if stop_on_end or any(task.cancelled() or task.exception() is not None for task in done):
            stop_all()
    # Every loop's failure is read (so none is reported as "never retrieved"); the
    # first one is raised.
    failures = [None if task.cancelled() else task.exception() for task in tasks]
    if cancelled:
        raise asyncio.CancelledError
    for task, failure in zip(tasks, failures, strict=True):
        if task.cancelled() and task not in stopped:
            raise asyncio.CancelledError  # a loop ended cancelled on its own
        if failure is not None:
            raise failure
