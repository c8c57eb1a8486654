"""Read a bulk cancellation file (CSV or JSONL) and check every row before anything is sent."""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import functools
import hashlib
import io
import json
import re
import sqlite3
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Final, TextIO

from .._errors import ValidationError
from ._address import (
    ADDRESS_COLUMNS,
    ADDRESS_KEY,
    address_from_columns,
    address_from_object,
    object_column,
)
from ._input_row import (
    DOCUMENT_LINE,
    HEADER_LINE,
    SETTLEMENT_DATE_COLUMN,
    BulkRow,
    RowError,
    RowOptions,
    ScannedRow,
    build_row_message,
    check_row,
    row_deadline,
    row_transliterations,
)
from ._xml_input import is_xml_input, scan_xml

__all__ = [
    "ATTENTION_COLUMN",
    "COLUMNS",
    "OPTIONAL_COLUMNS",
    "REQUIRED_COLUMNS",
    "BulkInput",
    "BulkRow",
    "DuplicateKeyError",
    "InputCheck",
    "InputScan",
    "ProgressCallback",
    "RowError",
    "RowOptions",
    "ScannedRow",
    "build_row_message",
    "check_input",
    "check_row",
    "file_sha256",
    "is_jsonl",
    "parse_amount",
    "parse_record",
    "read_input",
    "read_records",
    "transliterations",
    "unique_keys",
]

REQUIRED_COLUMNS: Final = (
    "original_end_to_end_id",
    "amount",
    "creditor_agent_bic",
    "creditor_iban",
    "reason",
    "assigner_bic",
    "assignee_bic",
)
"""Columns every row must fill."""

OPTIONAL_COLUMNS: Final = (
    "currency",
    "originator_name",
    "assignment_id",
    SETTLEMENT_DATE_COLUMN,
)
"""Columns that may be absent or empty (currency defaults to EUR).

``original_settlement_date`` is the original payment's interbank settlement date
(``YYYY-MM-DD``): a row past its recall window is refused, and a plan knows its deadline.
"""

COLUMNS: Final = REQUIRED_COLUMNS + OPTIONAL_COLUMNS
"""The columns of both formats, in the order the example file uses.

The creditor agent's address, optional, is given in CSV by one column per `Address` field
(``creditor_agent_street``, ``creditor_agent_town``, ..., ``creditor_agent_lines`` with
the lines separated by ``|``) and in JSONL by one object, ``creditor_agent_address``,
whose keys are `Address`'s field names.
"""

ATTENTION_COLUMN: Final = "attention"
"""A column (JSONL: field) read and ignored: why a row of an attention file needs a person."""

_JSON_KEYS: Final = frozenset((*COLUMNS, ADDRESS_KEY, ATTENTION_COLUMN))
_CSV_COLUMNS: Final = frozenset((*COLUMNS, *ADDRESS_COLUMNS, ATTENTION_COLUMN))

_HEADER_LINE: Final = HEADER_LINE
_DOCUMENT_LINE: Final = DOCUMENT_LINE

# An amount as people and ISO 20022 write it: ASCII digits, at most one point. No exponent
# (1e3), no digit separators (1_000.00, 1,000.00), no sign, no other scripts' digits
# (Python's Decimal() accepts all of these).
_AMOUNT: Final = re.compile(r"[0-9]+(?:\.[0-9]+)?", re.ASCII)

# A date as ISO 8601 writes it in a camt.056: YYYY-MM-DD, nothing else (Python's
# fromisoformat() also reads 20260105 and 2026-W02-1).
_DATE: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", re.ASCII)


@dataclass(frozen=True, slots=True)
class BulkInput:
    """A bulk file read and checked.

    Attributes:
        path: the file.
        sha256: digest of its bytes; a journal is bound to it.
        rows: the valid rows, in file order.
        errors: every problem found, in line order.
        invalid_lines: lines of the rows that have errors.
        xml: True for an ISO 20022 XML document (a line is a transaction's position).
    """

    path: Path
    sha256: str
    rows: tuple[BulkRow, ...]
    errors: tuple[RowError, ...]
    invalid_lines: tuple[int, ...]
    xml: bool = False

    @property
    def fatal(self) -> bool:
        """True when the file as a whole is unusable (bad header, no rows): nothing can run."""
        return _unusable(self.errors, xml=self.xml) or (not self.rows and not self.invalid_lines)

    @property
    def total(self) -> int:
        """Data rows in the file, valid or not."""
        return len(self.rows) + len(self.invalid_lines)


