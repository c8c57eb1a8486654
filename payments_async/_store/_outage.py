"""One outage policy for every process that holds a database: wait it out, say it once.

A database that restarts, recovers, is closed to new sessions, is full of them or hangs
is an outage, not a refusal: every connection of the process to it reconnects with a
growing pause, and the process says once that it is away (naming it without its
password, and why) and once that it is back (with the time since it went). Past a bound
the command stops with the room's *unavailable* error, whose message says a rerun
finishes the work.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from .._urls import redact_url
from ._errors import StoreErrors

__all__ = [
    "Outage",
    "Spell",
    "is_connection_lost",
    "is_passing",
    "one_line",
    "quiet_psycopg",
    "told",
]

logger = logging.getLogger("payments_async.store")

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


def is_passing(text: str) -> bool:
    """True when a server's refusal ``text`` is one that ends by itself (see `_WAIT_OUT`)."""
    return any(words in text for words in _WAIT_OUT)


def is_connection_lost(exc: BaseException) -> bool:
    """True when ``exc`` says the database went away or hangs (not that a statement is
    wrong)."""
    import psycopg

    if isinstance(exc, psycopg.InterfaceError | TimeoutError):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    # A full disk, a cancelled statement or a deadlock is an answer, not a lost server:
    # only no SQLSTATE (the socket went, or a connection was refused), class 08
    # (connection), the server shutting down or starting (57P01-57P03) and a server full
    # of sessions (53300) are waited out.
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03", "53300")


def told(exc: BaseException) -> bool:
    """True when ``exc`` is an outage `Outage` raised, which the process has said already
    (once, naming the database): a part of the process that meets it says nothing more."""
    return getattr(exc, "outage_told", False) is True


def one_line(exc: BaseException) -> str:
    """An error as one line: its type, then its message."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


_REPEATS: Final = (
    # closing a pipeline or a copy failed too, logged only while the failure that closed
    # it is being raised
    "error ignored terminating",
    # a cancelled task's query could not be cancelled in a server that is gone or hung:
    # psycopg closes the connection, and the loss is told by the outage policy
    "query cancellation interrupted",
    "query not terminated after cancellation",
    "query cancellation failed",
)


class _NotTwice(logging.Filter):
    """Drops psycopg's warnings that repeat a failure told anyway (see `_REPEATS`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(_REPEATS)


def quiet_psycopg() -> None:
    """Keep psycopg's repeats of a failure that is raised anyway off stderr (idempotent)."""
    log = logging.getLogger("psycopg")
    if not any(isinstance(f, _NotTwice) for f in log.filters):
        log.addFilter(_NotTwice())


_RECONNECT_INITIAL: Final = 0.2
_RECONNECT_MAX: Final = 2.0
"""The pause between two reconnections grows from the first to the second, in seconds."""


@dataclass(slots=True)
class _Away:
    """One database's outage as this process sees it (said when it began), shared by every
    connection to it."""

    since: float  # monotonic time of the first failure
    since_wall: float


_away: dict[str, _Away] = {}
_away_lock = threading.Lock()  # stores are used from threads as well as from the loop


