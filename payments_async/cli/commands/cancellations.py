"""Cancellations: ``cancel`` (a camt.056) and ``outcome`` (its camt.029)."""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Iterator
from pathlib import Path

import click

from payments_async import (
    POLL_TIMEOUT,
    Camt056,
    CancellationOutcome,
    Outcome,
    PaymentsError,
    check_payments_service_id,
)
from payments_async.bulk import JournalError, RecallLedger, open_recall_ledger
from payments_async.bulk._input import COLUMNS, build_row_message, check_row, parse_record
from payments_async.iso20022 import decode_camt056, summarize_resolution

from .._context import Settings, pass_settings
from .._exit import EXIT_OK, CliError, journal_failed, outcome_exit_code
from .._files import load_json_bytes, read_json_file
from .._params import read_options, seconds
from .._render import outcome_dict, say_outcome, say_submission, submission_dict
from .._run import connected, run_command, seconds_left
from .._xml import is_xml, print_xml, read_xml_message, xml_module, xml_options, xsd_option

__all__ = ["cancel", "outcome"]


def _cancellation_from_file(
    raw: bytes, path: Path, xsd: Path | None, transliterate: bool = False
) -> Camt056:
    """A camt.056 document (JSON or ISO XML), or one bulk-style row object turned into one
    (its text converted to the SEPA set with ``transliterate``; a document is sent as is)."""
    if is_xml(raw):
        return read_xml_message(raw, path, Camt056, xsd)
    obj = load_json_bytes(raw, repr(str(path)))
    if isinstance(obj, dict) and "fitoFIPmtCxlReq" in obj:
        return decode_camt056(raw)
    if not isinstance(obj, dict):
        raise CliError(f"{str(path)!r} must hold a JSON object")
    check = functools.partial(check_row, transliterate=transliterate)
    row, problems = parse_record(1, obj, check, known_only=True)
    if row is None:
        listed = "; ".join(f"{e.column}: {e.message}" if e.column else e.message for e in problems)
        raise CliError(
            f"{str(path)!r}: {listed} (give a camt.056 with root fitoFIPmtCxlReq, "
            f"or an object with {', '.join(COLUMNS)})",
            details={"problems": [{"column": e.column, "message": e.message} for e in problems]},
        )
    return build_row_message(
        row, assignment_id=row.assignment_id, cancellation_id=None, transliterate=transliterate
    )


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--wait", is_flag=True, help="Then wait for the outcome (camt.029).")
@click.option(
    "--timeout", type=float, callback=seconds, default=POLL_TIMEOUT, show_default=True, metavar="S"
)
@click.option(
    "--journal",
    metavar="PATH|URL",
    help="Record this recall in a bulk journal (a file, or postgresql://...), and refuse "
    "it when the journal already records a recall of the same payment.",
)
@click.option(
    "--transliterate",
    is_flag=True,
    help="For an object with the bulk columns: convert the originator's name and the "
    "address to the SEPA character set (each change said); identifiers never change.",
)
@xsd_option
@pass_settings
def cancel(
    settings: Settings,
    file: Path,
    wait: bool,
    timeout: float,
    journal: str | None,
    transliterate: bool,
    xsd: Path | None,
) -> None:
    """Request a cancellation (camt.056). Exit 1 when --wait sees it rejected.

    FILE is a camt.056 JSON (root fitoFIPmtCxlReq), a camt.056.001.08 ISO XML document
    (read with the xml extra), or one object with the bulk columns
    (original_end_to_end_id, amount, creditor_agent_bic, creditor_iban, reason,
    assigner_bic, assignee_bic, ...). A camt.056 file can be resent as is: the service
    answers 200 with the same paymentsServiceId. An object is built into a new message
    on every run; give it an assignment_id so that a second run is refused by the
    service (same id, other creation time) instead of creating a second request.

    With --journal, the recall is recorded in that bulk journal before it is sent, and
    refused (exit 2, nothing sent) when the journal already records a recall of the same
    payment, by a bulk run or another cancel, naming that first recall. Without it,
    nothing stops a second recall of a payment.
    """

    async def go() -> int:
        msg = _cancellation_from_file(read_json_file(file), file, xsd, transliterate)
        changes = [str(c) for c in msg.transliterations]
        if changes and not settings.json:
            for change in changes:
                settings.err.print(f"transliterated {change}")
        try:
            with _recall_ledger(journal, msg) as ledger:
                async with connected(settings) as client:
                    try:
                        sub = await client.request_cancellation(msg)
                    except PaymentsError as exc:
                        if ledger is not None:
                            ledger.failed(msg.message_id, exc)
                        raise
                    settings.created["cancellation"] = sub.payments_service_id
                    outcome = None
                    if wait:
                        outcome = await client.wait_for_cancellation_outcome(
                            sub.payments_service_id, timeout=timeout
                        )
                if ledger is not None and outcome is not None:
                    ledger.settle(msg.message_id, outcome.outcome.value)
        except JournalError as exc:
            raise journal_failed(exc) from None
        if settings.json:
            data = submission_dict(sub)
            if changes:
                data["transliterated"] = changes
            if outcome is not None:
                data["outcome"] = outcome_dict(outcome)
            settings.emit(data)
        else:
            say_submission(settings, "camt.056", sub)
            if outcome is not None:
                say_outcome(settings, outcome)
        return EXIT_OK if outcome is None else outcome_exit_code(outcome.outcome)

    run_command(settings, go)


