"""Connections to a PostgreSQL journal: made with a bound, and their errors told without
the password, a server that cannot be reached now kept apart from one that refuses us."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
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
    "is_passing",
    "quiet_psycopg",
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


_WAIT_OUT: Final = (
    "the database system is shutting down",
    "the database system is starting up",
    "the database system is not yet accepting connections",
    "the database system is not accepting connections",
    "the database system is in recovery mode",
    "is not currently accepting connections",
    "sorry, too many clients already",
    "remaining connection slots are reserved",
)
"""What a server says while it stops, starts, recovers, is closed to new sessions
(``ALLOW_CONNECTIONS false``) or full (SQLSTATE 57P01, 57P03, 55000, 53300): not a
refusal, an outage to wait out. libpq gives a failed connection no SQLSTATE: its words
are all there is."""


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
    kind = JournalError if "FATAL:" in text and not is_passing(text) else JournalUnavailableError
    return kind(f"cannot connect to PostgreSQL ({redact_url(dsn)}): {exc}")


def is_passing(text: str) -> bool:
    """True when a server's refusal ``text`` is one that ends by itself (see `_WAIT_OUT`)."""
    return any(words in text for words in _WAIT_OUT)


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


class _NotTwice(logging.Filter):
    """Drops psycopg's warning that closing a pipeline or a copy failed too, which it
    logs only while the failure that closed it is being raised: the same failure twice."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("error ignored terminating")


def quiet_psycopg() -> None:
    """Keep psycopg's repeats of a failure that is raised anyway off stderr (idempotent)."""
    log = logging.getLogger("psycopg")
    if not any(isinstance(f, _NotTwice) for f in log.filters):
        log.addFilter(_NotTwice())


def is_connection_lost(exc: Exception) -> bool:
    """True when ``exc`` says the database went away (not that a statement is wrong)."""
    import psycopg

    if isinstance(exc, psycopg.InterfaceError):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    # A full disk, a cancelled statement or a deadlock is an answer, not a lost server:
    # only no SQLSTATE (the socket went, or a connection was refused), class 08
    # (connection), the server shutting down or starting (57P01-57P03) and a server full
    # of sessions (53300) are waited out.
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03", "53300")


_RECONNECT_INITIAL: Final = 0.2
_RECONNECT_MAX: Final = 2.0
"""The pause between two reconnections grows from the first to the second, in seconds."""

logger = logging.getLogger("payments_async.bulk")


@dataclass(slots=True)
class _Away:
    """One database's outage as this process sees it (said when it began), shared by every
    connection to it."""

    since: float  # monotonic time of the first failure
    since_wall: float


_away: dict[str, _Away] = {}
_away_lock = threading.Lock()  # journals read from threads as well as from the event loop


class Outage:
    """A database that cannot be reached: how long to wait for it, said once per process.

    Every connection of the process to one database (a journal's writer and reader, a
    worker's pools, the rate limiter) has its own `Outage`, and they share what they
    see: the first that cannot reconnect says, in one line naming the database (without
    its password) and the cause, that it is away; the first that reaches it again says
    once that it is back, with the time since the first failure. A connection lost while
    the server is up (a server that ended idle sessions, or was restarted between two
    uses) is made again at once and says nothing.

    Args:
        dsn: the database's address (shown without its password).
        window: seconds to wait from the first failure before giving up
            (`JOURNAL_OUTAGE_WINDOW` if None).
    """

    def __init__(self, dsn: str, window: float | None = None) -> None:
        self._dsn = dsn
        self._window = JOURNAL_OUTAGE_WINDOW if window is None else window
        self._failures = 0
        self._first = 0.0
        self._pause = _RECONNECT_INITIAL

    def failed(self, exc: Exception) -> float:
        """Note a failure; return the pause before the next try.

        Raises:
            JournalUnavailableError: the window has passed since the first failure.
        """
        now = time.monotonic()
        self._failures += 1
        with _away_lock:
            away = _away.get(self._dsn)
            if self._failures == 1:
                self._first = now
                if away is None:
                    return 0.0  # a lost connection: try once more at once, silently
            tell = away is None
            if away is None:
                away = _away[self._dsn] = _Away(self._first, time.time() - (now - self._first))
            since_wall = away.since_wall
        if tell:
            logger.warning(
                "the PostgreSQL database %s cannot be reached (%s); waiting for it%s",
                redact_url(self._dsn),
                one_line(exc),
                f" for up to {self._window:g} s" if self._window != float("inf") else "",
            )
        if now - self._first >= self._window:
            with _away_lock:  # the command stops and says why: a later outage is new
                if _away.get(self._dsn) is away:
                    del _away[self._dsn]
            at = time.strftime("%H:%M:%S", time.localtime(since_wall))
            raise JournalUnavailableError(
                f"the PostgreSQL journal cannot be reached since {at} (waited "
                f"{self._window:g} s: {one_line(exc)}); every change made before is kept: "
                "run the same command again once the database is back"
            ) from None
        pause, self._pause = self._pause, min(2 * self._pause, _RECONNECT_MAX)
        return pause

    def ended(self) -> None:
        """The database answered again."""
        if not self._failures:
            return
        self._failures = 0
        self._pause = _RECONNECT_INITIAL
        with _away_lock:
            away = _away.pop(self._dsn, None)
        if away is not None:
            logger.warning(
                "the PostgreSQL database %s is back after %.1f s",
                redact_url(self._dsn),
                time.monotonic() - away.since,
            )
