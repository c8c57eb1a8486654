"""The programs' event loop: uvloop when the speed extra is installed, never a policy change."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from payments_async import ConfigurationError
from payments_async.loop import loop_factory, run
from payments_async.sandbox._main import build_parser


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_auto_runs_on_uvloop_when_installed_and_leaves_the_policy_alone() -> None:
    pytest.importorskip("uvloop")  # the speed extra; make venv installs it (bench extra)
    policy = type(asyncio.get_event_loop_policy())
    assert run(_loop_module()).startswith("uvloop")
    assert run(_loop_module(), kind="uvloop").startswith("uvloop")
    assert type(asyncio.get_event_loop_policy()) is policy


def test_asyncio_kind_runs_on_asyncios_own_loop() -> None:
    assert run(_loop_module(), kind="asyncio").startswith("asyncio")
    assert loop_factory("asyncio") is None


def test_an_unknown_kind_is_refused_not_taken_for_auto() -> None:
    with pytest.raises(ConfigurationError, match="unknown event loop 'uvlop'"):
        loop_factory("uvlop")  # type: ignore[arg-type]


def test_without_uvloop_auto_falls_back_and_uvloop_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop -> ImportError
    assert loop_factory("auto") is None
    assert run(_loop_module()).startswith("asyncio")
    with pytest.raises(ConfigurationError, match=r"payments-async\[speed\]"):
        loop_factory("uvloop")


def test_importing_the_library_or_its_programs_does_not_import_uvloop() -> None:
    code = (
        "import sys, payments_async, payments_async.cli, payments_async.sandbox; "
        "print('uvloop' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "False"


def test_the_sandbox_command_line_takes_a_loop_choice() -> None:
    assert build_parser().parse_args([]).loop == "auto"
    assert build_parser().parse_args(["--loop", "asyncio"]).loop == "asyncio"


def test_the_cli_refuses_uvloop_when_missing_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from payments_async.cli import cli

    monkeypatch.setitem(sys.modules, "uvloop", None)
    result = CliRunner().invoke(cli, ["--sandbox", "--loop", "uvloop", "token"])
    assert result.exit_code == 2
    assert "payments-async[speed]" in result.output
    assert "Traceback" not in result.output
