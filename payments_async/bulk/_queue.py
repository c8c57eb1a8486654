"""Distributed bulk runs: one procrastinate job per batch of rows, any number of workers and hosts.

The plan (every row's ``assgnmt.id``, ``cxlId`` and camt.056 bytes) is written to the
PostgreSQL journal before any job exists, so a job carries only ``(run_id, lines)`` and
every execution of it sends the very same messages: the service stores each once and
answers 200 to a resubmission. Procrastinate delivers a job at least once (a worker
killed mid-job has its job, every row of it, retried elsewhere); the effect on the
service is exactly once. A job's rows run at once; a retry takes up those not final.

A row is in at most one job waiting or running, and each job has a queueing lock named
after its first row. Enqueueing holds an advisory lock on the run and skips rows with a
job waiting or running, so two ``bulk-cancel`` commands racing on one input enqueue each
row once.
(No procrastinate ``lock`` per row: its fetch query then compares every waiting job with
the others, which made a 10,000-row queue crawl; and a row run twice at once, after a
worker wrongly taken for dead, is still stored once.) procrastinate and psycopg come with
the ``scale`` extra and are imported only here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from .. import PaymentsClient, PaymentsError, RateLimit, limit_rate
from .. import _store as store
from .._constants import POLL_TIMEOUT
from ._control import WorkerGates, aborted_change
from ._defaults import (
    ENQUEUE_BATCH,
    HEARTBEAT_INTERVAL,
    JOB_ATTEMPTS,
    JOB_RETRY_WAIT,
    QUEUE_NAME,
    SHUTDOWN_GRACE,
    STALLED_AFTER,
    STALLED_CHECK_INTERVAL,
    WORKER_CONCURRENCY,
    WORKER_ROWS,
)
from ._errors import JOURNAL_ERRORS, JournalError, JournalUnavailableError
from ._journal import RowState
from ._rate import RunRates, ensure_rate_table, store_run_rate
from ._results import write_run_results
from ._rows import (
    Stage,
    after_failure,
    after_outcome,
    after_wait_failure,
)
from ._status import POSTGRES_STATUS, QueueStatus, read_status
from ._steps import admit_row, connection_limit_for, record, send_row, wait_for_outcome
from ._stores import _postgres as pg

if TYPE_CHECKING:
    import procrastinate
    import psycopg_pool

__all__ = [
    "TASK_NAME",
    "EnqueueReport",
    "QueueStatus",
    "WorkerStopped",
    "enqueue_run",
    "make_app",
    "queue_status",
    "run_worker",
    "write_queue_results",
]

logger = logging.getLogger("payments_async.bulk.queue")

TASK_NAME: Final = "payments_async.bulk.cancel_row"
"""The procrastinate task every job of rows runs."""

JOB_ROWS: Final = 25
"""Rows per job: a worker's fetch, finish and journal read are made once per job."""


def row_lock(run_id: str, line: int) -> str:
    """The queueing lock of the job whose first row is ``line``."""
    return f"payments-bulk:{run_id}:{line}"


class WorkerStopped(Exception):
    """A job of rows was interrupted by its worker stopping; procrastinate retries it."""


@dataclass(slots=True)
class _WorkerState:
    """What every job of a worker process shares: the client and the database pool."""

    client: PaymentsClient
    pool: psycopg_pool.AsyncConnectionPool[Any]
    writer: pg.GroupCommitter
    timeout: float
    rates: RunRates | None = None  # None: the runs' rates are not looked up
    slots: asyncio.Semaphore | None = None  # the worker's rows at once; None: no limit
    gates: WorkerGates | None = None  # the runs' control (pause, abort); None: not read
    jobs: store.LocalJobs = field(default_factory=store.LocalJobs)  # run and ended here


_ASYNC_COMMIT: Final = "-c synchronous_commit=off"


# Procrastinate loops per worker process. One loop fetches one job per query and waits
# for each answer before the next, so a single loop keeps only a couple of jobs starting
# at a time; eight loops, each with its share of the worker's jobs, fill the slots
# (benchmarks/profile_worker.py shows where a row's time goes).
_FETCHERS: Final = 8


async def _autocommit(conn: Any) -> None:
    await conn.set_autocommit(True)


