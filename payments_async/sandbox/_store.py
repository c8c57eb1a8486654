"""Optional SQLite persistence: a restarted sandbox keeps its clients and messages.

Write-through, one statement per change, WAL journal with ``synchronous=NORMAL``: a crash
of the process loses nothing, a power cut may lose the last moments (a test tool). The
single-use ids (``jti``/``nonce``) seen in JWTs are kept until their token expires, so a
restart does not make a used token usable again. Access tokens are not persisted: after
a restart clients fetch new ones.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from dataclasses import astuple, fields
from pathlib import Path

from ._lifecycle import CancellationRecord, PaymentRecord, StatusRequestRecord

__all__ = ["SqliteStore"]

_PAYMENT_COLUMNS = tuple(f.name for f in fields(PaymentRecord))
_CANCELLATION_COLUMNS = tuple(f.name for f in fields(CancellationRecord))
_STATUS_REQUEST_COLUMNS = tuple(f.name for f in fields(StatusRequestRecord))


def _upsert(table: str, columns: tuple[str, ...]) -> str:
    names = ", ".join(columns)
    marks = ", ".join("?" for _ in columns)
    return f"INSERT OR REPLACE INTO {table} ({names}) VALUES ({marks})"  # noqa: S608


_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS clients (
    client_id TEXT NOT NULL, secret TEXT NOT NULL, kid TEXT NOT NULL, iss TEXT NOT NULL,
    pem TEXT NOT NULL, PRIMARY KEY (client_id, kid)
);
CREATE TABLE IF NOT EXISTS payments ({", ".join(_PAYMENT_COLUMNS)},
    PRIMARY KEY (payments_service_id));
CREATE TABLE IF NOT EXISTS cancellations ({", ".join(_CANCELLATION_COLUMNS)},
    PRIMARY KEY (payments_service_id));
CREATE TABLE IF NOT EXISTS status_requests ({", ".join(_STATUS_REQUEST_COLUMNS)},
    PRIMARY KEY (payments_service_id));
CREATE TABLE IF NOT EXISTS seen_ids (
    cache TEXT NOT NULL, key TEXT NOT NULL, expires_at REAL NOT NULL,
    PRIMARY KEY (cache, key)
);
"""


class SqliteStore:
    """The SQLite file behind a persistent sandbox.

    Args:
        path: the database file; created with its tables when missing.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._save_payment = _upsert("payments", _PAYMENT_COLUMNS)
        self._save_cancellation = _upsert("cancellations", _CANCELLATION_COLUMNS)
        self._save_status_request = _upsert("status_requests", _STATUS_REQUEST_COLUMNS)

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def save_client(self, client_id: str, secret: str, kid: str, iss: str, pem: str) -> None:
        """Insert or replace one registered key of a client."""
        self._db.execute(
            "INSERT OR REPLACE INTO clients VALUES (?, ?, ?, ?, ?)",
            (client_id, secret, kid, iss, pem),
        )

    def save_payment(self, record: PaymentRecord) -> None:
        """Insert or replace a payment."""
        self._db.execute(self._save_payment, astuple(record))

    def save_cancellation(self, record: CancellationRecord) -> None:
        """Insert or replace a cancellation."""
        self._db.execute(self._save_cancellation, astuple(record))

    def save_status_request(self, record: StatusRequestRecord) -> None:
        """Insert or replace a status request (pacs.028)."""
        self._db.execute(self._save_status_request, astuple(record))

    def save_seen(self, cache: str, key: str, expires_at: float) -> None:
        """Remember a single-use id of ``cache`` (``sca_jti``...) until ``expires_at``."""
        self._db.execute(
            "INSERT OR REPLACE INTO seen_ids VALUES (?, ?, ?)", (cache, key, expires_at)
        )

    def load_seen(self, now: float) -> Iterator[tuple[str, str, float]]:
        """``(cache, key, expires_at)`` of every id still remembered; expired ones are dropped."""
        self._db.execute("DELETE FROM seen_ids WHERE expires_at < ?", (now,))
        yield from self._db.execute("SELECT cache, key, expires_at FROM seen_ids")

    def load_clients(self) -> Iterator[tuple[str, str, str, str, str]]:
        """``(client_id, secret, kid, iss, pem)`` of every registered key."""
        yield from self._db.execute("SELECT client_id, secret, kid, iss, pem FROM clients")

    def load_payments(self) -> Iterator[PaymentRecord]:
        """Every stored payment, oldest first."""
        cols = ", ".join(_PAYMENT_COLUMNS)
        for row in self._db.execute(f"SELECT {cols} FROM payments ORDER BY created_at"):  # noqa: S608
            yield PaymentRecord(*row)

    def load_cancellations(self) -> Iterator[CancellationRecord]:
        """Every stored cancellation, oldest first."""
        cols = ", ".join(_CANCELLATION_COLUMNS)
        for row in self._db.execute(f"SELECT {cols} FROM cancellations ORDER BY created_at"):  # noqa: S608
            yield CancellationRecord(*row)

    def load_status_requests(self) -> Iterator[StatusRequestRecord]:
        """Every stored status request, oldest first."""
        cols = ", ".join(_STATUS_REQUEST_COLUMNS)
        for row in self._db.execute(f"SELECT {cols} FROM status_requests ORDER BY created_at"):  # noqa: S608
            record = StatusRequestRecord(*row)
            record.chased = bool(record.chased)
            yield record
