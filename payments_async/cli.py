"""The ``payments-async`` command line: a demo, one command per operation, bulk cancellation.

click and rich are imported here (and in ``bulk``'s progress display) only: the library
itself does not need them. Install them with the ``cli`` extra.

Exit codes scripts can rely on: 0 ok; 1 a business failure (a rejected cancellation, a
payment ending RJCT); 2 a usage or validation error (nothing was sent); 3 a service or
transport error, or an outcome whose codes cannot be classified; 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import math
import re
import shlex
import signal
import socket
import sys
import tempfile
import tomllib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NoReturn, TypeVar

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text
from yarl import URL

from . import __version__
from ._checks import check_payments_service_id
from ._client import PaymentsClient
from ._config import Limits, Timeout
from ._constants import (
    BULK_HEARTBEAT_INTERVAL,
    BULK_STALLED_AFTER,
    BULK_STALLED_CHECK_INTERVAL,
    BULK_STATUS_INTERVAL,
    BULK_WORKER_CONCURRENCY,
    BULK_WORKER_ROWS,
    CLI_MAX_JSON_DEPTH,
    CLI_PROBE_TIMEOUT,
    CLI_RETRY_TIMEOUT,
    DEFAULT_KEYGEN_BITS,
    MIN_RSA_BITS,
    NOTIFY_PATH,
    POLL_TIMEOUT,
    TOKEN_PATH,
)
from ._credentials import Credentials
from ._errors import (
    ConfigurationError,
    PaymentsError,
    TransportError,
    ValidationError,
)
from ._keys import generate_key_pair, load_public_key, public_key_pem
from ._loop import LOOP_CHOICES, LoopKind
from ._loop import run as run_loop
from ._models import CancellationOutcome, Submission
from .iso20022 import (
    Camt056,
    Outcome,
    PaymentStatus,
    decode_camt056,
    decode_pacs008,
    summarize_resolution,
    summarize_status_report,
)
from .signing import KeySigner, Pkcs11Signer, Signer, ThreadPoolSigner

__all__ = ["EXIT_BUSINESS", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_SERVICE", "EXIT_USAGE", "main"]

EXIT_OK: Final = 0
"""Everything asked for was done."""
EXIT_BUSINESS: Final = 1
"""The service said no: a rejected cancellation, a payment ending RJCT."""
EXIT_USAGE: Final = 2
"""Bad options, a bad file or invalid input: nothing was sent."""
EXIT_SERVICE: Final = 3
"""The service failed or could not be reached (after retries), or answered with codes
nobody can classify (an UNKNOWN outcome: check with the bank)."""
EXIT_INTERRUPTED: Final = 130
"""Stopped with Ctrl-C (or SIGTERM)."""

ENV_BASE_URL: Final = "PAYMENTS_BASE_URL"
ENV_PROXY: Final = "PAYMENTS_PROXY"
ENV_CREDENTIALS: Final = "PAYMENTS_CREDENTIALS_FILE"
SANDBOX_URL: Final = "http://127.0.0.1:8765"  # where ``payments-async sandbox`` listens

if TYPE_CHECKING:
    from .notifications import Authenticator

T = TypeVar("T")
logger = logging.getLogger("payments_async.cli")


class CliError(Exception):
    """An error to report in one line with an exit code (raised inside commands).

    Args:
        message: the line to print.
        code: the exit code.
        details: more fields for the ``--json`` error object (lists of problems).
    """

    def __init__(
        self, message: str, code: int = EXIT_USAGE, details: Mapping[str, Any] | None = None
    ) -> None:
        self.code = code
        self.details = dict(details or {})
        super().__init__(message)


@dataclass(slots=True)
class Settings:
    """The global options, shared by every command."""

    base_url: str | None = None
    credentials_file: Path | None = None
    sandbox: bool = False
    proxy: str | None = field(default=None, repr=False)  # may carry credentials
    trust_env: bool = False
    json: bool = False
    verbose: int = 0
    loop: LoopKind = "auto"
    argv: list[str] | None = None
    # Read once per command: a credentials file's signer may hold threads or an HSM
    # session, which every client of the command shares and _run closes at the end.
    credentials: Credentials | None = field(default=None, repr=False)
    out: Console = field(default_factory=lambda: Console(highlight=False, soft_wrap=True))
    err: Console = field(
        default_factory=lambda: Console(stderr=True, highlight=False, soft_wrap=True)
    )

    def emit(self, data: Mapping[str, Any]) -> None:
        """Print one JSON object on stdout (``--json``)."""
        click.echo(json.dumps(data, default=str, separators=(",", ":")))

    def say(self, text: str | Text = "") -> None:
        """Print a line for people on stdout (nothing with ``--json``)."""
        if not self.json:
            self.out.print(text)


# --- credentials and the client ---------------------------------------------------------------


def load_credentials_file(path: Path) -> Credentials:
    """Credentials from a JSON or TOML file.

    Keys: ``client_id``, ``client_secret``, ``key_id``, ``issuer``, and where the signing
    key is, one of:

    * ``private_key_file``: an unencrypted RSA PEM (a relative path is read from the
      file's directory), signed with in this process; with ``signing_threads = N``, on N
      worker threads (:class:`~payments_async.signing.ThreadPoolSigner`);
    * a ``pkcs11`` table: ``library``, ``token_label``, ``key_label`` and ``pin`` (or
      ``pin_file``): the key stays in the HSM
      (:class:`~payments_async.signing.Pkcs11Signer`, extra ``pkcs11``).

    A TOML file may put them all in a ``[credentials]`` table.

    Raises:
        CliError: the file is unreadable, malformed or incomplete.
        ConfigurationError: the key is unusable (or the HSM refuses the PIN, has no such
            token or key).
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read credentials file {str(path)!r}: {exc.strerror}") from None
    data: Any
    if path.suffix.lower() == ".toml":
        try:
            data = tomllib.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise CliError(f"credentials file {str(path)!r} {_not_utf8(exc)}") from None
        except (ValueError, RecursionError) as exc:
            raise CliError(f"credentials file {str(path)!r} is not valid TOML: {exc}") from None
        table = data.get("credentials", data)
        data = table
    else:
        data = load_json_bytes(raw, f"credentials file {str(path)!r}")
    what = f"credentials file {str(path)!r}"
    if not isinstance(data, dict):
        raise CliError(f"{what} must hold an object")
    _check_text(what, data, ("client_id", "client_secret", "key_id", "issuer"), required=True)
    _check_text(what, data, ("private_key_file",), required=False)
    misplaced = sorted(k for k in _PKCS11_KEYS if k in data)
    if misplaced:
        raise CliError(f"{what}: {', '.join(misplaced)} belong(s) in the pkcs11 table")
    hsm = data.get("pkcs11")
    if ("private_key_file" in data) == (hsm is not None):
        raise CliError(
            f"{what}: give the signing key as exactly one of private_key_file and a pkcs11 "
            f"table, not {'both' if hsm is not None else 'neither'}"
        )
    threads = data.get("signing_threads")
    if threads is not None and hsm is not None:
        raise CliError(f"{what}: signing_threads goes with private_key_file, not a pkcs11 table")
    if threads is not None and (type(threads) is not int or threads < 1):
        raise CliError(f"{what}: signing_threads must be a whole number >= 1")
    key_id = data["key_id"]
    signer: Signer
    if hsm is not None:
        signer = _pkcs11_signer(what, path, hsm, key_id)
    else:
        key_file = _relative_to(path, data["private_key_file"])
        if threads is None:
            signer = KeySigner(key_file, key_id=key_id)
        else:
            signer = ThreadPoolSigner(key_file, key_id=key_id, max_workers=threads)
    try:
        return Credentials(
            data["client_id"],
            data["client_secret"],
            key_id=key_id,
            issuer=data["issuer"],
            signer=signer,
        )
    except BaseException:
        _close_signer(signer)
        raise


def _check_text(what: str, data: Mapping[str, Any], keys: Sequence[str], *, required: bool) -> None:
    """Every one of ``keys`` present is text; with ``required``, each is there and not empty."""
    wrong = [
        f"{k} must be text, not {_json_type(data[k])}"
        for k in keys
        if k in data and not isinstance(data[k], str)
    ]
    if wrong:
        raise CliError(f"{what}: {'; '.join(wrong)}")
    missing = [k for k in keys if (required or k in data) and not data.get(k)]
    if missing:
        raise CliError(f"{what} lacks: {', '.join(missing)}")


def _relative_to(path: Path, name: str) -> Path:
    """``name`` as a path; a relative one is taken from the directory of the file ``path``."""
    found = Path(name).expanduser()
    return found if found.is_absolute() else path.parent / found


_PKCS11_KEYS: Final = ("library", "token_label", "key_label", "pin", "pin_file")


def _pkcs11_signer(what: str, path: Path, hsm: object, key_id: str) -> Signer:
    """The signer of a credentials file's ``pkcs11`` table (the PIN never in a message)."""
    if not isinstance(hsm, dict):
        kind = "text" if isinstance(hsm, str) else _json_type(hsm)
        raise CliError(f"{what}: pkcs11 must be a table, not {kind}")
    what = f"{what}, pkcs11"
    if "pin" in hsm and not isinstance(hsm["pin"], str):
        raise CliError(f'{what}: pin must be text (quote it: pin = "1234")')
    _check_text(what, hsm, ("library", "token_label", "key_label"), required=True)
    _check_text(what, hsm, ("pin", "pin_file"), required=False)
    unknown = sorted(set(hsm) - set(_PKCS11_KEYS))
    if unknown:
        raise CliError(f"{what}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}")
    if ("pin" in hsm) == ("pin_file" in hsm):
        raise CliError(f"{what}: give the token's PIN as exactly one of pin and pin_file")
    pin = hsm.get("pin")
    if pin is None:
        pin_path = _relative_to(path, hsm["pin_file"])
        try:
            pin = pin_path.read_text("utf-8-sig").strip()  # a BOM is not part of a PIN
        except OSError as exc:
            raise CliError(
                f"{what}: cannot read pin_file {str(pin_path)!r}: {exc.strerror}"
            ) from None
        except UnicodeDecodeError as exc:
            raise CliError(f"{what}: pin_file {str(pin_path)!r} {_not_utf8(exc)}") from None
        if not pin:
            raise CliError(f"{what}: pin_file {str(pin_path)!r} is empty")
    return Pkcs11Signer(
        Path(hsm["library"]).expanduser(),  # as given: a bare name is the loader's to find
        token_label=hsm["token_label"],
        key_label=hsm["key_label"],
        pin=pin,
        key_id=key_id,
    )


def _close_signer(signer: object) -> None:
    """Close a signer that holds threads or an HSM session (a KeySigner holds neither)."""
    close = getattr(signer, "close", None)
    if callable(close):
        close()


def _json_type(value: object) -> str:
    """How a JSON/TOML value's type reads to a person."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _not_utf8(exc: UnicodeDecodeError) -> str:
    return (
        f"is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
        "save it as UTF-8"
    )


def _depth(value: object) -> int:
    """Nesting depth of decoded JSON, without recursion."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for v in item)
    return deepest


def load_json_bytes(raw: bytes, what: str) -> Any:
    """Decode JSON from a file given by a person; every way it can be wrong is a CliError.

    Args:
        raw: the file's bytes (UTF-8, a BOM allowed).
        what: how to name the file in the message.

    Raises:
        CliError: not UTF-8, not JSON, an object naming a key twice, or nested deeper
            than ``CLI_MAX_JSON_DEPTH``.
    """
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CliError(f"{what} {_not_utf8(exc)}") from None
    from .bulk._input import DuplicateKeyError, unique_keys

    try:
        value = json.loads(text, object_pairs_hook=unique_keys)
    except RecursionError:
        raise CliError(f"{what} is nested too deeply to be read") from None
    except json.JSONDecodeError as exc:
        raise CliError(f"{what} is not valid JSON: {exc}") from None
    except DuplicateKeyError as exc:  # which of the two values is meant is unclear
        raise CliError(f"{what}: {exc}") from None
    except ValueError:  # int(): more than 4,300 digits
        raise CliError(f"{what} is not valid JSON: a number has too many digits") from None
    if _depth(value) > CLI_MAX_JSON_DEPTH:
        raise CliError(f"{what} is nested more than {CLI_MAX_JSON_DEPTH} levels deep")
    return value


def _credentials(settings: Settings) -> Credentials:
    if settings.credentials is None:
        settings.credentials = _read_credentials(settings)
    return settings.credentials


def _read_credentials(settings: Settings) -> Credentials:
    if settings.sandbox:
        return Credentials.sandbox()
    if settings.credentials_file is not None:
        return load_credentials_file(settings.credentials_file)
    try:
        return Credentials.from_env()
    except ConfigurationError as exc:
        raise CliError(
            f"{exc.message}; pass --credentials FILE (or set {ENV_CREDENTIALS}), set the "
            "PAYMENTS_* variables, or use --sandbox for the sandbox's predefined client"
        ) from None


_SECRET_PARAM = re.compile(r"([?&][^=&#]*password=)[^&#]*", re.IGNORECASE)


def _shown_url(text: str) -> str:
    """``text`` (a URL, or ``--option=URL``) as a message may show it, even when it is too
    malformed to parse: the user and password (all before the last ``@`` ahead of the
    query) are hidden, and so is the value of any query parameter named like a password
    (libpq reads ``password`` and ``sslpassword`` there)."""
    scheme_end = text.find("://")
    start = scheme_end + 3 if scheme_end >= 0 else 0
    query = len(text)
    for stop in "?#":
        found = text.find(stop, start)
        if found >= 0:
            query = min(query, found)
    at = text.rfind("@", start, query)
    head = text[:start] + "***" + text[at:query] if at >= 0 else text[:query]
    return head + _SECRET_PARAM.sub(r"\1***", text[query:])


def _base_url(settings: Settings) -> str:
    url = settings.base_url or (SANDBOX_URL if settings.sandbox else None)
    if url is None:
        raise CliError(f"no service address: pass --base-url URL or set {ENV_BASE_URL}")
    shown = _shown_url(url)
    try:
        parsed = URL(url)
        parsed.port  # noqa: B018  (yarl checks some ports only when asked)
    except ValueError as exc:
        raise CliError(f"--base-url {shown!r} is not a valid URL: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise CliError(f"--base-url {shown!r} is not a valid URL: give http(s)://host[:port]")
    return url


def _client(settings: Settings, **kwargs: Any) -> PaymentsClient:
    """The client, failing fast: a person is waiting (``CLI_RETRY_TIMEOUT`` per call)."""
    kwargs.setdefault("timeout", Timeout(total=CLI_RETRY_TIMEOUT))
    credentials = _credentials(settings)
    base_url = _base_url(settings)
    try:
        return PaymentsClient(
            credentials,
            base_url=base_url,
            proxy=settings.proxy or None,
            trust_env=settings.trust_env,
            **kwargs,
        )
    except ValueError as exc:  # a URL only the transport's parser objects to
        raise CliError(f"--base-url {_shown_url(base_url)!r} is not a valid URL: {exc}") from None


@contextlib.asynccontextmanager
async def _connected(settings: Settings, **kwargs: Any) -> AsyncIterator[PaymentsClient]:
    """An open client that already holds an access token.

    A service that cannot be reached, or credentials it refuses, are found here within
    ``CLI_RETRY_TIMEOUT`` seconds, before anything is sent or any file is written (a
    waiter would otherwise poll an unreachable service until its own deadline).
    """
    async with _client(settings, **kwargs) as client:
        await _token_lifetime(client)
        yield client


async def _token_lifetime(client: PaymentsClient) -> float:
    """Obtain the access token within the CLI's deadline (the library's own is longer)."""
    try:
        async with asyncio.timeout(CLI_RETRY_TIMEOUT):
            return await client.access_token_lifetime()
    except TimeoutError:
        raise TransportError(
            f"no access token within {CLI_RETRY_TIMEOUT:g} s",
            request_sent=False,
            method="POST",
            path=TOKEN_PATH,
        ) from None


# --- running a command: one-line errors and exit codes ----------------------------------------


def _fail(
    settings: Settings, message: str, code: int, details: Mapping[str, Any] | None = None
) -> NoReturn:
    message = " ".join(message.split())  # one line, whatever the message held
    if settings.json:
        click.echo(json.dumps({"error": message, "exit_code": code, **(details or {})}))
    else:
        settings.err.print(Text(f"error: {message}", style="red"))
    raise SystemExit(code)


def _run(settings: Settings, coro_fn: Callable[[], Awaitable[int]]) -> NoReturn:
    """Run a command's coroutine; map every error to one line and an exit code."""
    try:
        _run_command(settings, coro_fn)
    finally:
        credentials, settings.credentials = settings.credentials, None
        if credentials is not None:
            try:
                _close_signer(credentials.key_signer)
            except Exception:  # the command's own outcome is what to report
                logger.warning("closing the signer failed", exc_info=settings.verbose > 0)


def _run_command(settings: Settings, coro_fn: Callable[[], Awaitable[int]]) -> NoReturn:
    try:
        code = run_loop(_call(coro_fn), kind=settings.loop)
    except CliError as exc:
        _maybe_trace(settings)
        _fail(settings, str(exc), exc.code, exc.details)
    except (ValidationError, ConfigurationError) as exc:
        _maybe_trace(settings)
        _fail(settings, str(exc), EXIT_USAGE)
    except TransportError as exc:
        _maybe_trace(settings)
        _fail(settings, _unreachable(settings, exc), EXIT_SERVICE)
    except PaymentsError as exc:
        _maybe_trace(settings)
        _fail(settings, str(exc), EXIT_SERVICE)
    except KeyboardInterrupt:
        _fail(settings, "interrupted", EXIT_INTERRUPTED)
    raise SystemExit(code)


def _unreachable(settings: Settings, exc: TransportError) -> str:
    """Name why the service could not be reached, when a fresh TCP probe can tell."""
    return asyncio.run(_describe_unreachable(settings, exc))


async def _describe_unreachable(settings: Settings, exc: TransportError) -> str:
    # No probe when something answered (a proxy's 407 has a status) or when requests go
    # through a proxy: a direct connection would bypass it, and say nothing about it.
    if exc.request_sent or exc.status is not None or settings.proxy or settings.trust_env:
        return str(exc)
    try:
        url = URL(_base_url(settings))
    except CliError:
        return str(exc)
    why = await probe_service(url)
    return f"{why} ({exc})" if why else str(exc)


async def probe_service(url: URL, timeout: float = CLI_PROBE_TIMEOUT) -> str | None:
    """Try a TCP connection to the service; say what stops it, or None if it connects.

    Args:
        url: the service's base address.
        timeout: seconds to try.

    Returns:
        "connection refused to URL", "cannot resolve HOST" or "no answer from URL
        within S s"; None when a connection could be opened (the problem is elsewhere).
    """
    origin = str(url.origin())
    try:
        async with asyncio.timeout(timeout):
            _, writer = await asyncio.open_connection(url.host, url.port)
    except ConnectionRefusedError:
        return f"connection refused to {origin}"
    except socket.gaierror:
        return f"cannot resolve host {url.host!r} of {origin}"
    except TimeoutError:
        return f"no answer from {origin} within {timeout:g} s"
    except OSError as exc:
        return f"cannot connect to {origin}: {exc.strerror or exc}"
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None


async def _call(coro_fn: Callable[[], Awaitable[int]]) -> int:
    return await coro_fn()


def _maybe_trace(settings: Settings) -> None:
    if settings.verbose:
        settings.err.print_exception()


def _read_json_file(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read {str(path)!r}: {exc.strerror}") from None


# --- the group ---------------------------------------------------------------------------------

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


def _seconds(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """Refuse seconds (``--timeout``, a worker's ``--heartbeat``) that are not a positive,
    finite number, while the options are read (a click callback: no type of ours, so any
    click >= 8.1 takes it)."""
    if value is not None and (not math.isfinite(value) or value <= 0):
        raise click.BadParameter(f"{value:g} is not a positive, finite number of seconds")
    return value


def _delay(ctx: click.Context, param: click.Parameter, value: float) -> float:
    """Refuse a delay that is not a finite number of seconds >= 0 (as ``_seconds`` does)."""
    if not math.isfinite(value) or value < 0:
        raise click.BadParameter(f"{value:g} is not a finite number of seconds >= 0")
    return value


class _Group(click.Group):
    """The command group; click's own usage errors become one line (JSON with ``--json``)."""

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
        try:
            code = super().main(argv, prog_name, complete_var, False, **extra)
        except click.UsageError as exc:
            hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
            _usage_fail("--json" in argv, exc.format_message() + hint, exc.exit_code)
        except click.ClickException as exc:
            _usage_fail("--json" in argv, exc.format_message(), exc.exit_code)
        except click.Abort:
            _usage_fail("--json" in argv, "interrupted", EXIT_INTERRUPTED)
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
@click.version_option(__version__, prog_name="payments-async")
@click.pass_context
def cli(
    ctx: click.Context,
    base_url: str | None,
    credentials_file: Path | None,
    sandbox: bool,
    proxy: str | None,
    trust_env: bool,
    as_json: bool,
    verbose: int,
    loop: LoopKind,
) -> None:
    """The command group (see ``_HELP``)."""
    argv = ctx.obj if isinstance(ctx.obj, list) else None
    ctx.obj = Settings(
        base_url=base_url,
        credentials_file=credentials_file,
        sandbox=sandbox,
        proxy=proxy,
        trust_env=trust_env,
        json=as_json,
        verbose=verbose,
        loop=loop,
        argv=argv,
    )
    if verbose:
        logging.basicConfig(
            level=logging.DEBUG, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s"
        )


pass_settings = click.make_pass_decorator(Settings)


# --- keygen ------------------------------------------------------------------------------------


def _kid_for(pem: bytes) -> str:
    import hashlib

    der = "".join(pem.decode("ascii").strip().splitlines()[1:-1])
    return "kid-" + hashlib.sha256(der.encode("ascii")).hexdigest()[:16]


@cli.command()
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(),
    show_default=True,
    help="Where to write <name>-private.pem and <name>-public.pem.",
)
@click.option("--name", default="client", show_default=True, help="File name stem.")
@click.option(
    "--bits",
    type=click.IntRange(min=MIN_RSA_BITS),
    default=DEFAULT_KEYGEN_BITS,
    show_default=True,
    help="RSA modulus size (the service requires at least 2048).",
)
@click.option("--kid", help="Key id to register (default: from the key's fingerprint).")
@click.option("--iss", default=None, help="Issuer to register (default: the --name).")
@pass_settings
def keygen(
    settings: Settings, directory: Path, name: str, bits: int, kid: str | None, iss: str | None
) -> None:
    """Write a new RSA key pair and print what to register with the service.

    The private key file is created with mode 0600 and never overwritten. Register the
    public key PEM together with the kid and iss printed here; use the same values in
    your credentials file.
    """
    try:
        files = generate_key_pair(directory, name=name, bits=bits)
    except ConfigurationError as exc:
        _fail(settings, exc.message, EXIT_USAGE)
    pem = public_key_pem(load_public_key(files.public_key_path.read_bytes()))
    kid = kid or _kid_for(pem)
    iss = iss or name
    if settings.json:
        settings.emit(
            {
                "private_key_file": str(files.private_key_path),
                "public_key_file": str(files.public_key_path),
                "bits": bits,
                "kid": kid,
                "iss": iss,
                "public_key_pem": pem.decode("ascii"),
            }
        )
        return
    say = settings.say
    say(f"Wrote an RSA-{bits} key pair:")
    say(f"  private key  {files.private_key_path}  (mode 0600: keep it secret)")
    say(f"  public key   {files.public_key_path}")
    say("")
    say("Register with the service:")
    say(f"  kid  {kid}")
    say(f"  iss  {iss}")
    say("  public key (PEM, unencrypted, SubjectPublicKeyInfo):")
    say(Text(pem.decode("ascii").rstrip()))
    say("")
    say("Then a credentials file (JSON) for --credentials:")
    example = {
        "client_id": "<your client id>",
        "client_secret": "<your client secret>",
        "key_id": kid,
        "issuer": iss,
        "private_key_file": str(files.private_key_path),
    }
    say(Text(json.dumps(example, indent=2)))


# --- sandbox -----------------------------------------------------------------------------------


def _click_option(action: argparse.Action) -> click.Option:
    """The click form of one of the sandbox's argparse options (same name, help, default)."""
    decls = [*action.option_strings, action.dest]
    supported = (argparse._StoreAction, argparse._StoreTrueAction, argparse._AppendAction)
    if not isinstance(action, supported) or action.nargs not in (None, 0):
        # A new kind of sandbox option needs a line here (tests/integration/
        # test_sandbox_command.py fails until it has one).
        raise TypeError(f"sandbox option {action.option_strings[0]}: no click form for it")
    if isinstance(action, argparse._StoreTrueAction):
        return click.Option(decls, is_flag=True, default=False, help=action.help)
    choices = action.choices
    kind: Any  # a click.ParamType (generic in newer click, plain in older)
    if choices is not None:
        kind = click.Choice([str(c) for c in choices])
    elif action.type is int:
        kind = click.INT
    elif action.type is float:
        kind = click.FLOAT
    else:
        kind = click.STRING
    multiple = isinstance(action, argparse._AppendAction)
    metavar = action.metavar if isinstance(action.metavar, str) else None
    if metavar is None and choices is None:
        metavar = action.dest.upper()
    return click.Option(
        decls,
        type=kind,
        multiple=multiple,
        default=None if multiple else action.default,
        show_default=action.default is not None and not multiple,
        metavar=metavar,
        help=action.help,
    )


def _sandbox_options() -> tuple[list[click.Parameter], Callable[..., argparse.Namespace]]:
    """The sandbox's options as click parameters, and the way back to its Namespace.

    The options are defined once, by ``payments_async.sandbox``'s argparse parser (which
    ``python -m payments_async.sandbox`` uses without click); here each becomes a click
    option, so ``payments-async sandbox --help`` looks like every other command's.
    """
    from .sandbox._main import build_parser

    actions = [
        a
        for a in build_parser()._actions
        if a.option_strings and not isinstance(a, argparse._HelpAction)
    ]

    def namespace(**values: Any) -> argparse.Namespace:
        for action in actions:
            value = values.get(action.dest)
            if isinstance(action, argparse._AppendAction):
                values[action.dest] = list(value or ())
            elif action.choices is not None and value is not None and callable(action.type):
                values[action.dest] = action.type(value)
        return argparse.Namespace(**values)

    return [_click_option(a) for a in actions], namespace


class _SandboxCommand(click.Command):
    """``payments-async sandbox``: its options are built on first use, not at import."""

    _to_namespace: Callable[..., argparse.Namespace] | None = None

    def _namespace_builder(self) -> Callable[..., argparse.Namespace]:
        if self._to_namespace is None:
            options, self._to_namespace = _sandbox_options()
            self.params[:0] = options
        return self._to_namespace

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        self._namespace_builder()
        return super().get_params(ctx)

    def invoke(self, ctx: click.Context) -> Any:
        from .sandbox._main import run_from_args

        args = self._namespace_builder()(**ctx.params)
        settings = ctx.find_object(Settings) or Settings()
        try:
            code = run_from_args(args)
        except (OSError, OverflowError) as exc:  # a port out of range, in use, not ours
            _fail(settings, f"cannot start the sandbox: {exc}", EXIT_USAGE)
        raise SystemExit(code)


cli.add_command(
    _SandboxCommand(
        "sandbox",
        help="""Run the local sandbox (the service's emulator) until Ctrl-C.

    It prints its address and the predefined client (use them with --sandbox). The same
    options work with `python -m payments_async.sandbox`, which needs no cli extra.
    Every rule it applies is described in docs/sandbox.md.
    """,
        short_help="Run the local sandbox (the service's emulator) until Ctrl-C.",
        context_settings={"help_option_names": ["-h", "--help"]},
    )
)


# --- single operations -------------------------------------------------------------------------


def _submission_dict(sub: Submission) -> dict[str, Any]:
    return {
        "payments_service_id": sub.payments_service_id,
        "message_id": sub.message_id,
        "status": sub.status,
        "creation_date_time": sub.creation_date_time,
        "created": sub.created,
        "replayed": sub.replayed,
        "http_status": 201 if sub.created else 200,
        "attempts": sub.attempts,
    }


def _say_submission(settings: Settings, what: str, sub: Submission) -> None:
    how = "201 created" if sub.created else "200 replayed (the service had it already)"
    settings.say(f"{what} submitted: {how}")
    settings.say(f"  paymentsServiceId  {sub.payments_service_id}")
    settings.say(f"  message id         {sub.message_id}")
    settings.say(f"  status             {sub.status}  at {sub.creation_date_time}")


def _status_dict(st: PaymentStatus, psid: str) -> dict[str, Any]:
    return {
        "payments_service_id": psid,
        "outcome": st.outcome.value,
        "status": st.status,
        "final": st.is_final,
        "reason_codes": list(st.reason_codes),
        "tx_statuses": list(st.tx_statuses),
        "reason_texts": list(st.reason_texts),
        "end_to_end_id": st.end_to_end_id,
    }


_UNKNOWN_ADVICE: Final = (
    "these codes cannot be classified, so nothing is assumed: check with the bank, or "
    "read it again later"
)


def _outcome_exit(outcome: Outcome) -> int:
    """Exit code of a read outcome: 1 rejected, 3 unknown (codes nobody can classify)."""
    if outcome is Outcome.UNKNOWN:
        return EXIT_SERVICE
    return EXIT_BUSINESS if outcome is Outcome.REJECTED else EXIT_OK


def _outcome_dict(o: CancellationOutcome) -> dict[str, Any]:
    return {
        "payments_service_id": o.payments_service_id,
        "outcome": o.outcome.value,
        "status": o.status,
        "tx_statuses": list(o.tx_statuses),
        "reason_codes": list(o.reason_codes),
        "reason_texts": list(o.reason_texts),
        "return_request_needed": o.return_request_needed,
        "message": o.message,
    }


def _say_outcome(settings: Settings, o: CancellationOutcome) -> None:
    style = {"accepted": "green", "rejected": "yellow"}.get(o.outcome.value, "red")
    codes = "/".join(c for c in (o.status, *o.tx_statuses) if c)
    settings.say(Text(f"cancellation {o.outcome.value.upper()} ({codes})", style=style))
    if o.reason_codes or o.reason_texts:
        settings.say(f"  reason  {' '.join(o.reason_codes)} {'; '.join(o.reason_texts)}".rstrip())
    settings.say(f"  {o.message}")
    if o.outcome is Outcome.UNKNOWN:
        codes = " ".join(c for c in (o.status, *o.tx_statuses, *o.reason_codes) if c)
        settings.say(Text(f"  raw codes  {codes or '(none)'}", style="red"))
        settings.say(Text(f"  {_UNKNOWN_ADVICE}", style="red"))


@cli.command()
@pass_settings
def token(settings: Settings) -> None:
    """Obtain an access token: checks the credentials and the service address.

    The token itself is never printed; its lifetime is.
    """

    async def go() -> int:
        async with _connected(settings) as client:
            lifetime = await _token_lifetime(client)
        if settings.json:
            settings.emit({"ok": True, "expires_in": round(lifetime, 1)})
        else:
            settings.say(f"access token obtained; it expires in {lifetime:.0f} s")
        return EXIT_OK

    _run(settings, go)


@cli.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@pass_settings
def pay(settings: Settings, file: Path) -> None:
    """Submit a credit transfer: FILE is a pacs.008 JSON (root fitoFICstmrCdtTrf).

    Resubmitting the same file is safe: the service answers 200 with the same
    paymentsServiceId (it is idempotent on grpHdr.msgId).
    """

    async def go() -> int:
        raw = _read_json_file(file)
        load_json_bytes(raw, repr(str(file)))
        msg = decode_pacs008(raw)
        async with _connected(settings) as client:
            sub = await client.submit_credit_transfer(msg)
        if settings.json:
            settings.emit(_submission_dict(sub) | {"end_to_end_id": msg.end_to_end_id})
        else:
            _say_submission(settings, "pacs.008", sub)
            settings.say(f"  end-to-end id      {msg.end_to_end_id}")
        return EXIT_OK

    _run(settings, go)


@cli.command()
@click.argument("payments_service_id", metavar="ID")
@click.option("--wait", is_flag=True, help="Poll until the status is final.")
@click.option(
    "--timeout",
    type=float,
    callback=_seconds,
    metavar="S",
    help=f"Seconds: with --wait, to wait for a final status ({POLL_TIMEOUT:g}); without, for "
    f"the one read ({CLI_RETRY_TIMEOUT:g}).",
)
@pass_settings
def status(settings: Settings, payments_service_id: str, wait: bool, timeout: float | None) -> None:
    """Read a credit transfer's status (pacs.002).

    Exit 1 when it ended RJCT; 3 when its codes cannot be classified (every raw code is
    printed: check with the bank).
    """

    async def go() -> int:
        check_payments_service_id(payments_service_id)
        async with _connected(settings) as client:
            if wait:
                st = await client.wait_for_payment_status(
                    payments_service_id, timeout=POLL_TIMEOUT if timeout is None else timeout
                )
            else:
                report = await client.get_credit_transfer_status(
                    payments_service_id, timeout=timeout
                )
                st = summarize_status_report(report)
        if settings.json:
            settings.emit(_status_dict(st, payments_service_id))
        else:
            state = "final" if st.is_final else "not final yet"
            settings.say(
                f"payment {payments_service_id}: {st.status} ({st.outcome.value}, {state})"
            )
            if st.reason_codes or st.reason_texts:
                reasons = f"{' '.join(st.reason_codes)} {'; '.join(st.reason_texts)}"
                settings.say(f"  reason  {reasons.strip()}")
            if st.outcome is Outcome.UNKNOWN:
                codes = " ".join(c for c in (st.status, *st.tx_statuses, *st.reason_codes) if c)
                settings.say(Text(f"  raw codes  {codes or '(none)'}", style="red"))
                settings.say(Text(f"  {_UNKNOWN_ADVICE}", style="red"))
        return _outcome_exit(st.outcome)

    _run(settings, go)


def _cancellation_from_json(raw: bytes, path: Path) -> Camt056:
    """A camt.056 document, or one bulk-style row object turned into one."""
    obj = load_json_bytes(raw, repr(str(path)))
    if isinstance(obj, dict) and "fitoFIPmtCxlReq" in obj:
        return decode_camt056(raw)
    if not isinstance(obj, dict):
        raise CliError(f"{str(path)!r} must hold a JSON object")
    from .bulk._input import COLUMNS, check_row, parse_record

    row, problems = parse_record(1, obj, check_row, known_only=True)
    if row is None:
        listed = "; ".join(f"{e.column}: {e.message}" if e.column else e.message for e in problems)
        raise CliError(
            f"{str(path)!r}: {listed} (give a camt.056 with root fitoFIPmtCxlReq, "
            f"or an object with {', '.join(COLUMNS)})",
            details={"problems": [{"column": e.column, "message": e.message} for e in problems]},
        )
    from .iso20022 import build_cancellation

    return build_cancellation(
        original_end_to_end_id=row.original_end_to_end_id,
        amount=row.amount,
        currency=row.currency,
        creditor_agent_bic=row.creditor_agent_bic,
        creditor_iban=row.creditor_iban,
        reason=row.reason,
        assigner_bic=row.assigner_bic,
        assignee_bic=row.assignee_bic,
        originator_name=row.originator_name,
        assignment_id=row.assignment_id,
    )


@cli.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--wait", is_flag=True, help="Then wait for the outcome (camt.029).")
@click.option(
    "--timeout", type=float, callback=_seconds, default=POLL_TIMEOUT, show_default=True, metavar="S"
)
@pass_settings
def cancel(settings: Settings, file: Path, wait: bool, timeout: float) -> None:
    """Request a cancellation (camt.056). Exit 1 when --wait sees it rejected.

    FILE is a camt.056 JSON (root fitoFIPmtCxlReq), or one object with the bulk columns
    (original_end_to_end_id, amount, creditor_agent_bic, creditor_iban, reason,
    assigner_bic, assignee_bic, ...). A camt.056 file can be resent as is: the service
    answers 200 with the same paymentsServiceId. An object is built into a new message
    on every run; give it an assignment_id so that a second run is refused by the
    service (same id, other creation time) instead of creating a second request.
    """

    async def go() -> int:
        msg = _cancellation_from_json(_read_json_file(file), file)
        async with _connected(settings) as client:
            sub = await client.request_cancellation(msg)
            outcome = None
            if wait:
                outcome = await client.wait_for_cancellation_outcome(
                    sub.payments_service_id, timeout=timeout
                )
        if settings.json:
            data = _submission_dict(sub)
            if outcome is not None:
                data["outcome"] = _outcome_dict(outcome)
            settings.emit(data)
        else:
            _say_submission(settings, "camt.056", sub)
            if outcome is not None:
                _say_outcome(settings, outcome)
        return EXIT_OK if outcome is None else _outcome_exit(outcome.outcome)

    _run(settings, go)


@cli.command()
@click.argument("payments_service_id", metavar="ID")
@click.option("--wait", is_flag=True, help="Poll until the outcome is final.")
@click.option(
    "--timeout",
    type=float,
    callback=_seconds,
    metavar="S",
    help=f"Seconds: with --wait, to wait for a final outcome ({POLL_TIMEOUT:g}); without, for "
    f"the one read ({CLI_RETRY_TIMEOUT:g}).",
)
@pass_settings
def outcome(
    settings: Settings, payments_service_id: str, wait: bool, timeout: float | None
) -> None:
    """Read a cancellation's outcome (camt.029).

    Exit 1 when it was rejected; 3 when its codes cannot be classified (every raw code is
    printed: check with the bank).
    """

    async def go() -> int:
        check_payments_service_id(payments_service_id)
        async with _connected(settings) as client:
            if wait:
                result = await client.wait_for_cancellation_outcome(
                    payments_service_id, timeout=POLL_TIMEOUT if timeout is None else timeout
                )
            else:
                res = await client.get_cancellation_outcome(payments_service_id, timeout=timeout)
                summary = summarize_resolution(res)
                if summary.outcome is Outcome.PENDING:
                    if settings.json:
                        settings.emit(
                            {
                                "payments_service_id": payments_service_id,
                                "outcome": "pending",
                                "status": summary.status,
                            }
                        )
                    else:
                        settings.say(
                            f"cancellation {payments_service_id}: pending ({summary.status}); "
                            "use --wait to wait for the outcome"
                        )
                    return EXIT_OK
                result = CancellationOutcome.from_resolution(payments_service_id, res, summary)
        if settings.json:
            settings.emit(_outcome_dict(result))
        else:
            _say_outcome(settings, result)
        return _outcome_exit(result.outcome)

    _run(settings, go)


# --- demo --------------------------------------------------------------------------------------


@cli.command()
@click.option(
    "--processing-delay",
    type=float,
    callback=_delay,
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
    from ._demo import run_demo

    async def go() -> int:
        return await run_demo(settings.out, processing_delay=processing_delay)

    _run(settings, go)


# --- listen ------------------------------------------------------------------------------------


def _listen_auth(
    user: str | None,
    password: str | None,
    jwt_key: Path | None,
    issuer: str | None,
    audience: str | None,
) -> Authenticator:
    from .notifications import BasicAuth, BearerAuth, JwtBearerVerifier

    if (user is None) == (jwt_key is None):
        raise CliError(
            "give --user (with --password or PAYMENTS_NOTIFY_PASSWORD) for HTTP Basic, or "
            "--jwt-key with --issuer and --audience for OAuth 2.0 bearer JWTs (only one)"
        )
    if user is not None:
        if not password:
            raise CliError("--user needs --password or PAYMENTS_NOTIFY_PASSWORD")
        return BasicAuth(user, password)
    if not issuer or not audience:
        raise CliError("--jwt-key needs --issuer and --audience")
    assert jwt_key is not None
    return BearerAuth(JwtBearerVerifier(_read_json_file(jwt_key), issuer=issuer, audience=audience))


@cli.command()
@click.option("--port", type=click.IntRange(0, 65535), required=True, help="0: any free port.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--path", default=NOTIFY_PATH, show_default=True, help="Route of the receiver.")
@click.option("--user", help="HTTP Basic user name the service presents.")
@click.option(
    "--password",
    envvar="PAYMENTS_NOTIFY_PASSWORD",
    help="Its password (better: env PAYMENTS_NOTIFY_PASSWORD).",
)
@click.option(
    "--jwt-key",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="PEM public key (RSA or EC P-256) verifying bearer JWTs instead of Basic.",
)
@click.option("--issuer", help="Required iss of bearer JWTs.")
@click.option("--audience", help="Required aud of bearer JWTs.")
@click.option("--count", type=click.IntRange(min=1), help="Stop after this many notifications.")
@pass_settings
def listen(
    settings: Settings,
    port: int,
    host: str,
    path: str,
    user: str | None,
    password: str | None,
    jwt_key: Path | None,
    issuer: str | None,
    audience: str | None,
    count: int | None,
) -> None:
    """Receive status notifications; print each one and its confirmed status.

    Every notification is confirmed with a signed GET before it is printed as final;
    duplicates are marked. --json prints one object per line. Stop with Ctrl-C.
    """
    from .notifications import NotificationEvent, NotificationReceiver, ReceiverServer

    if not path.startswith("/"):
        raise click.BadParameter("must start with /", param_hint="--path")

    async def go() -> int:
        auth = _listen_auth(user, password, jwt_key, issuer, audience)
        done = asyncio.Event()
        seen = 0

        async def on_event(event: NotificationEvent) -> None:
            nonlocal seen
            n = event.notification
            record = {
                "payments_service_id": n.payments_service_id,
                "kind": n.kind.value,
                "payload": n.payload,
                "confirmed_status": event.status,
                "outcome": event.outcome.value,
                "final": event.final,
                "first": event.first,
            }
            if event.error is not None:
                record["error"] = str(event.error)
            if settings.json:
                settings.emit(record)
            else:
                note = "" if event.first or not event.final else " (already delivered)"
                what = f"{n.kind.value} {n.payments_service_id} ({n.payload})"
                if event.error is not None:
                    settings.say(Text(f"{what}: not confirmed: {event.error}", style="red"))
                else:
                    state = "final" if event.final else "not final"
                    settings.say(
                        f"{what}: confirmed {event.status} ({event.outcome.value}, {state}){note}"
                    )
            seen += 1
            if count is not None and seen >= count:
                done.set()

        async with _connected(settings) as client:  # credentials checked before listening
            receiver = NotificationReceiver(client, auth=auth, on_event=on_event)
            try:
                server = ReceiverServer(receiver, host=host, port=port, path=path)
                await server.start()
            except OSError as exc:
                raise CliError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
            try:
                async with receiver:
                    if settings.json:
                        settings.emit({"listening": server.url})
                    else:
                        settings.say(f"listening on {server.url} (Ctrl-C to stop)")
                    loop = asyncio.get_running_loop()
                    with contextlib.suppress(NotImplementedError):
                        loop.add_signal_handler(signal.SIGTERM, done.set)
                    await done.wait()
            finally:
                await server.stop()
        return EXIT_OK

    _run(settings, go)


# --- bulk-cancel -------------------------------------------------------------------------------


class _RateColumn(ProgressColumn):
    """Rows per second."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.0f}/s" if speed else "-/s", style="cyan")


class _RichProgress:
    """The live bar: submitted / accepted / rejected / failed, rate and ETA (on stderr)."""

    def __init__(self, console: Console) -> None:
        # Fits 80 columns: a narrow bar, percent, the four counters, rate and ETA.
        self._progress = Progress(
            BarColumn(bar_width=12),
            TaskProgressColumn(),
            TextColumn(
                "sub {task.fields[submitted]} [green]acc {task.fields[accepted]}[/] "
                "[yellow]rej {task.fields[rejected]}[/] [red]fail {task.fields[failed]}[/]"
            ),
            _RateColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self._task = self._progress.add_task(
            "bulk", total=None, submitted=0, accepted=0, rejected=0, failed=0
        )

        self._started = False

    @contextlib.contextmanager
    def running(self) -> Iterator[_RichProgress]:
        # Shown from the first update on: the input's own bar comes first (one live
        # display per console).
        try:
            yield self
        finally:
            if self._started:
                self._progress.stop()

    def update(self, counts: Any) -> None:
        if not self._started:
            self._started = True
            self._progress.start()
        self._progress.update(
            self._task,
            total=counts.total,
            completed=counts.done,
            submitted=counts.submitted,
            accepted=counts.accepted,
            rejected=counts.rejected,
            failed=counts.failed,
        )


class _InputBar:
    """The bar shown while the input is read: checked, then planned (MB of the file)."""

    _LABELS: Final = {"check": "checking", "plan": "planning"}

    def __init__(self, console: Console) -> None:
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(bar_width=24),
            TaskProgressColumn(),
            TextColumn("{task.fields[mb]}"),
            TimeRemainingColumn(),
            console=console,
            transient=True,
        )
        self._tasks: dict[str, Any] = {}
        self._started = False

    def __call__(self, phase: str, done: int, size: int) -> None:
        if not self._started:
            self._started = True
            self._progress.start()
        task = self._tasks.get(phase)
        if task is None:
            for other in self._tasks.values():
                self._progress.update(other, visible=False)
            task = self._tasks[phase] = self._progress.add_task(
                self._LABELS.get(phase, phase), total=max(size, 1), mb=""
            )
        mb = f"{done / 1e6:,.0f}/{size / 1e6:,.0f} MB"
        self._progress.update(task, completed=done, mb=mb)

    def close(self) -> None:
        if self._started:
            self._started = False
            self._progress.stop()


def _resume_command(settings: Settings, input_path: Path) -> str:
    if settings.argv is not None:
        # An address given with a password (--journal, --proxy) is shown without it.
        shown = [_shown_url(arg) if "://" in arg else arg for arg in settings.argv]
        command = shlex.join(["payments-async", *shown])
        if shown != settings.argv:
            command += "   (*** : the user and password you gave)"
        return command
    return f"payments-async ... bulk-cancel {shlex.quote(str(input_path))} ... (the same command)"


@cli.command("bulk-cancel")
@click.argument(
    "input_path", metavar="INPUT", type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1, max=1000),
    default=32,
    show_default=True,
    help="HTTP requests (submissions and outcome reads) in flight at once.",
)
@click.option(
    "--results",
    "results_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Results file, .csv or .jsonl [default: INPUT's stem + .results.csv/.jsonl, in the "
    "working directory].",
)
@click.option(
    "--journal",
    "journal_path",
    metavar="FILE|URL",
    help="Journal file, or a postgresql:// database (the scale extra) "
    "[default: beside the results, <results stem>.journal.sqlite].",
)
@click.option(
    "--queue",
    "queue_url",
    metavar="URL",
    help="Distribute the rows over workers: plan them in this postgresql:// database and "
    "queue one job per row (the scale extra; run `payments-async worker --queue URL`).",
)
@click.option("--no-wait", is_flag=True, help="With --queue: return once the rows are queued.")
@click.option(
    "--no-journal",
    is_flag=True,
    help="Keep no journal: faster, but a crashed run cannot be resumed safely.",
)
@click.option("--skip-invalid", is_flag=True, help="Send the valid rows; report invalid ones.")
@click.option(
    "--timeout",
    type=float,
    callback=_seconds,
    default=POLL_TIMEOUT,
    show_default=True,
    metavar="S",
    help="Seconds to wait for each row's outcome.",
)
@pass_settings
def bulk_cancel_cmd(
    settings: Settings,
    input_path: Path,
    concurrency: int,
    results_path: Path | None,
    journal_path: str | None,
    queue_url: str | None,
    no_wait: bool,
    no_journal: bool,
    skip_invalid: bool,
    timeout: float,
) -> None:
    """Cancel every payment listed in INPUT (CSV or JSONL, one payment per row).

    \b
    Columns: original_end_to_end_id, amount, creditor_agent_bic, creditor_iban,
    reason (DUPL TECH FRAD AC03 AM09 CUST), assigner_bic, assignee_bic; optional:
    currency (EUR), originator_name, assignment_id. See examples/README.md.

    Every row is checked first; any problem is listed with its line number and nothing
    is sent (exit 2), unless --skip-invalid. Each row's ids are fixed in the journal
    before anything is sent, so running the same command again after a crash or Ctrl-C
    resumes: final rows are left alone, rows in flight are resent with their recorded id
    (the service answers 200) and waited on.

    \b
    Exit: 0 all cancellations accepted; 1 every row done, some rejected (see
    return_request_needed in the results) or refused by the service (a rerun cannot
    change that: see the reason); 2 bad input; 3 some rows not completed (rerun the same
    command), or outcomes nobody can tell (codes nobody can classify, or a row sent before
    whose message can no longer be sent: check with the bank); 130 interrupted (rerun to
    resume).
    """
    from .bulk import (
        BulkInputError,
        JournalError,
        ResultsWriteError,
        bulk_cancel,
        connection_limit_for,
        default_results_path,
    )

    if queue_url is not None:
        if journal_path is not None or no_journal or results_path is not None:
            raise click.UsageError(
                "--queue keeps the journal in its database and writes no results file: "
                "drop --journal/--no-journal/--results (export with bulk-results)"
            )
        _bulk_cancel_queued(settings, input_path, queue_url, no_wait, skip_invalid)
    if no_wait:
        raise click.UsageError("--no-wait goes with --queue")
    journal_shown = _journal_shown(journal_path)
    show_bar = not settings.json and settings.err.is_terminal
    results = results_path if results_path is not None else default_results_path(input_path)

    async def go() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        installed: list[signal.Signals] = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, stop.set)
                installed.append(sig)
        bar = _RichProgress(settings.err) if show_bar else None
        input_bar = _InputBar(settings.err) if show_bar else None
        try:
            limit = connection_limit_for(concurrency)
            # The library's retry window, not the CLI's: a long unattended run rides out
            # a short outage; the service is checked within seconds once, below.
            limits = Limits(connections=limit)
            async with _client(settings, limits=limits, timeout=Timeout()) as client:
                if not settings.json:
                    settings.err.print(f"checking {input_path} ...")

                def planned(bulk: Any, resumed: bool) -> None:
                    if input_bar is not None:
                        input_bar.close()
                    if settings.json:
                        return
                    if resumed:
                        settings.err.print(
                            f"resuming the run recorded in its journal ({bulk.total} rows)"
                        )
                    else:
                        settings.err.print(f"{bulk.valid} rows planned")

                with bar.running() if bar is not None else contextlib.nullcontext():
                    report = await bulk_cancel(
                        client,
                        input_path,
                        results_path=results_path,
                        journal_path=journal_path,
                        use_journal=not no_journal,
                        skip_invalid=skip_invalid,
                        concurrency=concurrency,
                        timeout=timeout,
                        progress=bar,
                        stop=stop,
                        on_plan=planned,
                        # The service is checked once the input is: bad input is exit 2
                        # whatever the service's state, and no journal is made for a run
                        # that cannot start.
                        on_checked=lambda _: _checked_then_token(client, results),
                        input_progress=input_bar,
                    )
        except BulkInputError as exc:
            raise _input_refused(settings, input_path, exc) from None
        except UnicodeDecodeError as exc:
            raise _input_not_utf8(input_path, exc) from None
        except JournalError as exc:
            raise CliError(str(exc), EXIT_USAGE) from None
        except ResultsWriteError as exc:  # checked before sending: a disk full at the end, say
            kept = (
                "the outcomes were not kept (--no-journal)"
                if no_journal
                else "the journal keeps every outcome: run the same command again to write "
                "the file (nothing is sent again)"
            )
            raise CliError(
                f"cannot write {str(results)!r}: {exc.strerror or exc}; {kept}", EXIT_SERVICE
            ) from None
        finally:
            if input_bar is not None:
                input_bar.close()
            for sig in installed:
                loop.remove_signal_handler(sig)
        halted = await _halt_reason(settings, report.halted)
        return _bulk_summary(settings, report, input_path, halted, journal_shown)

    _run(settings, go)


def _journal_shown(journal: str | None) -> str | None:
    """How messages name a ``--journal`` database (its password left out); None for a file.

    Raises:
        click.BadParameter: an address of another scheme (it would be taken for a file
            name, and shown with its password).
    """
    if journal is None or "://" not in journal:
        return None
    from .bulk._stores import is_postgres_url

    if not is_postgres_url(journal):
        scheme = journal.partition("://")[0][:20]
        raise click.BadParameter(
            f"{scheme}:// is not a journal: give a file, or a postgresql:// database",
            param_hint="'--journal'",
        )
    from .bulk import JournalError
    from .bulk._stores._postgres import redact

    try:
        return f"PostgreSQL {redact(journal)}"
    except (ImportError, JournalError):  # no scale extra: opening the journal says so
        return "PostgreSQL"


def _input_refused(settings: Settings, input_path: Path, exc: Any) -> CliError:
    """The error of a bulk input with problems (a ``BulkInputError``): each one on stderr,
    and all of them in the ``--json`` error object."""
    if not settings.json:
        for err in exc.errors:
            settings.err.print(Text(f"{input_path}: {err}", style="red"))
    problems = [{"line": e.line, "column": e.column, "message": e.message} for e in exc.errors]
    return CliError(str(exc), EXIT_USAGE, details={"problems": problems})


def _input_not_utf8(input_path: Path, exc: UnicodeDecodeError) -> CliError:
    line = bytes(exc.object[: exc.start]).count(b"\n") + 1
    return CliError(f"{str(input_path)!r}, line {line}, {_not_utf8(exc)}")


async def _checked_then_token(client: PaymentsClient, results: Path) -> None:
    """What ``bulk-cancel`` checks once the input is good, before anything is sent."""
    _check_results_path(results)
    await _token_lifetime(client)


def _check_results_path(path: Path, option: str = "--results") -> None:
    """Refuse a results file the run could not write at its end, after sending every row.

    The results are written to a new file in the same folder, renamed over ``path``: the
    folder must take a new file, and ``path`` must not be a device or a pipe (the rename
    would replace it). ``option`` names the option that gave ``path``.

    Raises:
        CliError: ``path`` names no file, is not a regular file, or its folder cannot be
            written.
    """
    what = f"results file {str(path)!r}"
    if not path.name:
        raise CliError(f"{option} {str(path)!r} names no file")
    if path.exists() and not path.is_file():
        raise CliError(f"{what} is not a regular file: name a file for the results")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"):
            pass
    except (FileExistsError, NotADirectoryError):
        raise CliError(f"cannot write {what}: a file is where its folder should be") from None
    except OSError as exc:
        raise CliError(f"cannot write {what}: {exc.strerror}") from None


def _bulk_exit_code(report: Any) -> int:
    t = report.totals
    if report.interrupted:
        return EXIT_INTERRUPTED
    if any(t.get(k, 0) for k in ("not_sent", "in_flight", "pending", "unknown")):
        return EXIT_SERVICE
    if t.get("rejected", 0) or t.get("refused", 0):
        return EXIT_BUSINESS
    return EXIT_OK


_SUMMARY_ROWS: Final = (
    ("accepted", "accepted"),
    ("rejected", "rejected (ask for a pacs.004 return)"),
    ("unknown", "outcome unknown (check with the bank)"),
    ("refused", "refused by the service (see the reason)"),
    ("not_sent", "not sent (rerun to send)"),
    ("in_flight", "sent, no answer (rerun to resend with the same id)"),
    ("pending", "acknowledged, outcome not known yet (rerun to wait)"),
    ("invalid", "invalid input, skipped"),
)


def _bulk_summary(
    settings: Settings,
    report: Any,
    input_path: Path,
    halted: str | None = None,
    database: str | None = None,
) -> int:
    """Print a finished (or interrupted) run; ``database``: a PostgreSQL journal, as shown."""
    journal = str(report.journal_path) if report.journal_path is not None else database
    t = report.totals
    run = report.counts
    rate = run.done / report.elapsed if report.elapsed > 0 else 0.0
    code = _bulk_exit_code(report)
    unfinished = t.get("not_sent", 0) + t.get("in_flight", 0) + t.get("pending", 0)
    if settings.json:
        settings.emit(
            {
                "rows": report.row_count,
                **{name: t.get(name, 0) for name, _ in _SUMMARY_ROWS},
                "this_run": {
                    "sent": run.sent,
                    "submitted": run.submitted,
                    "replayed": run.replayed,
                    "finished": run.done,
                },
                "already_final": report.already_final,
                "resumed": report.resumed,
                "interrupted": report.interrupted,
                "halted": halted,
                "elapsed_s": round(report.elapsed, 3),
                "rows_per_s": round(rate, 1),
                "results": str(report.results_path),
                "journal": journal,
                "exit_code": code,
            }
        )
        return code
    table = Table(title="bulk cancellation", show_edge=False)
    table.add_column("outcome")
    table.add_column("rows", justify="right")
    for name, label in _SUMMARY_ROWS:
        if t.get(name, 0) or name in ("accepted", "rejected"):
            table.add_row(label, str(t.get(name, 0)))
    settings.out.print(table)
    unanswered = run.sent - run.submitted - run.refused
    settings.say(
        f"this run: {run.sent} request(s) sent: {run.submitted} acknowledged "
        f"({run.replayed} already known to the service), {run.refused} refused, "
        f"{max(unanswered, 0)} without an answer; {run.done} rows finished in "
        f"{report.elapsed:.1f} s ({rate:,.0f} rows/s); {report.already_final} were final "
        "before it"
    )
    settings.say(f"results: {report.results_path}")
    if journal is not None:
        settings.say(f"journal: {journal}")
    say = settings.err.print
    if halted is not None:
        say(f"stopped sending: {halted}")
    if t.get("refused", 0):
        say(
            f"{t['refused']} row(s) refused by the service: the results give each reason; "
            "running the command again will not change that"
        )
    if t.get("unknown", 0):
        say(
            f"{t['unknown']} row(s) ended with an outcome nobody can tell (the results give "
            "each reason): check them with the bank, or read one that has an ID again later "
            "with: payments-async outcome ID"
        )
    if unfinished or report.interrupted:
        verb = "interrupted" if report.interrupted else f"{unfinished} row(s) not completed"
        if journal is not None:
            say(f"{verb}; to resume, run the same command again:")
            say(Text(f"  {_resume_command(settings, input_path)}"))
        else:
            say(f"{verb}; without a journal a rerun starts over (see the results)")
    return code


async def _halt_reason(settings: Settings, exc: PaymentsError | None) -> str | None:
    if isinstance(exc, TransportError):
        return await _describe_unreachable(settings, exc)
    return None if exc is None else str(exc)


# --- distributed bulk runs (the scale extra) ---------------------------------------------------


def _queue_counts(st: Any) -> Any:
    """The progress bar's counters from a :class:`QueueStatus`."""
    from .bulk import BulkCounts

    oc = st.outcomes
    return BulkCounts(
        total=st.rows - st.states.get("invalid", 0),
        submitted=st.states.get("acknowledged", 0) + st.states.get("final", 0),
        accepted=oc.get("accepted", 0),
        rejected=oc.get("rejected", 0),
        unknown=oc.get("unknown", 0),
        failed=oc.get("failed", 0),
    )


def _queue_status_dict(st: Any) -> dict[str, Any]:
    return {
        "run_id": st.run_id,
        "input": st.input_name,
        "rows": st.rows,
        "states": dict(sorted(st.states.items())),
        "outcomes": dict(sorted(st.outcomes.items())),
        "queued": st.queued,
        "errors": st.errors,
        "done": st.done,
    }


def _queue_exit_code(st: Any) -> int:
    not_final = st.rows - st.done
    if not_final or st.outcomes.get("failed", 0):
        return EXIT_SERVICE
    if st.outcomes.get("rejected", 0) or st.outcomes.get("unknown", 0):
        return EXIT_BUSINESS
    return EXIT_OK


def _bulk_cancel_queued(
    settings: Settings, input_path: Path, queue_url: str, no_wait: bool, skip_invalid: bool
) -> NoReturn:
    """``bulk-cancel INPUT --queue URL``: check, plan in PostgreSQL, queue, then watch."""
    from .bulk import BulkInputError, JournalError, new_run_id
    from .bulk._input import check_input
    from .bulk._queue import enqueue_run, queue_status
    from .bulk._runner import plan_input

    show_bar = not settings.json and settings.err.is_terminal
    input_bar = _InputBar(settings.err) if show_bar else None

    def told(phase: str) -> Callable[[int, int], None] | None:
        if input_bar is None:
            return None
        return lambda done, size: input_bar(phase, done, size)

    async def go() -> int:
        if not settings.json:
            settings.err.print(f"checking {input_path} ...")
        try:
            bulk = await asyncio.to_thread(check_input, input_path, progress=told("check"))
        except UnicodeDecodeError as exc:
            raise _input_not_utf8(input_path, exc) from None
        except OSError as exc:
            raise CliError(f"cannot read {str(input_path)!r}: {exc}") from None
        finally:
            if input_bar is not None:
                input_bar.close()
        if bulk.errors and (not skip_invalid or bulk.fatal or not bulk.valid):
            raise _input_refused(settings, input_path, BulkInputError(bulk.errors))
        try:
            report = await enqueue_run(
                queue_url,
                input_sha256=bulk.sha256,
                input_name=input_path.name,
                new_run_id=new_run_id(),
                plan=lambda run_id: plan_input(bulk, run_id, progress=told("plan")),
            )
        except JournalError as exc:
            raise CliError(str(exc), EXIT_USAGE) from None
        finally:
            if input_bar is not None:
                input_bar.close()
        if not settings.json:
            what = "planned" if report.planned else "already planned (same input)"
            settings.err.print(
                f"run {report.run_id}: {report.rows} rows {what}; {report.enqueued} jobs queued"
            )
        if no_wait:
            if settings.json:
                settings.emit(
                    {
                        "run_id": report.run_id,
                        "rows": report.rows,
                        "planned": report.planned,
                        "enqueued": report.enqueued,
                    }
                )
            return EXIT_OK
        bar = (
            _RichProgress(settings.err) if not settings.json and settings.err.is_terminal else None
        )
        with bar.running() if bar is not None else contextlib.nullcontext():
            while True:
                try:
                    st = await asyncio.to_thread(queue_status, queue_url, report.run_id)
                except JournalError as exc:
                    # The rows are queued: the workers go on without this watcher.
                    if not settings.json:
                        settings.err.print(
                            "the run is queued and the workers go on; watch it again with: "
                            f"payments-async bulk-status --queue URL --run {report.run_id}"
                        )
                    raise CliError(str(exc), EXIT_SERVICE) from None
                if bar is not None:
                    bar.update(_queue_counts(st))
                if st.settled:
                    break
                await asyncio.sleep(BULK_STATUS_INTERVAL)
        return _queue_summary(settings, st)

    _run(settings, go)


def _queue_summary(settings: Settings, st: Any) -> int:
    code = _queue_exit_code(st)
    if settings.json:
        settings.emit({**_queue_status_dict(st), "exit_code": code})
        return code
    table = Table(title=f"bulk run {st.run_id} ({st.input_name})", show_edge=False)
    table.add_column("rows")
    table.add_column("count", justify="right")
    for name, n in sorted(st.outcomes.items()):
        table.add_row(name, str(n))
    for name in ("planned", "sent", "acknowledged", "invalid"):
        if st.states.get(name, 0):
            label = name if name == "invalid" else f"{name} (not final)"
            table.add_row(label, str(st.states[name]))
    table.add_row("queued or running", str(st.queued))
    settings.out.print(table)
    if code == EXIT_SERVICE and st.settled:
        settings.err.print(
            "some rows are not final and no job is left for them: run the same bulk-cancel "
            "command again to queue them"
        )
    return code


_queue_option = click.option(
    "--queue", "queue_url", required=True, metavar="URL", help="The postgresql:// queue."
)
_run_option = click.option(
    "--run", "run_id", metavar="RUN", help="The run id [default: the latest run]."
)


@cli.command("worker")
@_queue_option
@click.option(
    "--concurrency",
    type=click.IntRange(min=1, max=1000),
    default=BULK_WORKER_CONCURRENCY,
    show_default=True,
    help="HTTP requests (submissions and outcome reads) this process has in flight.",
)
@click.option(
    "--rows",
    type=click.IntRange(min=1, max=100_000),
    default=BULK_WORKER_ROWS,
    show_default=True,
    help="Rows this process works on at once (most of them waiting for their outcome).",
)
@click.option(
    "--timeout",
    type=float,
    callback=_seconds,
    default=POLL_TIMEOUT,
    show_default=True,
    metavar="S",
    help="Seconds to wait for each row's outcome.",
)
@click.option(
    "--heartbeat",
    type=click.FloatRange(min=0.1),
    callback=_seconds,
    default=BULK_HEARTBEAT_INTERVAL,
    show_default=True,
    metavar="S",
    help="Seconds between this worker's heartbeats.",
)
@click.option(
    "--stalled-after",
    type=click.FloatRange(min=0.5),
    callback=_seconds,
    default=BULK_STALLED_AFTER,
    show_default=True,
    metavar="S",
    help="A worker silent this long is taken for dead and its rows are run again.",
)
@click.option(
    "--once",
    is_flag=True,
    help="Stop when no job is waiting (benchmarks, tests) instead of serving the queue.",
)
@pass_settings
def worker_cmd(
    settings: Settings,
    queue_url: str,
    concurrency: int,
    rows: int,
    timeout: float,
    heartbeat: float,
    stalled_after: float,
    once: bool,
) -> None:
    """Run bulk-cancel rows queued with `bulk-cancel INPUT --queue URL` (the scale extra).

    Start any number of workers, on any hosts, against the same database. A worker that
    dies (even SIGKILL) has its rows put back in the queue by the others once its
    heartbeat stops; they resend each row with its recorded ids, so nothing is stored
    twice. Stop a worker with Ctrl-C or SIGTERM: its rows get a few seconds to finish,
    then go back to the queue.
    """
    from .bulk import JournalError
    from .bulk._queue import run_worker

    if heartbeat >= stalled_after:
        raise click.UsageError("--heartbeat must be shorter than --stalled-after")

    async def go() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        installed: list[signal.Signals] = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, stop.set)
                installed.append(sig)

        def ready() -> None:
            if not settings.json:
                settings.err.print(f"worker ready ({rows} rows, {concurrency} requests at once)")

        work = asyncio.ensure_future(
            run_worker(
                queue_url,
                lambda limit: _client(settings, limits=Limits(connections=limit)),
                concurrency=concurrency,
                rows=rows,
                timeout=timeout,
                heartbeat_interval=heartbeat,
                stalled_after=stalled_after,
                stalled_check_interval=min(BULK_STALLED_CHECK_INTERVAL, stalled_after / 2),
                wait=not once,
                ready=ready,
            )
        )
        stopper = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({work, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)
            stopper.cancel()
            if not work.done():
                work.cancel()
            try:
                await work
            except asyncio.CancelledError:
                pass
            except JournalError as exc:
                raise CliError(str(exc), EXIT_USAGE) from None
        return EXIT_INTERRUPTED if stop.is_set() else EXIT_OK

    _run(settings, go)


@cli.command("bulk-status")
@_queue_option
@_run_option
@pass_settings
def bulk_status_cmd(settings: Settings, queue_url: str, run_id: str | None) -> None:
    """Show the progress of a distributed bulk run across all its workers.

    Exit: 0 all rows accepted; 1 all final, some rejected; 3 rows not final yet.
    """
    from .bulk import JournalError
    from .bulk._queue import queue_status

    async def go() -> int:
        try:
            st = await asyncio.to_thread(queue_status, queue_url, run_id)
        except JournalError as exc:
            raise CliError(str(exc), EXIT_USAGE) from None
        return _queue_summary(settings, st)

    _run(settings, go)


@cli.command("bulk-results")
@_queue_option
@_run_option
@click.option(
    "--output",
    "output",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Results file, .csv or .jsonl (the columns of bulk-cancel's results).",
)
@pass_settings
def bulk_results_cmd(settings: Settings, queue_url: str, run_id: str | None, output: Path) -> None:
    """Export the results of a distributed bulk run, one line per input row."""
    from .bulk import JournalError
    from .bulk._queue import write_queue_results

    async def go() -> int:
        _check_results_path(output, "--output")
        try:
            run, path = await asyncio.to_thread(write_queue_results, queue_url, output, run_id)
        except JournalError as exc:
            raise CliError(str(exc), EXIT_USAGE) from None
        except OSError as exc:
            raise CliError(f"cannot write {str(output)!r}: {exc.strerror}") from None
        if settings.json:
            settings.emit({"run_id": run, "results": str(path)})
        else:
            settings.say(f"results of run {run}: {path}")
        return EXIT_OK

    _run(settings, go)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``payments-async`` console script and ``python -m payments_async``.

    Args:
        argv: the arguments without the program name; ``sys.argv[1:]`` if None.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    cli.main(args=args, prog_name="payments-async", obj=args)