def _unusable(errors: tuple[RowError, ...], *, xml: bool) -> bool:
    """A problem of the CSV header (line 1) or of the XML document (its line 0)."""
    whole = _DOCUMENT_LINE if xml else _HEADER_LINE
    return any(e.line == whole for e in errors)


class DuplicateKeyError(ValueError):
    """A JSON object names one key twice (raised by `unique_keys`)."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for ``json.loads``: an object whose keys are all different.

    JSON lets an object name a key twice and ``json.loads`` keeps the last value without a
    word; in a file a person wrote, that hides a mistake (which payment was meant?), as a
    CSV column given twice would.

    Raises:
        DuplicateKeyError: a key appears twice (its message names the key).
    """
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(f"the key {key[:40]!r} appears twice in one object")
            seen.add(key)
    return obj


def read_records(fh: TextIO, jsonl: bool) -> Iterator[tuple[int, Mapping[str, object] | None, str]]:
    """Yield ``(line, record, problem)``: a record as given, unchecked (a CSV's header first,
    ``{"__header__": names}``), or None and why the line is unreadable; one at a time."""
    if jsonl:
        for n, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                # Decimal keeps a number as written (1e3 stays 1E+3 and is refused later).
                obj = json.loads(raw, parse_float=Decimal, object_pairs_hook=unique_keys)
            except json.JSONDecodeError as exc:
                yield n, None, f"not valid JSON ({exc.msg} at column {exc.colno})"
                continue
            except DuplicateKeyError as exc:
                yield n, None, str(exc)
                continue
            except ValueError:  # int(): more than 4,300 digits
                yield n, None, "not valid JSON (a number with too many digits)"
                continue
            except RecursionError:
                yield n, None, "not valid JSON (nested too deeply)"
                continue
            if not isinstance(obj, dict):
                yield n, None, "expected a JSON object"
                continue
            yield n, obj, ""
        return
    reader = csv.reader(fh, strict=True)
    try:
        header = next(reader)
    except StopIteration:
        return
    except csv.Error as exc:
        yield _HEADER_LINE, None, f"unreadable CSV header: {exc}"
        return
    header_lines = 0
    if len(header) == 1 and ";" in header[0]:
        # Spreadsheets set to a language whose decimal mark is ',' save "CSV" with ';'
        # between fields. A header that is one field holding a ';' cannot name the required
        # columns, so such a file is read with ';' from its header on.
        header = next(csv.reader([header[0]], delimiter=";", strict=True))
        header_lines = reader.line_num
        reader = csv.reader(fh, delimiter=";", strict=True)
    names = [h.strip() for h in header]
    yield _HEADER_LINE, {"__header__": names}, ""
    start = header_lines + reader.line_num + 1
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            # Reported where the record starts: a stray '"' there opens a quoted field
            # that swallows the lines after it, up to where the reader gave up.
            end = header_lines + reader.line_num
            spans = f" (a '\"' opens a quoted field here that runs on to line {end})"
            yield start, None, f"unreadable CSV: {exc}{spans if end > start else ''}"
            return
        line = start
        start = header_lines + reader.line_num + 1
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != len(names):
            yield line, None, f"expected {len(names)} fields, found {len(cells)}"
            continue
        yield line, dict(zip(names, cells, strict=True)), ""


def _check_columns(names: list[str]) -> list[RowError]:
    known = ", ".join((*COLUMNS, *ADDRESS_COLUMNS))
    errors = [
        RowError(_HEADER_LINE, None, f"unknown column {name!r} (known: {known})")
        for name in names
        if name not in _CSV_COLUMNS
    ]
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        errors.append(RowError(_HEADER_LINE, None, f"missing column(s): {', '.join(missing)}"))
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        errors.append(RowError(_HEADER_LINE, None, f"duplicate column(s): {', '.join(dupes)}"))
    return errors


def _text(record: Mapping[str, object], key: str, line: int, out: list[RowError]) -> str | None:
    value = record.get(key)
    if value is None:
        return None
    if key == "amount" and isinstance(value, int | Decimal) and not isinstance(value, bool):
        return str(value)  # a JSON number, as written (Decimal keeps an exponent visible)
    if not isinstance(value, str):
        out.append(RowError(line, key, f"expected text, got {type(value).__name__}"))
        return None
    return value.strip() or None


