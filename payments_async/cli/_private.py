"""The library's private names the command line still uses, each in this one place.

Everything else the commands need comes from the library's public names. Each name here
waits for a public one in ``payments_async.bulk``: the bulk input's JSON hook and row
parser, the queue and its worker's defaults, and the PostgreSQL address helpers.

The defaults are imported at once; the others when they are asked for, so that
``payments-async --help`` loads no HTTP client, codec or database driver. A command that
calls ``_private.queue_status(...)`` looks the name up at each call, as an import inside
the function would.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .._constants import (
    BULK_HEARTBEAT_INTERVAL,
    BULK_STALLED_AFTER,
    BULK_STALLED_CHECK_INTERVAL,
    BULK_STATUS_INTERVAL,
    BULK_WORKER_CONCURRENCY,
    BULK_WORKER_ROWS,
)

if TYPE_CHECKING:
    from ..bulk._input import DuplicateKeyError, parse_record, unique_keys
    from ..bulk._queue import (
        QueueStatus,
        enqueue_run,
        queue_status,
        run_worker,
        write_queue_results,
    )
    from ..bulk._stores import is_postgres_url
    from ..bulk._stores._postgres import redact as redact_dsn

__all__ = [
    "BULK_HEARTBEAT_INTERVAL",
    "BULK_STALLED_AFTER",
    "BULK_STALLED_CHECK_INTERVAL",
    "BULK_STATUS_INTERVAL",
    "BULK_WORKER_CONCURRENCY",
    "BULK_WORKER_ROWS",
    "DuplicateKeyError",
    "QueueStatus",
    "enqueue_run",
    "is_postgres_url",
    "parse_record",
    "queue_status",
    "redact_dsn",
    "run_worker",
    "unique_keys",
    "write_queue_results",
]

_LAZY: dict[str, tuple[str, str]] = {
    "DuplicateKeyError": ("payments_async.bulk._input", "DuplicateKeyError"),
    "parse_record": ("payments_async.bulk._input", "parse_record"),
    "unique_keys": ("payments_async.bulk._input", "unique_keys"),
    "QueueStatus": ("payments_async.bulk._queue", "QueueStatus"),
    "enqueue_run": ("payments_async.bulk._queue", "enqueue_run"),
    "queue_status": ("payments_async.bulk._queue", "queue_status"),
    "run_worker": ("payments_async.bulk._queue", "run_worker"),
    "write_queue_results": ("payments_async.bulk._queue", "write_queue_results"),
    "is_postgres_url": ("payments_async.bulk._stores", "is_postgres_url"),
    "redact_dsn": ("payments_async.bulk._stores._postgres", "redact"),
}


def __getattr__(name: str) -> object:
    try:
        module, attribute = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    return getattr(importlib.import_module(module), attribute)
