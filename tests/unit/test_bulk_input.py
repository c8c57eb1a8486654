"""Reading bulk files: every problem reported with its line number, nothing guessed."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

from payments_async.bulk._input import BulkRow, build_row_message, read_input
from payments_async.bulk._plan import plan_rows
from payments_async.iso20022 import Address, encode

HEADER = (
    "original_end_to_end_id,amount,currency,creditor_agent_bic,creditor_iban,reason,"
    "assigner_bic,assignee_bic,originator_name"
)
GOOD = "E2E-1,12.50,EUR,COBADEFFXXX,DE89370400440532013000,DUPL,BNPAFRPPXXX,COBADEFFXXX,Alice"


def _csv(tmp_path: Path, *lines: str, name: str = "in.csv") -> Path:
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def _messages(path: Path) -> list[str]:
    return [str(e) for e in read_input(path).errors]


def test_valid_csv_rows_are_parsed_with_their_line_numbers(tmp_path: Path) -> None:
    p = _csv(tmp_path, HEADER, GOOD, "", GOOD.replace("E2E-1", "E2E-2").replace("Alice", ""))
    bulk = read_input(p)
    assert bulk.errors == ()
    assert [r.line for r in bulk.rows] == [2, 4]  # the blank line 3 is skipped, not renumbered
    first = bulk.rows[0]
    assert first.amount == Decimal("12.50")
    assert first.originator_name == "Alice"
    assert bulk.rows[1].originator_name is None
    assert bulk.rows[1].assignment_id is None
    assert len(bulk.sha256) == 64


def test_every_bad_row_is_reported_with_line_and_column(tmp_path: Path) -> None:
    p = _csv(
        tmp_path,
        HEADER,
        GOOD,
        GOOD.replace("E2E-1", "E2E-2").replace("DE89370400440532013000", "DE00370400440532013000"),
        GOOD.replace("E2E-1", "E2E-3").replace("12.50", "twelve"),
        GOOD.replace("E2E-1", "E2E-4").replace("DUPL", "NOPE").replace("COBADEFFXXX,Alice", "x,Al"),
        GOOD.replace("E2E-1", "E2E-5").replace(",EUR,", ",USD,"),
        ",1.00,EUR,COBADEFFXXX,DE89370400440532013000,DUPL,BNPAFRPPXXX,COBADEFFXXX,",
    )
    bulk = read_input(p)
    assert [r.line for r in bulk.rows] == [2]
    assert bulk.invalid_lines == (3, 4, 5, 6, 7)
    msgs = _messages(p)
    assert any(m.startswith("line 3: creditor_iban:") for m in msgs), msgs
    assert any(m.startswith("line 4: amount: not a decimal number") for m in msgs), msgs
    # one row, two problems: both reported, each under its own column
    assert any(m.startswith("line 5: reason:") for m in msgs), msgs
    assert any(m.startswith("line 5: assignee_bic:") for m in msgs), msgs
    assert any(m.startswith("line 6: currency:") for m in msgs), msgs
    assert "line 7: original_end_to_end_id: required, but empty" in msgs


def test_quoted_newlines_keep_line_numbers_true_to_the_file(tmp_path: Path) -> None:
    p = _csv(
        tmp_path,
        HEADER,
        GOOD.replace("Alice", '"Alice\nMartin"'),  # one record over lines 2-3
        GOOD.replace("E2E-1", "E2E-2").replace("12.50", "-1"),  # line 4
    )
    msgs = _messages(p)
    # the record starting on line 2 is reported there (a newline is not SEPA text), and
    # the next record is line 4 of the file, not the third record
    assert any(m.startswith("line 2: originator_name: characters outside") for m in msgs)
    assert any(m.startswith("line 4: amount:") for m in msgs), msgs
    assert not any(m.startswith("line 3") for m in msgs)


def test_a_stray_quote_is_reported_on_the_line_it_opens_not_where_reading_gave_up(
    tmp_path: Path,
) -> None:
    rows = [GOOD.replace("E2E-1", f"E2E-{i}") for i in range(2, 2000)]
    rows[2] = '"' + rows[2]  # line 4 of the file: a quoted field that never closes
    msgs = _messages(_csv(tmp_path, HEADER, *rows))
    assert len(msgs) == 1, msgs
    assert msgs[0].startswith("line 4: unreadable CSV: "), msgs
    assert "a '\"' opens a quoted field here that runs on to line" in msgs[0], msgs


def test_header_problems_make_the_file_unusable(tmp_path: Path) -> None:
    p = _csv(tmp_path, HEADER.replace("creditor_iban", "iban") + ",colour", GOOD + ",red")
    bulk = read_input(p)
    assert bulk.fatal
    msgs = _messages(p)
    assert any("unknown column 'iban'" in m for m in msgs)
    assert any("unknown column 'colour'" in m for m in msgs)
    assert any("missing column(s): creditor_iban" in m for m in msgs)
    assert all(m.startswith("line 1:") for m in msgs)


def test_a_semicolon_separated_file_is_read_as_its_comma_twin(tmp_path: Path) -> None:
    # What a spreadsheet set to a language with a decimal comma saves as "CSV".
    second = GOOD.replace("E2E-1", "E2E-2")
    lines = (HEADER, GOOD, "", second.replace("Alice", '"Bob, Jr"'))
    comma = read_input(_csv(tmp_path, *lines, name="comma.csv"))
    semi = [line.replace(",", ";") for line in lines[:3]]
    semi.append(second.replace(",", ";").replace("Alice", "Bob, Jr"))
    semicolon = read_input(_csv(tmp_path, *semi, name="semicolon.csv"))
    assert comma.errors == semicolon.errors == ()
    assert [r.line for r in semicolon.rows] == [r.line for r in comma.rows] == [2, 4]
    assert [r.originator_name for r in semicolon.rows] == ["Alice", "Bob, Jr"]
    assert [r.original_end_to_end_id for r in semicolon.rows] == ["E2E-1", "E2E-2"]
    assert semicolon.rows[0].amount == comma.rows[0].amount == Decimal("12.50")


def test_a_semicolon_file_names_its_own_columns_and_lines(tmp_path: Path) -> None:
    header = HEADER.replace(",", ";").replace("creditor_iban", "iban")
    rows = [GOOD.replace("E2E-1", f"E2E-{i}").replace(",", ";") for i in range(2, 6)]
    assert "line 1: unknown column 'iban'" in " ".join(
        _messages(_csv(tmp_path, header, *rows, name="cols.csv"))
    )
    rows[1] = '"' + rows[1]  # line 3: a quoted field that never closes
    msgs = _messages(_csv(tmp_path, HEADER.replace(",", ";"), *rows, name="quote.csv"))
    assert len(msgs) == 1, msgs
    assert msgs[0].startswith("line 3: unreadable CSV: "), msgs
    assert msgs[0].endswith("runs on to line 5)"), msgs


def test_wrong_field_count_and_empty_file(tmp_path: Path) -> None:
    assert _messages(_csv(tmp_path, HEADER, "E2E-1,12.50")) == [
        "line 2: expected 9 fields, found 2"
    ]
    empty = tmp_path / "empty.csv"
    empty.write_text("", encoding="utf-8")
    assert read_input(empty).fatal
    assert _messages(empty) == ["line 1: no rows to cancel"]


def test_duplicate_payment_or_assignment_id_is_refused(tmp_path: Path) -> None:
    header = HEADER + ",assignment_id"
    p = _csv(
        tmp_path,
        header,
        GOOD + ",ASG-1",
        GOOD + ",ASG-2",  # same payment as line 2
        GOOD.replace("E2E-1", "E2E-3") + ",ASG-1",  # same assignment id as line 2
    )
    msgs = _messages(p)
    assert "line 3: original_end_to_end_id: same payment as line 2" in msgs
    assert "line 4: assignment_id: already used on line 2" in msgs


def test_jsonl_rows_and_errors_use_file_lines(tmp_path: Path) -> None:
    good = dict(
        zip(HEADER.split(","), GOOD.split(","), strict=True),
    )
    p = tmp_path / "in.jsonl"
    p.write_text(
        "\n".join(
            [
                json.dumps(good),
                "",
                "{not json",
                json.dumps({**good, "original_end_to_end_id": "E2E-9", "amount": 7.5}),
                json.dumps({**good, "original_end_to_end_id": "E2E-8", "extra": 1}),
                json.dumps([1, 2]),
            ]
        ),
        encoding="utf-8",
    )
    bulk = read_input(p)
    assert [r.line for r in bulk.rows] == [1, 4]
    assert bulk.rows[1].amount == Decimal("7.5")
    msgs = [str(e) for e in bulk.errors]
    assert any(m.startswith("line 3: not valid JSON") for m in msgs), msgs
    assert "line 5: unknown field 'extra'" in msgs
    assert "line 6: expected a JSON object" in msgs


def test_a_jsonl_row_naming_a_key_twice_is_refused_not_read_as_its_last_value(
    tmp_path: Path,
) -> None:
    # json.loads keeps the last value: this row would cancel E2E-2's payment, not E2E-1's.
    good = dict(zip(HEADER.split(","), GOOD.split(","), strict=True))
    row = json.dumps(good).replace(
        '"original_end_to_end_id": ',
        '"original_end_to_end_id": "E2E-1", "original_end_to_end_id": ',
    )
    p = tmp_path / "twice.jsonl"
    p.write_text(json.dumps(good) + "\n" + row + "\n", encoding="utf-8")
    bulk = read_input(p)
    assert [r.line for r in bulk.rows] == [1]
    assert [str(e) for e in bulk.errors] == [
        "line 2: the key 'original_end_to_end_id' appears twice in one object"
    ]


def test_a_jsonl_number_with_too_many_digits_is_named_without_pythons_advice(
    tmp_path: Path,
) -> None:
    p = tmp_path / "long.jsonl"
    p.write_text('{"original_end_to_end_id": "E", "amount": ' + "9" * 5000 + "}\n")
    assert [str(e) for e in read_input(p).errors] == [
        "line 1: not valid JSON (a number with too many digits)"
    ]


def test_utf8_bom_and_lowercase_codes_are_accepted(tmp_path: Path) -> None:
    p = tmp_path / "bom.csv"
    p.write_bytes(("\ufeff" + HEADER + "\n" + GOOD.replace("DUPL", "dupl") + "\n").encode())
    bulk = read_input(p)
    assert bulk.errors == ()
    assert bulk.rows[0].reason == "DUPL"


def test_amounts_are_strict_decimals(tmp_path: Path) -> None:
    """Decimal() accepts all of these; a bank file means what its characters say."""
    refused = ["1e3", "1E3", "1_000.00", '"1,000.00"', "+5.00", "-5.00", "NaN", "Infinity"]
    refused += ["\u0661\u0660\u0660\u0660.\u0660\u0660", "\uff11\uff10.00", "12.", ".5"]
    lines = [
        GOOD.replace("E2E-1", f"E2E-{i}").replace("12.50", amount)
        for i, amount in enumerate(refused)
    ]
    p = _csv(tmp_path, HEADER, *lines, GOOD.replace("E2E-1", "E2E-OK").replace("12.50", "1000.00"))
    bulk = read_input(p)
    assert [r.amount for r in bulk.rows] == [Decimal("1000.00")]
    amount_errors = {e.line for e in bulk.errors if e.column == "amount"}
    assert amount_errors == set(range(2, 2 + len(refused))), _messages(p)
    assert all("not a decimal number" in e.message for e in bulk.errors)


def test_json_numbers_are_taken_as_written(tmp_path: Path) -> None:
    row = dict(zip(HEADER.split(","), GOOD.split(","), strict=True))
    p = tmp_path / "in.jsonl"
    p.write_text(
        "\n".join(
            [
                json.dumps(row | {"original_end_to_end_id": "E2E-A"}) + "",
                '{"original_end_to_end_id": "E2E-B", "amount": 1e3'
                + json.dumps({k: v for k, v in row.items() if k not in ("amount",)}).replace(
                    '{"original_end_to_end_id": "E2E-1"', ""
                )
                + "",
                json.dumps(row | {"original_end_to_end_id": "E2E-C"}).replace('"12.50"', "1000.5"),
                json.dumps(row | {"original_end_to_end_id": "E2E-D"}).replace('"12.50"', "250"),
            ]
        )
        + "\n"
    )
    bulk = read_input(p)
    assert [(r.original_end_to_end_id, r.amount) for r in bulk.rows] == [
        ("E2E-A", Decimal("12.50")),
        ("E2E-C", Decimal("1000.5")),
        ("E2E-D", Decimal("250")),
    ]
    assert [str(e) for e in bulk.errors] == [
        "line 2: amount: not a decimal number: '1E+3' (write digits 0-9 and one '.', "
        "such as 1000.00)"
    ]


def test_every_problem_of_a_row_is_listed_not_only_the_first(tmp_path: Path) -> None:
    bad = "E2E-9,ten,EUR,NOTABIC,DE00370400440532013000,WHY,BNPAFRPPXXX,COBADEFFXXX,Alice"
    p = _csv(tmp_path, HEADER, bad, ",1e3,EUR,COBADEFFXXX,DE0,DUPL,BNPAFRPPXXX,COBADEFFXXX,")
    bulk = read_input(p)
    by_line: dict[int, set[str | None]] = {}
    for e in bulk.errors:
        by_line.setdefault(e.line, set()).add(e.column)
    # An unreadable amount no longer hides the BIC, IBAN and reason problems.
    assert by_line[2] == {"amount", "creditor_agent_bic", "creditor_iban", "reason"}, _messages(p)
    assert by_line[3] == {"original_end_to_end_id", "amount", "creditor_iban"}, _messages(p)


# --- the creditor agent's address -------------------------------------------------------

ADDRESS_HEADER = (
    HEADER + ",creditor_agent_street,creditor_agent_building,creditor_agent_post_code,"
    "creditor_agent_town,creditor_agent_country,creditor_agent_lines"
)
UNSTRUCTURED = "line 4: creditor_agent_address: unstructured address (address lines without"


def _jsonl(tmp_path: Path, *rows: dict[str, object]) -> Path:
    p = tmp_path / "in.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return p


def _good_object(e2e: str, **extra: object) -> dict[str, object]:
    return dict(zip(HEADER.split(","), GOOD.split(","), strict=True)) | {
        "original_end_to_end_id": e2e,
        **extra,
    }


def _address_of(row: BulkRow) -> dict[str, object]:
    """The ``pstlAdr`` of the creditor's bank in the row's encoded camt.056, or {}."""
    body = json.loads(encode(build_row_message(row, assignment_id="A-1", cancellation_id="C-1")))
    agent = body["fitoFIPmtCxlReq"]["undrlyg"][0]["txInf"][0]["orgnlTxRef"]["cdtrAgt"]
    address: dict[str, object] = agent["finInstnId"].get("pstlAdr", {})
    return address


def test_csv_address_columns_reach_the_camt056_structured_and_hybrid(tmp_path: Path) -> None:
    p = _csv(
        tmp_path,
        ADDRESS_HEADER,
        GOOD + ", Kaiserstrasse ,16,60311,Frankfurt am Main,de,",
        GOOD.replace("E2E-1", "E2E-2") + ",,,,Paris,FR,12 rue des Lilas | Batiment B|",
        GOOD.replace("E2E-1", "E2E-3") + ",,,,,,",
    )
    bulk = read_input(p)
    assert bulk.errors == (), _messages(p)
    structured, hybrid, none = bulk.rows
    assert structured.creditor_agent_address == Address(
        street="Kaiserstrasse", building="16", post_code="60311", town="Frankfurt am Main",
        country="DE",
    )  # fmt: skip
    assert _address_of(structured) == {
        "strtNm": "Kaiserstrasse",
        "bldgNb": "16",
        "pstCd": "60311",
        "twnNm": "Frankfurt am Main",
        "ctry": "DE",
    }
    # the lines are split at '|', each stripped; an empty part is dropped
    assert _address_of(hybrid) == {
        "twnNm": "Paris",
        "ctry": "FR",
        "adrLine": ["12 rue des Lilas", "Batiment B"],
    }
    assert none.creditor_agent_address is None
    assert _address_of(none) == {}


def test_csv_addresses_that_break_the_epc_rule_are_invalid_rows_named_by_column(
    tmp_path: Path,
) -> None:
    p = _csv(
        tmp_path,
        ADDRESS_HEADER,
        GOOD + ",,,,Paris,FR,",
        GOOD.replace("E2E-1", "E2E-2") + ",,,60311123456789012,Berlin,DE,",
        GOOD.replace("E2E-1", "E2E-3") + ",,,,,,Hauptstrasse 1|10115 Berlin",
        GOOD.replace("E2E-1", "E2E-4") + ",,,,Berlin,DE,a|b|c",
        GOOD.replace("E2E-1", "E2E-5") + ",,,,Berlin,,",
    )
    bulk = read_input(p)
    assert [r.line for r in bulk.rows] == [2]
    assert bulk.invalid_lines == (3, 4, 5, 6)
    msgs = _messages(p)
    assert "line 3: creditor_agent_post_code: must be 1..16 characters, got 17" in msgs
    assert any(m.startswith(UNSTRUCTURED) for m in msgs), msgs
    assert any(m.startswith("line 5: creditor_agent_lines: allows at most 2") for m in msgs)
    assert any(m.startswith("line 6: creditor_agent_address: from 2026-11-15") for m in msgs)
    assert len(msgs) == 4, msgs


def test_a_csv_address_column_must_be_one_the_reader_knows(tmp_path: Path) -> None:
    p = _csv(tmp_path, HEADER + ",creditor_agent_zip", GOOD + ",60311")
    bulk = read_input(p)
    assert bulk.fatal
    (msg,) = _messages(p)
    assert msg.startswith("line 1: unknown column 'creditor_agent_zip' (known: ")
    assert "creditor_agent_post_code" in msg


def test_jsonl_address_object_reaches_the_camt056(tmp_path: Path) -> None:
    address = {"street": "Kaiserstrasse", "building": "16", "post_code": "60311"}
    p = _jsonl(
        tmp_path,
        _good_object("E2E-1", creditor_agent_address=address | {"town": "Frankfurt am Main"}
                     | {"country": "de"}),
        _good_object("E2E-2", creditor_agent_address={
            "town": "Paris", "country": "FR", "lines": ["12 rue des Lilas", "Batiment B"]
        }),
        _good_object("E2E-3", creditor_agent_address=None),
    )  # fmt: skip
    bulk = read_input(p)
    assert bulk.errors == ()
    structured, hybrid, none = bulk.rows
    assert _address_of(structured) == {
        "strtNm": "Kaiserstrasse",
        "bldgNb": "16",
        "pstCd": "60311",
        "twnNm": "Frankfurt am Main",
        "ctry": "DE",
    }
    assert _address_of(hybrid)["adrLine"] == ["12 rue des Lilas", "Batiment B"]
    assert none.creditor_agent_address is None


def test_jsonl_address_objects_unknown_keys_wrong_types_and_the_epc_rule_name_their_line(
    tmp_path: Path,
) -> None:
    town = {"town": "Berlin", "country": "DE"}
    p = _jsonl(
        tmp_path,
        _good_object("E2E-1", creditor_agent_address=town),
        _good_object("E2E-2", creditor_agent_address=town | {"zip": "10115", "strt": "x"}),
        _good_object("E2E-3", creditor_agent_address=town | {"post_code": 10115, "lines": "x"}),
        _good_object("E2E-4", creditor_agent_address={"lines": ["Hauptstrasse 1", "Berlin"]}),
        _good_object("E2E-5", creditor_agent_address=town | {"post_code": "1" * 17}),
        _good_object("E2E-6", creditor_agent_address="Hauptstrasse 1, Berlin"),
        _good_object("E2E-7", creditor_agent_town="Berlin"),
        _good_object("E2E-8", creditor_agent_address={}),
    )
    bulk = read_input(p)
    assert [r.line for r in bulk.rows] == [1]
    assert bulk.invalid_lines == (2, 3, 4, 5, 6, 7, 8)
    msgs = _messages(p)
    known = "(known: street, building, post_code, town, country, lines, building_name"
    line2 = [m for m in msgs if m.startswith("line 2:")]
    assert len(line2) == 2, line2
    assert line2[0].startswith(f"line 2: creditor_agent_address: unknown field 'zip' {known}")
    assert line2[1].startswith(f"line 2: creditor_agent_address: unknown field 'strt' {known}")
    assert [m for m in msgs if m.startswith("line 3:")] == [
        "line 3: creditor_agent_address.post_code: expected text, got int",
        "line 3: creditor_agent_address.lines: expected a list of text",
    ]
    assert any(m.startswith(UNSTRUCTURED) for m in msgs), msgs
    assert "line 5: creditor_agent_address.post_code: must be 1..16 characters, got 17" in msgs
    assert [m for m in msgs if m.startswith("line 6:")] == [
        "line 6: creditor_agent_address: expected an object with the fields street, building, "
        "post_code, town, country, lines, building_name, floor, post_box, room, department, "
        "sub_department, town_location, district, country_sub_division"
    ]
    assert [m for m in msgs if m.startswith("line 7:")] == [
        "line 7: unknown field 'creditor_agent_town' (in JSON the address is one object: "
        "'creditor_agent_address')"
    ]
    assert any(m.startswith("line 8: creditor_agent_address: from 2026-11-15") for m in msgs)


def test_an_address_is_part_of_the_rows_exact_body_and_of_the_files_digest(
    tmp_path: Path,
) -> None:
    first = read_input(_csv(tmp_path, ADDRESS_HEADER, GOOD + ",,,,Paris,FR,", name="a.csv"))
    other = read_input(_csv(tmp_path, ADDRESS_HEADER, GOOD + ",,,,Lyon,FR,", name="b.csv"))
    assert first.sha256 != other.sha256  # a journal of one refuses the other
    (planned,) = plan_rows(first, "RUN1")
    (planned_other,) = plan_rows(other, "RUN1")
    assert planned.body is not None
    assert b'"pstlAdr":{"twnNm":"Paris","ctry":"FR"}' in planned.body
    assert planned.body != planned_other.body
