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
    from payments_async.bulk import BulkReport

    from ._private import QueueStatus

__all__ = [
    "EXIT_BUSINESS",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_SERVICE",
    "EXIT_USAGE",
    "CliError",
    "exit_code_for",
    "local_bulk_exit_code",
    "outcome_exit_code",
    "queued_bulk_exit_code",
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

    A :class:`CliError` carries its own; invalid input or configuration is
    ``EXIT_USAGE`` (nothing was sent); any other error of the library is ``EXIT_SERVICE``.
    """
    from payments_async import ConfigurationError, ValidationError

    if isinstance(exc, CliError):
        return exc.code
    if isinstance(exc, ValidationError | ConfigurationError):
        return EXIT_USAGE
    return EXIT_SERVICE


def outcome_exit_code(outcome: Outcome) -> int:
    """Exit code of a read outcome: 1 rejected, 3 unknown (codes nobody can classify)."""
    from payments_async import Outcome

    if outcome is Outcome.UNKNOWN:
        return EXIT_SERVICE
    return EXIT_BUSINESS if outcome is Outcome.REJECTED else EXIT_OK


# The two mappings of a bulk run's rows to an exit code. They disagree today (a local run
# exits 3 for unknown outcomes and 1 for refused rows, as docs/cli.md says; a queued run
# the other way round); they are kept side by side until the bulk runs share one.


def local_bulk_exit_code(report: BulkReport) -> int:
    """Exit code of ``bulk-cancel`` run in this process (the one ``docs/cli.md`` states)."""
    t = report.totals
    if report.interrupted:
        return EXIT_INTERRUPTED
    if any(t.get(k, 0) for k in ("not_sent", "in_flight", "pending", "unknown")):
        return EXIT_SERVICE
    if t.get("rejected", 0) or t.get("refused", 0):
        return EXIT_BUSINESS
    return EXIT_OK


def queued_bulk_exit_code(status: QueueStatus) -> int:
    """Exit code of ``bulk-cancel --queue`` and ``bulk-status`` (a run over workers)."""
    not_final = status.rows - status.done
    if not_final or status.outcomes.get("failed", 0):
        return EXIT_SERVICE
    if status.outcomes.get("rejected", 0) or status.outcomes.get("unknown", 0):
        return EXIT_BUSINESS
    return EXIT_OK
