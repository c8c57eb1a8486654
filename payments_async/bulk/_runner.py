"""Run a bulk cancellation: plan, submit with bounded concurrency, wait, journal every step."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final, Protocol

from .. import PaymentsClient, PaymentsError
from .._constants import POLL_TIMEOUT
from ._chase import ChasePolicy, ChaseReport, chase_rows
from ._control import RunGate, aborted_change, journal_gate
from ._defaults import RESEND_INITIAL, RESEND_MAX, SHUTDOWN_GRACE
from ._events import BulkCounts, BulkEvents
from ._input import transliterations
from ._journal import Journal, JournalError, RowState
from ._plan import (
    check_run_input,
    default_journal_path,
    default_results_path,
    open_run,
)
from ._results import write_run_results
from ._rows import (
    RowChange,
    RowOutcome,
    RunTotals,
    Stage,
    after_failure,
    after_outcome,
    after_wait_failure,
)
from ._steps import admit_row, record, send_row, wait_for_outcome

__all__ = [
    "DEFAULT_CONCURRENCY",
    "MAX_WAITING",
    "BulkCounts",
    "BulkReport",
    "BulkRunner",
    "ProgressSink",
    "bulk_cancel",
    "execute_run",
]

logger = logging.getLogger("payments_async.bulk")

DEFAULT_CONCURRENCY: Final = 32
"""HTTP requests (submissions and outcome reads) in flight at once."""

MAX_WAITING: Final = 10_000
"""At most this many rows submitted and waiting for their outcome; more wait to be sent."""

RESEND_JITTER: Final = 0.5
"""Share of a resend's pause drawn at random, so rows failed together spread out."""

QUEUED_PER_SUBMITTER: Final = 4
"""Rows read ahead of the submitters, per unit of concurrency (the rest stay in the journal)."""


class ProgressSink(Protocol):
    """Where a run reports progress (the CLI's rich bar, or nothing); a
    `BulkEvents` is one."""

    def update(self, counts: BulkCounts) -> None:
        """Called after every change of the counters."""
        ...


@dataclass(slots=True)
class BulkReport:
    """What a run did, for the summary and the exit code.

    The report does not hold the rows: `rows` reads them from the journal when
    first asked for (the results file has them too, one line per row).

    Attributes:
        counts: this run's counters.
        row_count: rows in the journal (the input's data rows, invalid ones included).
        results_path: the results file written.
        journal_path: the journal file, or None with ``--no-journal``.
        resumed: True when a journal of an earlier run was picked up.
        already_final: rows that were final before this run started (left alone).
        elapsed: seconds the run took (planning and writing included).
        sending: of those, seconds spent sending rows and waiting for their outcomes
            (what a rate of rows per second is counted over).
        interrupted: True when the run was stopped before it finished.
        journal_commits: transactions written to the journal during the run.
        totals: rows by outcome over every run (see `RowOutcome`); what they add
            up to is ``totals.verdict``.
        halted: the error that stopped the run from sending more rows (the token
            endpoint or the service could not be reached), or None.
        read_rows: reads every row from the journal (what `rows` calls once).
        chases: what the chase of a resumed run's unanswered recalls did, or None when
            the run chased nothing (no chase policy, or a new run).
    """

    counts: BulkCounts
    row_count: int
    results_path: Path
    journal_path: Path | None
    resumed: bool
    already_final: int
    elapsed: float
    interrupted: bool = False
    sending: float = 0.0
    journal_commits: int = 0
    totals: RunTotals = field(default_factory=RunTotals)
    halted: PaymentsError | None = None
    chases: ChaseReport | None = None
    read_rows: Callable[[], list[RowState]] = field(default=list, repr=False, compare=False)
    _rows: list[RowState] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def rows(self) -> list[RowState]:
        """Every row as the journal knows it after the run, in line order.

        Read from the journal on first access and kept: all of them in memory at once,
        bodies included (about 1 KB a row). For the number of rows use `row_count`;
        to go through them, read the results file.
        """
        if self._rows is None:
            self._rows = self.read_rows()
        return self._rows

    @property
    def complete(self) -> bool:
        """True when every valid row has a final outcome."""
        return self.totals.complete

    @property
    def finished(self) -> int:
        """Rows this run made final: the final rows of ``totals`` less ``already_final``,
        so it always agrees with the rows by outcome."""
        return self.totals.rows - self.totals.unfinished - self.already_final

    @property
    def rows_per_second(self) -> float:
        """``finished`` over ``sending`` (planning and writing the results not counted)."""
        return self.finished / self.sending if self.sending > 0 else 0.0


