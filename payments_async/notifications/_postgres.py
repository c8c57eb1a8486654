"""The inbox in PostgreSQL (psycopg 3): shared by several receiver processes.

An item is processed by one receiver at a time: a receiver takes due items with
``FOR UPDATE SKIP LOCKED`` and holds each under a lease (its owner and an expiry), which
it renews while it processes the item; an item whose receiver died is taken again once its
lease expires. Writes are group-committed on one connection, as in the SQLite file, and
claims and reads go through a second one; both use the storage kit (`GroupCommit`,
`PsycopgBatch`): a database that goes away (or hangs) is said once per outage, and while it
is away the inbox fails at once with `InboxUnavailableError` (the receiver answers 503
and the sender redelivers) instead of holding the request. Times are the server's clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import sys
from typing import TYPE_CHECKING, Any, Final

from .._errors import ConfigurationError
from .._store import GroupCommit, PsycopgBatch
from .._urls import redact_url
from ._core import Notification
from ._defaults import NOTIFY_LEASE
from ._items import (
    INBOX_ERRORS,
    InboxError,
    InboxItem,
    InboxStatus,
    decode_notification,
    encode_notification,
)

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresInbox"]

logger = logging.getLogger("payments_async.notifications")

_NOW: Final = "EXTRACT(EPOCH FROM clock_timestamp())::float8"
# Table names carry a prefix: the database is often shared with the bulk journal's tables.
_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS payments_notify_inbox (
    kind TEXT NOT NULL,
    payments_service_id TEXT NOT NULL,
    notification BYTEA NOT NULL,
    seq BIGINT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    not_before DOUBLE PRECISION NOT NULL DEFAULT 0,
    lease_owner TEXT,
    lease_until DOUBLE PRECISION,
    received_at DOUBLE PRECISION NOT NULL,
    error TEXT,
    updated_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (kind, payments_service_id)
);
CREATE INDEX IF NOT EXISTS payments_notify_inbox_due
    ON payments_notify_inbox (state, received_at);
CREATE TABLE IF NOT EXISTS payments_notify_delivered (
    key TEXT PRIMARY KEY,
    delivered_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS payments_notify_delivered_age
    ON payments_notify_delivered (delivered_at);
CREATE TABLE IF NOT EXISTS payments_notify_tracked (
    kind TEXT NOT NULL,
    payments_service_id TEXT NOT NULL,
    tracked_at DOUBLE PRECISION NOT NULL,
    next_check DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (kind, payments_service_id)
);
CREATE INDEX IF NOT EXISTS payments_notify_tracked_due ON payments_notify_tracked (next_check);
"""
_SCHEMA_LOCK: Final = 0x70A7_1B0C

