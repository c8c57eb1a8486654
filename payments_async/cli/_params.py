"""Option checks and options that more than one command takes."""

from __future__ import annotations

import math
from collections.abc import Callable

import click
from click.decorators import FC

from payments_async import POLL_TIMEOUT
from payments_async.bulk import DEFAULT_CHASE_LIMIT, ChasePolicy

from ._defaults import CLI_RETRY_TIMEOUT

__all__ = [
    "chase_options",
    "chase_policy",
    "delay",
    "queue_option",
    "read_options",
    "run_option",
    "seconds",
]


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


def chase_options(command: FC) -> FC:
    """``--chase-after`` and ``--chase-limit``: when a bulk run's unanswered recalls are
    chased (``bulk-cancel``, ``bulk-status --refresh``)."""
    command = click.option(
        "--chase-limit",
        type=click.IntRange(min=1),
        metavar="N",
        help="With --chase-after: chase a row at most N times over every run, each "
        f"--chase-after banking days after the last [default: {DEFAULT_CHASE_LIMIT}].",
    )(command)
    return click.option(
        "--chase-after",
        type=click.IntRange(min=1),
        metavar="DAYS",
        help="Chase each row whose recall the service acknowledged DAYS TARGET2 banking "
        "days ago and has not answered: one pacs.028 request for status update (no "
        "camt.056 is sent again).",
    )(command)


def chase_policy(after: int | None, limit: int | None) -> ChasePolicy | None:
    """The policy ``--chase-after``/``--chase-limit`` give; None without ``--chase-after``.

    Raises:
        click.UsageError: ``--chase-limit`` without ``--chase-after``.
    """
    if after is None:
        if limit is not None:
            raise click.UsageError("--chase-limit goes with --chase-after")
        return None
    return ChasePolicy(after) if limit is None else ChasePolicy(after, limit)
