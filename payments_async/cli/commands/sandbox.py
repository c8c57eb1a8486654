"""``payments-async sandbox``: the sandbox program, with its options as click options.

The options are defined once, in the sandbox's option table (which
``python -m payments_async.sandbox`` reads with argparse, without click); each entry
becomes a click option here, so ``payments-async sandbox --help`` looks like every other
command's.
"""

from __future__ import annotations

from typing import Final

import click

from .._context import Settings
from .._exit import EXIT_USAGE
from .._private import SANDBOX_OPTIONS, SandboxOption, run_sandbox, sandbox_namespace
from .._run import fail

__all__ = ["click_option", "sandbox"]

_TYPES: Final = {"text": click.STRING, "int": click.INT, "float": click.FLOAT}


def click_option(option: SandboxOption) -> click.Option:
    """The click form of one of the sandbox's options (same name, help and default).

    Raises:
        TypeError: an option of a kind that has no click form here.
    """
    decls = [option.flag, option.dest]
    if option.kind == "flag":
        return click.Option(decls, is_flag=True, default=False, help=option.help)
    multiple = option.kind == "list"
    kind = _TYPES.get("text" if multiple else option.kind)
    if kind is None:
        raise TypeError(f"sandbox option {option.flag}: no click form for kind {option.kind!r}")
    if option.choices is not None:
        kind = click.Choice([str(c) for c in option.choices])
    metavar = option.metavar
    if metavar is None and option.choices is None:
        metavar = option.dest.upper()
    return click.Option(
        decls,
        type=kind,
        multiple=multiple,
        default=None if multiple else option.default,
        show_default=option.default is not None and not multiple,
        metavar=metavar,
        help=option.help,
    )


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.pass_context
def sandbox(ctx: click.Context, /, **values: object) -> None:
    """Run the local sandbox (the service's emulator) until Ctrl-C.

    It prints its address and the predefined client (use them with --sandbox). The same
    options work with `python -m payments_async.sandbox`, which needs no cli extra.
    Every rule it applies is described in docs/sandbox.md.
    """
    settings = ctx.find_object(Settings) or Settings()
    try:
        code = run_sandbox(sandbox_namespace(values))
    except (OSError, OverflowError) as exc:  # a port out of range, in use, not ours
        fail(settings, f"cannot start the sandbox: {exc}", EXIT_USAGE)
    raise SystemExit(code)


sandbox.params[:0] = [click_option(option) for option in SANDBOX_OPTIONS]
