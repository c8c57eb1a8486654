"""ISO 20022 XML at the command line: input files that hold XML, ``--xml`` output."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import click

from payments_async.iso20022 import Camt029, Camt056, Pacs002, Pacs008

from ._context import Settings
from ._exit import CliError
from ._files import read_file

__all__ = [
    "check_bulk_xml",
    "is_xml",
    "print_xml",
    "read_xml_message",
    "xml_module",
    "xml_options",
    "xsd_option",
]

_BOM = b"\xef\xbb\xbf"
_SNIFF = 4096  # bytes read to tell a bulk input's format, as the bulk reader does
F = TypeVar("F", bound=Callable[..., Any])


def is_xml(raw: bytes) -> bool:
    """True when a file holds XML: its first byte that is not white space is ``<``."""
    return raw.removeprefix(_BOM).lstrip()[:1] == b"<"


def xml_module() -> ModuleType:
    """``payments_async.iso20022.xml``; a `CliError` (exit 2) naming the extra without it."""
    try:
        from payments_async.iso20022 import xml
    except ImportError as exc:
        raise CliError(f"ISO 20022 XML needs the xml extra: {exc}") from None
    return xml


M = TypeVar("M", Pacs008, Camt056)


def read_xml_message(raw: bytes, path: Path, kind: type[M], xsd: Path | None) -> M:
    """The ``kind`` of message an XML file holds (checked against ``xsd`` when given).

    Raises:
        CliError: the xml extra is not installed, or the file holds the other message.
        ValidationError: the file is not such a document or breaks the XSD.
    """
    message = xml_module().from_xml(raw, xsd=xsd)
    if not isinstance(message, kind):
        wanted = "pacs.008" if kind is Pacs008 else "camt.056"
        raise CliError(f"{str(path)!r} holds a {type(message).__name__}, not a {wanted}")
    return message


def check_bulk_xml(path: Path, xsd: Path | None) -> None:
    """Before a bulk run: an XML input needs the xml extra; with ``xsd`` it must pass it.

    Raises:
        CliError: the xml extra is not installed, ``xsd`` is given for a CSV or JSONL
            input, or the document is larger than the CLI reads.
        ValidationError: the document breaks the XSD (every problem listed).
    """
    with path.open("rb") as fh:
        head = fh.read(_SNIFF)
    if not is_xml(head):
        if xsd is not None:
            raise CliError(f"--xsd checks an ISO 20022 XML input; {str(path)!r} is not XML")
        return
    xml = xml_module()
    if xsd is not None:
        xml.from_xml(read_file(path, "the XML input"), xsd=xsd)


def print_xml(settings: Settings, message: Pacs002 | Camt029, xsd: Path | None) -> None:
    """Print an answer of the service as ISO XML on stdout.

    With ``xsd``, the document is checked: what the XSD finds (what an incomplete answer
    lacks, such as a pacs.002 without its group header) is printed on stderr as notes,
    after the document, which is printed as the service gave it.
    """
    xml = xml_module()
    data: bytes = xml.to_xml(message)
    click.echo(data.decode("utf-8"), nl=False)
    if xsd is not None:
        for problem in xml.check_xml(data, xsd):
            click.echo(f"note: {problem}", err=True)


def xsd_option(command: F) -> F:
    """``--xsd FILE``: the official XSD to check XML against."""
    return click.option(
        "--xsd",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        metavar="FILE",
        help="The ISO XSD of the message's version: XML is checked against it.",
    )(command)


def xml_options(what: str) -> Callable[[F], F]:
    """``--xml`` and ``--xsd`` of a command that reads a ``what`` (pacs.002, camt.029)."""

    def decorate(command: F) -> F:
        command = xsd_option(command)
        return click.option(
            "--xml",
            "as_xml",
            is_flag=True,
            help=f"Print the {what} as ISO 20022 XML (needs the xml extra).",
        )(command)

    return decorate
