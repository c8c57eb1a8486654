"""The sandbox program's options, defined once for ``python -m payments_async.sandbox``
(argparse) and ``payments-async sandbox`` (click); stdlib only, so the first needs no click.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from .._constants import SANDBOX_CLIENT_ID
from ..loop import LOOP_CHOICES
from ._config import DEFAULT_HOST, DEFAULT_PORT, FaultConfig, SandboxConfig

__all__ = [
    "NOTIFICATIONS_GROUP",
    "NOTIFY_PASSWORD_ENV",
    "SANDBOX_OPTIONS",
    "OptionKind",
    "SandboxOption",
    "sandbox_namespace",
]

NOTIFY_PASSWORD_ENV: Final = "PAYMENTS_NOTIFY_PASSWORD"
NOTIFICATIONS_GROUP: Final = "notifications (our extension; the real sandbox has none)"

OptionKind = Literal["text", "int", "float", "flag", "list"]
"""What an option takes: one value of a type (``"text"``, ``"int"``, ``"float"``), nothing
(``"flag"``), or text given repeatedly (``"list"``)."""


@dataclass(frozen=True, slots=True)
class SandboxOption:
    """One option of the sandbox program, as a parser of the command line needs it.

    A program that parses its own command line (``payments-async sandbox`` builds click
    options from these) reads ``SANDBOX_OPTIONS`` and hands the values it parsed to
    ``run_from_options``.

    Attributes:
        flag: the option as typed, ``--port``; its value is named ``flag`` without the
            dashes, ``-`` read as ``_`` (``port``: see ``dest``).
        help: the help text (without the default: each parser adds it).
        kind: what it takes: one value, ``"text"``, ``"int"`` or ``"float"``; nothing,
            ``"flag"`` (true when given); or text given repeatedly, ``"list"``.
        default: the value when it is not given (a flag: False; a list: empty).
        metavar: how the help names its value; None for the parser's own.
        choices: the only values taken (given in the type of ``kind``).
        group: the title of the help section it is listed under; None for the main one.
    """

    flag: str
    help: str
    kind: OptionKind = "text"
    default: str | int | float | None = None
    metavar: str | None = None
    choices: tuple[str | int, ...] | None = None
    group: str | None = None

    @property
    def dest(self) -> str:
        """The name of the option's value in the parsed options."""
        return self.flag.removeprefix("--").replace("-", "_")


_CONFIG: Final = SandboxConfig()

