"""bulk-cancel against the sandbox with recall windows and European names: rows past their
window are listed and never sent, the feasibility is said before sending, and names are
converted to the SEPA set with every change reported.

Settlement dates are set weeks from any deadline (the CLI judges on the real day), so the
outcome does not depend on the hour the test runs.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from payments_async import Credentials, PaymentsClient, RetryPolicy
from payments_async.bulk import BulkReport, bulk_cancel
from payments_async.cli import cli
from payments_async.iso20022 import outside_sepa_set, target2_today, transliterate
from payments_async.sandbox import SandboxConfig
from tests.support.cli import (
    ThreadedSandbox,
    bulk_rows,
    precreate_payments,
    read_results,
    threaded_sandbox,
    write_csv,
)

NAMES_ROWS = 1000

FIRST = [
    "Jürgen", "Björn", "Zoë", "José", "João", "Łukasz", "Małgorzata", "Søren", "Åsa",
    "François", "Hélène", "Jiří", "Tomáš", "Žofie", "Núria", "Íñigo", "Conceição", "Gonçalo",
    "Øystein", "Ægir", "Anna", "Peter", "Dörte", "Bärbel", "Agnieszka", "Wojciech",
]  # fmt: skip
LAST = [
    "Müller", "Größe", "Nuñez", "Dvořák", "Šťastný", "Wałęsa", "Brzęczyszczykiewicz",
    "Lefèvre", "Gonçalves", "Sørensen", "Åkesson", "Østergård", "Peña", "Čapek",
    "Schröder & Söhne", "Martin", "Kowalski", "Fernández", "Magalhães", "Kühn",
]  # fmt: skip
TOWNS = [
    "Zürich", "Köln", "Łódź", "São Paulo", "Kraków", "Malmö", "Århus", "Göteborg", "Brno",
    "Plzeň", "Coruña", "Évora", "Besançon", "München", "Poznań", "Tromsø", "Paris",
]  # fmt: skip


@pytest.fixture(scope="module")
def sb() -> Iterator[ThreadedSandbox]:
    # Payments stay unprocessed for the whole module: their cancellations are accepted.
    with threaded_sandbox(SandboxConfig(processing_delay=600, settlement_delay=0.1)) as s:
        yield s


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def bulk(sb: ThreadedSandbox, *args: str, json_out: bool = False) -> Result:
    pre = ["--sandbox", "--base-url", sb.url] + (["--json"] if json_out else [])
    return CliRunner().invoke(cli, [*pre, "bulk-cancel", *args], catch_exceptions=False)


def camt056_requests(sb: ThreadedSandbox) -> int:
    return int(sb.stats()["requests"].get("camt056", 0))


def _straddling(prefix: str) -> tuple[list[dict[str, str]], list[str], list[str]]:
    """Four FRAD rows well within their 13 months, three DUPL rows weeks past their 10
    banking days: ``(rows, in-time ids, late ids)``."""
    today = target2_today()
    rows = bulk_rows(7, prefix=prefix)
    for i, row in enumerate(rows):
        late = i % 2 == 1
        row["reason"] = "DUPL" if late else "FRAD"
        settled = today - dt.timedelta(days=60 if late else 30)
        row["original_settlement_date"] = settled.isoformat()
    in_time = [r["original_end_to_end_id"] for r in rows if r["reason"] == "FRAD"]
    late = [r["original_end_to_end_id"] for r in rows if r["reason"] == "DUPL"]
    return rows, in_time, late


def test_rows_past_their_window_are_listed_and_never_sent(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    rows, in_time, late = _straddling("E2E-STRADDLE")
    precreate_payments(sb, in_time)
    src = write_csv(tmp_path / "straddle.csv", rows)
    before = camt056_requests(sb)

    # Without --skip-invalid the input is refused as a whole: nothing sent.
    refused = bulk(sb, str(src), "--yes")
    assert refused.exit_code == 2, refused.output
    assert refused.stderr.count("had to be sent by") == len(late)
    assert camt056_requests(sb) == before

    dry = bulk(sb, str(src), "--dry-run", "--skip-invalid", "--rate", "50", json_out=True)
    assert dry.exit_code == 0, dry.output
    plan = json.loads(dry.stdout)
    assert plan["to_send"] == len(in_time)
    assert plan["past_deadline_rows"] == len(late)
    assert all(p["deadline"] for p in plan["past_deadline"])
    assert plan["in_time"] is True
    assert plan["seconds_left"] > 300 * 86400  # FRAD: 13 months from a month ago
    assert camt056_requests(sb) == before

    run = bulk(sb, str(src), "--yes", "--skip-invalid", "--rate", "50", "--concurrency", "4")
    assert run.exit_code == 0, run.output  # every row sent was accepted
    assert f"{len(late)} row(s) past their recall window, refused (never sent)" in run.stderr
    assert "earliest recall deadline" in run.stderr
    assert "at 50 requests/s: in time" in run.stderr
    assert "NOT in time" not in run.stderr
    # 0 POSTs for the late rows, counted at the sandbox: only the in-time rows were sent.
    assert camt056_requests(sb) == before + len(in_time)
    stored = {c.original_end_to_end_id for c in sb.cancellations()}
    assert set(in_time) <= stored
    assert not set(late) & stored
    results = read_results(Path("straddle.results.csv"))
    invalid = [r for r in results if r["outcome"] == "invalid"]
    assert len(invalid) == len(late)
    assert all("had to be sent by" in r["reason"] for r in invalid)
    assert {r["outcome"] for r in results if r not in invalid} == {"accepted"}

    # The same command again, for scripts: nothing sent, the deadlines in the summary.
    again = bulk(sb, str(src), "--yes", "--skip-invalid", json_out=True)
    assert again.exit_code == 0, again.output
    summary = json.loads(again.stdout)
    deadlines = summary["recall_deadlines"]
    assert deadlines["past_deadline_rows"] == len(late)
    assert deadlines["seconds_left"] > 300 * 86400
    assert camt056_requests(sb) == before + len(in_time)


def test_a_run_that_cannot_finish_in_time_is_refused_under_if_late_refuse(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    rows, _, late = _straddling("E2E-SLOW")
    keep = [r for r in rows if r["original_end_to_end_id"] not in late]
    src = write_csv(tmp_path / "slow.csv", keep)
    before = camt056_requests(sb)
    # 4 rows x 2 requests at one request every 10 million seconds: past 13 months.
    slow = ["--yes", "--rate", "0.0000001"]
    warned = bulk(sb, str(src), *slow, "--if-late", "refuse")
    assert warned.exit_code == 2, warned.output
    assert "NOT in time for the earliest deadline" in warned.stderr
    assert "cannot send its 4 rows by the earliest recall deadline" in warned.stderr
    assert camt056_requests(sb) == before


def _names() -> list[dict[str, str]]:
    people = itertools.cycle(itertools.product(FIRST, LAST))
    towns = itertools.cycle(TOWNS)
    rows = bulk_rows(NAMES_ROWS, prefix="E2E-NAMES")
    for row in rows:
        first, last = next(people)
        row["originator_name"] = f"{first} {last}"
        row["creditor_agent_town"] = next(towns)
        row["creditor_agent_country"] = "DE"
    return rows


def test_a_thousand_european_names_are_sent_converted_with_every_change_reported(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    rows = _names()
    src = write_csv(tmp_path / "names.csv", rows)
    before = camt056_requests(sb)

    # Without the flag: every row with a name or town outside the set is refused, its
    # characters named, the option named; nothing sent.
    dry = bulk(sb, str(src), "--dry-run", json_out=True)
    assert dry.exit_code == 2, dry.output
    problems = json.loads(dry.stdout)["problems"]
    by_line: dict[int, list[str]] = {}
    for p in problems:
        by_line.setdefault(p["line"], []).append(p["message"])
    for line, row in enumerate(rows, start=2):
        outside = outside_sepa_set(row["originator_name"] + row["creditor_agent_town"])
        if not outside:
            assert line not in by_line
            continue
        said = " ".join(by_line[line])
        assert "--transliterate" in said
        for char in outside:
            assert char in said, (line, char, said)
    assert camt056_requests(sb) == before

    precreate_payments(sb, [r["original_end_to_end_id"] for r in rows])
    run = bulk(sb, str(src), "--transliterate", "--yes", "--concurrency", "32")
    assert run.exit_code == 0, run.output  # every row accepted
    results = read_results(Path("names.results.csv"))
    assert len(results) == NAMES_ROWS
    assert {r["outcome"] for r in results} == {"accepted"}
    assert camt056_requests(sb) == before + NAMES_ROWS
    for row, result in zip(rows, results, strict=True):
        expected = []
        for field, column in (
            ("originator_name", "originator_name"),
            ("creditor_agent_address.town", "creditor_agent_town"),
        ):
            new, changed = transliterate(row[column])
            if changed:
                expected.append(f"{field}: {row[column]!r} -> {new!r}")
        assert result["transliterated"] == "; ".join(expected)
        assert result["original_end_to_end_id"] == row["original_end_to_end_id"]  # unchanged
    changed_rows = sum(bool(r["transliterated"]) for r in results)
    assert changed_rows > NAMES_ROWS * 0.9
    sent = {c.original_end_to_end_id for c in sb.cancellations()}
    assert {r["original_end_to_end_id"] for r in rows} <= sent


def test_cancel_converts_a_row_object_s_name_with_transliterate(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    row = {**bulk_rows(1, prefix="E2E-ONE")[0], "originator_name": "Zoë Núñez & Söhne"}
    src = tmp_path / "one.json"
    src.write_text(json.dumps(row), encoding="utf-8")
    pre = ["--sandbox", "--base-url", sb.url, "--json"]
    before = camt056_requests(sb)

    plain = CliRunner().invoke(cli, [*pre, "cancel", str(src)])
    assert plain.exit_code == 2, plain.output
    error = json.loads(plain.stdout)["error"]
    assert "characters outside the SEPA set: '&ëñöú'" in error
    assert "--transliterate" in error
    assert camt056_requests(sb) == before

    sent = CliRunner().invoke(cli, [*pre, "cancel", str(src), "--transliterate"])
    assert sent.exit_code == 0, sent.output
    assert json.loads(sent.stdout)["transliterated"] == [
        "originator_name: 'Zoë Núñez & Söhne' -> 'Zoe Nunez + Sohne'"
    ]
    assert camt056_requests(sb) == before + 1
    (stored,) = [c for c in sb.cancellations() if c.original_end_to_end_id == "E2E-ONE-000000"]
    assert stored.original_end_to_end_id == row["original_end_to_end_id"]


async def _run_planned_on(url: str, src: Path, planned_on: dt.date) -> BulkReport:
    async with PaymentsClient(
        Credentials.sandbox(), base_url=url, retry=RetryPolicy.for_testing()
    ) as client:
        return await bulk_cancel(
            client, src, journal_path=src.with_suffix(".sqlite"), concurrency=4, today=planned_on
        )


def test_a_row_whose_window_closed_after_it_was_planned_is_not_sent(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    rows, in_time, late = _straddling("E2E-LATER")
    precreate_payments(sb, in_time)
    src = write_csv(tmp_path / "later.csv", rows)
    # Planned on the day after the late rows' settlement: every row was in time then.
    settled = dt.date.fromisoformat(rows[1]["original_settlement_date"])
    before = camt056_requests(sb)
    report = asyncio.run(_run_planned_on(sb.url, src, settled + dt.timedelta(days=1)))
    assert report.totals["accepted"] == len(in_time)
    assert report.totals["not_sent"] == len(late)
    assert camt056_requests(sb) == before + len(in_time)  # 0 POSTs for the late rows
    for row in report.rows:
        if row.original_end_to_end_id in late:
            assert row.error is not None
            assert "had to be sent by" in row.error
