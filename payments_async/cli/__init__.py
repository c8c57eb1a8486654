"""The ``payments-async`` command line: a demo, one command per operation, bulk cancellation.

click and rich are needed by the command line only (the ``cli`` extra), not by the
library. The group and its global options live here; each command family is a module of
``payments_async.cli.commands``, imported when one of its commands runs. The exit codes
scripts can rely on are the ``EXIT_*`` constants (see docs/cli.md).
"""

from __future__ import annotations

import importlib
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

import click

from payments_async import __version__
from payments_async.loop import LOOP_CHOICES, LoopKind

from ._context import Settings
from ._defaults import ENV_BASE_URL, ENV_CA_FILE, ENV_CREDENTIALS, ENV_PROXY, SANDBOX_URL
from ._exit import EXIT_BUSINESS, EXIT_INTERRUPTED, EXIT_OK, EXIT_SERVICE, EXIT_USAGE

__all__ = [
    "EXIT_BUSINESS",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_SERVICE",
    "EXIT_USAGE",
    "main",
]


class _Entry(NamedTuple):
    module: str
    attribute: str
    short_help: str


_COMMANDS: dict[str, _Entry] = {
    "bulk-cancel": _Entry(
        "bulk", "bulk_cancel", "Cancel every payment listed in INPUT (CSV or JSONL)."
    ),
    "bulk-control": _Entry(
        "bulk_control", "bulk_control", "Pause, resume or abort a bulk run (local or queued)."
    ),
    "bulk-results": _Entry(
        "bulk_results",
        "bulk_results",
        "Export a bulk run's results, or the rows that need a person.",
    ),
    "bulk-report": _Entry(
        "bulk_results", "bulk_report", "Write a bulk run's report (one HTML page)."
    ),
    "bulk-status": _Entry("bulk", "bulk_status", "Show the progress of a distributed bulk run."),
    "cancel": _Entry("cancellations", "cancel", "Request a cancellation (camt.056)."),
    "demo": _Entry("demo", "demo", "Run the whole flow against an embedded sandbox."),
    "keygen": _Entry("keygen", "keygen", "Write a new RSA key pair and print what to register."),
    "listen": _Entry("listen", "listen", "Receive status notifications; confirm and print each."),
    "outcome": _Entry("cancellations", "outcome", "Read a cancellation's outcome (camt.029)."),
    "pay": _Entry("payments", "pay", "Submit a credit transfer (a pacs.008 JSON file)."),
    "sandbox": _Entry(
        "sandbox", "sandbox", "Run the local sandbox (the service's emulator) until Ctrl-C."
    ),
    "status": _Entry("payments", "status", "Read a credit transfer's status (pacs.002)."),
    "token": _Entry("payments", "token", "Obtain an access token: checks credentials and address."),
    "worker": _Entry("queue", "worker", "Run bulk-cancel rows queued with --queue (scale extra)."),
}
"""Every command: the module of ``commands`` that defines it, the command's name there,
and the line ``payments-async --help`` lists it with."""


_HELP = """Client of the Payments Initiation and Cancellation Service.

\b
Try it without any setup:
  payments-async demo                  the whole flow against an embedded sandbox
  payments-async sandbox               run the sandbox (port 8765) for the commands below
  payments-async --sandbox token       get a token from it with its predefined client

\b
Credentials, in this order: --sandbox (the sandbox's predefined client), --credentials
FILE or PAYMENTS_CREDENTIALS_FILE (JSON or TOML: client_id, client_secret, key_id, issuer,
and private_key_file or a pkcs11 table for a key in an HSM), or the environment
(PAYMENTS_CLIENT_ID, PAYMENTS_CLIENT_SECRET, PAYMENTS_KEY_ID, PAYMENTS_ISSUER,
PAYMENTS_PRIVATE_KEY_FILE). The service address: --base-url or PAYMENTS_BASE_URL.

\b
Exit codes: 0 ok, 1 business failure (cancellation rejected, payment RJCT),
2 usage or validation error (nothing sent), 3 service or transport error, or an
outcome nobody can classify (check with the bank), 130 interrupted.
"""


