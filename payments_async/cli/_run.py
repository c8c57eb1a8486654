"""Running a command: its client, its event loop and signals, and errors as one line.

Every command's coroutine runs through `run_command`, which maps what it raises to
one line (a JSON object with ``--json``) and an exit code (see `._exit`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import signal
import socket
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Final, NoReturn

from rich.text import Text
from yarl import URL

from payments_async import (
    TOKEN_PATH,
    Hooks,
    Limits,
    PaymentsClient,
    PaymentsError,
    Timeout,
    TransportError,
    redact_url,
)
from payments_async.loop import run as run_loop

from ._context import Settings
from ._defaults import CLI_PROBE_TIMEOUT, CLI_RETRY_TIMEOUT, ENV_BASE_URL, SANDBOX_URL
from ._exit import EXIT_INTERRUPTED, EXIT_SERVICE, CliError, exit_code_for
from ._files import close_signer, credentials, read_file, service_profile
from ._watch import ConnectWatch

__all__ = [
    "connected",
    "describe_unreachable",
    "fail",
    "make_client",
    "probe_service",
    "run_command",
    "seconds_left",
    "set_on_signals",
    "token_lifetime",
    "token_or_outage",
    "why_unreachable",
]

logger = logging.getLogger("payments_async.cli")


# --- the service and its client ---------------------------------------------------------------


def _base_url(settings: Settings) -> str:
    url = settings.base_url or (SANDBOX_URL if settings.sandbox else None)
    if url is None:
        raise CliError(f"no service address: pass --base-url URL or set {ENV_BASE_URL}")
    shown = redact_url(url)
    try:
        parsed = URL(url)
        parsed.port  # noqa: B018  (yarl checks some ports only when asked)
    except ValueError as exc:
        raise CliError(f"--base-url {shown!r} is not a valid URL: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise CliError(f"--base-url {shown!r} is not a valid URL: give http(s)://host[:port]")
    return url


def make_client(
    settings: Settings,
    *,
    limits: Limits | None = None,
    timeout: Timeout | None = None,
    hooks: Hooks | None = None,
) -> PaymentsClient:
    """The client, failing fast: a person is waiting (``CLI_RETRY_TIMEOUT`` per call,
    unless ``timeout`` says otherwise)."""
    signed_in = credentials(settings)
    base_url = _base_url(settings)
    try:
        return PaymentsClient(
            signed_in,
            base_url=base_url,
            proxy=settings.proxy or None,
            trust_env=settings.trust_env,
            ssl_context=_trusting(settings.ca_file),
            timeout=timeout or Timeout(total=CLI_RETRY_TIMEOUT),
            limits=limits,
            hooks=hooks,
            profile=service_profile(settings),
        )
    except ValueError as exc:  # a URL only the transport's parser objects to
        raise CliError(f"--base-url {redact_url(base_url)!r} is not a valid URL: {exc}") from None


def _trusting(ca_file: Path | None) -> ssl.SSLContext | None:
    """A TLS context that trusts the CA certificates of ``--ca-file`` (None: the system's)."""
    if ca_file is None:
        return None
    pem = read_file(ca_file, "--ca-file")
    try:
        return ssl.create_default_context(cadata=pem.decode("ascii"))
    except (UnicodeDecodeError, ssl.SSLError, ValueError):
        raise CliError(
            f"--ca-file {str(ca_file)!r} holds no usable PEM certificate "
            "(-----BEGIN CERTIFICATE-----)"
        ) from None


@contextlib.asynccontextmanager
async def connected(
    settings: Settings, *, deadline: float | None = None
) -> AsyncIterator[PaymentsClient]:
    """An open client that already holds an access token.

    A service that cannot be reached, or credentials it refuses, are found here within
    ``CLI_RETRY_TIMEOUT`` seconds (and before ``deadline``, a ``time.monotonic()`` time:
    a command's ``--timeout`` bounds its token too), before anything is sent or any file
    is written (a waiter would otherwise poll an unreachable service until its own
    deadline). Within the block too: once every request has failed to connect for
    ``CLI_RETRY_TIMEOUT`` seconds (a service that died during a wait), the block stops
    with one line naming it, and exit 3.
    """
    watch = ConnectWatch()
    async with make_client(settings, hooks=watch.hooks) as client:
        within = CLI_RETRY_TIMEOUT
        if deadline is not None:
            within = min(within, deadline - time.monotonic())
        await token_or_outage(settings, client, watch, within)
        async with watch.guard(functools.partial(why_unreachable, settings)):
            yield client


def seconds_left(deadline: float | None) -> float | None:
    """What is left of a command's ``--timeout`` (None: the command has none).

    Never 0: a call given what is left when nothing is left raises its own timeout
    error, having sent nothing.
    """
    if deadline is None:
        return None
    return max(deadline - time.monotonic(), 1e-9)


async def token_or_outage(
    settings: Settings,
    client: PaymentsClient,
    watch: ConnectWatch,
    within: float = CLI_RETRY_TIMEOUT,
) -> None:
    """``token_lifetime``, with a service down named as ``watch`` names it during a wait.

    Raises:
        CliError: every token attempt failed to connect ("connection refused to URL since
            12:03:04", exit 3): the operator reads the same line whichever request met
            the outage first.
        PaymentsError: any other failure to obtain the token, as ``token_lifetime``.
    """
    try:
        await token_lifetime(client, within)
    except TransportError as exc:
        if isinstance(exc.__cause__, ssl.SSLError):
            raise  # a certificate not trusted is no outage: said with its remedy
        line = await watch.outage(functools.partial(why_unreachable, settings))
        if line is None:
            raise
        raise CliError(line, EXIT_SERVICE) from None


async def token_lifetime(client: PaymentsClient, within: float = CLI_RETRY_TIMEOUT) -> float:
    """Obtain the access token within ``within`` seconds (the library's own limit is
    longer)."""
    try:
        async with asyncio.timeout(max(within, 0.0)):
            return await client.access_token_lifetime()
    except TimeoutError:
        raise TransportError(
            f"no access token within {max(within, 0.0):.2g} s",
            request_sent=False,
            method="POST",
            path=TOKEN_PATH,
        ) from None


# --- running a command: one-line errors and exit codes ----------------------------------------


def fail(
    settings: Settings, message: str, code: int, details: Mapping[str, object] | None = None
) -> NoReturn:
    """Print one error line (a JSON object with ``--json``) and exit with ``code``."""
    message = " ".join(message.split())  # one line, whatever the message held
    if settings.json:
        settings.emit({"error": message, "exit_code": code, **(details or {})})
    else:
        settings.err.print(Text(f"error: {message}", style="red"))
    raise SystemExit(code)


def run_command(settings: Settings, coro_fn: Callable[[], Awaitable[int]]) -> NoReturn:
    """Run a command's coroutine; map every error to one line and an exit code."""
    try:
        _run(settings, coro_fn)
    finally:
        signed_in, settings.credentials = settings.credentials, None
        if signed_in is not None:
            try:
                close_signer(signed_in.key_signer)
            except Exception:  # the command's own outcome is what to report
                logger.warning("closing the signer failed", exc_info=settings.verbose > 0)


def _run(settings: Settings, coro_fn: Callable[[], Awaitable[int]]) -> NoReturn:
    try:
        code = run_loop(_call(coro_fn), kind=settings.loop)
    except (KeyboardInterrupt, _Interrupted, asyncio.CancelledError):
        # CancelledError: a signal that came as the command returned (nothing awaited after).
        _interrupted(settings)
    except (CliError, PaymentsError) as exc:
        if settings.verbose:
            settings.err.print_exception()
        message = str(exc)
        if isinstance(exc, TransportError):
            message = asyncio.run(describe_unreachable(settings, exc))
        details = exc.details if isinstance(exc, CliError) else None
        fail(settings, message, exit_code_for(exc), details)
    raise SystemExit(code)


# --- signals: one policy for every command ----------------------------------------------------

_STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)


