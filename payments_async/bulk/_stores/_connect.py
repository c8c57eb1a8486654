"""Connections to a PostgreSQL journal: made with a bound, and their errors told without
the password, a server that cannot be reached now kept apart from one that refuses us."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Final

from ..._urls import redact_url
from .._defaults import JOURNAL_OUTAGE_WINDOW
from .._journal import JournalError, JournalUnavailableError
from .._rows import one_line

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "CONNECT_TIMEOUT",
    "Outage",
    "connect",
    "connect_error",
    "is_connection_lost",
    "require_psycopg",
]

CONNECT_TIMEOUT: Final = 5
"""Seconds libpq tries to connect (it has no limit of its own)."""


def require_psycopg() -> None:
    """Raise a clear error naming the extra when psycopg is not installed.

    Raises:
        JournalError: psycopg is missing.
    """
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise JournalError(
            "a PostgreSQL journal needs psycopg: pip install 'payments-async[scale]'"
        ) from exc


_ADDRESS_FORM: Final = (
    "postgresql://[user[:password]@][host][:port]/dbname[?param=value&...], "
    "with special characters percent-encoded"
)


_RESTARTING: Final = (
    "the database system is shutting down",
    "the database system is starting up",
    "the database system is not yet accepting connections",
    "the database system is in recovery mode",
)
"""What a server says while it stops or starts (SQLSTATE 57P01, 57P03): not a refusal."""


def connect_error(dsn: str, exc: Exception) -> JournalError:
    """The error of a connection that could not be made, without the password.

    libpq's message about an address it cannot read quotes the part it could not read,
    which may be the password (or the whole address): that message is not shown.
    """
    require_psycopg()
    import psycopg

    try:
        psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return JournalError(
            f"cannot connect to PostgreSQL: the address cannot be read; write {_ADDRESS_FORM}"
        )
    # A server that answered (a refused password, no such database) is quoted by libpq
    # with its severity ("FATAL:  ..."); a refused or timed-out connection reached no
    # server, and neither did one a server shutting down or starting up turned away: a
    # rerun once it is back can work.
    text = str(exc)
    restarting = any(words in text for words in _RESTARTING)
    kind = JournalError if "FATAL:" in text and not restarting else JournalUnavailableError
    return kind(f"cannot connect to PostgreSQL ({redact_url(dsn)}): {exc}")


def connect(dsn: str) -> psycopg.Connection[Any]:
    """A synchronous autocommit connection, with a clear error when it cannot be made.

    Raises:
        JournalError: the server cannot be reached or refuses us (the password is never
            part of the message).
    """
    require_psycopg()
    import psycopg

    try:
        conn: psycopg.Connection[Any] = psycopg.connect(
            dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT
        )
    except psycopg.Error as exc:
        raise connect_error(dsn, exc) from None
    return conn


def is_connection_lost(exc: Exception) -> bool:
    """True when ``exc`` says the database went away (not that a statement is wrong)."""
    import psycopg

    if isinstance(exc, psycopg.InterfaceError):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    # A full disk, a cancelled statement or a deadlock is an answer, not a lost server:
    # only no SQLSTATE (the socket went), class 08 (connection) and the server shutting
    # down or starting (57P01-57P03) are waited out.
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")


_RECONNECT_INITIAL: Final = 0.2
_RECONNECT_MAX: Final = 2.0
"""The pause between two reconnections grows from the first to the second, in seconds."""

logger = logging.getLogger("payments_async.bulk")


class Outage:
    """A database that cannot be reached: how long to wait for it, logged once.

    Args:
        window: seconds to wait from the first failure before giving up
            (`JOURNAL_OUTAGE_WINDOW` if None).
    """

    def __init__(self, window: float | None = None) -> None:
        self._window = JOURNAL_OUTAGE_WINDOW if window is None else window
        self._since: float | None = None
        self._since_wall = 0.0
        self._pause = _RECONNECT_INITIAL

    def failed(self, exc: Exception) -> float:
        """Note a failure; return the pause before the next try.

        Raises:
            JournalUnavailableError: the window has passed since the first failure.
        """
        now = time.monotonic()
        if self._since is None:
            self._since, self._since_wall = now, time.time()
            logger.warning(
                "the PostgreSQL database cannot be reached (%s); reconnecting%s",
                one_line(exc),
                f" for up to {self._window:g} s" if self._window != float("inf") else "",
            )
        elif now - self._since >= self._window:
            since = time.strftime("%H:%M:%S", time.localtime(self._since_wall))
            raise JournalUnavailableError(
                f"the PostgreSQL journal cannot be reached since {since} (waited "
                f"{self._window:g} s: {one_line(exc)}); every change made before is kept: "
                "run the same command again once the database is back"
            ) from None
        pause, self._pause = self._pause, min(2 * self._pause, _RECONNECT_MAX)
        return pause

    def ended(self) -> None:
        """The database answered again."""
        if self._since is not None:
            logger.warning(
                "the PostgreSQL database is back after %.1f s", time.monotonic() - self._since
            )
        self._since = None
        self._pause = _RECONNECT_INITIAL