class _Group(click.Group):
    """The command group.

    A command's module is imported only when that command runs or shows its help (the
    listing in ``--help`` reads ``_COMMANDS``); click's own usage errors become one
    line (JSON with ``--json``).
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*_COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = _COMMANDS.get(cmd_name)
        if entry is None:
            return super().get_command(ctx, cmd_name)
        module = importlib.import_module(f"{__name__}.commands.{entry.module}")
        command = getattr(module, entry.attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{module.__name__}.{entry.attribute} is not a click command")
        command.short_help = entry.short_help
        return command

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """The global options, and ``--json`` also where users write it: after the command
        (``bulk-status --json``), anywhere before a ``--``."""
        rest = super().parse_args(ctx, args)
        end = rest.index("--") if "--" in rest else len(rest)
        if "--json" in rest[:end]:
            ctx.params["as_json"] = True
            ctx.args = rest = [a for a in rest[:end] if a != "--json"] + rest[end:]
        return rest

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, _COMMANDS[name].short_help) for name in sorted(_COMMANDS)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        argv = list(sys.argv[1:] if args is None else args)
        as_json = "--json" in argv[: argv.index("--") if "--" in argv else len(argv)]
        try:
            code = super().main(argv, prog_name, complete_var, False, **extra)
        except click.UsageError as exc:
            hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
            _usage_fail(as_json, exc.format_message() + hint, exc.exit_code)
        except click.ClickException as exc:
            _usage_fail(as_json, exc.format_message(), exc.exit_code)
        except click.Abort:
            _usage_fail(as_json, "interrupted", EXIT_INTERRUPTED)
        except SystemExit as exc:
            # click ends output into a closed pipe (`--help | head -1`) with exit 1 once it
            # has wrapped stdout to keep quiet: only the output was lost, as in run_command.
            if exc.code == 1 and type(sys.stdout).__name__.endswith("PacifyFlushWrapper"):
                sys.exit(EXIT_OK)
            raise
        sys.exit(code if isinstance(code, int) else EXIT_OK)


def _usage_fail(as_json: bool, message: str, code: int) -> NoReturn:
    message = " ".join(message.split())
    if as_json:
        click.echo(json.dumps({"error": message, "exit_code": code}))
    else:
        click.echo(f"error: {message}", err=True)
    sys.exit(code)


@click.group(cls=_Group, help=_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--base-url",
    envvar=ENV_BASE_URL,
    metavar="URL",
    help=f"Service address (env {ENV_BASE_URL}); {SANDBOX_URL} with --sandbox.",
)
@click.option(
    "--credentials",
    "credentials_file",
    envvar=ENV_CREDENTIALS,
    # Read only by a command that needs credentials (a directory is refused then): a
    # mistake in the variable must not break --sandbox or --help.
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="JSON/TOML file: client_id, client_secret, key_id, issuer, and private_key_file "
    "(optionally signing_threads) or a pkcs11 table (library, token_label, key_label, pin or "
    f"pin_file). Env {ENV_CREDENTIALS}.",
)
@click.option("--sandbox", is_flag=True, help="Use the sandbox's predefined client (no keys).")
@click.option(
    "--proxy",
    envvar=ENV_PROXY,
    metavar="URL",
    help=f"Forward proxy http://[user:password@]host:port (env {ENV_PROXY}: keeps the "
    "password off the command line).",
)
@click.option(
    "--ca-file",
    envvar=ENV_CA_FILE,
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="PEM certificates of the CA(s) to trust for the service's TLS certificate, instead "
    f"of the system's (a private CA). Env {ENV_CA_FILE}; SSL_CERT_FILE adds to the system's.",
)
@click.option(
    "--trust-env",
    is_flag=True,
    help="Without --proxy, use HTTPS_PROXY / HTTP_PROXY and NO_PROXY from the environment.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON on stdout.")
@click.option("-v", "--verbose", count=True, help="Log requests to stderr; show tracebacks.")
@click.option(
    "--loop",
    type=click.Choice(LOOP_CHOICES),
    default="auto",
    show_default=True,
    help="Event loop: uvloop when installed (the speed extra), or asyncio's own.",
)
@click.option(
    "--profile",
    multiple=True,
    metavar="FIELD=VALUE",
    help="Another edition of the service: pacs008_path, pacs002_path, camt056_path, "
    "camt029_path, pacs028_path or client_id_header (repeatable; over the credentials "
    "file's profile table).",
)
@click.version_option(__version__, prog_name="payments-async")
@click.pass_context
def cli(
    ctx: click.Context,
    base_url: str | None,
    credentials_file: Path | None,
    sandbox: bool,
    proxy: str | None,
    ca_file: Path | None,
    trust_env: bool,
    as_json: bool,
    verbose: int,
    loop: LoopKind,
    profile: tuple[str, ...],
) -> None:
    """The command group (see ``_HELP``): the global options become every command's
    ``Settings``."""
    argv = ctx.obj if isinstance(ctx.obj, list) else None
    ctx.obj = Settings(
        base_url=base_url,
        credentials_file=credentials_file,
        sandbox=sandbox,
        proxy=proxy,
        ca_file=ca_file,
        trust_env=trust_env,
        json=as_json,
        verbose=verbose,
        loop=loop,
        profile=profile,
        argv=argv,
    )
    if verbose:
        logging.basicConfig(
            level=logging.DEBUG, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s"
        )


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``payments-async`` console script and ``python -m payments_async``.

    Args:
        argv: the arguments without the program name; ``sys.argv[1:]`` if None.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    cli.main(args=args, prog_name="payments-async", obj=args)