@contextlib.contextmanager
def _recall_ledger(journal: str | None, msg: Camt056) -> Iterator[RecallLedger | None]:
    """The journal's recall ledger with this message's recall claimed, or None without
    ``--journal``.

    Raises:
        CliError: the camt.056 names no payment.
        JournalError: the journal already records a recall of one of its payments
            (`AlreadyRecalledError`, naming it), or it cannot be used.
    """
    if journal is None:
        yield None
        return
    payments = [
        tx.orgnl_end_to_end_id
        for und in msg.fito_fi_pmt_cxl_req.undrlyg
        for tx in und.tx_inf
        if tx.orgnl_end_to_end_id is not None
    ]
    if not payments:
        raise CliError(
            "the camt.056 names no orgnlEndToEndId: --journal keeps recalls per payment, "
            "so it cannot record this one"
        )
    with open_recall_ledger(journal) as ledger:
        ledger.claim(payments, msg.message_id)
        yield ledger


@click.command()
@click.argument("payments_service_id", metavar="ID")
@read_options("outcome")
@xml_options("camt.029")
@pass_settings
def outcome(
    settings: Settings,
    payments_service_id: str,
    wait: bool,
    timeout: float | None,
    as_xml: bool,
    xsd: Path | None,
) -> None:
    """Read a cancellation's outcome (camt.029).

    Exit 1 when it was rejected; 3 when its codes cannot be classified (every raw code is
    printed: check with the bank). With --xml the resolution is printed as ISO XML
    (camt.029.001.09); with --xsd too, what the XSD finds is noted on stderr.
    """

    async def go() -> int:
        check_payments_service_id(payments_service_id)
        if as_xml:
            xml_module()  # before asking the service: without the extra, say so first
        # --timeout bounds the whole command, the access token included.
        deadline = None if timeout is None else time.monotonic() + timeout
        async with connected(settings, deadline=deadline) as client:
            left = seconds_left(deadline)
            if wait:
                result = await client.wait_for_cancellation_outcome(
                    payments_service_id, timeout=POLL_TIMEOUT if left is None else left
                )
            else:
                res = await client.get_cancellation_outcome(
                    payments_service_id, timeout=seconds_left(deadline)
                )
                summary = summarize_resolution(res)
                if as_xml:
                    print_xml(settings, res, xsd)
                    return outcome_exit_code(summary.outcome)
                if summary.outcome is Outcome.PENDING:
                    if settings.json:
                        settings.emit(
                            {
                                "payments_service_id": payments_service_id,
                                "outcome": "pending",
                                "status": summary.status,
                            }
                        )
                    else:
                        settings.say(
                            f"cancellation {payments_service_id}: pending ({summary.status}); "
                            "use --wait to wait for the outcome"
                        )
                    return EXIT_OK
                result = CancellationOutcome.from_resolution(payments_service_id, res, summary)
        if as_xml:
            print_xml(settings, result.resolution, xsd)
        elif settings.json:
            settings.emit(outcome_dict(result))
        else:
            say_outcome(settings, result)
        return outcome_exit_code(result.outcome)

    run_command(settings, go)