def make_app(dsn: str, *, worker: bool = False) -> procrastinate.App:
    """The procrastinate app of bulk runs on this database, with the row task registered.

    Args:
        dsn: the ``postgresql://`` address of the queue (the journal lives there too).
        worker: True for a worker's app: its job bookkeeping commits without waiting for
            the disk (see `run_worker`); enqueueing always waits for it.
    """
    store.require_procrastinate(JOURNAL_ERRORS)
    import procrastinate

    extra: dict[str, Any] = {}
    if worker:
        # Every query of a worker's app is one statement (a procrastinate function): in
        # autocommit it costs one round trip instead of three (BEGIN, query, COMMIT). The
        # pool has room for every fetch loop and two more (heartbeats, finishing jobs).
        extra = {
            "kwargs": {"options": _ASYNC_COMMIT},
            "configure": _autocommit,
            "min_size": 1,
            "max_size": _FETCHERS + 2,
        }
    app: procrastinate.App = procrastinate.App(
        connector=procrastinate.PsycopgConnector(conninfo=dsn, **extra)
    )

    @app.task(
        name=TASK_NAME,
        queue=QUEUE_NAME,
        pass_context=True,
        retry=procrastinate.RetryStrategy(max_attempts=JOB_ATTEMPTS, linear_wait=JOB_RETRY_WAIT),
    )
    async def cancel_row(
        context: procrastinate.JobContext,
        run_id: str,
        lines: list[int],
    ) -> None:
        state = context.additional_context["payments_bulk"]
        assert isinstance(state, _WorkerState)
        with state.jobs.run(context.job):
            try:
                await _through_database_outages(state, run_id, lines)
            except asyncio.CancelledError:
                # A stopping worker cancels its rows after the grace period. Failing the
                # job (instead of letting procrastinate mark it aborted) puts it back in
                # the queue: its rows resume elsewhere from their recorded states.
                raise WorkerStopped(f"rows {lines} of run {run_id} interrupted") from None

    return app


_SELECT_ROWS: Final = (
    f"SELECT {pg.ROW_COLUMNS} FROM payments_bulk_rows "  # noqa: S608
    "WHERE run_id = %s AND line = ANY(%s)"
)


async def _through_database_outages(state: _WorkerState, run_id: str, lines: list[int]) -> None:
    """Run a job's rows; while the database is away, wait and run the open ones again.

    An outage uses none of the job's attempts (a restart could otherwise spend them all
    and leave its rows without a job); the rows resume from their recorded states, as a
    retry by procrastinate would. The worker says once per outage that it waits.
    """
    pause = _OUTAGE_PAUSE
    while True:
        try:
            rates = state.rates
            with limit_rate(None if rates is None else await rates.limiter(run_id)):
                await process_rows(state, run_id, lines)
            return
        except Exception as exc:
            if not (isinstance(exc, JournalUnavailableError) or pg.is_connection_lost(exc)):
                raise
            logger.debug("rows %s of run %s wait for the database: %s", lines, run_id, exc)
        await asyncio.sleep(pause)
        pause = min(2 * pause, _OUTAGE_PAUSE_MAX)


_OUTAGE_PAUSE: Final = 0.5
_OUTAGE_PAUSE_MAX: Final = 5.0


async def process_rows(state: _WorkerState, run_id: str, lines: list[int]) -> None:
    """Run a job's rows to their outcomes at once, each as `process_row` does.

    The rows are read in one query. Every row has its full turn even when another fails;
    then the first failure is raised (a failure that a retry may cure: procrastinate
    retries the job, and the retry takes up only the rows still open).
    """
    async with state.pool.connection() as conn:
        cur = await conn.execute(_SELECT_ROWS, (run_id, lines))
        found = [pg.row_from_record(rec) for rec in await cur.fetchall()]
    results = await asyncio.gather(
        *(_advance_slotted(state, run_id, row) for row in found), return_exceptions=True
    )
    for result in results:
        if isinstance(result, BaseException):
            raise result


async def _advance_slotted(state: _WorkerState, run_id: str, row: RowState) -> None:
    if state.slots is None:
        await _advance(state, run_id, row)
        return
    async with state.slots:
        await _advance(state, run_id, row)


async def process_row(state: _WorkerState, run_id: str, line: int) -> None:
    """Run one row to its outcome, from whatever state the journal records.

    A final row is left alone (a duplicate delivery does nothing); an acknowledged one is
    only waited on; any other is (re)sent with its recorded body. Every change is the
    single-process runner's (see `._rows`), recorded through the same journal
    methods; a change after a failed attempt is made only if the row is still as that
    attempt left it (an execution running at the same time, after a worker was wrongly
    taken for dead, may have moved it on). A failure that a retry may cure raises, so
    procrastinate retries the job; once it gives up, a row no attempt sent reads
    ``not_sent``.
    """
    await _advance(state, run_id, await pg.read_row(state.pool, run_id, line))


