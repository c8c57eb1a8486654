"""Read a bulk cancellation file that is an ISO 20022 camt.056 XML document: a row per
transaction."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import msgspec

from .._errors import ValidationError
from ..iso20022 import Address, Camt056, Pacs008, transliterate
from ..iso20022.camt056 import Assignment, CancellationTransaction
from ._defaults import XML_INPUT_MAX_BYTES
from ._input_row import (
    DOCUMENT_LINE,
    BulkRow,
    RowError,
    RowOptions,
    ScannedRow,
    build_row_message,
    check_row,
    row_problems,
)

__all__ = ["is_xml_input", "scan_xml"]

_BOM: Final = b"\xef\xbb\xbf"
_SNIFF: Final = 4096
_TX: Final = "$.fitoFIPmtCxlReq.undrlyg[0].txInf[0]"  # where a row's own camt.056 holds it


def is_xml_input(path: str | Path) -> bool:
    """True when a bulk file holds XML: its first byte that is not white space is ``<``.

    The CLI's ``pay`` and ``cancel`` tell XML from JSON the same way; a CSV header or a
    JSON line cannot start with ``<``.

    Raises:
        OSError: the file cannot be read.
    """
    with Path(path).open("rb") as fh:
        head = fh.read(_SNIFF)
    return head.removeprefix(_BOM).lstrip()[:1] == b"<"


def _document_error(message: str, column: str | None = None) -> ScannedRow:
    return ScannedRow(DOCUMENT_LINE, None, [RowError(DOCUMENT_LINE, column, message)], header=True)


def scan_xml(
    path: Path,
    check: Callable[[BulkRow], list[RowError]] | None,
    options: RowOptions | None = None,
) -> tuple[str, list[ScannedRow]]:
    """Read a camt.056.001.08 document: ``(sha256 of its bytes, one item per transaction)``.

    Each transaction (``undrlyg[].txInf[]``, in document order) is one row whose line is
    its position, from 1. A problem of the document as a whole (not XML, not a camt.056,
    larger than `XML_INPUT_MAX_BYTES`, the xml extra missing) is a header item at
    `DOCUMENT_LINE`. The document is read whole (it is at most `XML_INPUT_MAX_BYTES`).

    Args:
        path: the file.
        check: the per-row check; None (or `check_row`): the rows' camt.056 built under
            ``options``, the problems named by their path in the document.
        options: the run's rules (transliteration, the day recall windows are judged on).

    Raises:
        OSError: the file cannot be read.
    """
    size = path.stat().st_size
    if size > XML_INPUT_MAX_BYTES:
        digest = hashlib.sha256()
        with path.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
        limit = XML_INPUT_MAX_BYTES // (1024 * 1024)
        return digest.hexdigest(), [
            _document_error(
                f"an XML input holds at most {limit} MiB ({size} bytes given): split it, "
                "or give the rows as CSV or JSONL, which are read as a stream"
            )
        ]
    raw = path.read_bytes()
    sha256 = hashlib.sha256(raw).hexdigest()
    try:
        from ..iso20022 import xml
    except ImportError as exc:
        return sha256, [_document_error(str(exc))]
    try:
        message = xml.from_xml(raw)
    except ValidationError as exc:
        return sha256, [
            _document_error(p.message, p.path if p.path != "$" else None) for p in exc.problems
        ]
    if not isinstance(message, Camt056):
        held = "pacs.008" if isinstance(message, Pacs008) else "pacs.028"
        return sha256, [_document_error(f"holds a {held}, not a camt.056.001.08 document")]
    return sha256, list(_rows(message, check, options or RowOptions()))


def _rows(
    message: Camt056,
    check: Callable[[BulkRow], list[RowError]] | None,
    options: RowOptions,
) -> Iterator[ScannedRow]:
    body = message.body
    txs = [
        (f"$.fitoFIPmtCxlReq.undrlyg[{i}].txInf[{j}]", tx)
        for i, und in enumerate(body.undrlyg)
        for j, tx in enumerate(und.tx_inf)
    ]
    declared = body.ctrl_data.nb_of_txs if body.ctrl_data is not None else None
    if declared is not None and (not str(declared).isdigit() or int(declared) != len(txs)):
        yield _document_error(
            f"says {declared} transaction(s), holds {len(txs)}",
            "$.fitoFIPmtCxlReq.ctrlData.nbOfTxs",
        )
        return
    first_line: dict[tuple[str, str], int] = {}  # (kind, id) -> the first line that used it
    for line, (where, tx) in enumerate(txs, start=1):
        row, problems = _row(line, where, body.assgnmt, tx)
        if row is not None:
            if check is None or check is check_row:
                problems = _problems(row, where, tx, options)
            else:
                problems = check(row)
            for field, value in (
                ("orgnlEndToEndId", row.original_end_to_end_id),
                ("cxlId", tx.cxl_id),
            ):
                first = first_line.setdefault((field, value), line)
                if first != line:
                    problems.append(
                        RowError(line, f"{where}.{field}", f"same as transaction {first}")
                    )
        yield ScannedRow(line, None if problems else row, problems)


def _row(
    line: int, where: str, assignment: Assignment, tx: CancellationTransaction
) -> tuple[BulkRow | None, list[RowError]]:
    """The row a transaction gives, or the fields it lacks that a row needs.

    What the row cannot carry is found by `_problems`.
    """
    info = tx.cxl_rsn_inf[0]
    originator = info.orgtr
    ref = tx.orgnl_tx_ref
    amount = ref.intr_bk_sttlm_amt
    agent = ref.cdtr_agt.fin_instn_id if ref.cdtr_agt is not None else None
    bic = agent.bicfi if agent is not None else None
    iban = ref.cdtr_acct.id.iban if ref.cdtr_acct is not None else None
    needed = {
        "orgnlEndToEndId": tx.orgnl_end_to_end_id,
        "orgnlTxRef.intrBkSttlmAmt": amount,
        "orgnlTxRef.cdtrAgt.finInstnId.bicfi": bic,
        "orgnlTxRef.cdtrAcct.id.iban": iban,
    }
    missing = [
        RowError(line, f"{where}.{name}", "required in a bulk row, but absent")
        for name, value in needed.items()
        if value is None
    ]
    if missing or amount is None or tx.orgnl_end_to_end_id is None or bic is None or iban is None:
        return None, missing
    address = agent.pstl_adr if agent is not None else None
    settled = _date(ref.intr_bk_sttlm_dt)
    if ref.intr_bk_sttlm_dt is not None and settled is None:
        where_date = f"{where}.orgnlTxRef.intrBkSttlmDt"
        return None, [RowError(line, where_date, "not a date (YYYY-MM-DD)")]
    return BulkRow(
        line=line,
        original_end_to_end_id=tx.orgnl_end_to_end_id,
        amount=amount.value,
        currency=amount.ccy,
        creditor_agent_bic=bic,
        creditor_iban=iban,
        reason=info.rsn.cd,
        assigner_bic=assignment.assgnr.agt.fin_instn_id.bicfi,
        assignee_bic=assignment.assgne.agt.fin_instn_id.bicfi,
        originator_name=originator.nm if originator is not None else None,
        assignment_id=tx.cxl_id,
        creditor_agent_address=Address.from_iso(address) if address is not None else None,
        original_settlement_date=settled,
    ), []


def _date(value: str | None) -> dt.date | None:
    if value is None:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        return None


def _problems(
    row: BulkRow, where: str, tx: CancellationTransaction, options: RowOptions
) -> list[RowError]:
    """Every problem of a transaction's row, named by its path in the document.

    The row's camt.056 is built as it will be sent; the ISO/SEPA rules it breaks are
    listed, and so is every value of the transaction that this camt.056 does not carry
    (a second reason, a field a bulk row has no column for).
    """
    line = row.line
    try:
        built = build_row_message(
            row,
            assignment_id=tx.cxl_id,
            cancellation_id=tx.cxl_id,
            transliterate=options.transliterate,
            today=options.today,
        )
    except ValidationError as exc:
        return row_problems(row, exc, lambda path: _in_document(path, where))
    sent = msgspec.to_builtins(built.body.undrlyg[0].tx_inf[0])
    given = msgspec.to_builtins(tx)
    if options.transliterate:  # text is sent converted, not dropped (text in the set stays)
        given = _converted(given)
    return [RowError(line, path, message) for path, message in _dropped(given, sent, where)]


def _converted(value: Any) -> Any:
    """``value`` with every string converted to the SEPA set, as ``transliterate=True``."""
    if isinstance(value, dict):
        return {key: _converted(v) for key, v in value.items()}
    if isinstance(value, list):
        return [_converted(v) for v in value]
    if isinstance(value, str):
        return transliterate(value)[0]
    return value


def _in_document(path: str, where: str) -> str:
    """A path in the row's own camt.056 as the path in the document it came from."""
    if path.startswith(_TX):
        return where + path[len(_TX) :]
    return path


def _dropped(given: Any, sent: Any, path: str) -> Iterator[tuple[str, str]]:
    """``(path, why)`` of every value in ``given`` that ``sent`` does not hold as given."""
    if isinstance(given, dict):
        for key, value in given.items():
            yield from _dropped(
                value, sent.get(key) if isinstance(sent, dict) else None, f"{path}.{key}"
            )
        return
    if isinstance(given, list):
        held = sent if isinstance(sent, list) else []
        if path.endswith(".cxlRsnInf") and len(given) > 1:
            yield path, f"{len(given)} reasons: a bulk row carries exactly one"
            given = given[:1]
        for n, value in enumerate(given):
            yield from _dropped(value, held[n] if n < len(held) else None, f"{path}[{n}]")
        return
    if given != sent:
        yield path, f"{given!r} cannot be carried by a bulk row (it would not be sent)"
