"""``payments-async sandbox``: click help like every other command, every option passed on."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from click.testing import CliRunner, Result

from payments_async.cli import cli
from payments_async.sandbox._main import build_parser


def sandbox_options() -> list[tuple[str, str]]:
    return [
        (a.option_strings[-1], a.help or "")
        for a in build_parser()._actions
        if a.option_strings and a.dest != "help"
    ]


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), prog_name="payments-async")


def test_every_sandbox_option_has_help() -> None:
    missing = [opt for opt, text in sandbox_options() if not text.strip()]
    assert not missing, f"options without help: {missing}"


def test_sandbox_help_is_in_the_style_of_the_other_commands() -> None:
    result = invoke("sandbox", "--help")
    assert result.exit_code == 0, result.output
    other = invoke("status", "--help")
    assert other.output.startswith("Usage: payments-async status [OPTIONS]")
    assert result.output.startswith("Usage: payments-async sandbox [OPTIONS]\n")
    assert "\nOptions:\n" in result.output
    assert "python -m payments_async.sandbox" not in result.output.splitlines()[0]
    flat = " ".join(result.output.split())
    for opt, text in sandbox_options():
        assert opt in flat, opt
        assert " ".join(text.split()) in flat, f"help of {opt} missing"
    assert "[default: 8765]" in flat
    assert "-h, --help" in result.output
    assert invoke("sandbox", "-h").output == result.output


def test_sandbox_bad_option_is_a_click_usage_error() -> None:
    result = invoke("sandbox", "--port", "eighty")
    assert result.exit_code == 2
    other = invoke("status", "x", "--timeout", "soon")
    assert other.exit_code == 2
    # The same one-line form as every other command's usage errors.
    assert other.output.startswith("error: Invalid value for '--timeout'")
    assert result.output.startswith("error: Invalid value for '--port'")
    assert "payments-async sandbox --help" in result.output
    assert len(result.output.splitlines()) == 1


def test_sandbox_bad_fault_is_one_line_exit_2() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "payments_async", "sandbox", "--port", "0", "--fault", "oops"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: --fault expects KIND=SHARE, got 'oops'"


@pytest.mark.parametrize(
    ("option", "named"),
    [
        # Each started a sandbox that then answered 500 (or never answered) to normal
        # requests; not a number, or infinite, is no meaningful setting for any of them.
        (["--processing-delay", "nan"], "processing_delay"),
        (["--processing-delay", "inf"], "processing_delay"),
        (["--settlement-delay", "nan"], "settlement_delay"),
        (["--settlement-delay", "inf"], "settlement_delay"),
        (["--latency-seconds", "nan", "--fault", "latency=1"], "latency_seconds"),
        (["--latency-seconds", "inf"], "latency_seconds"),
        (["--amount-limit", "nan"], "amount_limit"),
        (["--amount-limit", "-Infinity"], "amount_limit"),
        (["--amount-limit", "sNaN"], "amount_limit"),
        (["--amount-limit", "abc"], "--amount-limit"),  # was a traceback
        (["--body-read-timeout", "inf"], "body_read_timeout"),
        (["--clock-skew", "-inf"], "clock_skew"),
        (["--fault", "latency=abc"], "--fault"),  # named no option once
    ],
)
def test_sandbox_setting_not_a_finite_number_is_one_line_exit_2(
    option: list[str], named: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def serve(*_: object, **__: object) -> None:
        pytest.fail("a sandbox was started with this setting")

    monkeypatch.setattr("payments_async.sandbox._main.run", serve)
    result = invoke("sandbox", "--port", "0", *option)
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines
    assert named in lines[0], lines
    assert result.stdout == ""


@contextmanager
def running(*args: str) -> Iterator[str]:
    """Start a sandbox process with these arguments; yield its URL; stop it with SIGINT."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [*args, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert "listening on " in first, first
        yield first.rsplit(" ", 1)[-1].strip()
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)  # also closes the pipes
        assert proc.returncode == 0, err


@pytest.mark.parametrize(
    "command",
    [["payments-async", "sandbox"], ["python", "-m", "payments_async.sandbox"]],
    ids=["cli", "python-m"],
)
def test_options_reach_the_sandbox(command: list[str]) -> None:
    bin_dir = os.path.dirname(sys.executable)
    exe = [os.path.join(bin_dir, command[0]), *command[1:]]
    if command[0] == "python":
        exe[0] = sys.executable
    args = [*exe, "--token-lifetime", "123", "--expires-in-as-string"]
    args += ["--other-client-status", "403", "--fault", "latency=0", "--seed", "7"]
    with running(*args) as url:
        started = time.monotonic()
        token = invoke("--sandbox", "--base-url", url, "--json", "token")
        assert token.exit_code == 0, token.output
        assert 100 < json.loads(token.stdout)["expires_in"] <= 123
        assert time.monotonic() - started < 30


def test_python_m_sandbox_works_without_click_or_rich() -> None:
    code = (
        "import sys; sys.modules['click'] = None; sys.modules['rich'] = None\n"
        "from payments_async.sandbox._main import main\n"
        "sys.exit(main(['--help']))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "--processing-delay S" in proc.stdout
    assert "[default: 5.0]" in proc.stdout


def test_options_left_out_take_the_defaults_argparse_gives() -> None:
    from payments_async.sandbox._options import sandbox_namespace

    assert sandbox_namespace({}) == build_parser().parse_args([])
    given = sandbox_namespace({"port": "9", "fault": ("latency=0",), "expires_in_as_string": True})
    assert given == build_parser().parse_args(
        ["--port", "9", "--fault", "latency=0", "--expires-in-as-string"]
    )


def test_run_from_options_refuses_a_bad_option_with_status_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from payments_async.sandbox import run_from_options

    assert run_from_options({"amount_limit": "lots"}) == 2
    assert capsys.readouterr().err == (
        "error: --amount-limit expects an amount in EUR or 'none', got 'lots'\n"
    )


@pytest.mark.parametrize(
    ("values", "error"),
    [
        ({"processing_delay": "soon"}, "error: --processing-delay: not a number: 'soon'\n"),
        ({"prot": 9}, "error: no such sandbox option: prot\n"),
    ],
)
def test_run_from_options_refuses_unreadable_values_and_unknown_names(
    values: dict[str, object], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from payments_async.sandbox import run_from_options

    assert run_from_options(values) == 2
    assert capsys.readouterr().err == error


def test_a_number_given_as_text_reads_as_argparse_reads_it() -> None:
    from payments_async.sandbox._main import build_parser
    from payments_async.sandbox._options import sandbox_namespace

    given = sandbox_namespace({"processing_delay": "0.5"})
    assert given == build_parser().parse_args(["--processing-delay", "0.5"])


@pytest.mark.parametrize("kind", ["store_false", "nargs+"])
def test_a_sandbox_option_without_a_click_form_is_named(kind: str) -> None:
    from payments_async.cli.commands.sandbox import click_option
    from payments_async.sandbox import SandboxOption

    option = SandboxOption("--new-thing", "A new option.", kind)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="--new-thing"):
        click_option(option)


def test_help_never_shows_the_notification_password(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "pw-do-not-print-0123456789"
    monkeypatch.setenv("PAYMENTS_NOTIFY_PASSWORD", secret)
    shown = invoke("sandbox", "--help").output
    assert "--notify-password" in shown
    assert secret not in shown
    proc = subprocess.run(
        [sys.executable, "-m", "payments_async.sandbox", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0
    assert "--notify-password" in proc.stdout
    assert secret not in proc.stdout + proc.stderr