async def _advance(state: _WorkerState, run_id: str, row: RowState | None) -> None:
    if row is None or row.is_done:
        return
    client = state.client
    rows = pg.PostgresRows(state.writer, run_id)
    line = row.line
    psid = row.payments_service_id
    if row.state != Stage.ACKNOWLEDGED or psid is None:
        # The run's control first: paused, no POST starts; aborted, a row never sent ends
        # "not sent (aborted)" while a row in flight is finished.
        gate = None if state.gates is None else state.gates.gate(run_id)
        if not await admit_row(gate) and row.state == Stage.PLANNED:
            await record(rows, line, aborted_change(gate.aborted_by if gate else None))
            return
        await rows.mark_sent(line)
        try:
            sub = await send_row(client, row, admitted=True)
        except PaymentsError as exc:
            change = after_failure(row.state, exc)
            await record(rows, line, change, attempts=row.attempts + 1)
            if change.retry:
                raise
            return
        psid = sub.payments_service_id
        await rows.mark_acknowledged(line, psid, sub.created)
    try:
        outcome = await wait_for_outcome(client, psid, state.timeout)
    except PaymentsError as exc:
        await record(rows, line, after_wait_failure(Stage.ACKNOWLEDGED, exc))
        raise
    await record(rows, line, after_outcome(outcome))


def _lock_id(name: str) -> int:
    return store.advisory_lock_id(f"payments-bulk:{name}")


@dataclass(frozen=True, slots=True)
class EnqueueReport:
    """What `enqueue_run` did.

    Attributes:
        run_id: the run (new, or the one this input already had).
        planned: True when this call wrote the plan; False when it was there already.
        enqueued: rows queued by this call (rows already queued, running or final are
            not queued again).
        rows: data rows in the run.
    """

    run_id: str
    planned: bool
    enqueued: int
    rows: int


# The rows of a run's jobs waiting or running (a job of one row queued by an earlier
# version has ``line`` in place of ``lines``).
_QUEUED_LINES: Final = """
SELECT jsonb_array_elements_text(COALESCE(j.args->'lines', jsonb_build_array(j.args->'line')))::int
  FROM procrastinate_jobs j
 WHERE j.task_name = %(task)s AND j.args->>'run_id' = %(run)s AND j.status IN ('todo', 'doing')
"""

_UNQUEUED_ROWS: Final = f"""
SELECT line FROM payments_bulk_rows WHERE run_id = %(run)s AND state NOT IN ('final', 'invalid')
EXCEPT {_QUEUED_LINES}
ORDER BY 1
"""  # noqa: S608


# Fresh statistics for procrastinate's fetch query. Its plan is made from the table's
# statistics; right after thousands of jobs are inserted they still say "a few rows", so
# the planner reads and sorts every waiting job for each fetch, in the database and for
# every worker at once, instead of taking the first entry of the priority index.
# Autovacuum would fix them, but only a minute or more later. ANALYZE reads a sample, not
# the table, once per enqueue.
_ANALYZE_JOBS: Final = "ANALYZE procrastinate_jobs"


def _not_recorded(rows: Iterator[Any], recorded: dict[str, str]) -> Iterator[Any]:
    """The rows of a new queued run; `JournalError` (nothing planned, nothing queued) once
    all are read when some payment already has a cancellation in another run."""
    refused: list[tuple[int, str]] = []
    for row in rows:
        earlier = recorded.get(row.original_end_to_end_id or "")
        if earlier is None:
            yield row
        else:
            refused.append((row.line, f"{row.original_end_to_end_id} ({earlier})"))
    if refused:
        line, what = refused[0]
        raise JournalError(
            f"{len(refused)} payment(s) of this input already have a cancellation recorded "
            f"in another run of the queue's database (first at line {line}: {what}): the "
            "input was edited after it was queued, or repeats another run's payments; "
            "nothing was queued. Queue the original file again to resume its run (its rows "
            "keep their ids), or leave those payments out"
        )