def parse_amount(text: str) -> Decimal | None:
    """The amount as a Decimal, or None unless written as ASCII digits with one optional point.

    ``1e3``, ``1_000.00``, ``1,000.00``, ``+5``, ``NaN`` and non-ASCII digits (such as
    Arabic-Indic ``١٠``) are refused although ``Decimal()`` would accept them: a bank file
    means what its characters say, and the service takes only plain decimals.

    Args:
        text: the cell's text, stripped.
    """
    return Decimal(text) if _AMOUNT.fullmatch(text) else None


def parse_record(
    line: int,
    record: Mapping[str, object],
    check: Callable[[BulkRow], list[RowError]],
    *,
    known_only: bool,
) -> tuple[BulkRow | None, list[RowError]]:
    """One record (a CSV row or a JSON object) as a checked row, or every problem it has.

    Every problem of the row is listed, not only the first: the ISO/SEPA check runs on
    the other columns even when one of them could not be read.

    Args:
        line: the record's line number.
        record: column name -> value.
        check: the ISO/SEPA check of a parsed row (see `check_row`).
        known_only: refuse keys that are not columns (JSON objects; CSV checks its header).
            A JSON object gives the address as the object ``creditor_agent_address``
            (its problems named ``creditor_agent_address.<field>``), a CSV row as the
            ``creditor_agent_<field>`` columns.

    Returns:
        ``(row, [])`` for a valid record, ``(None, problems)`` otherwise.
    """
    errors: list[RowError] = []
    if known_only:
        errors.extend(
            RowError(line, None, f"unknown field {key!r}{_object_hint(key)}")
            for key in record
            if key not in _JSON_KEYS
        )
    values = {key: _text(record, key, line, errors) for key in COLUMNS}
    if known_only:
        address, address_problems = address_from_object(record.get(ADDRESS_KEY))
        errors.extend(RowError(line, column, message) for column, message in address_problems)
    else:
        address = address_from_columns(record)
    for key in REQUIRED_COLUMNS:
        if values[key] is None and not any(e.column == key for e in errors):
            errors.append(RowError(line, key, "required, but empty"))
    amount: Decimal | None = None
    if values["amount"] is not None:
        amount = parse_amount(values["amount"])
        if amount is None:
            errors.append(
                RowError(
                    line,
                    "amount",
                    f"not a decimal number: {values['amount']!r} (write digits 0-9 and "
                    "one '.', such as 1000.00)",
                )
            )
    settled = _settlement_date(values[SETTLEMENT_DATE_COLUMN], line, errors)
    row = BulkRow(
        line=line,
        original_end_to_end_id=values["original_end_to_end_id"] or "",
        # A stand-in only so the other columns still get checked; never sent (errors).
        amount=amount if amount is not None else Decimal("1.00"),
        currency=(values["currency"] or "EUR").upper(),
        creditor_agent_bic=values["creditor_agent_bic"] or "",
        creditor_iban=values["creditor_iban"] or "",
        reason=(values["reason"] or "").upper(),
        assigner_bic=values["assigner_bic"] or "",
        assignee_bic=values["assignee_bic"] or "",
        originator_name=values["originator_name"],
        assignment_id=values["assignment_id"],
        creditor_agent_address=address,
        original_settlement_date=settled,
    )
    reported = {e.column for e in errors}
    for e in check(row):
        column = object_column(e.column) if known_only else e.column
        if column is None or column not in reported:
            errors.append(RowError(e.line, column, e.message, deadline=e.deadline))
    return (None, errors) if errors else (row, [])


def _settlement_date(text: str | None, line: int, out: list[RowError]) -> dt.date | None:
    """The ``original_settlement_date`` cell as a date (None when empty or wrong)."""
    if text is None:
        return None
    if _DATE.fullmatch(text):
        try:
            return dt.date.fromisoformat(text)
        except ValueError:
            pass
    out.append(
        RowError(
            line,
            SETTLEMENT_DATE_COLUMN,
            f"not a date: {text[:40]!r} (write the original payment's settlement date as "
            "YYYY-MM-DD, such as 2026-11-27)",
        )
    )
    return None


