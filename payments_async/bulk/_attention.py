"""The rows of a finished run that need a person, written back in the input's own format.

A run's results file says what became of every row; the rows a person has to act on
(refused by the service, rejected with a pacs.004 return to request, unknown, not sent,
invalid) are written as a file in the format of the input they came from, each with the
reason in an ``attention`` column (CSV), field (JSONL) or comment (camt.056 XML): fix the
rows and feed the file back. The input reader ignores that column, so the file is a valid
input as it stands.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgspec

from ..iso20022 import Camt056
from ._input import ATTENTION_COLUMN, is_jsonl, read_records
from ._rows import RowOutcome

__all__ = [
    "ATTENTION_COLUMN",
    "AttentionReport",
    "attention_reason",
    "read_results",
    "write_attention",
]

_JSONL_SUFFIXES: Final = (".jsonl", ".ndjson", ".json")
_ENCODE: Final = msgspec.json.Encoder(decimal_format="number")

_WHAT_TO_DO: Final = {
    RowOutcome.REFUSED: "refused by the service: fix the row, then send it again",
    RowOutcome.UNKNOWN: "outcome unknown: check with the bank before anything else; a "
    "rerun does not send it again",
    RowOutcome.NOT_SENT: "not sent: the service does not have it",
    RowOutcome.ABORTED: "aborted before it was sent: the service does not have it; send "
    "it again if it is still wanted",
    RowOutcome.INVALID: "invalid input row: fix it, then send it",
}


def read_results(path: str | Path) -> Iterator[dict[str, Any]]:
    """The records of a results file (CSV or JSONL, as ``write_results`` writes them).

    Every record has the results file's columns with JSON types: ``line`` and
    ``attempts`` as ints, ``return_request_needed`` as a bool, ``reason_codes`` as a
    list of codes, empty cells as None.

    Raises:
        OSError: the file cannot be read.
        ValueError: the file is not a results file.
    """
    path = Path(path)
    with path.open(encoding="utf-8", newline="") as fh:
        if path.suffix.lower() in _JSONL_SUFFIXES:
            for raw in fh:
                if raw.strip():
                    obj = json.loads(raw)
                    if not isinstance(obj, dict) or "line" not in obj or "outcome" not in obj:
                        raise ValueError(f"{str(path)!r} is not a results file")
                    yield obj
            return
        reader = csv.DictReader(fh)
        if reader.fieldnames is None or not {"line", "outcome"} <= set(reader.fieldnames):
            raise ValueError(f"{str(path)!r} is not a results file")
        for row in reader:
            rec: dict[str, Any] = {k: (v if v != "" else None) for k, v in row.items()}
            rec["line"] = int(row["line"])
            rec["attempts"] = int(row.get("attempts") or 0)
            rec["return_request_needed"] = row.get("return_request_needed") == "true"
            rec["reason_codes"] = (row.get("reason_codes") or "").split()
            replayed = row.get("replayed")
            rec["replayed"] = None if not replayed else replayed == "true"
            yield rec


def attention_reason(record: Mapping[str, Any]) -> str | None:
    """Why a results record needs a person, or None when it needs nothing more.

    Accepted rows, rejected rows with nothing to return, and rows a rerun of the same
    command picks up by itself (in flight, pending) need nobody. A rejected row whose
    ``return_request_needed`` is true needs a pacs.004 return requested from the
    beneficiary; refused, unknown, not sent, aborted and invalid rows need fixing,
    checking or sending again.
    """
    outcome = RowOutcome(record["outcome"])
    why = record.get("reason")
    if outcome is RowOutcome.REJECTED:
        if not record.get("return_request_needed"):
            return None
        codes = " ".join(record.get("reason_codes") or ())
        text = "rejected: request a return (pacs.004) from the beneficiary; do not recall again"
        return f"{text} ({codes})" if codes else text
    what = _WHAT_TO_DO.get(outcome)
    if what is None:
        return None
    return f"{what} ({why})" if why else what


@dataclass(slots=True)
class AttentionReport:
    """What `write_attention` wrote.

    Attributes:
        path: the file written.
        rows: rows written.
        by_outcome: rows written per outcome.
    """

    path: Path
    rows: int = 0
    by_outcome: dict[str, int] = field(default_factory=dict)


def _needs(results: str | Path) -> tuple[dict[int, str], Counter[str]]:
    needs: dict[int, str] = {}
    outcomes: Counter[str] = Counter()
    for rec in read_results(results):
        why = attention_reason(rec)
        if why is not None:
            needs[rec["line"]] = f"line {rec['line']}: {why}"
            outcomes[rec["outcome"]] += 1
    return needs, outcomes


def write_attention(
    input_path: str | Path, results_path: str | Path, output: str | Path
) -> AttentionReport:
    """Write the rows of ``input_path`` that need a person, in its own format.

    A CSV input gives a CSV with its own columns and an ``attention`` column; a JSONL
    input the same objects with an ``attention`` field; a camt.056 XML input a camt.056
    document of those transactions, with a comment naming each one's reason. Each reason
    starts with the row's line in the original input. The file is written atomically.

    Nothing is written when no row needs a person (``rows`` is 0).

    Feed it back to ``bulk-cancel`` with the run's journal and ``--new-run``: a payment
    whose cancellation the journal records (rejected, unknown) is then refused rather
    than recalled twice.

    Args:
        input_path: the run's input, unchanged since the run.
        results_path: the run's results file.
        output: where to write.

    Raises:
        OSError: a file cannot be read or written.
        ValueError: ``results_path`` is not a results file, or the input does not hold
            a line the results name (the input changed since the run).
    """
    needs, outcomes = _needs(results_path)
    output = Path(output)
    if not needs:
        return AttentionReport(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(f".{output.name}.tmp")
    from ._xml_input import is_xml_input  # it builds on the input reader

    if is_xml_input(input_path):
        data = _attention_xml(Path(input_path), needs)
        with tmp.open("wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    else:
        with tmp.open("w", encoding="utf-8", newline="") as fh:
            found = _attention_text(Path(input_path), needs, fh)
            fh.flush()
            os.fsync(fh.fileno())
        if found != len(needs):
            tmp.unlink()
            raise ValueError(
                f"{str(input_path)!r} does not hold every line its results name: give the "
                "run's input as it was"
            )
    tmp.replace(output)
    return AttentionReport(output, len(needs), dict(outcomes))


def _attention_text(path: Path, needs: Mapping[int, str], out: io.TextIOBase) -> int:
    """Write the CSV or JSONL rows of ``needs``, as a stream; returns how many were found."""
    jsonl = is_jsonl(path)
    writer = None if jsonl else csv.writer(out)
    found = 0
    with path.open(encoding="utf-8-sig", newline="") as fh:
        for line, record, _ in read_records(fh, jsonl):
            if writer is not None and record is not None and "__header__" in record:
                header = record["__header__"]
                assert isinstance(header, list)
                writer.writerow([*(n for n in header if n != ATTENTION_COLUMN), ATTENTION_COLUMN])
                continue
            why = needs.get(line)
            if why is None:
                continue
            found += 1
            fields = {k: v for k, v in (record or {}).items() if k != ATTENTION_COLUMN}
            if writer is not None:  # an unreadable record has no cells: the reason says why
                writer.writerow([*fields.values(), why])
            else:
                out.write(_ENCODE.encode({**fields, ATTENTION_COLUMN: why}).decode())
                out.write("\n")
    return found


def _attention_xml(path: Path, needs: Mapping[int, str]) -> bytes:
    """A camt.056 document of the transactions at the positions of ``needs``."""
    from ..iso20022 import xml  # the xml extra: an XML input was read with it

    message = xml.from_xml(path.read_bytes())
    if not isinstance(message, Camt056):
        raise ValueError(f"{str(path)!r} is not a camt.056 document")
    body = message.body
    position = 0
    kept_undrlyg = []
    notes: list[str] = []
    for und in body.undrlyg:
        kept = []
        for tx in und.tx_inf:
            position += 1
            why = needs.get(position)
            if why is not None:
                kept.append(tx)
                notes.append(f"transaction {len(notes) + 1}: {why}")
        if kept:
            kept_undrlyg.append(msgspec.structs.replace(und, tx_inf=kept))
    if len(notes) != len(needs):
        raise ValueError(
            f"{str(path)!r} does not hold every transaction its results name: give the "
            "run's input as it was"
        )
    ctrl = body.ctrl_data
    if ctrl is not None:
        ctrl = msgspec.structs.replace(ctrl, nb_of_txs=str(len(notes)))
    body = msgspec.structs.replace(body, undrlyg=kept_undrlyg, ctrl_data=ctrl)
    document: bytes = xml.to_xml(msgspec.structs.replace(message, fito_fi_pmt_cxl_req=body))
    comment = "".join(
        f"<!-- {ATTENTION_COLUMN}: {n.replace('--', '- -')} -->\n" for n in notes
    ).encode()
    head, sep, rest = document.partition(b"?>\n")
    return head + sep + comment + rest if sep else comment + document
