"""The storage kit under every durable store: bulk journals and notification inboxes.

What every store needs and is written once here: how a PostgreSQL connection is made and
its failures told (`connect`, `connect_error`), one outage policy for every process that
holds a database (`Outage`), one group commit with a SQLite and a psycopg adapter
(`GroupCommit`, `SqliteBatch`, `PsycopgBatch`), the mapping of a SQLite failure (a full
disk included, `sqlite_error`), one writer per SQLite file (`lock_file`), and procrastinate
under the rooms that run jobs on PostgreSQL (`install_jobs_schema`, `through_outages`,
`retry_stalled`, `LocalJobs`). Each store keeps its own schema and meaning in its room, and its own
public error types (`StoreErrors` names them).
"""

from ._errors import StoreErrors
from ._group import GroupCommit, PsycopgBatch, SqliteBatch
from ._jobs import (
    LocalJobs,
    advisory_lock_id,
    all_loops,
    install_jobs_schema,
    require_procrastinate,
    retry_stalled,
    through_outages,
)
from ._lock import FileLock, holder_text, lock_file, run_holder
from ._outage import Outage, Spell, is_connection_lost, quiet_psycopg, told
from ._postgres import CONNECT_TIMEOUT, aconnect, connect, connect_error, require_psycopg
from ._sqlite import is_disk_full, open_sqlite, open_sqlite_read_only, sqlite_error

__all__ = [
    "CONNECT_TIMEOUT",
    "FileLock",
    "GroupCommit",
    "LocalJobs",
    "Outage",
    "PsycopgBatch",
    "Spell",
    "SqliteBatch",
    "StoreErrors",
    "aconnect",
    "advisory_lock_id",
    "all_loops",
    "connect",
    "connect_error",
    "holder_text",
    "install_jobs_schema",
    "is_connection_lost",
    "is_disk_full",
    "lock_file",
    "open_sqlite",
    "open_sqlite_read_only",
    "quiet_psycopg",
    "require_procrastinate",
    "require_psycopg",
    "retry_stalled",
    "run_holder",
    "sqlite_error",
    "through_outages",
    "told",
]