class BulkRunner:
    """Submits every unfinished row of a journal and waits for each outcome.

    Rows in state ``planned`` or ``sent`` are (re)sent with their recorded body (same
    ``assgnmt.id``: a row the service already has is answered 200 with its id); rows
    ``acknowledged`` are only waited on; ``final`` rows are not touched.

    Args:
        client: the client; its ``connection_limit`` must exceed ``concurrency`` (see
            `connection_limit_for`) so no request waits inside the pool.
        journal: where every state change is committed.
        concurrency: submissions in flight at once (the client bounds every request).
        timeout: seconds to wait for each row's outcome.
        progress: told about every change of the counters.
        max_waiting: rows submitted and not yet final, at most.
        gate: the run's control (`RunGate`), asked before every POST: while the run is
            paused no request is sent (outcome reads go on); once it is aborted a row
            never sent ends ``not sent (aborted)`` and rows in flight finish. None: the
            run is not controlled.
    """

    def __init__(
        self,
        client: PaymentsClient,
        journal: Journal,
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
        timeout: float = POLL_TIMEOUT,
        progress: ProgressSink | None = None,
        max_waiting: int = MAX_WAITING,
        gate: RunGate | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._client = client
        self._journal = journal
        self._concurrency = concurrency
        self._timeout = timeout
        self._progress = progress
        self._gate = gate
        self._requests = asyncio.Semaphore(concurrency)
        self._waiting = asyncio.Semaphore(max(max_waiting, concurrency))
        self.counts = BulkCounts()
        self.halted: PaymentsError | None = None
        self._stopping = False
        self._polling: set[asyncio.Task[None]] = set()  # rows waiting for their outcome

    def _halting(self) -> bool:
        return self.halted is not None or self._stopping

    def stop(self) -> None:
        """Stop the run gracefully: no row is sent any more, every request in flight
        finishes (its answer is recorded, or it is recorded as sent without an answer,
        never resent), and rows waiting for their outcome stop waiting (they stay
        acknowledged: a rerun waits for them). ``run`` then returns."""
        self._stopping = True
        for task in self._polling:
            task.cancel()

    def _changed(self) -> None:
        if self._progress is not None:
            self._progress.update(self.counts)

    async def run(self) -> BulkCounts:
        """Finish every row that is not final; return this run's counters.

        Rows are read from the journal as the run goes (`Journal.iter_rows`), at
        most `QUEUED_PER_SUBMITTER` per unit of concurrency ahead of the requests,
        so memory does not grow with the number of rows.

        ``stop`` ends it gracefully. Cancelling the task stops at once: what was
        committed stays committed, and a later run picks every row up from its recorded
        state (a row whose request was cut off stays ``sent``, its answer unknown).

        Raises:
            JournalError: the journal could not be read or written (the run stops).
        """
        self.counts.total = _unfinished(self._journal.state_counts())
        self._changed()
        # Rows are read from the journal as the submitters take them, never all at once.
        queue: asyncio.Queue[RowState | None] = asyncio.Queue(
            QUEUED_PER_SUBMITTER * self._concurrency
        )
        try:
            async with asyncio.TaskGroup() as tg:
                feeder = tg.create_task(self._feed(queue))
                submitters = [
                    tg.create_task(self._submitter(queue, tg))
                    for _ in range(min(self._concurrency, max(1, self.counts.total)))
                ]
                await asyncio.wait(submitters)
                # Halted: the submitters left rows behind, and the feeder may be waiting for
                # room in the queue that nobody empties any more.
                feeder.cancel()
        except BaseExceptionGroup as group:
            # One failure (a journal that cannot be written) stops every task; raise it
            # as itself rather than wrapped, so callers can catch it by type (a journal
            # gone away fails every task waiting on it: the first says it all).
            first = group.exceptions[0]
            if len(group.exceptions) == 1 or all(
                isinstance(e, JournalError) for e in group.exceptions
            ):
                raise first from None
            raise
        return self.counts

    async def _feed(self, queue: asyncio.Queue[RowState | None]) -> None:
        """Queue every unfinished row as read from the journal, then ``None``: the end."""
        for row in self._journal.iter_rows(unfinished=True):
            if self._halting():
                break
            await queue.put(row)
        await queue.put(None)

    async def _submitter(
        self, queue: asyncio.Queue[RowState | None], tg: asyncio.TaskGroup
    ) -> None:
        while not self._halting():
            row = await queue.get()
            if row is None:
                queue.put_nowait(None)  # the end, for the next submitter too
                return
            await self._waiting.acquire()
            if self._halting():  # the service became unreachable meanwhile
                self._waiting.release()
                return
            if row.state == Stage.ACKNOWLEDGED and row.payments_service_id is not None:
                psid: str | None = row.payments_service_id
            else:
                psid = await self._submit(row)
            if psid is None or self._stopping:  # stopped: it stays acknowledged
                self._waiting.release()
                continue
            tg.create_task(self._wait(row.line, psid))

    async def _submit(self, row: RowState) -> str | None:
        journal = self._journal
        deadline = time.monotonic() + self._timeout
        base = RESEND_INITIAL  # the pause before the next resend, before its jitter
        sent = False  # a request of this row left in this run
        while True:
            # Paused: no POST (a resend included) until resumed. Aborted: a row never
            # sent ends "not sent (aborted)"; a row in flight is finished.
            if (
                not await admit_row(self._gate, self._halting)
                and row.state == Stage.PLANNED
                and not sent
            ):
                change = aborted_change(self._gate.aborted_by if self._gate else None)
                self._count(change)
                await record(journal, row.line, change)
                self._changed()
                return None
            # A row waiting for a slot is not "sent": it is marked so only once its request
            # is about to leave, which keeps an interrupted run's counts and states true.
            async with self._requests:
                if self._stopping and not sent:
                    return None  # stopped before its request left: as it was
                # Counted together with the journal's "sent" (set before the commit is
                # awaited), so an interrupt during the commit leaves the two in agreement.
                self.counts.sent += 1
                await journal.mark_sent(row.line)  # committed before the request goes out
                try:
                    sub = await send_row(self._client, row, admitted=True)
                except PaymentsError as exc:
                    change = after_failure(row.state, exc)
                    pause = base * random.uniform(1 - RESEND_JITTER, 1)
                    if not self._resends(change, deadline - time.monotonic() - pause):
                        await self._failed(row, exc, change)
                        return None
                    attempts = row.attempts + 1
                    await record(journal, row.line, change, attempts=attempts)
                    if change.left:
                        row = replace(row, state=Stage.SENT, attempts=attempts)
                        sent = True
                    else:  # it never left (no free connection in time): planned again
                        self.counts.sent -= 1
                        row = replace(row, attempts=attempts)
                else:
                    break
            # Its outcome is unknown, or it never left: the same bytes and id again after
            # a pause (the service answers 200 if it has it), while the row's time lasts.
            logger.debug("line %d: %s; sending again in %.2f s", row.line, change.error, pause)
            await asyncio.sleep(pause)
            if self._halting():  # stopped meanwhile: recorded as sent without an answer
                self._count(change)
                self._changed()
                return None
            base = min(2 * base, RESEND_MAX)
        # Counters first: the journal's memory changes before its commit is awaited.
        self.counts.submitted += 1
        if sub.replayed:
            self.counts.replayed += 1
        await journal.mark_acknowledged(row.line, sub.payments_service_id, sub.created)
        self._changed()
        return sub.payments_service_id

    def _resends(self, change: RowChange, time_left: float) -> bool:
        """True when a failed submission is to be sent again within this run: its
        outcome is unknown (the request left, no answer says what became of it) or it
        never left for want of a free connection (a burst, or the process paused), the
        service can be reached, and the row's time is not over after the pause."""
        return (
            change.stage in (Stage.SENT, Stage.PLANNED)
            and change.retry
            and not change.unreachable
            and not self._halting()
            and time_left > 0
        )

    async def _failed(self, row: RowState, exc: PaymentsError, change: RowChange) -> None:
        """Record a failed submission as what it is: not sent, refused, or in flight."""
        if change.unreachable and self.halted is None:
            # The token endpoint or the service cannot be reached: every other row would
            # meet the same. Send no more; what is left stays planned for a rerun.
            logger.debug("line %d: the service cannot be reached; sending no more", row.line)
            self.halted = exc
        logger.debug("line %d: %s after %s", row.line, change.outcome or change.stage, exc)
        # Counters first: the journal's memory changes before its commit is awaited.
        if not change.left:
            self.counts.sent -= 1
        self._count(change)
        await record(self._journal, row.line, change, attempts=row.attempts + 1)
        self._changed()

    def _count(self, change: RowChange) -> None:
        """Count a row's change in this run's counters."""
        c = self.counts
        if change.outcome is RowOutcome.ACCEPTED:
            c.accepted += 1
        elif change.outcome is RowOutcome.REJECTED:
            c.rejected += 1
        elif change.outcome is RowOutcome.REFUSED:
            c.refused += 1
        elif change.outcome is RowOutcome.NOT_SENT:
            c.not_sent += 1
        elif change.outcome is RowOutcome.ABORTED:
            c.aborted += 1
        elif change.outcome is not None:
            c.unknown += 1
        else:
            c.failed += 1  # not final: a rerun may overcome it

    async def _wait(self, line: int, payments_service_id: str) -> None:
        task = asyncio.current_task()
        assert task is not None
        try:
            self._polling.add(task)  # `stop` cancels it while it polls, never mid-record
            try:
                outcome = await wait_for_outcome(self._client, payments_service_id, self._timeout)
            except PaymentsError as exc:
                logger.debug("line %d: waiting failed: %s", line, exc)
                change = after_wait_failure(Stage.ACKNOWLEDGED, exc)
            else:
                change = after_outcome(outcome)
            finally:
                self._polling.discard(task)
            # Counters first: the journal's memory changes before its commit is awaited,
            # so a run cut off during the commit still counts what its table shows.
            self._count(change)
            self._changed()
            await record(self._journal, line, change)
        finally:
            self._waiting.release()


def _unfinished(states: dict[str, int]) -> int:
    """Rows a run still has to finish, from `Journal.state_counts`."""
    return sum(n for state, n in states.items() if state not in (Stage.FINAL, Stage.INVALID))


async def execute_run(
    client: PaymentsClient,
    journal: Journal,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    timeout: float = POLL_TIMEOUT,
    progress: ProgressSink | None = None,
    stop: asyncio.Event | None = None,
    gate: RunGate | None = None,
) -> tuple[BulkCounts, PaymentsError | None, bool]:
    """Step 3 of a local run: finish every row of a planned journal that is not final.

    Args:
        client: the client to send with.
        journal: the planned journal.
        concurrency: HTTP requests in flight at once.
        timeout: seconds to wait for each row's outcome.
        progress: told about every change of the counters.
        stop: when set, the run stops (`BulkRunner.stop`): no row is sent any more,
            the requests in flight finish and are recorded (those still unanswered
            after ``SHUTDOWN_GRACE`` (5) seconds are cut off and stay ``sent``), and rows
            waiting for their outcome stay acknowledged. Cancelling the call instead
            stops at once.
        gate: the run's control, obeyed as `BulkRunner` says (None: not controlled).

    Returns:
        ``(counts, halted, interrupted)``: this run's counters, the error that stopped it
        from sending more rows (or None), and whether ``stop`` ended it.

    Raises:
        JournalError: the journal could not be read or written.
    """
    runner = BulkRunner(
        client, journal, concurrency=concurrency, timeout=timeout, progress=progress, gate=gate
    )
    work = asyncio.ensure_future(runner.run())
    stopper = asyncio.ensure_future((stop or asyncio.Event()).wait())
    interrupted = False
    try:
        await asyncio.wait({work, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if not work.done():
            interrupted = True
            runner.stop()
            # The requests in flight finish (the waits end at once), unless the service
            # keeps them past the grace: then they stay "sent", their answer unknown.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(SHUTDOWN_GRACE):
                    await work
    finally:
        if not work.done():  # cancelled (a second signal): stop at once
            work.cancel()
        stopper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await stopper
        with contextlib.suppress(asyncio.CancelledError):
            await work
    return runner.counts, runner.halted, interrupted


async def bulk_cancel(
    client: PaymentsClient,
    input_path: str | Path,
    *,
    results_path: str | Path | None = None,
    journal_path: str | Path | None = None,
    use_journal: bool = True,
    skip_invalid: bool = False,
    concurrency: int = DEFAULT_CONCURRENCY,
    timeout: float = POLL_TIMEOUT,
    events: BulkEvents | None = None,
    stop: asyncio.Event | None = None,
    new_run: bool = False,
    transliterate: bool = False,
    today: dt.date | None = None,
    chase: ChasePolicy | None = None,
) -> BulkReport:
    """Cancel every payment listed in a CSV/JSONL file, resumably.

    The four steps of a run: check the input (`check_run_input`: raising
    `BulkInputError` with every problem and nothing sent, unless
    ``skip_invalid``); open the run (`open_run`: the journal beside the results;
    when it already holds a plan for this same input the run resumes it, otherwise the
    plan, fixed ids and bodies, is committed before the first request); execute it
    (`execute_run`); write the results file, one line per input row
    (`write_run_results`).

    Args:
        client: the client to send with.
        input_path: the CSV or JSONL file.
        results_path: where to write the results; `default_results_path` if None.
        journal_path: the journal file, or a ``postgresql://`` address to keep it in
            PostgreSQL (the ``scale`` extra); `default_journal_path` if None.
        use_journal: False keeps the plan in memory only (no resume after a crash).
        skip_invalid: plan only the valid rows; invalid ones are reported as ``invalid``.
        concurrency: HTTP requests in flight at once.
        timeout: seconds to wait for each row's outcome.
        events: told how the run goes (`BulkEvents`); what its ``checked`` raises
            propagates and nothing is written.
        stop: when set, the run stops as `execute_run` says (no more rows sent, the
            requests in flight finish) and the report says ``interrupted``.
        new_run: a journal file of another input gets a new run for this input rather
            than being refused (in a PostgreSQL journal: a new run may list payments
            another run of the database records); rows whose payment has a cancellation
            recorded in the journal are refused, or with ``skip_invalid`` reported
            ``invalid`` (see `open_run`).
        transliterate: convert names and addresses to the SEPA character set; each
            change is in the row's ``transliterated`` result (see `check_run_input`).
        today: the TARGET2 day recall windows are judged on (see `check_run_input`) and
            a chase counts banking days to; None: today in Central European Time.
        chase: when a resumed run chases its rows whose recall is still unanswered:
            before the run waits for them, each due row (`ChasePolicy.due`) gets one
            pacs.028 request for status update, and no camt.056 is sent again (see
            `chase_rows`); a paused run chases once resumed, an aborted one never.
            None: never.

    Returns:
        The report; the results file is written even when the run was interrupted.

    Raises:
        BulkInputError: the input has problems (and ``skip_invalid`` is off, or nothing
            valid is left), or with ``new_run`` rows already cancelled in the journal;
            nothing was sent (and no journal was created for a bad input).
        JournalBusyError: another run holds the journal; nothing was sent.
        JournalError: the journal belongs to another input, or (PostgreSQL) another run
            of the database records a cancellation for some of this input's payments,
            both without ``new_run``; or it cannot be written.
        ResultsWriteError: the results cannot be written (an ``OSError``); the run is
            over and the journal keeps every outcome.
        OSError: the input cannot be read.
    """
    start = time.monotonic()
    events = events or BulkEvents()
    checked = await check_run_input(
        input_path,
        skip_invalid=skip_invalid,
        events=events,
        transliterate=transliterate,
        today=today,
    )
    await events.checked(checked)
    results = Path(results_path) if results_path is not None else default_results_path(input_path)
    journal_target = (journal_path or default_journal_path(results)) if use_journal else None
    journal, resumed = open_run(
        checked, journal_target, events=events, new_run=new_run, skip_invalid=skip_invalid
    )
    # The run obeys its control (pause, resume, abort) read from its journal's database.
    gate, close_gate = (
        (None, None)
        if journal_target is None
        else journal_gate(journal.path or str(journal_target), journal.run_id)
    )
    try:
        states = journal.state_counts()
        already_final = sum(states.values()) - _unfinished(states)
        events.planned(checked, resumed)
        sending = time.monotonic()
        chases = None
        stopping = stop.is_set if stop is not None else lambda: False
        if (
            chase is not None
            and resumed
            and (gate is None or await gate.may_send(stopping))
            and not stopping()
        ):
            chases = await chase_rows(
                client, journal.iter_rows(unfinished=True), journal, chase, today=today
            )
        counts, halted, interrupted = await execute_run(
            client,
            journal,
            concurrency=concurrency,
            timeout=timeout,
            progress=events,
            stop=stop,
            gate=gate,
        )
        sending = time.monotonic() - sending
        totals = write_run_results(
            journal.iter_rows(), results, transliterated=transliterations(checked)
        )
        return BulkReport(
            counts=counts,
            row_count=totals.rows,
            results_path=results,
            journal_path=journal.path,
            resumed=resumed,
            already_final=already_final,
            elapsed=time.monotonic() - start,
            interrupted=interrupted,
            sending=sending,
            journal_commits=getattr(journal, "commits", 0),
            totals=totals,
            halted=halted,
            chases=chases,
            read_rows=journal.rows,
        )
    finally:
        if close_gate is not None:
            close_gate()
        journal.close()
