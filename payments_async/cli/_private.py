"""The library's private names the command line still uses, each in this one place.

Everything else the commands need comes from the library's public modules. Each name
here waits for a public one: the bulk input's JSON hook and row parser, the queue and the
PostgreSQL address helpers (``payments_async.bulk``), the sandbox's runner, option table
and notification target, a key generator for the demo, and the defaults and event-loop
runner of ``_constants`` and ``_loop``.

The light names (defaults, the loop runner) are imported at once; the others when they
are asked for, so that ``payments-async --help`` loads no HTTP client, codec or database
driver. A command that calls ``_private.queue_status(...)`` looks the name up at each
call, as an import inside the function would.
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
    DEFAULT_KEYGEN_BITS,
    MIN_RSA_BITS,
    NOTIFY_PATH,
    POLL_TIMEOUT,
    SANDBOX_CLIENT_ID,
    TOKEN_PATH,
)
from .._loop import LOOP_CHOICES, LoopKind
from .._loop import run as run_loop

if TYPE_CHECKING:
    from .._keys import generate_private_key, load_public_key, public_key_pem
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
    from ..sandbox._config import NotificationTarget
    from ..sandbox._main import run_from_args as run_sandbox
    from ..sandbox._options import SANDBOX_OPTIONS, SandboxOption, sandbox_namespace

__all__ = [
    "BULK_HEARTBEAT_INTERVAL",
    "BULK_STALLED_AFTER",
    "BULK_STALLED_CHECK_INTERVAL",
    "BULK_STATUS_INTERVAL",
    "BULK_WORKER_CONCURRENCY",
    "BULK_WORKER_ROWS",
    "DEFAULT_KEYGEN_BITS",
    "LOOP_CHOICES",
    "MIN_RSA_BITS",
    "NOTIFY_PATH",
    "POLL_TIMEOUT",
    "SANDBOX_CLIENT_ID",
    "SANDBOX_OPTIONS",
    "TOKEN_PATH",
    "DuplicateKeyError",
    "LoopKind",
    "NotificationTarget",
    "QueueStatus",
    "SandboxOption",
    "enqueue_run",
    "generate_private_key",
    "is_postgres_url",
    "load_public_key",
    "parse_record",
    "public_key_pem",
    "queue_status",
    "redact_dsn",
    "run_loop",
    "run_sandbox",
    "run_worker",
    "sandbox_namespace",
    "unique_keys",
    "write_queue_results",
]

_LAZY: dict[str, tuple[str, str]] = {
    "generate_private_key": ("payments_async._keys", "generate_private_key"),
    "load_public_key": ("payments_async._keys", "load_public_key"),
    "public_key_pem": ("payments_async._keys", "public_key_pem"),
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
    "run_sandbox": ("payments_async.sandbox._main", "run_from_args"),
    "NotificationTarget": ("payments_async.sandbox._config", "NotificationTarget"),
    "SANDBOX_OPTIONS": ("payments_async.sandbox._options", "SANDBOX_OPTIONS"),
    "SandboxOption": ("payments_async.sandbox._options", "SandboxOption"),
    "sandbox_namespace": ("payments_async.sandbox._options", "sandbox_namespace"),
}


def __getattr__(name: str) -> object:
    try:
        module, attribute = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    return getattr(importlib.import_module(module), attribute)
