"""The errors of a bulk run (its input, journal and results file), all under `PaymentsError`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from .._errors import PaymentsError, Problem, ValidationError
from .._store import StoreErrors
from ._input import RowError

__all__ = [
    "JOURNAL_ERRORS",
    "BulkInputError",
    "JournalBusyError",
    "JournalError",
    "JournalUnavailableError",
    "ResultsWriteError",
]


class BulkInputError(ValidationError):
    """The input file has problems; nothing was sent.

    A `ValidationError`: its ``problems`` say the same as ``row_errors``, each placed
    as ``line N`` or ``line N, COLUMN``; its message only counts them (an input can hold
    thousands). Its ``errors`` are empty, as for every error the service did not answer.

    Attributes:
        row_errors: every problem, with its line number and column.
    """

    def __init__(self, row_errors: Sequence[RowError]) -> None:
        n = len(row_errors)
        PaymentsError.__init__(
            self, f"{n} problem{'s' if n != 1 else ''} in the input; nothing was sent"
        )
        self.row_errors = tuple(row_errors)
        self.problems = tuple(
            Problem(f"line {e.line}, {e.column}" if e.column else f"line {e.line}", e.message)
            for e in self.row_errors
        )


class ResultsWriteError(PaymentsError, OSError):
    """The results file could not be written (the run is over: the journal, if any, keeps
    every row's outcome, and running the same command again writes the file).

    An ``OSError`` too, with the ``errno``, ``strerror`` and ``filename`` of the failure.
    """

    def __init__(self, errno: int | None, strerror: str | None, filename: str) -> None:
        PaymentsError.__init__(self, str(OSError(errno, strerror, filename)))
        self.errno = errno  # OSError's fields, as OSError(errno, strerror, filename) sets them
        self.strerror = strerror
        self.filename = filename

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.errno, self.strerror, self.filename))


class JournalError(PaymentsError):
    """The journal cannot be used: unreadable, another schema, or another input file."""


class JournalUnavailableError(JournalError):
    """The journal cannot be reached or written for now: its database server is away for
    longer than a run waits for it, or its disk is full.

    Every change committed before is kept; the same command run again once the database
    is back (or space is freed) resumes the run.
    """


class JournalBusyError(JournalError):
    """Another run holds the journal: nothing was sent.

    With ``lost``, the run had started: its connection to a PostgreSQL journal was lost
    and another run took the journal before it reconnected; it stopped before writing or
    sending anything more, and what it recorded is kept.

    Attributes:
        holder: who holds it, as people read it (``pid 123 on host, since 12:03:04 UTC``),
            or an empty string when it cannot be told.
    """

    def __init__(self, journal: str, holder: str, *, lost: bool = False) -> None:
        self.holder = holder
        who = f" ({holder})" if holder else ""
        if lost:
            said = (
                f"journal {journal} was taken by another run{who} while this run's "
                "connection to it was lost; this run stopped and every change it made is "
                "kept: wait for that run to end (or stop it), then run the same command "
                "again to resume"
            )
        else:
            said = (
                f"journal {journal} is in use by another run{who}; nothing was sent: wait "
                "for that run to end (or stop it), then run the same command again to resume"
            )
        super().__init__(said)


JOURNAL_ERRORS: Final = StoreErrors(JournalError, JournalUnavailableError, JournalBusyError)
"""The journal's errors, as the storage kit raises them."""