class _Interrupted(Exception):
    """The command's task was cancelled by SIGINT or SIGTERM."""


class _SignalPolicy:
    """What SIGINT and SIGTERM do while a command runs.

    A command that stops cleanly on request (a bulk run, a worker) registers its stop
    event with `set_on_signals`: the first signal sets it. Otherwise, or on a further
    signal, the command's task is cancelled: its ``finally`` blocks and ``async with``
    exits run (clients close, servers stop), then it ends with ``EXIT_INTERRUPTED``.
    """

    def __init__(self, task: asyncio.Task[int]) -> None:
        self.task = task
        self.stops: list[asyncio.Event] = []
        self.cancelled = False

    def __call__(self) -> None:
        waiting = [stop for stop in self.stops if not stop.is_set()]
        for stop in waiting:
            stop.set()
        if not waiting:
            self.cancelled = True
            self.task.cancel()


_POLICY: contextvars.ContextVar[_SignalPolicy | None] = contextvars.ContextVar(
    "payments_async_cli_signals", default=None
)


async def _call(coro_fn: Callable[[], Awaitable[int]]) -> int:
    """Run the command under the signal policy: SIGINT and SIGTERM end it with 130."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    policy = _SignalPolicy(task)
    installed: list[signal.Signals] = []
    for sig in _STOP_SIGNALS:
        # Not where the loop cannot handle signals (not the main thread, Windows): there
        # Ctrl-C raises KeyboardInterrupt as usual.
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, policy)
            installed.append(sig)
    token = _POLICY.set(policy)
    try:
        return await coro_fn()
    except (Exception, asyncio.CancelledError):
        # Whatever the cancellation became on its way out (a client's error, say), the
        # command was interrupted.
        if policy.cancelled:
            task.uncancel()
            raise _Interrupted from None
        raise
    finally:
        _POLICY.reset(token)
        for sig in installed:
            loop.remove_signal_handler(sig)


def _interrupted(settings: Settings) -> NoReturn:
    """End an interrupted command: say so, with what it created (to look it up later)."""
    created = settings.created
    message = "interrupted"
    if created:
        listed = "; ".join(
            f"{kind} {ident} (see it with: payments-async {_LOOK_UP.get(kind, 'status')} {ident})"
            for kind, ident in created.items()
        )
        message = f"interrupted after creating {listed}"
    fail(settings, message, EXIT_INTERRUPTED, {"created": created} if created else None)


_LOOK_UP: Final = {"payment": "status", "cancellation": "outcome"}
"""The command that reads what a command created, by kind."""


@contextlib.contextmanager
def set_on_signals(event: asyncio.Event) -> Iterator[None]:
    """Set ``event`` on the first SIGINT or SIGTERM while in the block (a clean stop).

    A further signal cancels the command (see `run_command`). Outside `run_command`, or
    where the loop cannot handle signals, nothing is installed and a signal acts as it
    would without the block.
    """
    policy = _POLICY.get()
    if policy is None:
        yield
        return
    policy.stops.append(event)
    try:
        yield
    finally:
        policy.stops.remove(event)


# --- why the service cannot be reached --------------------------------------------------------


async def describe_unreachable(settings: Settings, exc: PaymentsError) -> str:
    """``exc`` as a message, naming why the service could not be reached when a fresh TCP
    probe can tell."""
    if isinstance(exc, TransportError) and isinstance(exc.__cause__, ssl.SSLError):
        # The library's advice (an ssl_context) is for programs; the command line's is this.
        said = str(exc).replace(_LIBRARY_TLS_ADVICE, "")
        return (
            f"{said}; if the service's certificate comes from a private CA, trust it with "
            "--ca-file FILE (PEM), or add it to the system's with SSL_CERT_FILE=FILE"
        )
    why = await why_unreachable(settings, exc)
    return f"{why} ({exc})" if why else str(exc)


async def why_unreachable(settings: Settings, exc: PaymentsError) -> str | None:
    """Why the service could not be reached, when a fresh TCP probe can tell; else None."""
    # No probe when something answered (a proxy's 407 has a status) or when requests go
    # through a proxy: a direct connection would bypass it, and say nothing about it.
    if (
        not isinstance(exc, TransportError)
        or exc.request_sent
        or exc.status is not None
        or settings.proxy
        or settings.trust_env
    ):
        return None
    try:
        url = URL(_base_url(settings))
    except CliError:
        return None
    return await probe_service(url)


_LIBRARY_TLS_ADVICE: Final = (
    " (pass an ssl_context that trusts the service's certificate if it uses a private CA)"
)


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
