"""One bulk input row: its fields, the rules it is checked by, its problems, its camt.056.

Every input format (CSV, JSONL, camt.056 XML) reads into these; the readers build on
this room and nothing here knows a format.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Final

import msgspec

from .._errors import ValidationError
from ..iso20022 import (
    RECALL_WINDOWS,
    Address,
    Camt056,
    Transliteration,
    build_cancellation,
    outside_sepa_set,
    recall_deadline,
    target2_today,
)
from ._address import address_column_of

__all__ = [
    "DOCUMENT_LINE",
    "HEADER_LINE",
    "SETTLEMENT_DATE_COLUMN",
    "BulkRow",
    "RowError",
    "RowOptions",
    "ScannedRow",
    "build_row_message",
    "check_row",
    "column_of",
    "row_deadline",
    "row_problems",
    "row_transliterations",
]

HEADER_LINE: Final = 1
"""A CSV header's line: its problems make the file unusable."""

DOCUMENT_LINE: Final = 0
"""An XML document's own problems; its transactions are lines 1, 2, ..."""

SETTLEMENT_DATE_COLUMN: Final = "original_settlement_date"
"""The optional column of the original payment's interbank settlement date (YYYY-MM-DD)."""

# A validation problem's JSON path -> the input column it came from (first match wins).
_PATH_TO_COLUMN: Final = (
    ("orgnlEndToEndId", "original_end_to_end_id"),
    ("intrBkSttlmAmt.value", "amount"),
    ("intrBkSttlmAmt.ccy", "currency"),
    ("intrBkSttlmDt", SETTLEMENT_DATE_COLUMN),
    ("cdtrAcct.ccy", "currency"),
    ("cdtrAgt", "creditor_agent_bic"),
    ("cdtrAcct", "creditor_iban"),
    ("rsn.cd", "reason"),
    ("orgtr.nm", "originator_name"),
    ("orgtr.id", "assigner_bic"),
    ("assgnr", "assigner_bic"),
    ("assgne", "assignee_bic"),
    ("assgnmt.id", "assignment_id"),
    ("cxlId", "assignment_id"),
)

_TRANSLITERATE_HINT: Final = "; --transliterate (transliterate=True) converts text to the set"


@dataclass(frozen=True, slots=True)
class RowOptions:
    """The rules every row of a run is checked and built by, fixed once for the run.

    Attributes:
        transliterate: convert names and addresses to the SEPA character set (each
            change reported); identifiers are never changed.
        today: the TARGET2 day recall windows are judged on; None: today in TARGET2's
            time zone when the options are fixed (see `fixed`).
    """

    transliterate: bool = False
    today: dt.date | None = None

    def fixed(self) -> RowOptions:
        """These options with ``today`` set: a run checks and plans on one day."""
        if self.today is not None:
            return self
        return RowOptions(transliterate=self.transliterate, today=target2_today())


@dataclass(frozen=True, slots=True)
class RowError:
    """One problem in the input file.

    Attributes:
        line: the line number in the file (1 is the CSV header); in an XML document the
            transaction's position (1 is the first), 0 for the document as a whole.
        column: the column concerned, or None for the whole row.
        message: what is wrong.
        deadline: for a row refused because its recall window has closed, the last day
            on which its recall could be sent; None for any other problem.
    """

    line: int
    column: str | None
    message: str
    deadline: dt.date | None = field(default=None, compare=False)

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line != DOCUMENT_LINE else "document"
        return (
            f"{where}: {self.column}: {self.message}" if self.column else f"{where}: {self.message}"
        )


@dataclass(frozen=True, slots=True)
class BulkRow:
    """One valid input row: the facts a camt.056 needs about the payment to cancel.

    Attributes:
        line: the line number in the file (in an XML document, the transaction's
            position); the row's key in the journal and results.
        original_end_to_end_id: ``endToEndId`` of the payment to cancel.
        amount: its amount.
        currency: its currency (EUR).
        creditor_agent_bic: BIC of the creditor's bank.
        creditor_iban: the creditor's IBAN.
        reason: SEPA recall reason code (DUPL, TECH, FRAD, AC03, AM09, CUST).
        assigner_bic: the customer's agent.
        assignee_bic: the merchant's agent.
        originator_name: who asks for the cancellation, if given.
        assignment_id: ``assgnmt.id`` given by the file, or None to have one generated.
        creditor_agent_address: the postal address of the creditor's bank, if given
            (``orgnlTxRef.cdtrAgt.finInstnId.pstlAdr``; the EPC address rule applies).
        original_settlement_date: the original payment's interbank settlement date
            (``orgnlTxRef.intrBkSttlmDt``), if given: a row past its reason's recall
            window is refused, and a plan knows its deadline.
    """

    line: int
    original_end_to_end_id: str
    amount: Decimal
    currency: str
    creditor_agent_bic: str
    creditor_iban: str
    reason: str
    assigner_bic: str
    assignee_bic: str
    originator_name: str | None = None
    assignment_id: str | None = None
    creditor_agent_address: Address | None = None
    original_settlement_date: dt.date | None = None


