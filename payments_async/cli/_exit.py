"""Every exit code of ``payments-async``, and how errors and outcomes map to them.

Scripts can rely on: 0 ok; 1 a business failure (a rejected cancellation, a payment
ending RJCT); 2 a usage or validation error (nothing was sent); 3 a service or transport
error, or an outcome whose codes cannot be classified; 130 interrupted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from payments_async import Outcome, PaymentsError
    from payments_async.bulk import JournalError, RunTotals

__all__ = [
    "EXIT_BUSINESS",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_SERVICE",
    "EXIT_USAGE",
    "CliError",
    "bulk_exit_code",
    "exit_code_for",
    "journal_failed",
    "outcome_exit_code",
]

EXIT_OK: Final = 0
"""Everything asked for was done."""
EXIT_BUSINESS: Final = 1
"""The service said no: a rejected cancellation, a payment ending RJCT."""
EXIT_USAGE: Final = 2
"""Bad options, a bad file or invalid input: nothing was sent."""
EXIT_SERVICE: Final = 3
"""The service failed or could not be reached (after retries), or answered with codes
nobody can classify (an UNKNOWN outcome: check with the bank)."""
EXIT_INTERRUPTED: Final = 130
"""Stopped with Ctrl-C (or SIGTERM)."""


class CliError(Exception):
    """An error to report in one line with an exit code (raised inside commands).

    Args:
        message: the line to print.
        code: the exit code.
        details: more fields for the ``--json`` error object (lists of problems).
    """

    def __init__(
        self, message: str, code: int = EXIT_USAGE, details: Mapping[str, object] | None = None
    ) -> None:
        self.code = code
        self.details = dict(details or {})
        super().__init__(message)


def exit_code_for(exc: CliError | PaymentsError) -> int:
    """The exit code of an error a command raised.

    A `CliError` carries its own; invalid input or configuration is ``EXIT_USAGE``
    (nothing was sent), and so is a bulk journal that cannot be used (another input, a bad
    address, no such run) or is held by another run; a journal whose database cannot be
    reached, and any other error of the library, is ``EXIT_SERVICE``.
    """
    from payments_async import ConfigurationError, ValidationError
    from payments_async.bulk import JournalError, JournalUnavailableError

    if isinstance(exc, CliError):
        return exc.code
    if isinstance(exc, JournalUnavailableError):
        return EXIT_SERVICE  # rerun once the database is back
    if isinstance(exc, ValidationError | ConfigurationError | JournalError):
        return EXIT_USAGE
    return EXIT_SERVICE


def journal_failed(exc: JournalError) -> CliError:
    """The one-line error of a journal or queue that cannot be used, with its exit code
    (`exit_code_for`)."""
    return CliError(str(exc), exit_code_for(exc))


def outcome_exit_code(outcome: Outcome) -> int:
    """Exit code of a read outcome: 1 rejected, 3 unknown (codes nobody can classify)."""
    from payments_async import Outcome

    if outcome is Outcome.UNKNOWN:
        return EXIT_SERVICE
    return EXIT_BUSINESS if outcome is Outcome.REJECTED else EXIT_OK


_VERDICT_EXIT: Final = {"done": EXIT_OK, "said_no": EXIT_BUSINESS, "unsettled": EXIT_SERVICE}
"""Exit code by `payments_async.bulk.Verdict` (a ``StrEnum``: its value is its word)."""


def bulk_exit_code(totals: RunTotals, *, interrupted: bool = False) -> int:
    """Exit code of a bulk run, local (``bulk-cancel``) or queued (``--queue``,
    ``bulk-status``), from what its rows add up to (``docs/cli.md``).

    0 every valid row accepted; 1 every row final and some rejected or refused by the
    service; 3 some rows not final (not sent, in flight, pending), not sent for good (their
    message is refused before sending) or ended ``unknown``;
    130 a local run was interrupted.
    """
    return EXIT_INTERRUPTED if interrupted else _VERDICT_EXIT[totals.verdict]