class Outage:
    """A database that cannot be reached: how long to wait for it, said once per process.

    Every connection of the process to one database (a journal's writer and reader, a
    worker's pools, an inbox's connections) has its own `Outage`, and they share what
    they see: the first that cannot reconnect says, in one line naming the database
    (without its password) and the cause, that it is away; the first that reaches it
    again says once that it is back, with the time since the first failure. A connection
    lost while the server is up (a server that ended idle sessions, or was restarted
    between two uses) is made again at once and says nothing.

    Args:
        dsn: the database's address (shown without its password).
        window: seconds to wait from the first failure before giving up (``inf``: never).
        errors: the room's errors; past the window, ``errors.unavailable`` is raised.
        what: what the database holds for the room (``journal``, ``inbox``), as the
            final error names it.
    """

    def __init__(self, dsn: str, *, window: float, errors: StoreErrors, what: str) -> None:
        self._dsn = dsn
        self._window = window
        self._errors = errors
        self._what = what
        self._failures = 0
        self._first = 0.0  # when the outage began (a hang: when its transaction began)
        self._found = 0.0  # when it was found: the window is counted from then
        self._pause = _RECONNECT_INITIAL

    @property
    def failing(self) -> bool:
        """True between a failure and the next `ended`."""
        return self._failures > 0

    def failed(self, exc: BaseException, *, began: float | None = None) -> float:
        """Note a failure; return the pause before the next try.

        ``began``: the ``time.monotonic()`` at which the failure began, when it is found
        only later (a hung transaction, ended at its bound): its duration is told from
        then (the window is counted from when it was found), and it is told at once, even
        when the next try reaches the database (the database did not answer for that long).

        Raises:
            Exception: ``errors.unavailable``, once the window has passed since the first
                failure was found.
        """
        now = time.monotonic()
        self._failures += 1
        with _away_lock:
            away = _away.get(self._dsn)
            if self._failures == 1:
                self._first = now if began is None else min(began, now)
                self._found = now
                if away is None and began is None:
                    return 0.0  # a lost connection: try once more at once, silently
            tell = away is None
            if away is None:
                away = _away[self._dsn] = _Away(self._first, time.time() - (now - self._first))
            since_wall = away.since_wall
        if tell:
            if self._window == float("inf"):
                waiting = "; waiting for it"
            elif self._window > 0:
                waiting = f"; waiting for it for up to {self._window:g} s"
            else:  # the caller answers at once (a receiver's 503) and tries again later
                waiting = ""
            logger.warning(
                "the PostgreSQL database %s cannot be reached (%s)%s",
                redact_url(self._dsn),
                one_line(exc),
                waiting,
            )
        if now - self._found >= self._window:
            # The outage stays told: others still waiting, or this caller trying again
            # later (a receiver answering 503 meanwhile), say nothing more until one of
            # them reaches the database and says it is back.
            at = time.strftime("%H:%M:%S", time.localtime(since_wall))
            error = self._errors.unavailable(
                f"the PostgreSQL {self._what} cannot be reached since {at} (waited "
                f"{self._window:g} s: {one_line(exc)}); every change made before is kept: "
                "run the same command again once the database is back"
            )
            setattr(error, "outage_told", True)  # noqa: B010 (the room's error type has no such field; see `told`)
            raise error from None
        if self._failures == 1:
            return 0.0  # a hang, told: try once more at once
        pause, self._pause = self._pause, min(2 * self._pause, _RECONNECT_MAX)
        return pause

    def ended(self) -> None:
        """The database answered again: an outage said by this connection or by another
        (one that gave up at its window, a receiver's) is said to be over."""
        self._failures = 0
        self._pause = _RECONNECT_INITIAL
        if not _away:  # nothing was said: the usual case, without the lock
            return
        with _away_lock:
            away = _away.pop(self._dsn, None)
        if away is not None:
            logger.warning(
                "the PostgreSQL database %s is back after %.1f s",
                redact_url(self._dsn),
                time.monotonic() - away.since,
            )


class Spell:
    """A run of failures of one kind (a store that cannot be written, a full disk), said
    once when it begins and once when it ends, however many attempts meet it meanwhile.

    For what a process retries by itself or leaves to a sender's redelivery, where a line
    per attempt would be a flood: `failed` logs only the first failure of a spell (the
    others at debug level), `ended` logs once that it is over, with its duration and how
    many attempts met it.

    Args:
        log: the logger to say it with.
        settle: seconds a success must come after the spell's last failure to end it. A
            nearly full disk lets a small write pass between failed larger ones; with a
            ``settle``, such a success is part of the spell, and the spell is said to end
            at the first success that long after the last failure, its duration counted
            to the first success since that failure. 0: the first success ends it.
        clock: the monotonic clock the spell is timed with.
    """

    def __init__(
        self,
        log: logging.Logger,
        *,
        settle: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = log
        self._settle = settle
        self._clock = clock
        self._since: float | None = None
        self._last = 0.0  # the spell's last failure
        self._passed: float | None = None  # the first success since then
        self._told = False
        self.count = 0
        """Failures in the current spell (0 outside one)."""

    @property
    def failing(self) -> bool:
        """True between a failure and the next `ended` that ends the spell."""
        return self._since is not None

    def failed(self, message: str, *args: object, told: bool = False) -> None:
        """Note a failure; log ``message % args`` as an error if it begins a spell.

        ``told``: the failure was said already (an `Outage`'s, see the function `told`):
        a spell it begins is kept at debug level, its end too.
        """
        self.count += 1
        self._last, self._passed = self._clock(), None
        if self._since is None:
            self._since = self._last
            self._told = told
            self._log.log(logging.DEBUG if told else logging.ERROR, message, *args)
        elif self._log.isEnabledFor(logging.DEBUG):
            self._log.debug(message, *args)

    def ended(self, message: str) -> None:
        """Note a success; log ``message`` followed by the spell's duration and count if
        it ends one (see ``settle``)."""
        if self._since is None:
            return
        now = self._clock()
        if self._passed is None:
            self._passed = now
        if now - self._last < self._settle:
            return
        took, count = self._passed - self._since, self.count
        self._since, self._passed, self.count = None, None, 0
        level = logging.DEBUG if self._told else logging.WARNING
        self._log.log(level, "%s after %.1f s (%d attempts met it)", message, took, count)