async def enqueue_run(
    dsn: str,
    *,
    input_sha256: str,
    input_name: str,
    new_run_id: str,
    plan: Callable[[str], Iterator[Any]],
    rate: RateLimit | None = None,
) -> EnqueueReport:
    """Fix every row's ids in PostgreSQL (once per input) and queue the open rows in jobs.

    Args:
        dsn: the queue's database.
        input_sha256: the input's digest: the key of its run.
        input_name: the input's file name, for ``bulk-status``.
        new_run_id: the run id when this input has no run yet.
        plan: called with the run id, yields the planned rows (consumed only when this
            call writes the plan).
        rate: the requests per second (and burst) every worker of the run keeps together;
            None leaves the run's stored rate, if any, as it is.

    Raises:
        JournalError: the database cannot be reached or holds another schema, or some
            payment of a new run already has a cancellation in another run (nothing queued).
    """
    app = make_app(dsn)
    await store.install_jobs_schema(app, dsn, JOURNAL_ERRORS)
    conn = await asyncio.to_thread(pg.connect, dsn)
    try:
        await asyncio.to_thread(pg.ensure_schema, conn)
        run_id, _ = await asyncio.to_thread(
            pg.open_run,
            conn,
            input_sha256=input_sha256,
            new_run_id=new_run_id,
            input_name=input_name,
        )
        recorded = await asyncio.to_thread(pg.recorded_elsewhere, conn, run_id)
        try:
            wrote = await asyncio.to_thread(
                lambda: pg.plan_run(conn, run_id, _not_recorded(plan(run_id), recorded))
            )
        except JournalError:
            await asyncio.to_thread(
                conn.execute,
                "DELETE FROM payments_bulk_runs WHERE run_id = %s AND NOT planned",
                (run_id,),
            )
            raise
        if rate is not None:
            await asyncio.to_thread(ensure_rate_table, conn, _lock_id("schema"))
            await asyncio.to_thread(store_run_rate, conn, run_id, rate)
        # One enqueuer per run at a time: a second command waits here, then finds every
        # row queued (or final) and defers nothing.
        await asyncio.to_thread(conn.execute, "SELECT pg_advisory_lock(%s)", (_lock_id(run_id),))
        try:
            lines = [
                r[0]
                for r in (
                    await asyncio.to_thread(
                        lambda: conn.execute(
                            _UNQUEUED_ROWS, {"run": run_id, "task": TASK_NAME}
                        ).fetchall()
                    )
                )
            ]
            async with app.open_async():
                task = app.tasks[TASK_NAME]
                template = task.configure().job
                chunks = [lines[i : i + JOB_ROWS] for i in range(0, len(lines), JOB_ROWS)]
                for i in range(0, len(chunks), ENQUEUE_BATCH):
                    jobs = [
                        template.evolve(
                            task_kwargs={"run_id": run_id, "lines": chunk},
                            queueing_lock=row_lock(run_id, chunk[0]),
                        )
                        for chunk in chunks[i : i + ENQUEUE_BATCH]
                    ]
                    await app.job_manager.batch_defer_jobs_async(jobs)
        finally:
            await asyncio.to_thread(
                conn.execute, "SELECT pg_advisory_unlock(%s)", (_lock_id(run_id),)
            )
        if lines:
            await asyncio.to_thread(conn.execute, _ANALYZE_JOBS)
        total = await asyncio.to_thread(
            lambda: conn.execute(
                "SELECT rows_total FROM payments_bulk_runs WHERE run_id = %s", (run_id,)
            ).fetchone()
        )
    finally:
        conn.close()
    return EnqueueReport(
        run_id=run_id, planned=wrote, enqueued=len(lines), rows=int(total[0]) if total else 0
    )


def queue_status(dsn: str, run: str | None = None) -> QueueStatus:
    """Read a run's progress (the latest run when ``run`` is None).

    Raises:
        JournalError: the database cannot be reached, or has no such run.
    """
    conn = pg.connect(dsn)
    try:
        run_id, _, total = pg.find_run(conn, run)
        name = conn.execute(
            "SELECT input_name FROM payments_bulk_runs WHERE run_id = %s", (run_id,)
        ).fetchone()
        added = read_status(lambda q: conn.execute(q, {"run": run_id}).fetchall(), POSTGRES_STATUS)
        queue = conn.execute("SELECT to_regclass('procrastinate_jobs') IS NOT NULL").fetchone()
        # A run of the single-process runner (--journal postgresql://...) has no queue.
        queued = (
            conn.execute(
                f"SELECT COUNT(*) FROM ({_QUEUED_LINES}) q",  # noqa: S608
                {"run": run_id, "task": TASK_NAME},
            ).fetchone()
            if queue and queue[0]
            else None
        )
    finally:
        conn.close()
    return QueueStatus(
        run_id=run_id,
        input_name=name[0] if name else None,
        rows=total,
        states=added.states,
        outcomes=added.outcomes,
        queued=int(queued[0]) if queued else 0,
        errors=added.errors,
        totals=added.totals,
        times=added.times,
    )


