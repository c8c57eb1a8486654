"""``payments-async worker``: run the rows of bulk runs queued with ``--queue``."""

from __future__ import annotations

import asyncio

import click

from payments_async import POLL_TIMEOUT, Limits, bulk
from payments_async.bulk import JournalError
from payments_async.bulk._defaults import (
    HEARTBEAT_INTERVAL,
    SHUTDOWN_GRACE,
    STALLED_AFTER,
    STALLED_CHECK_INTERVAL,
    WORKER_CONCURRENCY,
    WORKER_ROWS,
)

from .._context import Settings, pass_settings
from .._exit import EXIT_INTERRUPTED, EXIT_OK, journal_failed
from .._params import delay, queue_option, seconds
from .._run import make_client, run_command, set_on_signals

__all__ = ["worker"]


@click.command("worker")
@queue_option
@click.option(
    "--concurrency",
    type=click.IntRange(min=1, max=1000),
    default=WORKER_CONCURRENCY,
    show_default=True,
    help="HTTP requests (submissions and outcome reads) this process has in flight.",
)
@click.option(
    "--rows",
    type=click.IntRange(min=1, max=100_000),
    default=WORKER_ROWS,
    show_default=True,
    help="Rows this process works on at once (most of them waiting for their outcome).",
)
@click.option(
    "--timeout",
    type=float,
    callback=seconds,
    default=POLL_TIMEOUT,
    show_default=True,
    metavar="S",
    help="Seconds to wait for each row's outcome.",
)
@click.option(
    "--heartbeat",
    type=click.FloatRange(min=0.1),
    callback=seconds,
    default=HEARTBEAT_INTERVAL,
    show_default=True,
    metavar="S",
    help="Seconds between this worker's heartbeats.",
)
@click.option(
    "--stalled-after",
    type=click.FloatRange(min=0.5),
    callback=seconds,
    default=STALLED_AFTER,
    show_default=True,
    metavar="S",
    help="A worker silent this long is taken for dead and its rows are run again.",
)
@click.option(
    "--grace",
    type=float,
    callback=delay,
    default=SHUTDOWN_GRACE,
    show_default=True,
    metavar="S",
    help=(
        "Seconds a stopping worker (Ctrl-C, SIGTERM) lets its rows go on towards their "
        "outcomes before it puts the unfinished ones back in the queue (with --once, "
        "they are waited for to the end)."
    ),
)
@click.option(
    "--once",
    is_flag=True,
    help=(
        "Take jobs until none is waiting, run their rows to their outcomes, then stop "
        "(benchmarks, tests) instead of serving the queue."
    ),
)
@pass_settings
def worker(
    settings: Settings,
    queue_url: str,
    concurrency: int,
    rows: int,
    timeout: float,
    heartbeat: float,
    stalled_after: float,
    grace: float,
    once: bool,
) -> None:
    """Run bulk-cancel rows queued with `bulk-cancel INPUT --queue URL` (the scale extra).

    Start any number of workers, on any hosts, against the same database. A worker that
    dies (even SIGKILL) has its rows put back in the queue by the others once its
    heartbeat stops; they resend each row with its recorded ids, so nothing is stored
    twice. Stop a worker with Ctrl-C or SIGTERM: its rows get --grace seconds to finish,
    then go back to the queue (with --once, its rows are waited for to the end).
    """
    if heartbeat >= stalled_after:
        raise click.UsageError("--heartbeat must be shorter than --stalled-after")

    async def go() -> int:
        stop = asyncio.Event()

        def ready() -> None:
            if not settings.json:
                settings.err.print(f"worker ready ({rows} rows, {concurrency} requests at once)")

        work = asyncio.ensure_future(
            bulk.run_worker(
                queue_url,
                lambda limit: make_client(settings, limits=Limits(connections=limit)),
                concurrency=concurrency,
                rows=rows,
                timeout=timeout,
                heartbeat_interval=heartbeat,
                stalled_after=stalled_after,
                stalled_check_interval=min(STALLED_CHECK_INTERVAL, stalled_after / 2),
                grace=grace,
                wait=not once,
                ready=ready,
            )
        )
        stopper = asyncio.ensure_future(stop.wait())
        try:
            with set_on_signals(stop):
                await asyncio.wait({work, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
            if not work.done():
                work.cancel()
            try:
                await work
            except asyncio.CancelledError:
                pass
            except JournalError as exc:
                raise journal_failed(exc) from None
        return EXIT_INTERRUPTED if stop.is_set() else EXIT_OK

    run_command(settings, go)
