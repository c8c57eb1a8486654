"""Bulk input read as a stream: the same checks and plan as before, in bounded memory."""

from __future__ import annotations

import json
import re
import tracemalloc
from pathlib import Path

import pytest

from payments_async.bulk import JournalError, PlannedRow
from payments_async.bulk._input import check_input, read_input
from payments_async.bulk._plan import plan_input, plan_rows

HEADER = (
    "original_end_to_end_id,amount,creditor_agent_bic,creditor_iban,reason,assigner_bic,"
    "assignee_bic,assignment_id"
)
ROW = "{e2e},12.50,COBADEFFXXX,DE89370400440532013000,DUPL,BNPAFRPPXXX,COBADEFFXXX,{aid}"


def _csv(path: Path, n: int, *extra: str) -> Path:
    lines = [HEADER, *(ROW.format(e2e=f"E2E-{i:07d}", aid="") for i in range(n)), *extra]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _mixed(tmp_path: Path) -> Path:
    return _csv(
        tmp_path / "mixed.csv",
        5,
        ROW.format(e2e="E2E-0000001", aid=""),  # same payment as line 3
        ROW.format(e2e="E2E-X", aid="MY-1"),
        ROW.format(e2e="E2E-Y", aid="MY-1"),  # assignment id used on the line before
        ROW.format(e2e="E2E-Z", aid="").replace("12.50", "twelve"),
        "E2E-W,1.00,too,few",
    )


def test_check_input_finds_what_read_input_finds_without_keeping_rows(tmp_path: Path) -> None:
    src = _mixed(tmp_path)
    full = read_input(src)
    checked = check_input(src)
    assert checked.errors == full.errors
    assert checked.invalid_lines == full.invalid_lines == (7, 9, 10, 11)
    assert checked.sha256 == full.sha256
    assert checked.valid == len(full.rows) == 6
    assert checked.total == full.total
    messages = [str(e) for e in checked.errors]
    assert "line 7: original_end_to_end_id: same payment as line 3" in messages
    assert "line 9: assignment_id: already used on line 8" in messages
    assert not hasattr(checked, "rows")


def test_jsonl_is_streamed_with_the_same_checks(tmp_path: Path) -> None:
    rec = json.loads(json.dumps(dict(zip(HEADER.split(","), ROW.split(","), strict=True))))
    lines = [
        json.dumps({**rec, "original_end_to_end_id": f"E2E-{i}", "assignment_id": None})
        for i in range(3)
    ]
    lines.insert(1, "not json")
    lines.append(json.dumps({**rec, "original_end_to_end_id": "E2E-0", "assignment_id": None}))
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    checked = check_input(src)
    assert checked.errors == read_input(src).errors
    assert checked.invalid_lines == (2, 5)
    assert checked.valid == 3


def test_plan_input_plans_exactly_what_plan_rows_plans(tmp_path: Path) -> None:
    src = _mixed(tmp_path)
    streamed = list(plan_input(check_input(src), "0123456789AB"))
    listed = plan_rows(read_input(src), "0123456789AB")
    assert [r.line for r in streamed] == list(range(2, 12))

    def facts(r: PlannedRow) -> tuple[object, ...]:
        # the bodies may differ only by their creation time (creDtTm)
        body = None if r.body is None else re.sub(rb'"creDtTm":"[^"]*"', b"", r.body)
        return (r.line, r.original_end_to_end_id, r.assignment_id, r.cancellation_id, r.error, body)

    assert [facts(r) for r in streamed] == [facts(r) for r in listed]


def test_a_file_changed_after_its_check_is_not_planned(tmp_path: Path) -> None:
    src = _csv(tmp_path / "in.csv", 20)
    checked = check_input(src)
    _csv(src, 20, ROW.format(e2e="E2E-NEW", aid=""))  # one row more
    with pytest.raises(JournalError, match="changed while it was being planned"):
        list(plan_input(checked, "0123456789AB"))
    _csv(src, 20)
    src.write_text(src.read_text().replace("E2E-0000004,12.50", "E2E-0000004,oops"))
    with pytest.raises(JournalError, match="changed while it was being planned"):
        list(plan_input(checked, "0123456789AB"))


def test_progress_is_told_as_the_file_is_read(tmp_path: Path) -> None:
    src = _csv(tmp_path / "in.csv", 5000)
    size = src.stat().st_size
    seen: list[tuple[int, int]] = []
    check_input(src, progress=lambda done, total: seen.append((done, total)))
    assert len(seen) >= 3  # along the way, not only at the end
    assert all(total == size for _, total in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert seen[-1] == (size, size)


def _peak(fn: object) -> int:
    tracemalloc.start()
    try:
        fn()  # type: ignore[operator]
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.slow  # traces every allocation of two whole runs
def test_memory_does_not_grow_with_the_number_of_rows(tmp_path: Path) -> None:
    """Eight times the rows, about the same peak: nothing per row is kept (the old reader
    held the whole text, every row and a dict of ids: eight times the rows, eight times
    the memory).

    The peak is about 2 MiB whatever the size (buffers, caches), and 1,750 more rows add
    tens of KiB to it; keeping each planned row would add about 3 MiB, keeping only each
    end-to-end id about 1.5 MiB: both fail the bound, as they would at any larger size.
    """
    small = _csv(tmp_path / "small.csv", 250)
    large = _csv(tmp_path / "large.csv", 2_000)

    def check_and_plan(src: Path) -> None:
        checked = check_input(src)
        for _ in plan_input(checked, "0123456789AB"):
            pass

    check_and_plan(small)  # warm caches and imports before measuring
    peak_small = _peak(lambda: check_and_plan(small))
    peak_large = _peak(lambda: check_and_plan(large))
    assert peak_large < peak_small + 1024 * 1024, (peak_small, peak_large)


def test_the_digest_covers_the_whole_file_even_when_reading_stops_early(tmp_path: Path) -> None:
    """An unreadable CSV record ends the reading; the digest still binds every byte."""
    import hashlib

    src = _csv(tmp_path / "in.csv", 3, 'E2E-Q,"unclosed', *(f"tail line {i}" for i in range(50)))
    checked = check_input(src)
    assert checked.sha256 == hashlib.sha256(src.read_bytes()).hexdigest()
    assert checked.sha256 == read_input(src).sha256
    assert any("unreadable CSV" in str(e) for e in checked.errors)