def write_queue_results(dsn: str, path: str | Path, run: str | None = None) -> tuple[str, Path]:
    """Write a run's results file, streaming: the step that ends a local run, on the queue.

    Returns:
        ``(run_id, path written)``.

    Raises:
        JournalError: the database cannot be reached, or has no such run.
        ResultsWriteError: the file cannot be written (an ``OSError``).
    """
    conn = pg.connect(dsn)
    try:
        run_id, _, _ = pg.find_run(conn, run)

        def rows() -> Iterator[RowState]:
            with conn.transaction(), conn.cursor(name="payments_bulk_results") as cur:
                cur.itersize = 2000
                cur.execute(
                    f"SELECT {pg.ROW_COLUMNS} FROM payments_bulk_rows "  # noqa: S608
                    "WHERE run_id = %s ORDER BY line",
                    (run_id,),
                )
                for rec in cur:
                    yield pg.row_from_record(rec)

        write_run_results(rows(), path)
    finally:
        conn.close()
    return run_id, Path(path)


async def run_worker(
    dsn: str,
    client_factory: Callable[[int], PaymentsClient],
    *,
    concurrency: int = WORKER_CONCURRENCY,
    rows: int = WORKER_ROWS,
    timeout: float = POLL_TIMEOUT,
    heartbeat_interval: float = HEARTBEAT_INTERVAL,
    stalled_after: float = STALLED_AFTER,
    stalled_check_interval: float = STALLED_CHECK_INTERVAL,
    grace: float = SHUTDOWN_GRACE,
    wait: bool = True,
    ready: Callable[[], Awaitable[None] | None] | None = None,
) -> None:
    """Run bulk row jobs until cancelled (or, with ``wait=False``, until the queue is empty).

    Beside procrastinate's own loop, the worker looks for jobs of workers whose heartbeat
    stopped (killed processes, lost hosts) and puts them back in the queue; any worker
    then runs them with the row's recorded ids.

    A database that goes away (a restart, a failover, a database closed to new sessions),
    even while the worker starts, is waited for without a time limit: said once when it
    goes and once when it is back (see `through_outages`); with ``wait=False`` it is
    raised as `JournalUnavailableError`.

    A run queued with a rate (``enqueue_run(rate=...)``) has every request of its rows
    (sends, resends, polls) take a slot of that rate, shared with every other worker of
    the run through the database, in place of the client's own ``rate_limit``.

    The worker's commits do not wait for the server's disk (``synchronous_commit=off``),
    as the SQLite journal's ``synchronous=NORMAL``: a killed worker loses nothing, since
    the server has every commit; a crash of the server itself may drop its last few
    hundred milliseconds of changes, which makes rows run again with their recorded ids.
    One such row can then read "not sent" although it was sent: if its lost change was
    the ``sent`` before a POST, and every later attempt failed before sending. A rerun
    resends it with the same id, and the service answers with the one it stored. The
    plan and the jobs are written with durable commits.

    Args:
        dsn: the queue's database.
        client_factory: builds the worker's client for a connection limit.
        concurrency: HTTP requests this process has in flight (its client's connections,
            a few spare for tokens).
        rows: rows this process works on at once, taken in jobs of several rows; most of
            them wait for their outcome, so this is far larger than ``concurrency``.
        timeout: seconds each row waits for its outcome.
        heartbeat_interval: seconds between this worker's heartbeats.
        stalled_after: a worker whose heartbeat is older than this is taken for dead.
        stalled_check_interval: seconds between looks for stalled jobs.
        grace: seconds a worker serving the queue, once cancelled, lets the rows it took
            go on towards their outcomes; the rows still unfinished then go back to the
            queue, for any worker to run with their recorded ids (with ``wait=False``
            they are waited for to the end).
        wait: False stops the worker once no job is waiting and the jobs it took have
            ended, every row of them run to its outcome or its failure (for benchmarks and
            tests: it does not stay to put back the jobs of a worker that died, nor for
            jobs whose retry is due later). Cancelled, such a worker also waits for its
            rows to end.
        ready: called once the worker is about to take jobs.

    Raises:
        ValueError: ``grace`` is not a finite number of seconds >= 0 (before any
            connection is made).
    """
    from psycopg_pool import AsyncConnectionPool

    if not math.isfinite(grace) or grace < 0:
        raise ValueError(f"grace must be a finite number of seconds >= 0, not {grace!r}")

    app = make_app(dsn, worker=True)
    await _open_worker_app(app, dsn, wait=wait)
    # Row reads only (the changes go through the group committer): one per job start,
    # and jobs start at most one per fetch loop at a time.
    jobs = max(1, -(-rows // JOB_ROWS))
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        dsn,
        min_size=1,
        max_size=_FETCHERS + 1,
        open=False,
        kwargs={"autocommit": True, "options": _ASYNC_COMMIT},
    )
    async with contextlib.AsyncExitStack() as opened:
        opened.push_async_callback(app.close_async)
        await pool.open()
        opened.push_async_callback(pool.close)
        writer = pg.GroupCommitter(dsn)
        opened.push_async_callback(writer.aclose)
        rates = RunRates(dsn)
        opened.push_async_callback(rates.aclose)
        client = await opened.enter_async_context(client_factory(connection_limit_for(concurrency)))
        state = _WorkerState(
            client, pool, writer, timeout, rates, asyncio.Semaphore(rows), WorkerGates(pool)
        )
        reaper = asyncio.create_task(
            store.retry_stalled(
                app,
                QUEUE_NAME,
                stalled_after=stalled_after,
                every=stalled_check_interval,
                jobs=state.jobs,  # its own too: running ones kept, unwritten ends put back
            )
        )
        try:
            if ready is not None:
                maybe = ready()
                if maybe is not None:
                    await maybe
            loops = min(_FETCHERS, jobs)
            names = [f"payments-bulk-{i}" for i in range(loops)]
            await store.through_outages(
                dsn,
                lambda: [
                    app.run_worker_async(
                        queues=[QUEUE_NAME],
                        name=names[i],
                        concurrency=jobs // loops + (1 if i < jobs % loops else 0),
                        # Serving the queue, a worker stops only when told to: its rows
                        # get the grace, then go back. Without ``wait`` the loop stops
                        # because no job is waiting: the jobs it took run to their end.
                        shutdown_graceful_timeout=grace if wait else float("inf"),
                        wait=wait,
                        install_signal_handlers=False,
                        update_heartbeat_interval=heartbeat_interval,
                        stalled_worker_timeout=stalled_after,
                        additional_context={"payments_bulk": state},
                        delete_jobs="never",
                        # One LISTEN connection per process is enough: the first loop
                        # hears of new (and retried) jobs at once, the others poll (every
                        # job is queued before any worker starts).
                        listen_notify=i == 0,
                    )
                    for i in range(loops)
                ],
                wait=wait,
                errors=JOURNAL_ERRORS,
                what="journal",
                # procrastinate logs a worker's side task that failed (its listener or
                # heartbeat, when the database goes) on the worker's own logger.
                loggers=[f"procrastinate.worker.{name}" for name in names],
            )
        finally:
            reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reaper


async def _open_worker_app(app: procrastinate.App, dsn: str, *, wait: bool) -> None:
    """Create the tables when missing and open the app's connections.

    A worker serving the queue (``wait``) that starts while its database is away (a
    restart, a failover, a database closed to new sessions) waits for it as it would once
    running: said once, no time limit. Otherwise the outage is raised at once.

    Raises:
        JournalError: the database refuses us (or, without ``wait``, cannot be reached).
    """
    outage = pg.outage(dsn, window=float("inf"))
    while True:
        try:
            await store.install_jobs_schema(app, dsn, JOURNAL_ERRORS)
            conn = await asyncio.to_thread(pg.connect, dsn)
            try:
                await asyncio.to_thread(pg.ensure_schema, conn)
                await asyncio.to_thread(ensure_rate_table, conn, _lock_id("schema"))
            finally:
                conn.close()
            await app.open_async()
        except Exception as exc:
            if not wait or not (
                isinstance(exc, JournalUnavailableError) or pg.is_connection_lost(exc)
            ):
                raise
            await asyncio.sleep(outage.failed(exc))
            continue
        outage.ended()
        return
