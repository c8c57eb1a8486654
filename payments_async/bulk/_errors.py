"""The errors of a bulk run's journal, and how the storage kit makes them."""

from __future__ import annotations

from typing import Final

from .._store import StoreErrors

__all__ = ["JOURNAL_ERRORS", "JournalBusyError", "JournalError", "JournalUnavailableError"]


class JournalError(Exception):
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
