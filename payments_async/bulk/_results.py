"""Write a bulk run's results file (CSV or JSONL): one line per input row, in file order."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from ._errors import ResultsWriteError
from ._journal import RowState
from ._rows import UNFINISHED, RowOutcome, RunTotals, Stage, outcome_of

__all__ = [
    "RESULT_COLUMNS",
    "UNFINISHED",
    "result_record",
    "row_outcome",
    "write_results",
    "write_run_results",
]

RESULT_COLUMNS: Final = (
    "line",
    "original_end_to_end_id",
    "assignment_id",
    "cancellation_id",
    "payments_service_id",
    "replayed",
    "outcome",
    "status",
    "reason_codes",
    "reason",
    "return_request_needed",
    "attempts",
    "sent_at",
    "acknowledged_at",
    "final_at",
    "chases",
    "chased_at",
    "recall_deadline",
    "transliterated",
)
"""The columns of the results file, in order.

``recall_deadline`` is the last day the row's recall may be sent (ISO 8601), empty when
the input does not give the original settlement date. ``transliterated`` lists, for a run
with transliteration, every text the row's camt.056 sends converted to the SEPA character
set (``field: 'old' -> 'new'``, ``; ``-separated); empty when nothing was converted.
"""


def row_outcome(row: RowState) -> RowOutcome:
    """What a row's state means for its owner, as the results file and summary name it.

    ``accepted``, ``rejected``, ``unknown`` (codes nobody can classify, or a message an
    earlier attempt sent that cannot be sent again: check with the bank), ``refused``
    (the service refused it for good; the reason says why), ``invalid`` (a skipped input
    row), ``not_sent`` (the service does not have it; a rerun sends it, unless the row
    is final: its message was refused before sending, the reason says why), ``in_flight``
    (sent, no answer recorded: the service may have it; a rerun resends it with its
    recorded id) or ``pending`` (acknowledged, outcome not yet known: a rerun waits for
    it). See `payments_async.bulk.RowOutcome`.
    """
    return outcome_of(row.state, row.outcome)


_FINAL_REASONS: Final = frozenset({RowOutcome.ACCEPTED, RowOutcome.REJECTED, RowOutcome.UNKNOWN})


def result_record(row: RowState, transliterated: str | None = None) -> dict[str, Any]:
    """One row of the results file as a dict (JSON types; CSV writes them as text).

    ``outcome`` is one of `row_outcome`'s names. ``reason`` carries the service's
    reason text for a final outcome, otherwise the error met (why it was refused, why it
    could not be sent, what interrupted it). ``sent_at`` (the last POST started),
    ``acknowledged_at`` (the service answered it) and ``final_at`` (the outcome became
    final) are ISO 8601 UTC times, or None when the row has not got there. ``chases``
    counts the requests for status update (pacs.028) the service took on the row's
    recall, ``chased_at`` is when the latest was recorded (None: never chased).
    ``transliterated``: what the row's text was converted to (see `RESULT_COLUMNS`), or
    None.
    """
    outcome = row_outcome(row)
    reason = row.reason_text if outcome in _FINAL_REASONS else row.error
    return {
        "line": row.line,
        "original_end_to_end_id": row.original_end_to_end_id,
        "assignment_id": row.assignment_id,
        "cancellation_id": row.cancellation_id,
        "payments_service_id": row.payments_service_id,
        "replayed": None if row.created is None else not row.created,
        "outcome": outcome.value,
        "status": row.status,
        "reason_codes": list(row.reason_codes),
        "reason": reason or None,
        "return_request_needed": row.return_request_needed,
        "attempts": row.attempts,
        "sent_at": _iso(row.sent_at),
        "acknowledged_at": _iso(row.acknowledged_at),
        "final_at": _iso(row.final_at),
        "chases": row.chases,
        "chased_at": _iso(row.chased_at),
        "recall_deadline": None if row.recall_deadline is None else row.recall_deadline.isoformat(),
        "transliterated": transliterated,
    }


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


def _csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return " ".join(str(v) for v in value)
    return str(value)


def _noted(
    rows: Iterable[RowState], notes: Iterable[tuple[int, str]] | None
) -> Iterator[tuple[RowState, str | None]]:
    """Each row with its note: ``notes`` are ``(line, text)`` in line order, as the rows."""
    if notes is None:
        for row in rows:
            yield row, None
        return
    pending = iter(notes)
    note = next(pending, None)
    for row in rows:
        while note is not None and note[0] < row.line:
            note = next(pending, None)
        if note is not None and note[0] == row.line:
            yield row, note[1]
        else:
            yield row, None


def write_results(
    path: str | Path,
    rows: Iterable[RowState],
    *,
    transliterated: Iterable[tuple[int, str]] | None = None,
) -> Path:
    """Write the results file atomically (a temporary file renamed over the old one).

    The format follows the suffix: ``.jsonl``/``.ndjson``/``.json`` writes one JSON object
    per line, anything else CSV with a header.

    Args:
        path: where to write.
        rows: the rows, in line order.
        transliterated: ``(line, text)`` in line order: the ``transliterated`` column of
            the rows it names (read as the rows are written, so in bounded memory).

    Returns:
        The path written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    jsonl = path.suffix.lower() in (".jsonl", ".ndjson", ".json")
    with tmp.open("w", encoding="utf-8", newline="") as fh:
        if jsonl:
            for row, note in _noted(rows, transliterated):
                fh.write(json.dumps(result_record(row, note), separators=(",", ":")) + "\n")
        else:
            writer = csv.writer(fh)
            writer.writerow(RESULT_COLUMNS)
            for row, note in _noted(rows, transliterated):
                rec = result_record(row, note)
                writer.writerow([_csv_cell(rec[c]) for c in RESULT_COLUMNS])
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(path)
    return path


def _counted(rows: Iterable[RowState], totals: RunTotals) -> Iterator[RowState]:
    """The rows, passed through, each counted in ``totals`` by `row_outcome`: rows
    by outcome over every run, in the same pass that writes the results file."""
    for r in rows:
        totals.add(
            row_outcome(r),
            return_request_needed=r.return_request_needed,
            final=r.state == Stage.FINAL,
        )
        yield r


def write_run_results(
    rows: Iterable[RowState],
    results_path: str | Path,
    *,
    transliterated: Iterable[tuple[int, str]] | None = None,
) -> RunTotals:
    """Step 4 of a run: write the results file from the rows, and count them by outcome.

    Args:
        rows: the journal's rows, in line order.
        results_path: where to write.
        transliterated: see `write_results`.

    Raises:
        ResultsWriteError: the file cannot be written (an ``OSError``).
    """
    totals = RunTotals()
    try:
        write_results(results_path, _counted(rows, totals), transliterated=transliterated)
    except OSError as exc:
        raise ResultsWriteError(exc.errno, exc.strerror, str(results_path)) from exc
    return totals