_PUT: Final = f"""
INSERT INTO payments_notify_inbox AS i
    (kind, payments_service_id, notification, seq, state, received_at, updated_at)
VALUES (%s, %s, %s, 1, 'pending', {_NOW}, {_NOW})
ON CONFLICT (kind, payments_service_id) DO UPDATE SET
    notification = excluded.notification,
    seq = i.seq + 1,
    received_at = CASE WHEN i.state = 'pending' THEN i.received_at ELSE excluded.received_at END,
    attempts = CASE WHEN i.state = 'pending' THEN i.attempts ELSE 0 END,
    not_before = CASE WHEN i.state = 'pending' THEN i.not_before ELSE 0 END,
    error = CASE WHEN i.state = 'pending' THEN i.error END,
    state = 'pending',
    updated_at = excluded.updated_at
"""  # noqa: S608
_CLAIM: Final = f"""
UPDATE payments_notify_inbox AS i SET lease_owner = %s, lease_until = {_NOW} + %s
FROM (
    SELECT kind, payments_service_id FROM payments_notify_inbox
    WHERE state = 'pending' AND not_before <= {_NOW}
        AND (lease_until IS NULL OR lease_until < {_NOW})
    ORDER BY received_at LIMIT %s FOR UPDATE SKIP LOCKED
) AS due
WHERE i.kind = due.kind AND i.payments_service_id = due.payments_service_id
RETURNING i.notification, i.seq, i.attempts, i.received_at
"""  # noqa: S608
_DONE: Final = f"""
UPDATE payments_notify_inbox SET
    state = CASE WHEN seq = %s AND state = 'pending' THEN 'done' ELSE state END,
    attempts = 0, error = NULL, lease_owner = NULL, lease_until = NULL, updated_at = {_NOW}
WHERE kind = %s AND payments_service_id = %s AND lease_owner = %s
"""  # noqa: S608
# A failed attempt counts, and parks, whatever arrived meanwhile: the callback runs only
# for a final status, and a notification folded in since can bring no other.
_RETRY: Final = f"""
UPDATE payments_notify_inbox SET
    attempts = attempts + 1, not_before = {_NOW} + %s,
    state = %s,
    error = %s, lease_owner = NULL, lease_until = NULL, updated_at = {_NOW}
WHERE kind = %s AND payments_service_id = %s AND lease_owner = %s
"""  # noqa: S608
# A failed confirming read is no failed callback: the attempts stay as they are.
_DEFER: Final = f"""
UPDATE payments_notify_inbox SET
    not_before = {_NOW} + %s, lease_owner = NULL, lease_until = NULL, updated_at = {_NOW}
WHERE kind = %s AND payments_service_id = %s AND lease_owner = %s
"""  # noqa: S608
# Only items this receiver still holds: one taken by another receiver stays theirs.
_RENEW: Final = f"""
UPDATE payments_notify_inbox SET lease_until = {_NOW} + %s
WHERE lease_owner = %s
    AND (kind, payments_service_id) IN (SELECT * FROM unnest(%s::text[], %s::text[]))
RETURNING 1
"""  # noqa: S608
_DELIVERED: Final = (
    "INSERT INTO payments_notify_delivered (key, delivered_at) "  # noqa: S608
    f"VALUES (%s, {_NOW}) ON CONFLICT (key) DO NOTHING"
)
_STATUS: Final = """
SELECT
    (SELECT COUNT(*) FROM payments_notify_inbox WHERE state = 'pending'),
    (SELECT COUNT(*) FROM payments_notify_inbox WHERE state = 'failed'),
    (SELECT MIN(received_at) FROM payments_notify_inbox WHERE state = 'pending'),
    (SELECT COUNT(*) FROM payments_notify_delivered),
    (SELECT error FROM payments_notify_inbox WHERE state = 'failed'
        ORDER BY updated_at DESC LIMIT 1),
    (SELECT COUNT(*) FROM payments_notify_tracked)
"""
_PRUNE_DONE: Final = (
    "DELETE FROM payments_notify_inbox "  # noqa: S608
    f"WHERE state = 'done' AND updated_at < {_NOW} - %s"
)
_PRUNE_DELIVERED: Final = f"DELETE FROM payments_notify_delivered WHERE delivered_at < {_NOW} - %s"  # noqa: S608
_TRACK: Final = f"""
INSERT INTO payments_notify_tracked (kind, payments_service_id, tracked_at, next_check)
VALUES (%s, %s, {_NOW}, {_NOW} + %s) ON CONFLICT DO NOTHING
"""  # noqa: S608
# Receivers sweeping at once take different ids.
_DUE_TRACKED: Final = f"""
UPDATE payments_notify_tracked AS t SET next_check = {_NOW} + %s
FROM (
    SELECT kind, payments_service_id FROM payments_notify_tracked
    WHERE next_check <= {_NOW} ORDER BY next_check LIMIT %s FOR UPDATE SKIP LOCKED
) AS due
WHERE t.kind = due.kind AND t.payments_service_id = due.payments_service_id
RETURNING t.kind, t.payments_service_id
"""  # noqa: S608