def _object_hint(key: str) -> str:
    if key in ADDRESS_COLUMNS:
        return f" (in JSON the address is one object: {ADDRESS_KEY!r})"
    return ""


ProgressCallback = Callable[[int, int], None]
"""Told ``(bytes read, file size)`` as a file is read."""

_PROGRESS_EVERY: Final = 2000  # rows between two progress calls
_READ_CHUNK: Final = 1 << 20


def is_jsonl(path: str | Path) -> bool:
    """True when the file is read as JSON lines (by its suffix), else as CSV."""
    return Path(path).suffix.lower() in (".jsonl", ".ndjson", ".json")


class _HashingReader(io.RawIOBase):
    """A binary file that hashes and counts what is read through it."""

    def __init__(self, raw: io.BufferedReader) -> None:
        self._raw = raw
        self.digest = hashlib.sha256()
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self._raw.readinto(buffer)
        if n:
            view = memoryview(buffer)[:n]
            self.digest.update(view)
            self.count += n
        return n or 0


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes, read in chunks (a journal is bound to it).

    Raises:
        OSError: the file cannot be read.
    """
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        while chunk := fh.read(_READ_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


class _SeenIds:
    """The ids met so far in a file, on disk: memory stays flat for any number of rows.

    A temporary SQLite file (deleted on close) maps each end-to-end id and each given
    ``assignment_id`` to the first line that used it.
    """

    def __init__(self) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="payments-bulk-ids-")
        self._db = sqlite3.connect(Path(self._dir.name) / "ids.sqlite", isolation_level=None)
        self._db.execute("PRAGMA journal_mode=OFF")
        self._db.execute("PRAGMA synchronous=OFF")
        self._db.execute("PRAGMA cache_size=-8192")  # KiB: 8 MiB of cache at most
        self._db.execute(
            "CREATE TABLE seen (kind INTEGER, id TEXT, line INTEGER, PRIMARY KEY (kind, id))"
            " WITHOUT ROWID"
        )
        self._db.execute("BEGIN")  # never committed: the file is thrown away

    def first(self, kind: int, value: str, line: int) -> int:
        """The first line that used ``value`` (``line`` itself when it is new)."""
        cur = self._db.execute(
            "INSERT INTO seen VALUES (?, ?, ?) ON CONFLICT DO NOTHING RETURNING line",
            (kind, value, line),
        )
        if cur.fetchone() is not None:
            return line
        got = self._db.execute(
            "SELECT line FROM seen WHERE kind = ? AND id = ?", (kind, value)
        ).fetchone()
        return int(got[0])

    def close(self) -> None:
        self._db.close()
        self._dir.cleanup()


_E2E: Final = 0
_ASSIGNMENT: Final = 1


class InputScan:
    """A bulk file read as a stream: iterate it once for every row, then read its digest.

    Only one row is in memory at a time, besides the ids seen so far (two rows for the
    same payment or ``assignment_id`` are refused, as `read_input` refuses them).

    Args:
        path: the CSV or JSONL file.
        check: the per-row ISO/SEPA check; None: `check_row` under ``options`` (which
            builds each row's camt.056).
        progress: told ``(bytes read, file size)`` every few thousand rows and at the end.
        options: the run's rules for the default check.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        check: Callable[[BulkRow], list[RowError]] | None = None,
        progress: ProgressCallback | None = None,
        options: RowOptions | None = None,
    ) -> None:
        self.path = Path(path)
        self._own_check = check
        self._options = options or RowOptions()
        self._check = (
            check
            if check is not None
            else functools.partial(
                check_row,
                transliterate=self._options.transliterate,
                today=self._options.today,
            )
        )
        self._progress = progress
        self.sha256: str | None = None
        """The file's SHA-256, once the iteration has read it to the end."""
        self.xml = False
        """True once the iteration has found an ISO 20022 camt.056 XML document."""

    def __iter__(self) -> Iterator[ScannedRow]:
        """Every data row (valid or not) in file order, and the header's problems first.

        Raises:
            OSError: the file cannot be read.
            UnicodeDecodeError: the file is not UTF-8.
        """
        path = self.path
        size = path.stat().st_size
        if is_xml_input(path):
            self.xml = True
            sha256, items = scan_xml(path, self._own_check, self._options)
            yield from items
            self.sha256 = sha256
            if self._progress is not None:
                self._progress(size, size)
            return
        jsonl = is_jsonl(path)
        header_ok = True
        progress = self._progress
        seen = _SeenIds()
        with path.open("rb") as raw, contextlib.closing(seen):
            hashing = _HashingReader(raw)
            text = io.TextIOWrapper(
                io.BufferedReader(hashing, _READ_CHUNK), encoding="utf-8-sig", newline=""
            )
            for n, (line, record, problem) in enumerate(read_records(text, jsonl), start=1):
                if progress is not None and n % _PROGRESS_EVERY == 0:
                    progress(hashing.count, size)
                if record is None:
                    yield ScannedRow(line, None, [RowError(line, None, problem)])
                    continue
                if "__header__" in record:
                    names = record["__header__"]
                    assert isinstance(names, list)
                    header_errors = _check_columns(names)
                    header_ok = not header_errors
                    if header_errors:
                        yield ScannedRow(line, None, header_errors, header=True)
                    continue
                if not header_ok:
                    yield ScannedRow(line, None, [])
                    continue
                row, problems = parse_record(line, record, self._check, known_only=jsonl)
                if row is not None:
                    first = seen.first(_E2E, row.original_end_to_end_id, line)
                    if first != line:
                        problems.append(
                            RowError(
                                line, "original_end_to_end_id", f"same payment as line {first}"
                            )
                        )
                    if row.assignment_id is not None:
                        first = seen.first(_ASSIGNMENT, row.assignment_id, line)
                        if first != line:
                            problems.append(
                                RowError(line, "assignment_id", f"already used on line {first}")
                            )
                yield ScannedRow(line, None if problems else row, problems)
            while text.read(_READ_CHUNK):  # to the end, so the digest covers every byte
                pass
            self.sha256 = hashing.digest.hexdigest()
            if progress is not None:
                progress(hashing.count, size)


