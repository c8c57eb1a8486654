"""Run the sandbox as a process: ``python -m payments_async.sandbox``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from decimal import Decimal, InvalidOperation
from typing import Final

from .._constants import (
    SANDBOX_ASSERTION,
    SANDBOX_CLIENT_ID,
    SANDBOX_CLIENT_SECRET,
    SANDBOX_ISSUER,
    SANDBOX_KEY_ID,
    SANDBOX_SCA_TOKEN,
)
from .._errors import ConfigurationError
from .._profile import ServiceProfile
from ..loop import LoopKind
from ..loop import run as run_loop
from ._config import (
    DEFAULT_PORT,
    FaultConfig,
    NotificationFaults,
    NotificationSettings,
    NotificationTarget,
    SandboxConfig,
)
from ._control import CONTROL_PREFIX
from ._options import NOTIFY_PASSWORD_ENV, SANDBOX_OPTIONS, sandbox_namespace
from ._server import SandboxServer

__all__ = [
    "DESCRIPTION",
    "banner",
    "build_parser",
    "main",
    "run",
    "run_from_args",
    "run_from_options",
]


def banner(url: str) -> str:
    """What the sandbox prints on start: its URL and the predefined credentials."""
    return "\n".join(
        [
            f"payments-async sandbox listening on {url}",
            f"  client id             {SANDBOX_CLIENT_ID}",
            f"  client secret         {SANDBOX_CLIENT_SECRET}",
            f"  key id (kid)          {SANDBOX_KEY_ID}",
            f"  issuer (iss)          {SANDBOX_ISSUER}",
            f"  predefined assertion  {SANDBOX_ASSERTION}",
            f"  predefined sca-token  {SANDBOX_SCA_TOKEN}",
            f"  control routes        {url}{CONTROL_PREFIX}/stats, /messages, /faults "
            "(no auth: loopback only)",
            "Press Ctrl+C to stop.",
        ]
    )


DESCRIPTION = "Run the local payments sandbox (the service's emulator) until Ctrl-C."


class _HelpFormatter(argparse.HelpFormatter):
    """Names each option's default as ``payments-async``'s click help does: ``[default: X]``."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if not any(default is none for none in (None, False, argparse.SUPPRESS)) and default != []:
            text += "  [default: %(default)s]"
        return text


def build_parser(prog: str = "python -m payments_async.sandbox") -> argparse.ArgumentParser:
    """The command-line options, each with its help (from `SANDBOX_OPTIONS`, which
    the CLI's ``sandbox`` command reads too).

    Args:
        prog: the program name shown in usage and errors.
    """
    p = argparse.ArgumentParser(
        prog=prog,
        description=DESCRIPTION,
        formatter_class=_HelpFormatter,
    )
    groups: dict[str, argparse._ActionsContainer] = {}
    for option in SANDBOX_OPTIONS:
        target: argparse._ActionsContainer = p
        if option.group is not None:
            if option.group not in groups:
                groups[option.group] = p.add_argument_group(option.group)
            target = groups[option.group]
        if option.kind == "flag":
            target.add_argument(option.flag, action="store_true", help=option.help)
        elif option.kind == "list":
            target.add_argument(
                option.flag, action="append", default=[], metavar=option.metavar, help=option.help
            )
        else:
            target.add_argument(
                option.flag,
                type=_TYPES[option.kind],
                default=option.default,
                choices=option.choices,
                metavar=option.metavar,
                help=option.help,
            )
    return p


_TYPES: Final[dict[str, Callable[[str], object]]] = {"text": str, "int": int, "float": float}


def _notification_settings(args: argparse.Namespace) -> NotificationSettings:
    shares: dict[str, object] = {"seed": args.seed}
    for item in args.notify_fault:
        kind, sep, share = item.partition("=")
        if not sep:
            raise ValueError(f"--notify-fault expects KIND=SHARE, got {item!r}")
        shares[kind.strip()] = float(share)
    faults = NotificationFaults.from_dict(shares)
    if args.notify is None:
        if args.notify_fault:
            raise ValueError("--notify-fault needs --notify")
        return NotificationSettings(faults=faults)
    client_id, sep, url = args.notify.partition("=")
    if not sep or "://" in client_id:
        client_id, url = SANDBOX_CLIENT_ID, args.notify
    target = NotificationTarget(
        url=url,
        payload=args.notify_payload,
        username=args.notify_user,
        password=(args.notify_password or os.environ.get(NOTIFY_PASSWORD_ENV))
        if args.notify_user
        else None,
        bearer=args.notify_bearer,
    )
    return NotificationSettings(targets={client_id: target}, faults=faults)


