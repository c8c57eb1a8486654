"""The command line as a package: a command's module is loaded only when it is used."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from payments_async.cli import _COMMANDS, cli
from payments_async.sandbox._main import build_parser
from payments_async.sandbox._options import SANDBOX_OPTIONS


def test_the_group_help_loads_no_client_codec_or_rich() -> None:
    code = (
        "import sys\n"
        "from payments_async.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n"
        "heavy = ('aiohttp', 'msgspec', 'rich', 'payments_async._client', "
        "'payments_async.cli.commands.bulk')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "Commands:" in proc.stdout
    assert proc.stdout.splitlines()[-1] == "[]"


@pytest.mark.parametrize("name", sorted(_COMMANDS))
def test_every_listed_command_is_in_its_module_under_its_name(name: str) -> None:
    command = cli.get_command(click.Context(cli), name)
    assert isinstance(command, click.Command)
    assert command.name == name
    assert command.get_short_help_str() == _COMMANDS[name].short_help
    assert len(f"  {name:13} {_COMMANDS[name].short_help}") <= 80, "wraps in --help"


def test_an_unknown_command_is_none() -> None:
    assert cli.get_command(click.Context(cli), "no-such-command") is None


def test_argparse_and_click_take_the_same_sandbox_options() -> None:
    command = cli.get_command(click.Context(cli), "sandbox")
    assert command is not None
    clicked = {o for p in command.params for o in p.opts if o != "--help"}
    parsed = {o for a in build_parser()._actions for o in a.option_strings} - {"-h", "--help"}
    assert clicked == parsed == {o.flag for o in SANDBOX_OPTIONS}


@pytest.mark.parametrize(
    ("counts", "interrupted", "code"),
    [
        ({"accepted": 2, "invalid": 1}, False, 0),
        ({"accepted": 1, "rejected": 1}, False, 1),
        ({"accepted": 1, "refused": 1}, False, 1),
        ({"refused": 1, "unknown": 1}, False, 3),
        ({"not_sent": 2}, False, 3),
        ({"rejected": 1, "in_flight": 1}, False, 3),
        ({"accepted": 1, "pending": 1}, False, 3),
        ({"accepted": 2}, True, 130),
    ],
)
def test_a_bulk_run_exits_by_the_one_rule_of_docs_cli(
    counts: dict[str, int], interrupted: bool, code: int
) -> None:
    from payments_async.bulk import RunTotals
    from payments_async.cli._exit import bulk_exit_code

    assert bulk_exit_code(RunTotals.of(counts), interrupted=interrupted) == code


def test_a_bulk_run_with_rows_that_cannot_be_sent_is_unsettled() -> None:
    from payments_async.bulk import RunTotals
    from payments_async.cli._exit import bulk_exit_code

    totals = RunTotals.of({"accepted": 1, "not_sent": 2}, unsendable=2)
    assert totals.complete
    assert bulk_exit_code(totals) == 3


def test_json_is_accepted_after_the_command_too(tmp_path: Path) -> None:
    before = CliRunner().invoke(cli, ["--json", "keygen", "--dir", str(tmp_path / "a")])
    after = CliRunner().invoke(cli, ["keygen", "--dir", str(tmp_path / "b"), "--json"])
    assert before.exit_code == after.exit_code == 0, after.output
    assert json.loads(before.stdout).keys() == json.loads(after.stdout).keys()


def test_a_usage_error_is_json_exactly_when_json_was_asked_for() -> None:
    asked = CliRunner().invoke(cli, ["bulk-status", "--json"])
    assert asked.exit_code == 2
    assert json.loads(asked.stdout) == {
        "error": "give the run: --journal FILE|URL, or --queue URL (with --run) "
        "(see 'cli bulk-status --help')",
        "exit_code": 2,
    }
    plain = CliRunner().invoke(cli, ["bulk-status"])
    assert plain.exit_code == 2
    assert plain.stdout == ""
    assert plain.stderr.startswith("error: give the run: --journal FILE|URL, or --queue URL")


def test_json_after_a_double_dash_is_an_argument_not_the_option(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["keygen", "--dir", str(tmp_path), "--", "--json"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "unexpected extra argument (--json)" in result.stderr
