"""Run the sandbox as a process: ``python -m payments_async.sandbox``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from decimal import Decimal, InvalidOperation

from .._constants import (
    SANDBOX_ASSERTION,
    SANDBOX_CLIENT_ID,
    SANDBOX_CLIENT_SECRET,
    SANDBOX_ISSUER,
    SANDBOX_KEY_ID,
    SANDBOX_SCA_TOKEN,
)
from .._errors import ConfigurationError
from .._loop import LOOP_CHOICES, LoopKind
from .._loop import run as run_loop
from ._config import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    FaultConfig,
    NotificationFaults,
    NotificationSettings,
    NotificationTarget,
    SandboxConfig,
)
from ._control import CONTROL_PREFIX
from ._server import SandboxServer

__all__ = ["DESCRIPTION", "banner", "build_parser", "main", "run", "run_from_args"]


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


NOTIFY_PASSWORD_ENV = "PAYMENTS_NOTIFY_PASSWORD"

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
    """The command-line options, each with its help (the CLI's ``sandbox`` command reuses them).

    Args:
        prog: the program name shown in usage and errors.
    """
    d = SandboxConfig()
    p = argparse.ArgumentParser(
        prog=prog,
        description=DESCRIPTION,
        formatter_class=_HelpFormatter,
    )
    p.add_argument("--host", default=DEFAULT_HOST, help="Address to bind (loopback).")
    p.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="Port to listen on (0: any free port)."
    )
    p.add_argument(
        "--allow-non-loopback",
        action="store_true",
        help="Permit a non-loopback --host (the control routes have no auth).",
    )
    p.add_argument("--persist", metavar="PATH", help="Keep the state in this SQLite file.")
    p.add_argument(
        "--token-lifetime",
        type=int,
        default=d.token_lifetime,
        metavar="S",
        help="expires_in of the access tokens it issues, in seconds.",
    )
    p.add_argument(
        "--expires-in-as-string",
        action="store_true",
        help="Send expires_in quoted, like the specification's sample.",
    )
    p.add_argument(
        "--processing-delay",
        type=float,
        default=d.processing_delay,
        metavar="S",
        help="Seconds a payment stays PEND before its final status.",
    )
    p.add_argument(
        "--settlement-delay",
        type=float,
        default=d.settlement_delay,
        metavar="S",
        help="Seconds a cancellation stays pending before its outcome.",
    )
    p.add_argument(
        "--amount-limit",
        default=str(d.amount_limit),
        metavar="EUR",
        help="Payments above it end RJCT/AM02 ('none' disables).",
    )
    p.add_argument(
        "--other-client-status",
        type=int,
        choices=(403, 404),
        default=404,
        help="The answer to reading another client's message.",
    )
    p.add_argument(
        "--clock-skew",
        type=float,
        default=d.clock_skew,
        metavar="S",
        help="Run the sandbox's clock S seconds ahead (negative: behind) of this machine's.",
    )
    p.add_argument(
        "--max-body-size",
        type=int,
        default=d.max_body_size,
        metavar="BYTES",
        help="Larger request bodies get 413.",
    )
    p.add_argument(
        "--body-read-timeout",
        type=float,
        default=d.body_read_timeout,
        metavar="S",
        help="A body slower than this gets 408 and its connection closed.",
    )
    p.add_argument("--seed", type=int, default=0, help="Seed of the fault injector.")
    p.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="KIND=SHARE",
        help="Inject a fault into a share of the requests, e.g. error_503=0.1, "
        "drop_before=0.05, latency=0.1 (repeatable).",
    )
    p.add_argument(
        "--latency-seconds",
        type=float,
        default=FaultConfig().latency_seconds,
        metavar="S",
        help="Delay added by the latency fault.",
    )
    n = p.add_argument_group("notifications (our extension; the real sandbox has none)")
    n.add_argument(
        "--notify",
        metavar="[CLIENT=]URL",
        help=f"POST status notifications of CLIENT (default {SANDBOX_CLIENT_ID}) to URL.",
    )
    n.add_argument(
        "--notify-payload",
        choices=("short", "full"),
        default="short",
        help="A short notice (where to read the status) or the full status report.",
    )
    n.add_argument("--notify-user", metavar="USER", help="HTTP Basic user to present.")
    n.add_argument(
        "--notify-password",
        metavar="PASSWORD",
        # Read from the environment when the options are used, not here: a default would
        # be printed by --help.
        help=f"Its password (default: env {NOTIFY_PASSWORD_ENV}).",
    )
    n.add_argument("--notify-bearer", metavar="TOKEN", help="Or a bearer token to present.")
    n.add_argument(
        "--notify-fault",
        action="append",
        default=[],
        metavar="KIND=SHARE",
        help="loss, duplicate, reorder, delay, wrong_credentials (repeatable; uses --seed).",
    )
    p.add_argument("--log-level", default="INFO", help="Level of the access log (stderr).")
    p.add_argument(
        "--loop",
        choices=LOOP_CHOICES,
        default="auto",
        help="Event loop: uvloop when installed (the speed extra), or asyncio's own.",
    )
    return p


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
    )


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


def run_from_args(args: argparse.Namespace) -> int:
    """Serve with parsed options until interrupted; returns the exit status.

    Errors in the options are one line on stderr and status 2; a port that cannot be
    bound is one line and status 1.

    Args:
        args: the options, as :func:`build_parser` parses them.
    """
    try:
        logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(message)s")
        config = config_from_args(args)
        # This process is the sandbox program, nothing else runs in it: what exists now
        # (modules, classes, functions: ~50,000 objects) lives until exit, so it is moved
        # out of the collector's way. A full collection then traverses only the state the
        # sandbox builds (one record per message), a few ms instead of 30-150 ms during
        # which no notification is sent. (The library itself never touches the collector.)
        gc.collect()
        gc.freeze()
        run(config, loop=args.loop)
    except (ConfigurationError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr)
        return 1
    return 0