def config_from_args(args: argparse.Namespace) -> SandboxConfig:
    """Turn parsed options into a ``SandboxConfig``.

    Raises:
        ValueError: a malformed ``--fault`` or ``--amount-limit``, or a setting the
            configuration refuses (e.g. a delay that is not a finite number of seconds).
    """
    faults: dict[str, object] = {"seed": args.seed, "latency_seconds": args.latency_seconds}
    for item in args.fault:
        kind, sep, share = item.partition("=")
        if not sep:
            raise ValueError(f"--fault expects KIND=SHARE, got {item!r}")
        try:
            faults[kind.strip()] = float(share)
        except ValueError:
            raise ValueError(f"--fault expects KIND=SHARE, SHARE a number, got {item!r}") from None
    try:
        limit = None if args.amount_limit.lower() == "none" else Decimal(args.amount_limit)
    except InvalidOperation:  # an ArithmeticError: not a ValueError like the others
        raise ValueError(
            f"--amount-limit expects an amount in EUR or 'none', got {args.amount_limit!r}"
        ) from None
    return SandboxConfig(
        host=args.host,
        port=args.port,
        allow_non_loopback=args.allow_non_loopback,
        persist_path=args.persist,
        token_lifetime=args.token_lifetime,
        expires_in_as_string=args.expires_in_as_string,
        processing_delay=args.processing_delay,
        settlement_delay=args.settlement_delay,
        amount_limit=limit,
        other_client_status=args.other_client_status,
        max_body_size=args.max_body_size,
        body_read_timeout=args.body_read_timeout,
        clock_skew=args.clock_skew,
        faults=FaultConfig.from_dict(faults),
        notifications=_notification_settings(args),
        profile=_profile(args.profile),
    )


def _profile(items: list[str]) -> ServiceProfile:
    """The ``--profile FIELD=VALUE`` settings as a profile (the spec's for none)."""
    try:
        return ServiceProfile.parse(items)
    except ConfigurationError as exc:
        raise ValueError(f"--profile: {exc.message}") from None


async def serve(
    config: SandboxConfig,
    *,
    ready: Callable[[SandboxServer], None] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve until ``stop`` is set, SIGINT or SIGTERM.

    Args:
        config: the configuration.
        ready: called once the server listens (prints the banner by default).
        stop: an event that ends serving when set.
    """
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        async with SandboxServer(config) as server:
            if ready is None:
                print(banner(server.url), flush=True)
            else:
                ready(server)
            await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)


def run(
    config: SandboxConfig | None = None,
    *,
    host: str | None = None,
    port: int | None = None,
    loop: LoopKind = "auto",
) -> None:
    """Run the sandbox in the foreground until interrupted (blocking).

    Args:
        config: the configuration; ``SandboxConfig(port=DEFAULT_PORT)`` if None.
        host: overrides ``config.host``.
        port: overrides ``config.port``.
        loop: ``"auto"`` runs on uvloop when it is installed (the ``speed`` extra),
            ``"asyncio"`` on asyncio's own loop, ``"uvloop"`` requires uvloop.

    Raises:
        ConfigurationError: ``loop="uvloop"`` and uvloop is not installed.
    """
    config = config or SandboxConfig(port=DEFAULT_PORT)
    if host is not None:
        config = replace(config, host=host)
    if port is not None:
        config = replace(config, port=port)
    run_loop(serve(config), kind=loop)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m payments_async.sandbox``; returns the exit status.

    Args:
        argv: the arguments (without the program name); ``sys.argv[1:]`` if None.
    """
    return run_from_args(build_parser().parse_args(argv))


def run_from_options(values: Mapping[str, object]) -> int:
    """Run the sandbox program with options another parser read; returns the exit status.

    What ``python -m payments_async.sandbox`` does with its command line, for a program
    that parses its own (``payments-async sandbox`` builds click options from
    ``SANDBOX_OPTIONS``). It serves in the foreground until SIGINT or SIGTERM, and acts
    on the whole process as a program does: it configures logging
    (``logging.basicConfig``) and reads ``PAYMENTS_NOTIFY_PASSWORD`` when
    notifications are asked for. Embed ``SandboxServer`` instead to run it beside other
    work.

    Args:
        values: each option's value by its ``SandboxOption.dest`` (``port``,
            ``notify_fault``...). An option left out takes its default; a ``"list"``
            option is a list or tuple of texts, or None for none.

    Returns:
        0 after an interrupt; 2, with one line on stderr, for an option the
            sandbox refuses; 1, with one line, for a port it cannot listen on.
    """
    try:
        args = sandbox_namespace(values)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return run_from_args(args)


def run_from_args(args: argparse.Namespace) -> int:
    """Serve with parsed options until interrupted; returns the exit status.

    Errors in the options are one line on stderr and status 2; a port that cannot be
    bound is one line and status 1.

    Args:
        args: the options, as `build_parser` parses them.
    """
    try:
        logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(message)s")
        config = config_from_args(args)
        run(config, loop=args.loop)
    except (ConfigurationError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr)
        return 1
    return 0
