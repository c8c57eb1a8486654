"""Bulk cancellation: many camt.056 requests from a CSV/JSONL file, resumable after a crash.

```python
report = await bulk_cancel(client, "payments.csv", concurrency=32)
```

Every row's ids are fixed and committed to a journal (a SQLite file, or PostgreSQL with the
``scale`` extra) before anything is sent, and every state change is committed as it
happens, so the same call after a crash resumes without creating anything twice. The input
is checked and planned as a stream, and the run reads the journal a batch at a time, so
memory stays bounded however many rows there are (``--no-journal`` keeps the plan in
memory). A run is four steps, each public: ``check_run_input``, ``open_run``,
``execute_run``, ``write_run_results``. Rows are named with one vocabulary (``Stage``,
``RowOutcome``) and what a run's rows add up to is one ``Verdict``
(``RunTotals.verdict``), for a local run and a queued one alike. See
``examples/README.md`` for the columns, and ``docs/scaling.md`` for runs over many worker
processes.
"""

from ._attention import AttentionReport, attention_reason, read_results, write_attention
from ._awaited import awaited_cancellations
from ._defaults import (
    HEARTBEAT_INTERVAL,
    STALLED_AFTER,
    STALLED_CHECK_INTERVAL,
    STATUS_INTERVAL,
    WORKER_CONCURRENCY,
    WORKER_ROWS,
)
from ._dry_run import RunPlan, earliest_recall_deadline, plan_summary
from ._errors import JournalBusyError
from ._input import (
    ATTENTION_COLUMN,
    COLUMNS,
    OPTIONAL_COLUMNS,
    REQUIRED_COLUMNS,
    BulkInput,
    BulkRow,
    DuplicateKeyError,
    InputCheck,
    RowError,
    build_row_message,
    check_input,
    check_row,
    parse_record,
    read_input,
    unique_keys,
)
from ._journal import (
    Journal,
    JournalError,
    JournalUnavailableError,
    PlannedRow,
    RowState,
    RowWrites,
    SqliteJournal,
    journal_counts,
)
from ._memory import MemoryJournal
from ._plan import (
    BulkEvents,
    BulkInputError,
    check_run_input,
    default_journal_path,
    default_results_path,
    new_run_id,
    open_run,
    plan_input,
    plan_rows,
)
from ._queue import (
    EnqueueReport,
    QueueStatus,
    enqueue_run,
    queue_status,
    run_worker,
    write_queue_results,
)
from ._recall import AlreadyRecalledError, Recall
from ._report import REPORT_ROWS, RunReport, charts_available, run_report
from ._results import (
    RESULT_COLUMNS,
    ResultsWriteError,
    result_record,
    row_outcome,
    write_results,
    write_run_results,
)
from ._rows import UNFINISHED, RowOutcome, RunTotals, Stage, Verdict
from ._runner import (
    DEFAULT_CONCURRENCY,
    MAX_WAITING,
    BulkCounts,
    BulkReport,
    BulkRunner,
    ProgressSink,
    bulk_cancel,
    execute_run,
)
from ._steps import connection_limit_for
from ._stores import is_postgres_url, open_journal
from ._stores._recalls import RecallLedger, open_recall_ledger

__all__ = [
    "ATTENTION_COLUMN",
    "COLUMNS",
    "DEFAULT_CONCURRENCY",
    "HEARTBEAT_INTERVAL",
    "MAX_WAITING",
    "OPTIONAL_COLUMNS",
    "REPORT_ROWS",
    "REQUIRED_COLUMNS",
    "RESULT_COLUMNS",
    "STALLED_AFTER",
    "STALLED_CHECK_INTERVAL",
    "STATUS_INTERVAL",
    "UNFINISHED",
    "WORKER_CONCURRENCY",
    "WORKER_ROWS",
    "AlreadyRecalledError",
    "AttentionReport",
    "BulkCounts",
    "BulkEvents",
    "BulkInput",
    "BulkInputError",
    "BulkReport",
    "BulkRow",
    "BulkRunner",
    "DuplicateKeyError",
    "EnqueueReport",
    "InputCheck",
    "Journal",
    "JournalBusyError",
    "JournalError",
    "JournalUnavailableError",
    "MemoryJournal",
    "PlannedRow",
    "ProgressSink",
    "QueueStatus",
    "Recall",
    "RecallLedger",
    "ResultsWriteError",
    "RowError",
    "RowOutcome",
    "RowState",
    "RowWrites",
    "RunPlan",
    "RunReport",
    "RunTotals",
    "SqliteJournal",
    "Stage",
    "Verdict",
    "attention_reason",
    "awaited_cancellations",
    "build_row_message",
    "bulk_cancel",
    "charts_available",
    "check_input",
    "check_row",
    "check_run_input",
    "connection_limit_for",
    "default_journal_path",
    "default_results_path",
    "earliest_recall_deadline",
    "enqueue_run",
    "execute_run",
    "is_postgres_url",
    "journal_counts",
    "new_run_id",
    "open_journal",
    "open_recall_ledger",
    "open_run",
    "parse_record",
    "plan_input",
    "plan_rows",
    "plan_summary",
    "queue_status",
    "read_input",
    "read_results",
    "result_record",
    "row_outcome",
    "run_report",
    "run_worker",
    "unique_keys",
    "write_attention",
    "write_queue_results",
    "write_results",
    "write_run_results",
]
