"""Connections to PostgreSQL: made with bounds that find a dead or hung server within
seconds, and their failures told without the password, a passing outage kept apart from a
refusal."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

from .._urls import redact_url
from ._errors import StoreErrors
from ._outage import is_passing

if TYPE_CHECKING:
    import psycopg

__all__ = ["CONNECT_TIMEOUT", "aconnect", "connect", "connect_error", "require_psycopg"]

CONNECT_TIMEOUT: Final = 5
"""Seconds libpq tries to connect (it has no limit of its own)."""

# Bounds a connection gets unless its address sets them: libpq's connect timeout, and TCP
# keepalives and a user timeout so that a server gone silent (a paused VM, a failover, a
# cut network) fails the connection within seconds instead of the kernel's minutes.
# (A Unix socket has no keepalives: libpq ignores them there.)
_BOUNDS: Final = {
    "connect_timeout": str(CONNECT_TIMEOUT),
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "tcp_user_timeout": "10000",
}

_ADDRESS_FORM: Final = (
    "postgresql://[user[:password]@][host][:port]/dbname[?param=value&...], "
    "with special characters percent-encoded"
)


def require_module(module: str, errors: StoreErrors, need: str, extra: str = "scale") -> None:
    """Raise ``errors.error`` (``need``, then how to install ``extra``) when ``module`` is
    not installed."""
    try:
        importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise errors.error(f"{need}: pip install 'payments-async[{extra}]'") from exc


def require_psycopg(errors: StoreErrors, extra: str = "scale") -> None:
    """Raise ``errors.error`` naming the extra when psycopg is not installed."""
    require_module("psycopg", errors, "a PostgreSQL store needs psycopg", extra)


def _bounded(dsn: str) -> str:
    """``dsn`` with the bounds it does not set itself (it may set any of them).

    Raises:
        psycopg.ProgrammingError: libpq cannot read the address.
    """
    import psycopg

    given = psycopg.conninfo.conninfo_to_dict(dsn)
    return psycopg.conninfo.make_conninfo(
        dsn, **{k: v for k, v in _BOUNDS.items() if k not in given}
    )


def connect_error(dsn: str, exc: Exception, errors: StoreErrors) -> Exception:
    """The error of a connection that could not be made, without the password.

    libpq's message about an address it cannot read quotes the part it could not read,
    which may be the password (or the whole address): that message is not shown. A
    server that answered with a refusal that lasts (a refused password, no such
    database) is ``errors.error``; anything else (no server answered, or one restarting,
    recovering, closed to new sessions or full) is ``errors.unavailable``.
    """
    import psycopg

    try:
        psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return errors.error(
            f"cannot connect to PostgreSQL: the address cannot be read; write {_ADDRESS_FORM}"
        )
    text = str(exc)
    kind = errors.error if "FATAL:" in text and not is_passing(text) else errors.unavailable
    return kind(f"cannot connect to PostgreSQL ({redact_url(dsn)}): {' '.join(text.split())}")


def connect(dsn: str, errors: StoreErrors) -> psycopg.Connection[Any]:
    """A synchronous autocommit connection, bounded (see `_BOUNDS`).

    Raises:
        Exception: ``errors.error`` or ``errors.unavailable`` (see `connect_error`).
    """
    require_psycopg(errors)
    import psycopg

    try:
        conn: psycopg.Connection[Any] = psycopg.connect(_bounded(dsn), autocommit=True)
    except psycopg.Error as exc:
        raise connect_error(dsn, exc, errors) from None
    return conn


async def aconnect(dsn: str, errors: StoreErrors) -> psycopg.AsyncConnection[Any]:
    """An asyncio autocommit connection, bounded (see `_BOUNDS`).

    Raises:
        Exception: ``errors.error`` or ``errors.unavailable`` (see `connect_error`).
    """
    require_psycopg(errors)
    import psycopg

    try:
        conn: psycopg.AsyncConnection[Any] = await psycopg.AsyncConnection.connect(
            _bounded(dsn), autocommit=True
        )
    except psycopg.Error as exc:
        raise connect_error(dsn, exc, errors) from None
    return conn