@dataclass(frozen=True, slots=True)
class InputCheck:
    """A bulk file checked as a stream: every problem, and how many rows are valid.

    Unlike `BulkInput` it keeps no rows: `plan_input` reads the file again
    to plan them, so a file of any length is checked and planned in bounded memory.

    Attributes:
        path: the file.
        sha256: digest of its bytes; a journal is bound to it.
        valid: the number of valid rows.
        errors: every problem found, in line order.
        invalid_lines: lines of the rows that have errors.
        xml: True for an ISO 20022 XML document (a line is a transaction's position).
        options: the rules the rows were checked by (``today`` fixed): planning the
            file builds every row by the same rules.
        earliest_recall_deadline: the earliest recall deadline of the valid rows that
            give their settlement date; None when none does.
    """

    path: Path
    sha256: str
    valid: int
    errors: tuple[RowError, ...]
    invalid_lines: tuple[int, ...]
    xml: bool = False
    options: RowOptions = field(default_factory=RowOptions)
    earliest_recall_deadline: dt.date | None = None

    @property
    def fatal(self) -> bool:
        """True when the file as a whole is unusable (bad header, no rows): nothing can run."""
        return _unusable(self.errors, xml=self.xml) or (not self.valid and not self.invalid_lines)

    @property
    def late(self) -> tuple[RowError, ...]:
        """The rows refused because their recall window closed before ``options.today``,
        one problem each, carrying its deadline."""
        return tuple(e for e in self.errors if e.deadline is not None)

    @property
    def total(self) -> int:
        """Data rows in the file, valid or not."""
        return self.valid + len(self.invalid_lines)


def check_input(
    path: str | Path,
    *,
    check: Callable[[BulkRow], list[RowError]] | None = None,
    progress: ProgressCallback | None = None,
    transliterate: bool = False,
    today: dt.date | None = None,
) -> InputCheck:
    """Check every row of a CSV or JSONL bulk file, reading it as a stream; nothing is sent.

    The same checks as `read_input`, without keeping the rows.

    Args:
        path: the input file.
        check: the per-row ISO/SEPA check; None: `check_row` under ``options``.
        progress: told ``(bytes read, file size)`` as the file is read.
        transliterate: convert names and addresses to the SEPA character set
            (identifiers never change); without it, text outside the set is a problem
            that names its characters.
        today: the TARGET2 day recall windows are judged on; None: today in Central
            European Time. Kept on the result (``options``), so the plan uses it too.

    Raises:
        OSError: the file cannot be read.
        UnicodeDecodeError: the file is not UTF-8.
    """
    fixed = RowOptions(transliterate=transliterate, today=today).fixed()
    scan = InputScan(path, check=check, progress=progress, options=fixed)
    collected = _collect(scan, keep_rows=False)
    return InputCheck(
        path=Path(path),
        sha256=collected.sha256,
        valid=collected.valid,
        errors=collected.errors,
        invalid_lines=collected.invalid,
        xml=scan.xml,
        options=fixed,
        earliest_recall_deadline=collected.earliest,
    )


