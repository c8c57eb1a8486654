"""Run a bulk cancellation: plan, submit with bounded concurrency, wait, journal every step."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

from .._client import PaymentsClient
from .._constants import POLL_TIMEOUT, TOKEN_PATH
from .._errors import (
    ApiError,
    AuthenticationError,
    PaymentsError,
    PermissionDeniedError,
    RateLimitedError,
    ServerError,
    TransportError,
    ValidationError,
)
from .._models import CancellationOutcome
from ..iso20022 import decode_camt056, encode
from ._input import (
    BulkInput,
    BulkRow,
    InputCheck,
    InputScan,
    ProgressCallback,
    RowError,
    build_row_message,
    check_input,
)
from ._journal import (
    ACKNOWLEDGED,
    FINAL,
    INVALID,
    PLANNED,
    Journal,
    JournalError,
    MemoryJournal,
    PlannedRow,
    RowState,
)
from ._results import UNFINISHED, ResultsWriteError, row_outcome, write_results
from ._stores import is_postgres_url, open_journal

__all__ = [
    "DEFAULT_CONCURRENCY",
    "MAX_WAITING",
    "BulkCounts",
    "BulkInputError",
    "BulkReport",
    "BulkRunner",
    "ProgressSink",
    "bulk_cancel",
    "connection_limit_for",
    "default_journal_path",
    "default_results_path",
    "new_run_id",
    "plan_input",
    "plan_rows",
]

logger = logging.getLogger("payments_async.bulk")

DEFAULT_CONCURRENCY: Final = 32
"""HTTP requests (submissions and outcome reads) in flight at once."""

_SPARE_CONNECTIONS: Final = 4  # for token refreshes beside the bulk requests

MAX_WAITING: Final = 10_000
"""At most this many rows submitted and waiting for their outcome; more wait to be sent."""

QUEUED_PER_SUBMITTER: Final = 4
"""Rows read ahead of the submitters, per unit of concurrency (the rest stay in the journal)."""


class BulkInputError(Exception):
    """The input file has problems; nothing was sent.

    Attributes:
        errors: every problem, with its line number.
    """

    def __init__(self, errors: Sequence[RowError]) -> None:
        self.errors = tuple(errors)
        n = len(self.errors)
        super().__init__(f"{n} problem{'s' if n != 1 else ''} in the input; nothing was sent")


@dataclass(slots=True)
class BulkCounts:
    """Counters of a run, as the progress bar and the summary show them.

    Attributes:
        total: rows this run has to finish (not final before it started).
        sent: requests this run sent that may have reached the service (an attempt that
            failed before its request could leave is not counted).
        submitted: rows the service acknowledged during this run (201 or 200).
        replayed: of those, rows it already had (200): resent with their recorded id.
        accepted: rows whose cancellation was accepted during this run.
        rejected: rows whose cancellation was rejected during this run.
        unknown: rows whose outcome nobody can tell: codes nobody can classify, or a row
            an earlier run sent whose recorded message can no longer be sent. Check
            them with the bank.
        refused: rows the service refused for good (a 4xx a rerun cannot change).
        not_sent: rows whose request could not be sent (token endpoint down, no
            connection, invalid message): the service does not have them.
        failed: rows that met an error a rerun may overcome (see the results file).
    """

    total: int = 0
    sent: int = 0
    submitted: int = 0
    replayed: int = 0
    accepted: int = 0
    rejected: int = 0
    unknown: int = 0
    refused: int = 0
    not_sent: int = 0
    failed: int = 0

    @property
    def done(self) -> int:
        """Rows that need nothing more from this run (final, refused, not sent or failed)."""
        return (
            self.accepted
            + self.rejected
            + self.unknown
            + self.refused
            + self.not_sent
            + self.failed
        )


class ProgressSink(Protocol):
    """Where a run reports progress (the CLI's rich bar, or nothing)."""

    def update(self, counts: BulkCounts) -> None:
        """Called after every change of the counters."""
        ...


@dataclass(slots=True)
class BulkReport:
    """What a run did, for the summary and the exit code.

    The report does not hold the rows: :attr:`rows` reads them from the journal when
    first asked for (the results file has them too, one line per row).

    Attributes:
        counts: this run's counters.
        row_count: rows in the journal (the input's data rows, invalid ones included).
        results_path: the results file written.
        journal_path: the journal file, or None with ``--no-journal``.
        resumed: True when a journal of an earlier run was picked up.
        already_final: rows that were final before this run started (left alone).
        elapsed: seconds the run took (planning and writing included).
        interrupted: True when the run was stopped before it finished.
        journal_commits: transactions written to the journal during the run.
        totals: rows by outcome over every run (see :func:`row_outcome`).
        halted: the error that stopped the run from sending more rows (the token
            endpoint or the service could not be reached), or None.
        read_rows: reads every row from the journal (what :attr:`rows` calls once).
    """

    counts: BulkCounts
    row_count: int
    results_path: Path
    journal_path: Path | None
    resumed: bool
    already_final: int
    elapsed: float
    interrupted: bool = False
    journal_commits: int = 0
    totals: dict[str, int] = field(default_factory=dict)
    halted: PaymentsError | None = None
    read_rows: Callable[[], list[RowState]] = field(default=list, repr=False, compare=False)
    _rows: list[RowState] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def rows(self) -> list[RowState]:
        """Every row as the journal knows it after the run, in line order.

        Read from the journal on first access and kept: all of them in memory at once,
        bodies included (about 1 KB a row). For the number of rows use :attr:`row_count`;
        to go through them, read the results file.
        """
        if self._rows is None:
            self._rows = self.read_rows()
        return self._rows

    @property
    def complete(self) -> bool:
        """True when every valid row has a final outcome."""
        return not any(self.totals.get(k, 0) for k in UNFINISHED)


def connection_limit_for(concurrency: int) -> int:
    """The client ``connection_limit`` a run with this concurrency needs (a few spare)."""
    return concurrency + _SPARE_CONNECTIONS


def default_results_path(input_path: str | Path) -> Path:
    """``<input stem>.results.csv`` in the working directory (``.jsonl`` for a JSONL input).

    Not beside the input: an input kept in a repository or a shared folder stays clean
    unless the caller names a results path there.
    """
    p = Path(input_path)
    suffix = ".jsonl" if p.suffix.lower() in (".jsonl", ".ndjson", ".json") else ".csv"
    return Path(f"{p.stem}.results{suffix}")


def default_journal_path(results_path: str | Path) -> Path:
    """The journal beside the results: ``<results stem>.journal.sqlite``."""
    p = Path(results_path)
    return p.with_name(f"{p.stem}.journal.sqlite")


def new_run_id() -> str:
    """A random 12-character run id (upper-case hex)."""
    return secrets.token_hex(6).upper()


def plan_rows(bulk: BulkInput, run_id: str) -> list[PlannedRow]:
    """Fix every row's ids and encode its camt.056, before anything is sent.

    A row's ``assgnmt.id`` is the file's ``assignment_id`` or ``BC-<run id>-<line>``; its
    ``cxlId`` is ``CX-<run id>-<line>``. Both are unique per run and at most 35 characters.

    Args:
        bulk: the input read and checked.
        run_id: the run's id.

    Returns:
        One planned row per data row; invalid rows carry their errors and no body.
    """
    planned: list[PlannedRow] = []
    for row in bulk.rows:
        aid = row.assignment_id or f"BC-{run_id}-{row.line}"
        cid = f"CX-{run_id}-{row.line}"
        msg = build_row_message(row, assignment_id=aid, cancellation_id=cid)
        planned.append(PlannedRow(row.line, row.original_end_to_end_id, aid, cid, encode(msg)))
    by_line: dict[int, list[str]] = {}
    for err in bulk.errors:
        text = f"{err.column}: {err.message}" if err.column else err.message
        by_line.setdefault(err.line, []).append(text)
    planned.extend(
        PlannedRow(line, None, None, None, None, error="; ".join(by_line.get(line, ["invalid"])))
        for line in bulk.invalid_lines
    )
    planned.sort(key=lambda r: r.line)
    return planned


# 4xx statuses a rerun may overcome: credentials or permissions fixed, load gone down.
_RETRYABLE_4XX: Final = frozenset({401, 403, 408, 409, 425, 429})


def _phase(progress: Callable[[str, int, int], None] | None, phase: str) -> ProgressCallback | None:
    if progress is None:
        return None
    return lambda done, size: progress(phase, done, size)


def _no_check(row: BulkRow) -> list[RowError]:
    return []


def plan_input(
    checked: InputCheck, run_id: str, *, progress: ProgressCallback | None = None
) -> Iterator[PlannedRow]:
    """Plan a checked file row by row, reading it again as a stream (bounded memory).

    The same ids and bodies as :func:`plan_rows`; give the result to ``Journal.plan``,
    which consumes it inside its one transaction.

    Args:
        checked: what :func:`check_input` found in the file.
        run_id: the run's id.
        progress: told ``(bytes read, file size)`` as the file is read.

    Yields:
        One planned row per data row, in line order; invalid rows carry their errors.

    Raises:
        JournalError: the file changed since it was checked (the plan is rolled back).
    """
    by_line: dict[int, list[str]] = {}
    for err in checked.errors:
        text = f"{err.column}: {err.message}" if err.column else err.message
        by_line.setdefault(err.line, []).append(text)
    invalid = set(checked.invalid_lines)
    changed = JournalError(
        f"{str(checked.path)!r} changed while it was being planned; nothing was sent"
    )
    scan = InputScan(checked.path, check=_no_check, progress=progress)
    for item in scan:
        if item.header:
            continue
        line = item.line
        if line in invalid:
            error = "; ".join(by_line.get(line, ["invalid"]))
            yield PlannedRow(line, None, None, None, None, error=error)
            continue
        row = item.row
        if row is None:
            raise changed
        aid = row.assignment_id or f"BC-{run_id}-{line}"
        cid = f"CX-{run_id}-{line}"
        try:
            msg = build_row_message(row, assignment_id=aid, cancellation_id=cid)
        except ValidationError:
            raise changed from None
        yield PlannedRow(line, row.original_end_to_end_id, aid, cid, encode(msg))
    if scan.sha256 != checked.sha256:
        raise changed


def _is_final_refusal(exc: PaymentsError) -> bool:
    """True when resending the same row cannot help: the service refused the message."""
    if isinstance(exc, ValidationError):
        return True
    if isinstance(exc, AuthenticationError | PermissionDeniedError | RateLimitedError):
        return False  # a setup or load problem: a rerun may well succeed
    if isinstance(exc, ServerError) or not isinstance(exc, ApiError) or exc.path == TOKEN_PATH:
        return False
    return exc.status is not None and 400 <= exc.status < 500 and exc.status not in _RETRYABLE_4XX


def _never_sent(exc: PaymentsError) -> bool:
    """True when the attempt failed before its POST could reach the service.

    A token-endpoint failure of any kind (its path is the token path: a refusal, a
    timeout or a dropped connection there, even once its own request was sent), a
    transport failure that says no byte of the POST was sent (connection refused), or a
    message refused before any I/O. An error that escapes the client after an attempt
    that may have been stored is an ``OutcomeUnknownError`` with the POST's path, never
    one of these.
    """
    if isinstance(exc, ValidationError) or exc.path == TOKEN_PATH:
        return True
    if isinstance(exc, TransportError):
        return not exc.request_sent
    return False


def _not_resent(exc: ValidationError) -> str:
    """Why a row an earlier attempt sent ends ``unknown``: its recorded message is refused.

    The body was checked when the run was planned; a later version of the library may
    check more. It cannot be sent again, and the earlier attempt may have reached the
    service: nobody can say which, so the row is not reported refused.
    """
    return (
        f"not sent again: {_one_line(exc)}; an earlier attempt sent this message, so the "
        "service may have it: check with the bank"
    )


def _one_line(exc: BaseException) -> str:
    text = str(exc).replace("\n", " ")
    return f"{type(exc).__name__}: {text}"


class BulkRunner:
    """Submits every unfinished row of a journal and waits for each outcome.

    Rows in state ``planned`` or ``sent`` are (re)sent with their recorded body (same
    ``assgnmt.id``: a row the service already has is answered 200 with its id); rows
    ``acknowledged`` are only waited on; ``final`` rows are not touched.

    Args:
        client: the client; its ``connection_limit`` must exceed ``concurrency`` (see
            :func:`connection_limit_for`) so no request waits inside the pool.
        journal: where every state change is committed.
        concurrency: submissions in flight at once (the client bounds every request).
        timeout: seconds to wait for each row's outcome.
        progress: told about every change of the counters.
        max_waiting: rows submitted and not yet final, at most.
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
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._client = client
        self._journal = journal
        self._concurrency = concurrency
        self._timeout = timeout
        self._progress = progress
        self._requests = asyncio.Semaphore(concurrency)
        self._waiting = asyncio.Semaphore(max(max_waiting, concurrency))
        self.counts = BulkCounts()
        self.halted: PaymentsError | None = None

    def _halting(self) -> bool:
        return self.halted is not None

    def _changed(self) -> None:
        if self._progress is not None:
            self._progress.update(self.counts)

    async def run(self) -> BulkCounts:
        """Finish every row that is not final; return this run's counters.

        Rows are read from the journal as the run goes (:meth:`Journal.iter_rows`), at
        most :data:`QUEUED_PER_SUBMITTER` per unit of concurrency ahead of the requests,
        so memory does not grow with the number of rows.

        Cancelling the task stops at once: what was committed stays committed, and a
        later run picks every row up from its recorded state.

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
            # as itself rather than wrapped, so callers can catch it by type.
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
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
            if row.state == ACKNOWLEDGED and row.payments_service_id is not None:
                psid: str | None = row.payments_service_id
            else:
                psid = await self._submit(row)
            if psid is None:
                self._waiting.release()
                continue
            tg.create_task(self._wait(row.line, psid))

    async def _submit(self, row: RowState) -> str | None:
        assert row.body is not None  # only invalid rows lack a body, and they are done
        journal = self._journal
        # A row waiting for a slot is not "sent": it is marked so only once its request
        # is about to leave, which keeps an interrupted run's counts and states true.
        async with self._requests:
            # Counted together with the journal's "sent" (set before the commit is awaited),
            # so an interrupt during the commit leaves the two in agreement.
            self.counts.sent += 1
            await journal.mark_sent(row.line)  # committed before the request goes out
            try:
                msg = decode_camt056(row.body)
                sub = await self._client.request_cancellation(msg)
            except PaymentsError as exc:
                await self._failed(row, exc)
                return None
        # Counters first: the journal's memory changes before its commit is awaited.
        self.counts.submitted += 1
        if sub.replayed:
            self.counts.replayed += 1
        await journal.mark_acknowledged(row.line, sub.payments_service_id, sub.created)
        self._changed()
        return sub.payments_service_id

    async def _failed(self, row: RowState, exc: PaymentsError) -> None:
        """Record a failed submission as what it is: not sent, refused, or in flight."""
        journal = self._journal
        text = _one_line(exc)
        final = _is_final_refusal(exc)
        # "Not sent" only if no earlier attempt (an earlier run's) may have reached it.
        if _never_sent(exc) and not isinstance(exc, ValidationError) and self.halted is None:
            # The token endpoint or the service cannot be reached: every other row would
            # meet the same. Send no more; what is left stays planned for a rerun.
            logger.debug("line %d: the service cannot be reached; sending no more", row.line)
            self.halted = exc
        # Counters first: the journal's memory changes before its commit is awaited.
        if _never_sent(exc) and row.state == PLANNED:
            self.counts.sent -= 1
            if final:
                self.counts.not_sent += 1
            else:
                self.counts.failed += 1
            logger.debug("line %d: not sent (final=%s): %s", row.line, final, exc)
            await journal.mark_not_sent(row.line, text, final=final)
        elif isinstance(exc, ValidationError):
            # Refused before it left, but an earlier attempt sent it (see _not_resent).
            self.counts.sent -= 1
            self.counts.unknown += 1
            logger.debug("line %d: sent before, cannot be sent again: %s", row.line, exc)
            await journal.mark_final(
                row.line,
                outcome="unknown",
                status=None,
                reason_codes=(),
                reason_text=_not_resent(exc),
                return_request_needed=False,
            )
        elif final:
            self.counts.refused += 1
            logger.debug("line %d: refused: %s", row.line, exc)
            await journal.mark_error(row.line, text, final=True)
        else:
            self.counts.failed += 1
            logger.debug("line %d: submission failed, may be stored: %s", row.line, exc)
            await journal.mark_error(row.line, text, final=False)
        self._changed()

    async def _wait(self, line: int, payments_service_id: str) -> None:
        try:
            try:
                outcome = await self._poll_outcome(payments_service_id)
            except PaymentsError as exc:
                logger.debug("line %d: waiting failed: %s", line, exc)
                await self._journal.mark_error(line, _one_line(exc), final=False)
                self.counts.failed += 1
                self._changed()
                return
            await self._record(line, outcome)
        finally:
            self._waiting.release()

    async def _poll_outcome(self, payments_service_id: str) -> CancellationOutcome:
        """The client's own waiter: its transport keeps at most ``connection_limit``
        requests in flight, so thousands of rows waiting at once only stretch the
        intervals between polls."""
        return await self._client.wait_for_cancellation_outcome(
            payments_service_id, timeout=self._timeout
        )

    async def _record(self, line: int, outcome: CancellationOutcome) -> None:
        name = outcome.outcome.value
        await self._journal.mark_final(
            line,
            outcome=name,
            status=outcome.status or next(iter(outcome.tx_statuses), None),
            reason_codes=outcome.reason_codes,
            reason_text="; ".join(outcome.reason_texts) or None,
            return_request_needed=outcome.return_request_needed,
        )
        if name == "accepted":
            self.counts.accepted += 1
        elif name == "rejected":
            self.counts.rejected += 1
        else:
            self.counts.unknown += 1
        self._changed()


def _unfinished(states: dict[str, int]) -> int:
    """Rows a run still has to finish, from :meth:`Journal.state_counts`."""
    return sum(n for state, n in states.items() if state not in (FINAL, INVALID))


def _no_totals() -> dict[str, int]:
    """Every outcome :func:`row_outcome` names, at zero."""
    return dict.fromkeys(("accepted", "rejected", "unknown", "refused", "invalid", *UNFINISHED), 0)


def _counted(rows: Iterable[RowState], totals: dict[str, int]) -> Iterator[RowState]:
    """The rows, passed through, each counted in ``totals`` by :func:`row_outcome`: rows
    by outcome over every run, in the same pass that writes the results file."""
    for r in rows:
        name = row_outcome(r)
        totals[name] = totals.get(name, 0) + 1
        yield r


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
    progress: ProgressSink | None = None,
    stop: asyncio.Event | None = None,
    on_plan: Callable[[InputCheck, bool], Awaitable[None] | None] | None = None,
    on_checked: Callable[[InputCheck], Awaitable[object] | None] | None = None,
    input_progress: Callable[[str, int, int], None] | None = None,
) -> BulkReport:
    """Cancel every payment listed in a CSV/JSONL file, resumably.

    Reads and checks every row first (raising :class:`BulkInputError` with every problem
    and nothing sent, unless ``skip_invalid``). Then opens the journal beside the results:
    when it already holds a plan for this same input, the run resumes it; otherwise the
    plan (fixed ids and bodies) is committed before the first request. Finally it writes
    the results file, one line per input row.

    Args:
        client: the client to send with.
        input_path: the CSV or JSONL file.
        results_path: where to write the results; :func:`default_results_path` if None.
        journal_path: the journal file, or a ``postgresql://`` address to keep it in
            PostgreSQL (the ``scale`` extra); :func:`default_journal_path` if None.
        use_journal: False keeps the plan in memory only (no resume after a crash).
        skip_invalid: plan only the valid rows; invalid ones are reported as ``invalid``.
        concurrency: HTTP requests in flight at once.
        timeout: seconds to wait for each row's outcome.
        progress: told about every change of the counters.
        stop: when set, the run stops promptly (state stays committed) and the report
            says ``interrupted``.
        on_plan: called with the checked input and whether the run resumes, before sending.
        on_checked: called with the checked input before the journal is opened (the CLI
            checks there that the service can be reached); what it raises propagates and
            nothing is written.
        input_progress: told ``(phase, bytes read, file size)`` while the input is read,
            with phase ``"check"``, then ``"plan"`` for a new run (the file is read as a
            stream, in bounded memory, once to check it and once to plan it).

    Returns:
        The report; the results file is written even when the run was interrupted.

    Raises:
        BulkInputError: the input has problems (and ``skip_invalid`` is off, or nothing
            valid is left); nothing was sent and no journal was created.
        JournalError: the journal belongs to another input, or cannot be written.
        ResultsWriteError: the results cannot be written (an ``OSError``); the run is
            over and the journal keeps every outcome.
        OSError: the input cannot be read.
    """
    start = time.monotonic()
    bulk = await asyncio.to_thread(
        check_input, input_path, progress=_phase(input_progress, "check")
    )
    if bulk.errors and (not skip_invalid or bulk.fatal or not bulk.valid):
        raise BulkInputError(bulk.errors)
    if on_checked is not None:
        checked = on_checked(bulk)
        if checked is not None:
            await checked
    results = Path(results_path) if results_path is not None else default_results_path(input_path)
    journal: Journal
    if use_journal:
        target: str | Path = (
            default_journal_path(results)
            if journal_path is None
            else journal_path
            if is_postgres_url(journal_path)
            else Path(journal_path)
        )
        journal = open_journal(
            target, input_sha256=bulk.sha256, new_run_id=new_run_id(), input_name=bulk.path.name
        )
    else:
        journal = MemoryJournal(new_run_id())
    interrupted = False
    try:
        resumed = journal.is_planned()
        if not resumed:
            journal.plan(plan_input(bulk, journal.run_id, progress=_phase(input_progress, "plan")))
        states = journal.state_counts()
        already_final = sum(states.values()) - _unfinished(states)
        if on_plan is not None:
            maybe = on_plan(bulk, resumed)
            if maybe is not None:
                await maybe
        runner = BulkRunner(
            client,
            journal,
            concurrency=concurrency,
            timeout=timeout,
            progress=progress,
        )
        work = asyncio.ensure_future(runner.run())
        stopper = asyncio.ensure_future((stop or asyncio.Event()).wait())
        try:
            await asyncio.wait({work, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not work.done():
                interrupted = True
                work.cancel()
            stopper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await stopper
            try:
                await work
            except asyncio.CancelledError:
                if not interrupted:
                    raise
        totals = _no_totals()
        try:
            write_results(results, _counted(journal.iter_rows(), totals))
        except OSError as exc:
            raise ResultsWriteError(exc.errno, exc.strerror, str(results)) from exc
        return BulkReport(
            counts=runner.counts,
            row_count=sum(totals.values()),
            results_path=results,
            journal_path=journal.path,
            resumed=resumed,
            already_final=already_final,
            elapsed=time.monotonic() - start,
            interrupted=interrupted,
            journal_commits=getattr(journal, "commits", 0),
            totals=totals,
            halted=runner.halted,
            read_rows=journal.rows,
        )
    finally:
        journal.close()