class PostgresInbox:
    """The inbox in a PostgreSQL database, shared by any number of receivers.

    Args:
        dsn: the ``postgresql://`` address (its password is never shown).
        lease: seconds an item stays held by the receiver that took it unless renewed.
            While the receiver processes the item (however long its callback takes), the
            lease is renewed every ``lease / 3`` seconds; a receiver that died holding
            it, or could not reach the database for ``lease`` seconds, lets it go after
            this long.
    """

    durable = True

    def __init__(self, dsn: str, *, lease: float = NOTIFY_LEASE) -> None:
        if not 0 < lease <= sys.float_info.max:  # also NaN and inf
            raise ConfigurationError("lease must be a positive, finite number of seconds")
        self._dsn = dsn
        self._lease = float(lease)
        self._owner = secrets.token_hex(8)
        # No wait for a database that is away: the receiver answers 503 at once.
        self._writer = PsycopgBatch(dsn, errors=INBOX_ERRORS, what="inbox", window=0)
        self._reader = PsycopgBatch(dsn, errors=INBOX_ERRORS, what="inbox", window=0)
        self._group = GroupCommit(self._writer)
        self._open = False
        self._held: set[tuple[str, str]] = set()  # items whose leases are renewed
        self._renewer: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"PostgresInbox({redact_url(self._dsn)!r})"

    @property
    def commits(self) -> int:
        """Transactions written, for tests and the benchmark."""
        return self._group.commits

    async def open(self) -> None:
        """Connect and create the tables.

        Raises:
            InboxUnavailableError: the server cannot be reached for now.
            InboxError: psycopg is missing, the address cannot be read, or the server
                refuses us.
        """
        if self._open:
            return

        async def schema(cur: psycopg.AsyncCursor[Any]) -> None:
            await cur.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            await cur.execute(_SCHEMA)

        await self._writer([schema])
        await self._reader([])
        self._open = True
        self._renewer = asyncio.create_task(self._renew(), name="notifications-lease")

    async def aclose(self) -> None:
        """Write what is queued and disconnect (items held are let go at once)."""
        renewer, self._renewer = self._renewer, None
        if renewer is not None:
            renewer.cancel()
            await asyncio.gather(renewer, return_exceptions=True)
        self._held.clear()
        await self._group.drain()
        if self._open:
            with contextlib.suppress(Exception):  # else the leases expire by themselves
                await self._read(
                    "UPDATE payments_notify_inbox SET lease_owner = NULL, lease_until = NULL "
                    "WHERE lease_owner = %s RETURNING 1",
                    (self._owner,),
                )
        self._open = False
        await self._reader.aclose()
        await self._writer.aclose()

    def _submit(self, op: Any) -> asyncio.Future[Any]:
        if not self._open:
            raise InboxError("the inbox is not open")
        return self._group.submit(op)

    async def put(self, notification: Notification) -> None:
        """Store it; committed (with whatever else was queued) on return."""
        params = (
            notification.kind.value,
            notification.payments_service_id,
            encode_notification(notification),
        )

        async def op(cur: psycopg.AsyncCursor[Any]) -> None:
            await cur.execute(_PUT, params)

        await self._submit(op)

    async def _read(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        async def read(cur: psycopg.AsyncCursor[Any]) -> list[Any]:
            await cur.execute(sql, params)
            return await cur.fetchall()

        (rows,) = await self._reader([read])
        result: list[Any] = rows
        return result

    async def claim(self, limit: int) -> list[InboxItem]:
        """Due items nobody holds, taken under this receiver's lease (renewed until the
        item is completed, retried, deferred or released)."""
        rows = await self._read(_CLAIM, (self._owner, self._lease, limit))
        items = [
            InboxItem(decode_notification(raw), seq, attempts, received_at)
            for raw, seq, attempts, received_at in rows
        ]
        # One still held here, whose lease ran out while the database could not be
        # reached, is leased again and stays with the worker processing it.
        items = [item for item in items if item.key not in self._held]
        self._held.update(item.key for item in items)
        return items

    async def _renew(self) -> None:
        """Every ``lease / 3`` seconds, extend the leases of the items held."""
        while True:
            await asyncio.sleep(self._lease / 3)
            if not self._held:
                continue
            kinds, ids = zip(*self._held, strict=True)
            try:
                await self._read(_RENEW, (self._lease, self._owner, list(kinds), list(ids)))
            except InboxError as exc:  # the outage itself is said once by the kit
                logger.debug("cannot renew the leases of the items held: %s", exc)

    async def is_delivered(self, key: str) -> bool:
        """Read from the database."""
        rows = await self._read("SELECT 1 FROM payments_notify_delivered WHERE key = %s", (key,))
        return bool(rows)

    async def complete(self, item: InboxItem, delivered: str | None) -> bool:
        """Done and delivered, in one transaction."""
        kind, psid = item.key

        async def op(cur: psycopg.AsyncCursor[Any]) -> bool:
            first = False
            if delivered is not None:
                await cur.execute(_DELIVERED, (delivered,))
                first = cur.rowcount == 1
                await cur.execute(
                    "DELETE FROM payments_notify_tracked WHERE kind = %s "
                    "AND payments_service_id = %s",
                    (kind, psid),
                )
            await cur.execute(_DONE, (item.seq, kind, psid, self._owner))
            return first

        result: bool = await self._submit(op)
        self._held.discard(item.key)  # not before: a failed write leaves it held
        return result

    async def retry(self, item: InboxItem, *, delay: float, park: bool, error: str) -> None:
        """Due again later, or parked."""
        kind, psid = item.key
        params = (delay, "failed" if park else "pending", error, kind, psid, self._owner)

        async def op(cur: psycopg.AsyncCursor[Any]) -> None:
            await cur.execute(_RETRY, params)

        await self._submit(op)
        self._held.discard(item.key)

    async def defer(self, item: InboxItem, *, delay: float) -> None:
        """Due again later, its attempts unchanged."""
        kind, psid = item.key
        params = (delay, kind, psid, self._owner)

        async def op(cur: psycopg.AsyncCursor[Any]) -> None:
            await cur.execute(_DEFER, params)

        try:
            await self._submit(op)
        finally:
            self._held.discard(item.key)

    def release(self, item: InboxItem) -> None:
        """No longer renewed, nothing written now: `aclose` lets every held item go, or
        the lease expires."""
        self._held.discard(item.key)

    async def status(self) -> InboxStatus:
        """Counted by the database."""
        rows = await self._read(_STATUS, ())
        depth, failed, oldest, delivered, last_error, tracked = rows[0]
        return InboxStatus(
            int(depth), int(failed), oldest, int(delivered), last_error, int(tracked)
        )

    async def track(self, kind: str, payments_service_id: str, *, check_after: float) -> None:
        """Remember it in the database (until its final status is delivered)."""
        params = (kind, payments_service_id, check_after)

        async def op(cur: psycopg.AsyncCursor[Any]) -> None:
            await cur.execute(_TRACK, params)

        await self._submit(op)

    async def due_tracked(self, limit: int, *, recheck: float) -> list[tuple[str, str]]:
        """The due ones nobody else is sweeping, each due again after ``recheck``."""
        rows = await self._read(_DUE_TRACKED, (recheck, limit))
        return [(str(k), str(p)) for k, p in rows]

    async def prune(self, older_than: float) -> int:
        """Delete done items and delivered marks older than that, in one transaction."""

        async def op(cur: psycopg.AsyncCursor[Any]) -> int:
            await cur.execute(_PRUNE_DONE, (older_than,))
            done = cur.rowcount
            await cur.execute(_PRUNE_DELIVERED, (older_than,))
            return max(done, 0) + max(cur.rowcount, 0)

        pruned: int = await self._submit(op)
        return pruned
