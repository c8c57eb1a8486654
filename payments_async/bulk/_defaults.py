"""The defaults of bulk runs (local, and the queue and its workers), on one screen."""

from __future__ import annotations

from typing import Final

__all__ = [
    "ENQUEUE_BATCH",
    "HEARTBEAT_INTERVAL",
    "JOB_ATTEMPTS",
    "JOB_RETRY_WAIT",
    "JOURNAL_OUTAGE_WINDOW",
    "QUEUE_NAME",
    "RATE_BACKLOG",
    "RESEND_INITIAL",
    "RESEND_MAX",
    "SHUTDOWN_GRACE",
    "STALLED_AFTER",
    "STALLED_CHECK_INTERVAL",
    "STATUS_INTERVAL",
    "WORKER_CONCURRENCY",
    "WORKER_ROWS",
]

QUEUE_NAME: Final = "payments-bulk"
"""The procrastinate queue bulk rows go to."""
ENQUEUE_BATCH: Final = 1000
"""Jobs deferred per INSERT."""
WORKER_CONCURRENCY: Final = 32
"""HTTP requests one worker process has in flight."""
WORKER_ROWS: Final = 1000
"""Rows (jobs) one worker process works on at once, those waiting for their outcome included."""
SHUTDOWN_GRACE: Final = 5.0
"""Seconds a stopping worker lets its rows finish before it puts them back in the queue."""
HEARTBEAT_INTERVAL: Final = 2.0
"""Seconds between a worker's heartbeats."""
STALLED_AFTER: Final = 10.0
"""Seconds of silence after which a worker is taken for dead and its jobs are retried."""
STALLED_CHECK_INTERVAL: Final = 2.0
"""Seconds between each worker's looks for stalled jobs."""
JOB_ATTEMPTS: Final = 5
"""Attempts of a row's job while the service keeps failing."""
JOB_RETRY_WAIT: Final = 2
"""Seconds before a row's job is retried, times the attempt number."""
STATUS_INTERVAL: Final = 1.0
"""Seconds between progress reads while a queued run is watched."""
RATE_BACKLOG: Final = 1.0
"""Seconds ahead a run's rate may be booked before another row is sent: the rows under way
then ask no more than the rate serves, and wait for their slots well within their deadlines."""
RESEND_INITIAL: Final = 0.5
"""Seconds before a local run resends a row whose outcome is unknown (then doubling)."""
RESEND_MAX: Final = 8.0
"""The longest pause between two resends of a row whose outcome is unknown."""
JOURNAL_OUTAGE_WINDOW: Final = 30.0
"""Seconds a run waits for its PostgreSQL journal to come back (reconnecting with a
growing pause) before it stops with `JournalUnavailableError`."""
XML_INPUT_MAX_BYTES: Final = 4 * 1024 * 1024
"""The largest ISO 20022 XML bulk input, in bytes: it is read whole (CSV and JSONL stream)."""
