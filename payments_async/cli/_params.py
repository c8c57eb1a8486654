"""Option checks and options that more than one command takes."""

from __future__ import annotations

import math
from collections.abc import Callable

import click
from click.decorators import FC

from ._defaults import CLI_RETRY_TIMEOUT
from ._private import POLL_TIMEOUT

__all__ = ["delay", "queue_option", "read_options", "run_option", "seconds"]


def seconds(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """Refuse seconds (``--timeout``, a worker's ``--heartbeat``) that are not a positive,
    finite number, while the options are read (a click callback: no type of ours, so any
    click >= 8.1 takes it)."""
    if value is not None and (not math.isfinite(value) or value <= 0):
        raise click.BadParameter(f"{value:g} is not a positive, finite number of seconds")
    return value


def delay(ctx: click.Context, param: click.Parameter, value: float) -> float:
    """Refuse a delay that is not a finite number of seconds >= 0 (as ``seconds`` does)."""
    if not math.isfinite(value) or value < 0:
        raise click.BadParameter(f"{value:g} is not a finite number of seconds >= 0")
    return value


queue_option = click.option(
    "--queue", "queue_url", required=True, metavar="URL", help="The postgresql:// queue."
)
run_option = click.option(
    "--run", "run_id", metavar="RUN", help="The run id [default: the latest run]."
)


def read_options(what: str) -> Callable[[FC], FC]:
    """``--wait`` and ``--timeout`` of a command that reads a ``what`` (a status, an outcome)."""

    def decorate(command: FC) -> FC:
        command = click.option(
            "--timeout",
            type=float,
            callback=seconds,
            metavar="S",
            help=f"Seconds: with --wait, to wait for a final {what} ({POLL_TIMEOUT:g}); "
            f"without, for the one read ({CLI_RETRY_TIMEOUT:g}).",
        )(command)
        return click.option("--wait", is_flag=True, help=f"Poll until the {what} is final.")(
            command
        )

    return decorate
