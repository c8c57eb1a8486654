"""Bulk cancellation: many camt.056 requests from a CSV/JSONL file, resumable after a crash.

::

    report = await bulk_cancel(client, "payments.csv", concurrency=32)

Every row's ids are fixed and committed to a journal (a SQLite file, or PostgreSQL with the
``scale`` extra) before anything is sent, and every state change is committed as it
happens, so the same call after a crash resumes without creating anything twice. The input
is checked and planned as a stream, and the run reads the journal a batch at a time, so
memory stays bounded however many rows there are (``--no-journal`` keeps the plan in
memory). See ``examples/README.md`` for the columns, and ``docs/scaling.md`` for runs over
many worker processes.
"""

from ._input import (
    COLUMNS,
    OPTIONAL_COLUMNS,
    REQUIRED_COLUMNS,
    BulkInput,
    BulkRow,
    InputCheck,
    RowError,
    build_row_message,
    check_input,
    check_row,
    read_input,
)
from ._journal import (
    Journal,
    JournalError,
    MemoryJournal,
    PlannedRow,
    RowState,
    SqliteJournal,
    journal_counts,
)
from ._results import RESULT_COLUMNS, ResultsWriteError, result_record, write_results
from ._runner import (
    DEFAULT_CONCURRENCY,
    MAX_WAITING,
    BulkCounts,
    BulkInputError,
    BulkReport,
    BulkRunner,
    ProgressSink,
    bulk_cancel,
    connection_limit_for,
    default_journal_path,
    default_results_path,
    new_run_id,
    plan_input,
    plan_rows,
)
from ._stores import open_journal

__all__ = [
    "COLUMNS",
    "DEFAULT_CONCURRENCY",
    "MAX_WAITING",
    "OPTIONAL_COLUMNS",
    "REQUIRED_COLUMNS",
    "RESULT_COLUMNS",
    "BulkCounts",
    "BulkInput",
    "BulkInputError",
    "BulkReport",
    "BulkRow",
    "BulkRunner",
    "InputCheck",
    "Journal",
    "JournalError",
    "MemoryJournal",
    "PlannedRow",
    "ProgressSink",
    "ResultsWriteError",
    "RowError",
    "RowState",
    "SqliteJournal",
    "build_row_message",
    "bulk_cancel",
    "check_input",
    "check_row",
    "connection_limit_for",
    "default_journal_path",
    "default_results_path",
    "journal_counts",
    "new_run_id",
    "open_journal",
    "plan_input",
    "plan_rows",
    "read_input",
    "result_record",
    "write_results",
]
