"""The context object every command gets: the global options and where output goes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import click

from payments_async.loop import LoopKind

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from payments_async import Credentials

__all__ = ["Settings", "pass_settings"]


def _stdout() -> Console:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


def _stderr() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


@dataclass(slots=True)
class Settings:
    """The global options, shared by every command."""

    base_url: str | None = None
    credentials_file: Path | None = None
    sandbox: bool = False
    proxy: str | None = field(default=None, repr=False)  # may carry credentials
    trust_env: bool = False
    json: bool = False
    verbose: int = 0
    loop: LoopKind = "auto"
    profile: tuple[str, ...] = ()  # --profile FIELD=VALUE, over the credentials file's
    argv: list[str] | None = None
    # Read once per command: a credentials file's signer may hold threads or an HSM
    # session, which every client of the command shares and run_command closes at the end.
    credentials: Credentials | None = field(default=None, repr=False)
    out: Console = field(default_factory=_stdout)
    err: Console = field(default_factory=_stderr)

    def emit(self, data: Mapping[str, object]) -> None:
        """Print one JSON object on stdout (``--json``)."""
        click.echo(json.dumps(data, default=str, separators=(",", ":")))

    def say(self, text: str | Text = "") -> None:
        """Print a line for people on stdout (nothing with ``--json``)."""
        if not self.json:
            self.out.print(text)


pass_settings = click.make_pass_decorator(Settings)
"""Decorates a command to receive the `Settings` as its first argument."""
