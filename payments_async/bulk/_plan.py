"""The first steps of a bulk run, shared by the local and the queued command.

Check the input (as a stream), then fix every row's ids and encode its camt.056 before
anything is sent, and open the run's journal (planning it when new).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import secrets
from collections.abc import Iterator, Sequence
from pathlib import Path

from .. import ValidationError
from ..iso20022 import encode
from ._errors import BulkInputError
from ._events import BulkEvents
from ._input import (
    BulkInput,
    BulkRow,
    InputCheck,
    InputScan,
    ProgressCallback,
    RowError,
    RowOptions,
    build_row_message,
    check_input,
)
from ._input_row import row_deadline
from ._journal import Journal, JournalError, PlannedRow
from ._memory import MemoryJournal
from ._stores import is_postgres_url, open_journal

__all__ = [
    "BulkEvents",
    "check_run_input",
    "default_journal_path",
    "default_results_path",
    "new_run_id",
    "open_run",
    "plan_input",
    "plan_rows",
    "recorded_refusal",
]


def _reading(events: BulkEvents, phase: str) -> ProgressCallback:
    return lambda done, size: events.reading(phase, done, size)


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


def _problems_by_line(errors: Sequence[RowError]) -> dict[int, list[str]]:
    by_line: dict[int, list[str]] = {}
    for err in errors:
        text = f"{err.column}: {err.message}" if err.column else err.message
        by_line.setdefault(err.line, []).append(text)
    return by_line


def _planned(row: BulkRow, line: int, run_id: str, options: RowOptions | None) -> PlannedRow:
    aid = row.assignment_id or f"BC-{run_id}-{line}"
    cid = f"CX-{run_id}-{line}"
    options = options or RowOptions()
    msg = build_row_message(
        row,
        assignment_id=aid,
        cancellation_id=cid,
        transliterate=options.transliterate,
        today=options.today,
    )
    return PlannedRow(
        line, row.original_end_to_end_id, aid, cid, encode(msg), recall_deadline=row_deadline(row)
    )


def plan_rows(
    bulk: BulkInput, run_id: str, *, transliterate: bool = False, today: dt.date | None = None
) -> list[PlannedRow]:
    """Fix every row's ids and encode its camt.056, before anything is sent.

    A row's ``assgnmt.id`` is the file's ``assignment_id`` or ``BC-<run id>-<line>``; its
    ``cxlId`` is ``CX-<run id>-<line>``. Both are unique per run and at most 35 characters.

    Args:
        bulk: the input read and checked.
        run_id: the run's id.
        transliterate: as the rows were read (see `check_run_input`).
        today: the day recall windows are judged on (see `check_run_input`).

    Returns:
        One planned row per data row; invalid rows carry their errors and no body.
    """
    options = RowOptions(transliterate=transliterate, today=today)
    planned = [_planned(row, row.line, run_id, options) for row in bulk.rows]
    by_line = _problems_by_line(bulk.errors)
    planned.extend(
        PlannedRow(line, None, None, None, None, error="; ".join(by_line.get(line, ["invalid"])))
        for line in bulk.invalid_lines
    )
    planned.sort(key=lambda r: r.line)
    return planned


def _no_check(row: BulkRow) -> list[RowError]:
    return []


def plan_input(
    checked: InputCheck, run_id: str, *, progress: ProgressCallback | None = None
) -> Iterator[PlannedRow]:
    """Plan a checked file row by row, reading it again as a stream (bounded memory).

    The same ids and bodies as `plan_rows`, built by the rules the file was checked by
    (``checked.options``: transliteration, the day recall windows are judged on); give
    the result to ``Journal.plan``, which consumes it inside its one transaction.

    Args:
        checked: what `check_input` found in the file.
        run_id: the run's id.
        progress: told ``(bytes read, file size)`` as the file is read.

    Yields:
        One planned row per data row, in line order; invalid rows carry their errors.

    Raises:
        JournalError: the file changed since it was checked (the plan is rolled back).
    """
    by_line = _problems_by_line(checked.errors)
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
        try:
            planned = _planned(row, line, run_id, checked.options)
        except ValidationError:
            raise changed from None
        yield planned
    if scan.sha256 != checked.sha256:
        raise changed


def recorded_refusal(original_end_to_end_id: str | None, earlier: str) -> str:
    """Why a row whose payment has a cancellation recorded in the journal is not sent."""
    return (
        f"payment {original_end_to_end_id} already has a cancellation recorded in "
        f"this journal ({earlier}); it is not sent again"
    )


def _not_recorded(
    rows: Iterator[PlannedRow],
    recorded: dict[str, str],
    *,
    skip_invalid: bool,
    refuse_input: bool = False,
) -> Iterator[PlannedRow]:
    """The planned rows, less those whose payment has a recorded cancellation: planned
    ``invalid`` with ``skip_invalid``, else `BulkInputError` once all are found; with
    ``refuse_input`` (a new run not asked for with ``new_run``) `JournalError` instead."""
    refused: list[RowError] = []
    for row in rows:
        earlier = recorded.get(row.original_end_to_end_id or "")
        if earlier is None:
            yield row
            continue
        why = recorded_refusal(row.original_end_to_end_id, earlier)
        if skip_invalid and not refuse_input:
            yield PlannedRow(row.line, row.original_end_to_end_id, None, None, None, error=why)
        else:
            refused.append(RowError(row.line, "original_end_to_end_id", why))
    if refused and refuse_input:
        first = refused[0]
        raise JournalError(
            f"{len(refused)} payment(s) of this input already have a cancellation recorded "
            f"in the journal (first at line {first.line}: {first.message}): the input was "
            "edited after a stop, or repeats payments recalled before; nothing "
            "was sent. Resume with the original file (its rows keep their ids), or start a "
            "new run with --new-run: rows whose payment already has a cancellation recorded "
            "in the journal are refused"
        )
    if refused:
        raise BulkInputError(refused)


async def check_run_input(
    input_path: str | Path,
    *,
    skip_invalid: bool = False,
    events: BulkEvents | None = None,
    transliterate: bool = False,
    today: dt.date | None = None,
) -> InputCheck:
    """Step 1 of a run: check every row of the input, as a stream; nothing is written.

    Args:
        input_path: the CSV or JSONL file.
        skip_invalid: accept a file with invalid rows (they are reported ``invalid``),
            as long as some rows are valid.
        events: told how much of the file has been read.
        transliterate: convert names and addresses to the SEPA character set (every
            change is reported in the results); identifiers never change. Without it,
            text outside the set is a problem that names its characters.
        today: the TARGET2 day recall windows are judged on (rows that give
            ``original_settlement_date`` and are past their window are refused, each
            problem carrying its deadline); None: today in Central European Time. The
            run is planned by the same day (``InputCheck.options``).

    Raises:
        BulkInputError: the input has problems (and ``skip_invalid`` is off, or nothing
            valid is left).
        OSError: the input cannot be read.
        UnicodeDecodeError: the input is not UTF-8.
    """
    events = events or BulkEvents()
    bulk = await asyncio.to_thread(
        functools.partial(
            check_input,
            input_path,
            progress=_reading(events, "check"),
            transliterate=transliterate,
            today=today,
        )
    )
    if bulk.errors and (not skip_invalid or bulk.fatal or not bulk.valid):
        raise BulkInputError(bulk.errors)
    return bulk


def open_run(
    checked: InputCheck,
    journal_path: str | Path | None,
    *,
    events: BulkEvents | None = None,
    new_run: bool = False,
    skip_invalid: bool = False,
) -> tuple[Journal, bool]:
    """Step 2 of a local run: open its journal, and plan the run when it is new.

    Args:
        checked: the input, as `check_run_input` found it.
        journal_path: a file, a ``postgresql://`` address, or None to keep the plan in
            memory only (no resume after a crash).
        events: told how much of the file has been read while planning.
        new_run: a journal file of another input gets a new run for this one instead of
            being refused; in a PostgreSQL journal, a new run is allowed to list payments
            that another run of the database records a cancellation for. A row whose
            payment has a cancellation recorded in that journal is never sent again: it
            is refused (`BulkInputError`, nothing written), or with ``skip_invalid``
            planned as ``invalid`` with the reason.
        skip_invalid: see ``new_run``.

    Returns:
        ``(journal, resumed)``: ``resumed`` when the journal already held this input's
        plan. The caller closes the journal.

    Raises:
        BulkInputError: with ``new_run``, rows whose payment already has a cancellation
            recorded in the journal (and no ``skip_invalid``); nothing was written.
        JournalBusyError: another run holds the journal.
        JournalError: the journal belongs to another input, or (PostgreSQL) a new run
            lists payments another run of the database records a cancellation for, both
            without ``new_run``; or the journal cannot be opened or written, or the input
            changed since it was checked. Nothing was sent.
    """
    events = events or BulkEvents()
    journal: Journal
    if journal_path is None:
        journal = MemoryJournal(new_run_id())
    else:
        target = journal_path if is_postgres_url(journal_path) else Path(journal_path)
        journal = open_journal(
            target,
            input_sha256=checked.sha256,
            new_run_id=new_run_id(),
            input_name=checked.path.name,
            new_run=new_run,
        )
    try:
        resumed = journal.is_planned()
        if not resumed:
            rows = plan_input(checked, journal.run_id, progress=_reading(events, "plan"))
            recorded = journal.recorded_cancellations()
            if recorded:
                rows = _not_recorded(
                    rows, recorded, skip_invalid=skip_invalid, refuse_input=not new_run
                )
            journal.plan(rows)
    except BaseException:
        journal.forget_unplanned()
        journal.close()
        raise
    return journal, resumed