SANDBOX_OPTIONS: Final[tuple[SandboxOption, ...]] = (
    SandboxOption("--host", "Address to bind (loopback).", default=DEFAULT_HOST),
    SandboxOption("--port", "Port to listen on (0: any free port).", "int", DEFAULT_PORT),
    SandboxOption(
        "--allow-non-loopback",
        "Permit a non-loopback --host (the control routes have no auth).",
        "flag",
    ),
    SandboxOption("--persist", "Keep the state in this SQLite file.", metavar="PATH"),
    SandboxOption(
        "--token-lifetime",
        "expires_in of the access tokens it issues, in seconds.",
        "int",
        _CONFIG.token_lifetime,
        "S",
    ),
    SandboxOption(
        "--expires-in-as-string",
        "Send expires_in quoted, like the specification's sample.",
        "flag",
    ),
    SandboxOption(
        "--processing-delay",
        "Seconds a payment stays PEND before its final status.",
        "float",
        _CONFIG.processing_delay,
        "S",
    ),
    SandboxOption(
        "--settlement-delay",
        "Seconds a cancellation stays pending before its outcome.",
        "float",
        _CONFIG.settlement_delay,
        "S",
    ),
    SandboxOption(
        "--amount-limit",
        "Payments above it end RJCT/AM02 ('none' disables).",
        default=str(_CONFIG.amount_limit),
        metavar="EUR",
    ),
    SandboxOption(
        "--other-client-status",
        "The answer to reading another client's message.",
        "int",
        404,
        choices=(403, 404),
    ),
    SandboxOption(
        "--clock-skew",
        "Run the sandbox's clock S seconds ahead (negative: behind) of this machine's.",
        "float",
        _CONFIG.clock_skew,
        "S",
    ),
    SandboxOption(
        "--max-body-size", "Larger request bodies get 413.", "int", _CONFIG.max_body_size, "BYTES"
    ),
    SandboxOption(
        "--body-read-timeout",
        "A body slower than this gets 408 and its connection closed.",
        "float",
        _CONFIG.body_read_timeout,
        "S",
    ),
    SandboxOption("--seed", "Seed of the fault injector.", "int", 0),
    SandboxOption(
        "--fault",
        "Inject a fault into a share of the requests, e.g. error_503=0.1, "
        "drop_before=0.05, latency=0.1 (repeatable).",
        "list",
        metavar="KIND=SHARE",
    ),
    SandboxOption(
        "--latency-seconds",
        "Delay added by the latency fault.",
        "float",
        FaultConfig().latency_seconds,
        "S",
    ),
    SandboxOption(
        "--notify",
        f"POST status notifications of CLIENT (default {SANDBOX_CLIENT_ID}) to URL.",
        metavar="[CLIENT=]URL",
        group=NOTIFICATIONS_GROUP,
    ),
    SandboxOption(
        "--notify-payload",
        "A short notice (where to read the status) or the full status report.",
        default="short",
        choices=("short", "full"),
        group=NOTIFICATIONS_GROUP,
    ),
    SandboxOption(
        "--notify-user", "HTTP Basic user to present.", metavar="USER", group=NOTIFICATIONS_GROUP
    ),
    SandboxOption(
        "--notify-password",
        # Read from the environment when the options are used, not here: a default would
        # be printed by --help.
        f"Its password (default: env {NOTIFY_PASSWORD_ENV}).",
        metavar="PASSWORD",
        group=NOTIFICATIONS_GROUP,
    ),
    SandboxOption(
        "--notify-bearer",
        "Or a bearer token to present.",
        metavar="TOKEN",
        group=NOTIFICATIONS_GROUP,
    ),
    SandboxOption(
        "--notify-fault",
        "loss, duplicate, reorder, delay, wrong_credentials (repeatable; uses --seed).",
        "list",
        metavar="KIND=SHARE",
        group=NOTIFICATIONS_GROUP,
    ),
    SandboxOption(
        "--profile",
        "Emulate another edition: an operation's path or the client-id header, e.g. "
        "pacs008_path=/payments/pacs008/v08, client_id_header=X-Client-Id (repeatable).",
        "list",
        metavar="FIELD=VALUE",
    ),
    SandboxOption("--log-level", "Level of the access log (stderr).", default="INFO"),
    SandboxOption(
        "--loop",
        "Event loop: uvloop when installed (the speed extra), or asyncio's own.",
        default="auto",
        choices=LOOP_CHOICES,
    ),
)
"""Every option of the sandbox program, in the order its help lists them.

``python -m payments_async.sandbox`` turns them into argparse options and
``payments-async sandbox`` into click ones. Options may be added; a flag, once listed,
keeps its name, its kind and the name of its value (``SandboxOption.dest``)."""


def sandbox_namespace(values: Mapping[str, object]) -> argparse.Namespace:
    """The parsed options as argparse gives them, from values by `SandboxOption.dest`.

    What the sandbox's argparse parser returns, from another parser's values: an option
    left out has its default (a flag False), a list option not given is an empty list, a
    number given as text a number.

    Raises:
        ValueError: a name that is no option's, or a number that does not read as one.
    """
    parsed = dict(values)
    unknown = sorted(set(parsed) - {option.dest for option in SANDBOX_OPTIONS})
    if unknown:
        raise ValueError(f"no such sandbox option: {', '.join(unknown)}")
    for option in SANDBOX_OPTIONS:
        if option.dest not in parsed:
            parsed[option.dest] = False if option.kind == "flag" else option.default
        value = parsed[option.dest]
        if option.kind == "list":
            parsed[option.dest] = list(value) if isinstance(value, list | tuple) else []
        elif option.kind in ("int", "float") and isinstance(value, str):
            try:
                parsed[option.dest] = int(value) if option.kind == "int" else float(value)
            except ValueError:
                raise ValueError(f"{option.flag}: not a number: {value!r}") from None
    return argparse.Namespace(**parsed)
