"""Payments: ``token``, ``pay`` (a pacs.008) and ``status`` (its pacs.002)."""

from __future__ import annotations

import time
from pathlib import Path

import click

from payments_async import POLL_TIMEOUT, check_payments_service_id
from payments_async.iso20022 import Pacs008, decode_pacs008, summarize_status_report

from .._context import Settings, pass_settings
from .._exit import EXIT_OK, outcome_exit_code
from .._files import load_json_bytes, read_json_file
from .._params import read_options
from .._render import say_status, say_submission, status_dict, submission_dict
from .._run import connected, run_command, seconds_left, token_lifetime
from .._xml import is_xml, print_xml, read_xml_message, xml_module, xml_options, xsd_option

__all__ = ["pay", "status", "token"]


@click.command()
@pass_settings
def token(settings: Settings) -> None:
    """Obtain an access token: checks the credentials and the service address.

    The token itself is never printed; its lifetime is.
    """

    async def go() -> int:
        async with connected(settings) as client:
            lifetime = await token_lifetime(client)
        if settings.json:
            settings.emit({"ok": True, "expires_in": round(lifetime, 1)})
        else:
            settings.say(f"access token obtained; it expires in {lifetime:.0f} s")
        return EXIT_OK

    run_command(settings, go)


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@xsd_option
@pass_settings
def pay(settings: Settings, file: Path, xsd: Path | None) -> None:
    """Submit a credit transfer: FILE is a pacs.008 JSON (root fitoFICstmrCdtTrf) or
    a pacs.008.001.10 ISO XML document (read with the xml extra).

    Resubmitting the same file is safe: the service answers 200 with the same
    paymentsServiceId (it is idempotent on grpHdr.msgId).
    """

    async def go() -> int:
        raw = read_json_file(file)
        if is_xml(raw):
            msg = read_xml_message(raw, file, Pacs008, xsd)
        else:
            load_json_bytes(raw, repr(str(file)))
            msg = decode_pacs008(raw)
        async with connected(settings) as client:
            sub = await client.submit_credit_transfer(msg)
            settings.created["payment"] = sub.payments_service_id
        if settings.json:
            settings.emit(submission_dict(sub) | {"end_to_end_id": msg.end_to_end_id})
        else:
            say_submission(settings, "pacs.008", sub)
            settings.say(f"  end-to-end id      {msg.end_to_end_id}")
        return EXIT_OK

    run_command(settings, go)


@click.command()
@click.argument("payments_service_id", metavar="ID")
@read_options("status")
@xml_options("pacs.002")
@pass_settings
def status(
    settings: Settings,
    payments_service_id: str,
    wait: bool,
    timeout: float | None,
    as_xml: bool,
    xsd: Path | None,
) -> None:
    """Read a credit transfer's status (pacs.002).

    Exit 1 when it ended RJCT; 3 when its codes cannot be classified (every raw code is
    printed: check with the bank). With --xml the report is printed as ISO XML
    (pacs.002.001.12); with --xsd too, what the XSD finds is noted on stderr.
    """

    async def go() -> int:
        check_payments_service_id(payments_service_id)
        if as_xml:
            xml_module()  # before asking the service: without the extra, say so first
        report = None
        # --timeout bounds the whole command, the access token included.
        deadline = None if timeout is None else time.monotonic() + timeout
        async with connected(settings, deadline=deadline) as client:
            left = seconds_left(deadline)
            if wait:
                st = await client.wait_for_payment_status(
                    payments_service_id, timeout=POLL_TIMEOUT if left is None else left
                )
            if not wait or as_xml:
                report = await client.get_credit_transfer_status(
                    payments_service_id, timeout=seconds_left(deadline)
                )
                st = summarize_status_report(report)
        if as_xml and report is not None:
            print_xml(settings, report, xsd)
        elif settings.json:
            settings.emit(status_dict(st, payments_service_id))
        else:
            say_status(settings, st, payments_service_id)
        return outcome_exit_code(st.outcome)

    run_command(settings, go)
