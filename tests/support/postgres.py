"""A real PostgreSQL 16 for the tests, started by the suite from the ``pgserver`` wheel.

One server per test session in a short temporary directory (its Unix socket lives
there; no TCP port is opened), one fresh database per test. As root, pgserver runs the
server as its own unprivileged ``pgserver`` user (PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import contextlib
import fcntl
import secrets
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def _one_process_at_a_time(name: str) -> Iterator[None]:
    """Hold an exclusive lock on a file named ``name`` in the temporary directory."""
    with (Path(tempfile.gettempdir()) / name).open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[object]:
    """The running server (``pgserver.PostgresServer``), stopped and deleted at the end.

    Each pytest-xdist worker starts its own. The starts take turns: as root, pgserver
    creates its system user the first time (``useradd``), and two workers doing that at
    once on a fresh machine would fail one of them.
    """
    with warnings.catch_warnings():
        # platformdirs warns that XDG_RUNTIME_DIR is unset when pgserver is imported.
        warnings.simplefilter("ignore")
        import pgserver

        pgdata = Path(tempfile.mkdtemp(prefix="pa-pg-"))
        with _one_process_at_a_time("payments-async-pgserver.lock"):
            server = pgserver.get_server(pgdata, cleanup_mode="delete")
    try:
        yield server
    finally:
        server.cleanup()
        shutil.rmtree(pgdata, ignore_errors=True)


@pytest.fixture
def pg_dsn(postgres_server: object) -> Iterator[str]:
    """The ``postgresql://`` address of a new, empty database, dropped after the test."""
    import psycopg

    name = f"t_{secrets.token_hex(6)}"
    admin = postgres_server.get_uri()  # type: ignore[attr-defined]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield postgres_server.get_uri(name)  # type: ignore[attr-defined]
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def cut_off(dsn: str, admin: str) -> None:
    """Refuse new connections to ``dsn``'s database and end every session in it (as a
    restart would), through the administrator's address ``admin``."""
    import psycopg

    name = psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
            (name,),
        )


def restore(dsn: str, admin: str) -> None:
    """Accept connections to ``dsn``'s database again (after `cut_off`)."""
    import psycopg

    name = psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