@dataclass(frozen=True, slots=True)
class _Collected:
    sha256: str
    rows: tuple[BulkRow, ...]
    valid: int
    errors: tuple[RowError, ...]
    invalid: tuple[int, ...]
    earliest: dt.date | None


def _collect(scan: InputScan, *, keep_rows: bool) -> _Collected:
    """Read a scan to its end: its digest, the rows kept, every problem, the earliest
    recall deadline of the valid rows."""
    rows: list[BulkRow] = []
    valid = 0
    errors: list[RowError] = []
    invalid: list[int] = []
    earliest: dt.date | None = None
    for item in scan:
        errors.extend(item.errors)
        if item.header:
            continue
        if item.row is None:
            invalid.append(item.line)
        else:
            valid += 1
            deadline = row_deadline(item.row)
            if deadline is not None and (earliest is None or deadline < earliest):
                earliest = deadline
            if keep_rows:
                rows.append(item.row)
    if not valid and not errors:
        errors.append(
            RowError(_DOCUMENT_LINE if scan.xml else _HEADER_LINE, None, "no rows to cancel")
        )
    assert scan.sha256 is not None  # the scan read the file to its end
    return _Collected(scan.sha256, tuple(rows), valid, tuple(errors), tuple(invalid), earliest)


def read_input(
    path: str | Path,
    *,
    check: Callable[[BulkRow], list[RowError]] | None = None,
    transliterate: bool = False,
    today: dt.date | None = None,
) -> BulkInput:
    """Read a CSV or JSONL bulk file and check every row; nothing is sent.

    The format follows the suffix: ``.jsonl``/``.ndjson``/``.json`` is one JSON object per
    line, anything else is CSV with a header row. Every problem is collected (never only
    the first), with the file's line number. Two rows for the same original end-to-end id
    or the same ``assignment_id`` are refused: the second would only be rejected, or
    stored as a replay of the first. Every valid row is kept in memory: for large files
    use `check_input` and `plan_input`, which stream.

    Args:
        path: the input file.
        check: the per-row ISO/SEPA check; None: `check_row` under ``options`` (which
            builds each row's camt.056).
        transliterate: as `check_input`'s.
        today: as `check_input`'s.

    Returns:
        The valid rows and every error.

    Raises:
        OSError: the file cannot be read.
        UnicodeDecodeError: the file is not UTF-8.
    """
    options = RowOptions(transliterate=transliterate, today=today).fixed()
    scan = InputScan(path, check=check, options=options)
    collected = _collect(scan, keep_rows=True)
    return BulkInput(
        path=Path(path),
        sha256=collected.sha256,
        rows=collected.rows,
        errors=collected.errors,
        invalid_lines=collected.invalid,
        xml=scan.xml,
    )


def _no_check(row: BulkRow) -> list[RowError]:
    return []


def transliterations(checked: InputCheck) -> Iterator[tuple[int, str]]:
    """``(line, what was converted)`` for every valid row of a checked file whose text its
    run converts to the SEPA set (``checked.options.transliterate``), in line order.

    The file is read again as a stream and each row built by the rules it was checked
    by; the text is ``field: 'old' -> 'new'`` per change, ``; ``-separated. Nothing
    without transliteration.

    Raises:
        OSError: the file cannot be read.
    """
    if not checked.options.transliterate:
        return
    invalid = frozenset(checked.invalid_lines)
    for item in InputScan(checked.path, check=_no_check, options=checked.options):
        if item.header or item.row is None or item.line in invalid:
            continue
        try:
            changes = row_transliterations(item.row, checked.options)
        except ValidationError:
            continue  # the file changed since it was checked: the plan says so
        if changes:
            yield item.line, "; ".join(str(c) for c in changes)