@dataclass(slots=True)
class ScannedRow:
    """One item of an input scan.

    Attributes:
        line: the line number in the file.
        row: the parsed row, or None when the line is unusable.
        errors: its problems (duplicates included); empty for a valid row.
        header: True for the CSV header's problems (not a data row).
    """

    line: int
    row: BulkRow | None
    errors: list[RowError]
    header: bool = False


def build_row_message(
    row: BulkRow,
    *,
    assignment_id: str | None,
    cancellation_id: str | None,
    transliterate: bool = False,
    today: dt.date | None = None,
) -> Camt056:
    """The camt.056 that cancels one row's payment, with the ids fixed by the plan.

    Args:
        row: the parsed row.
        assignment_id: ``assgnmt.id``; generated when None.
        cancellation_id: ``cxlId``; generated when None.
        transliterate: convert names and addresses to the SEPA character set (each
            change on the result's ``transliterations``); identifiers never change.
        today: the TARGET2 day the recall window is judged on; None: today in Central
            European Time.

    Raises:
        ValidationError: the row breaks an ISO/SEPA rule, or its recall window has
            closed (every problem listed).
    """
    return build_cancellation(
        original_end_to_end_id=row.original_end_to_end_id,
        amount=row.amount,
        currency=row.currency,
        creditor_agent_bic=row.creditor_agent_bic,
        creditor_iban=row.creditor_iban,
        reason=row.reason,
        assigner_bic=row.assigner_bic,
        assignee_bic=row.assignee_bic,
        originator_name=row.originator_name,
        assignment_id=assignment_id,
        cancellation_id=cancellation_id,
        creditor_agent_address=row.creditor_agent_address,
        original_settlement_date=row.original_settlement_date,
        sent_on=today,
        transliterate=transliterate,
    )


def row_deadline(row: BulkRow) -> dt.date | None:
    """The last day on which the row's recall may be sent, or None when unknown (no
    settlement date, or a reason that is not a SEPA recall reason)."""
    if row.original_settlement_date is None or row.reason not in RECALL_WINDOWS:
        return None
    return recall_deadline(row.reason, row.original_settlement_date)


def column_of(path: str) -> str | None:
    """The input column a validation problem's path in the row's camt.056 names."""
    address_column = address_column_of(path)
    if address_column is not None:
        return address_column
    for fragment, column in _PATH_TO_COLUMN:
        if fragment in path:
            return column
    return None


def row_problems(
    row: BulkRow, exc: ValidationError, name: Callable[[str], str | None] = column_of
) -> list[RowError]:
    """The problems of a row's camt.056 as the row's errors.

    A problem at the settlement date of a row that has one is its closed recall window
    (the builder judges nothing else there): it carries the deadline. Text outside the
    SEPA set says that transliteration exists.

    Args:
        row: the row.
        exc: what building its camt.056 raised.
        name: ``path -> column`` (the column, or another name such as the path in the
            XML document the row came from).
    """
    deadline = row_deadline(row)
    out = []
    for p in exc.problems:
        late = deadline if p.path.endswith(".intrBkSttlmDt") and deadline is not None else None
        message = p.message
        if "outside the SEPA set" in message and "transliterate" in message:
            message = message.partition("; ")[0] + _TRANSLITERATE_HINT
        out.append(RowError(row.line, name(p.path), message, deadline=late))
    return out


def check_row(
    row: BulkRow, *, transliterate: bool = False, today: dt.date | None = None
) -> list[RowError]:
    """Every ISO/SEPA problem of one row, found by building its camt.056.

    Args:
        row: the parsed row.
        transliterate: as `build_row_message`'s.
        today: as `build_row_message`'s.

    Returns:
        The problems, each named by input column; empty when the row is valid. A row past
        its recall window has a problem at ``original_settlement_date`` carrying the
        deadline.
    """
    try:
        build_row_message(
            row,
            assignment_id=row.assignment_id or "BC-CHECK",
            cancellation_id="CX-CHECK",
            transliterate=transliterate,
            today=today,
        )
    except ValidationError as exc:
        return row_problems(row, exc)
    return []


def row_transliterations(row: BulkRow, options: RowOptions) -> tuple[Transliteration, ...]:
    """What transliteration changes in a valid row's text (empty without it).

    Raises:
        ValidationError: the row is not valid under ``options``.
    """
    if not options.transliterate or not any(outside_sepa_set(t) for t in _texts(row)):
        return ()  # nothing to convert: no need to build the message
    msg = build_row_message(
        row,
        assignment_id="BC-CHECK",
        cancellation_id="CX-CHECK",
        transliterate=True,
        today=options.today,
    )
    return msg.transliterations


def _texts(row: BulkRow) -> Iterator[str]:
    """Every text of a row that transliteration may convert (and some it never does)."""
    if row.originator_name is not None:
        yield row.originator_name
    if row.creditor_agent_address is not None:
        for value in msgspec.structs.astuple(row.creditor_agent_address):
            if isinstance(value, str):
                yield value
            elif isinstance(value, tuple):
                yield from (v for v in value if isinstance(v, str))
