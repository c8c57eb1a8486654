"""Every error of the library keeps its documented exit code (``docs/errors.md``), the
bulk and notification errors included now that they are ``PaymentsError``s."""

from __future__ import annotations

import errno
import json

import pytest

from payments_async import (
    ConfigurationError,
    OutcomeUnknownError,
    PaymentsError,
    TransportError,
    ValidationError,
)
from payments_async.bulk import (
    BulkInputError,
    JournalBusyError,
    JournalError,
    JournalUnavailableError,
    ResultsWriteError,
    RowError,
)
from payments_async.cli._context import Settings
from payments_async.cli._exit import (
    EXIT_SERVICE,
    EXIT_USAGE,
    exit_code_for,
    journal_failed,
)
from payments_async.cli._run import run_command
from payments_async.notifications import (
    InboxBusyError,
    InboxError,
    InboxFull,
    InboxUnavailableError,
)

ERRORS: list[tuple[PaymentsError, int]] = [
    (ValidationError.single("$.grpHdr.msgId", "too long"), EXIT_USAGE),
    (ConfigurationError("no key"), EXIT_USAGE),
    (TransportError("refused"), EXIT_SERVICE),
    (OutcomeUnknownError("lost", message_id="M1"), EXIT_SERVICE),
    (BulkInputError([RowError(2, "amount", "not a number")]), EXIT_USAGE),
    (JournalError("journal j.db belongs to another input"), EXIT_USAGE),
    (JournalBusyError("j.db", "pid 12 on host"), EXIT_USAGE),
    (JournalUnavailableError("cannot reach the journal's database"), EXIT_SERVICE),
    (ResultsWriteError(errno.ENOSPC, "No space left on device", "r.csv"), EXIT_SERVICE),
    (InboxError("cannot read the inbox"), EXIT_SERVICE),
    (InboxFull("the inbox is full"), EXIT_SERVICE),
    (InboxBusyError("held by another receiver"), EXIT_SERVICE),
    (InboxUnavailableError("the inbox's database is away"), EXIT_SERVICE),
]


@pytest.mark.parametrize(("error", "code"), ERRORS, ids=lambda v: type(v).__name__)
def test_each_error_has_its_documented_exit_code(error: PaymentsError, code: int) -> None:
    assert exit_code_for(error) == code


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (JournalError("journal j.db belongs to another input"), EXIT_USAGE),
        (JournalBusyError("j.db", ""), EXIT_USAGE),
        (JournalUnavailableError("cannot reach the journal's database"), EXIT_SERVICE),
    ],
    ids=lambda v: type(v).__name__,
)
def test_a_journal_error_caught_by_a_command_or_not_has_one_code(
    error: JournalError, code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """Commands turn a ``JournalError`` into a ``CliError`` (`journal_failed`); one that
    reaches the command runner uncaught, as every ``PaymentsError`` may, ends the same."""
    assert journal_failed(error).code == code

    async def command() -> int:
        raise error

    with pytest.raises(SystemExit) as ended:
        run_command(Settings(json=True), command)
    assert ended.value.code == code
    printed = capsys.readouterr()
    assert json.loads(printed.out) == {"error": str(error), "exit_code": code}
    assert "Traceback" not in printed.err
