"""The context object every command gets: the global options and where output goes."""

from __future__ import annotations

import json
import os
import sys
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

__all__ = ["Settings", "Stdout", "pass_settings"]


class Stdout:
    """Standard output that a reader may close (``payments-async ... | head -1``).

    Once a write finds the pipe closed, output goes to ``os.devnull`` from then on (the
    process's stdout included, so that nothing fails when Python flushes it at exit) and
    `lost` is True: the command goes on to its own exit code, only its output is lost.
    A long-running command (``listen``) stops when it sees `lost`.
    """

    def __init__(self) -> None:
        self.lost = False

    def write(self, text: str) -> int:
        try:
            written = sys.stdout.write(text)
            sys.stdout.flush()
        except BrokenPipeError:
            self._lost()
            return len(text)
        return written

    def flush(self) -> None:
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            self._lost()

    def isatty(self) -> bool:
        return not self.lost and sys.stdout.isatty()

    def fileno(self) -> int:
        return sys.stdout.fileno()

    @property
    def encoding(self) -> str:
        return sys.stdout.encoding

    def _lost(self) -> None:
        self.lost = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)


def _stdout() -> Console:
    from rich.console import Console

    return Console(file=Stdout(), highlight=False, soft_wrap=True)  # type: ignore[arg-type]


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
    ca_file: Path | None = None
    trust_env: bool = False
    json: bool = False
    verbose: int = 0
    loop: LoopKind = "auto"
    profile: tuple[str, ...] = ()  # --profile FIELD=VALUE, over the credentials file's
    argv: list[str] | None = None
    # Read once per command: a credentials file's signer may hold threads or an HSM
    # session, which every client of the command shares and run_command closes at the end.
    credentials: Credentials | None = field(default=None, repr=False)
    # What the command created so far, by kind ("payment", "cancellation"): an
    # interrupted command names it (see _run.run_command).
    created: dict[str, str] = field(default_factory=dict)
    out: Console = field(default_factory=_stdout)
    err: Console = field(default_factory=_stderr)

    @property
    def output_lost(self) -> bool:
        """Whether the reader of stdout went away (see `Stdout`)."""
        file = self.out.file
        return isinstance(file, Stdout) and file.lost

    def emit(self, data: Mapping[str, object]) -> None:
        """Print one JSON object on stdout (``--json``)."""
        click.echo(json.dumps(data, default=str, separators=(",", ":")), file=self.out.file)

    def say(self, text: str | Text = "") -> None:
        """Print a line for people on stdout (nothing with ``--json``)."""
        if not self.json:
            self.out.print(text)


pass_settings = click.make_pass_decorator(Settings)
"""Decorates a command to receive the `Settings` as its first argument."""
