"""``payments-async demo``: the whole flow against an embedded sandbox, narrated."""

from __future__ import annotations

import click

from .._context import Settings, pass_settings
from .._demo import run_demo
from .._params import delay
from .._run import run_command

__all__ = ["demo"]


@click.command()
@click.option(
    "--processing-delay",
    type=float,
    callback=delay,
    default=1.0,
    show_default=True,
    metavar="S",
    help="Seconds the embedded sandbox keeps a payment unprocessed.",
)
@pass_settings
def demo(settings: Settings, processing_delay: float) -> None:
    """Run the whole flow against an embedded sandbox and narrate it (a few seconds).

    Starts the sandbox on a free loopback port, registers a client with a freshly
    generated RSA key, then: token, pacs.008 submitted, pacs.002 read, a cancellation
    accepted (payment still unprocessed), a cancellation rejected (payment processed:
    ask for a pacs.004 return), and a resubmission answered 200 (replayed).
    """

    async def go() -> int:
        return await run_demo(settings.out, processing_delay=processing_delay)

    run_command(settings, go)
