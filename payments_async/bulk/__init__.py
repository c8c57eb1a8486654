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
``execute_run``, ``write_run_results``; ``plan_summary`` says what a run would send
without sending anything. Rows are named with one vocabulary (``Stage``,
``RowOutcome``) and what a run's rows add up to is one ``Verdict``
(``RunTotals.verdict``), for a local run and a queued one alike. See
``examples/README.md`` for the columns, and ``docs/scaling.md`` for runs over many worker
processes.
"""

from ._attention import AttentionReport, read_results, write_attention
from ._awaited import awaited_cancellations
from ._chase import DEFAULT_CHASE_LIMIT, ChasePolicy, ChaseReport
from ._control import (
    Action,
    ControlEvent,
    ControlState,
    RunAbortedError,
    RunControlError,
    RunFinishedError,
    RunNotFoundError,
    RunState,
    read_control,
    record_action,
)
from ._dry_run import RunPlan, plan_summary
from ._errors import (
    BulkInputError,
    JournalBusyError,
    JournalError,
    JournalUnavailableError,
    ResultsWriteError,
)
from ._input import InputCheck, RowError
from ._journal import (
    Journal,
    PlannedRow,
    RowState,
    SqliteJournal,
    journal_counts,
)
from ._memory import MemoryJournal
from ._plan import (
    BulkEvents,
    check_run_input,
    default_journal_path,
    default_results_path,
    open_run,
)
from ._queue import (
    EnqueueReport,
    enqueue_run,
    queue_status,
    run_worker,
    write_queue_results,
)
from ._recall import AlreadyRecalledError, Recall
from ._refresh import RefreshReport, refresh_pending
from ._report import RunReport, run_report
from ._results import RESULT_COLUMNS, write_run_results
from ._rows import RowOutcome, RunTotals, Stage, Verdict
from ._runner import (
    DEFAULT_CONCURRENCY,
    BulkCounts,
    BulkReport,
    ProgressSink,
    bulk_cancel,
    execute_run,
)
from ._status import QueueStatus, journal_status
from ._steps import connection_limit_for
from ._stores import open_journal
from ._stores._recalls import RecallLedger, open_recall_ledger
from ._times import RunTimes

__all__ = [
    "DEFAULT_CHASE_LIMIT",
    "DEFAULT_CONCURRENCY",
    "RESULT_COLUMNS",
    "Action",
    "AlreadyRecalledError",
    "AttentionReport",
    "BulkCounts",
    "BulkEvents",
    "BulkInputError",
    "BulkReport",
    "ChasePolicy",
    "ChaseReport",
    "ControlEvent",
    "ControlState",
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
    "RefreshReport",
    "ResultsWriteError",
    "RowError",
    "RowOutcome",
    "RowState",
    "RunAbortedError",
    "RunControlError",
    "RunFinishedError",
    "RunNotFoundError",
    "RunPlan",
    "RunReport",
    "RunState",
    "RunTimes",
    "RunTotals",
    "SqliteJournal",
    "Stage",
    "Verdict",
    "awaited_cancellations",
    "bulk_cancel",
    "check_run_input",
    "connection_limit_for",
    "default_journal_path",
    "default_results_path",
    "enqueue_run",
    "execute_run",
    "journal_counts",
    "journal_status",
    "open_journal",
    "open_recall_ledger",
    "open_run",
    "plan_summary",
    "queue_status",
    "read_control",
    "read_results",
    "record_action",
    "refresh_pending",
    "run_report",
    "run_worker",
    "write_attention",
    "write_queue_results",
    "write_run_results",
]
