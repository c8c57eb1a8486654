"""``SyncPaymentsClient``: the client's operations as blocking calls, for synchronous code.

```python
from payments_async.sync import SyncPaymentsClient

with SyncPaymentsClient(credentials, base_url=url) as client:
    submission = client.submit_credit_transfer(transfer)
    status = client.wait_for_payment_status(submission.payments_service_id)
```

Each ``SyncPaymentsClient`` runs one ``PaymentsClient`` on an event loop of its own, on a
background thread; every method hands the async client's method of the same name to that
loop and blocks until it is done. There is one implementation of the operations (one
session, one token cache, one rate limiter, the same retries, idempotency and errors),
whichever way it is called.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import ssl
import threading
import weakref
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Concatenate, Final, ParamSpec, Self, TypeVar

import aiohttp

from ._client import PaymentsClient
from ._config import Limits, Timeout
from ._constants import CLOCK_SKEW_THRESHOLD
from ._credentials import Credentials
from ._errors import ConfigurationError, OutcomeUnknownError
from ._instrument import Hooks
from ._models import Answered
from ._polling import PollPolicy
from ._portal import LoopStopped, LoopThread
from ._profile import ServiceProfile
from ._rate import RateLimit, RateLimiter
from ._retry import RetryPolicy
from ._telemetry import Telemetry

__all__ = ["SyncPaymentsClient", "SyncWithResponse"]

P = ParamSpec("P")
R = TypeVar("R")

_BODY_METHODS: Final = frozenset({"POST", "PUT", "PATCH"})


@dataclass(frozen=True, slots=True)
class _Engine:
    """A running ``PaymentsClient`` and the loop thread it runs on."""

    thread: LoopThread
    client: PaymentsClient

    def close(self) -> None:
        """Close the client on its loop, then stop the loop and join its thread."""
        if threading.current_thread() is self.thread.thread:  # dropped on its own loop
            threading.Thread(target=self.close, name="payments-async-sync-close").start()
            return
        try:
            self.thread.run(self.client.aclose())
        except LoopStopped:
            pass
        finally:
            self.thread.stop()


# The clients alive in this process, told when it forks (see ``_after_fork_in_child``).
_CLIENTS: weakref.WeakSet[SyncPaymentsClient] = weakref.WeakSet()
# A forked child keeps its parent's engines referenced, never touched: collecting them would
# close sockets and a loop that are the parent's.
_PARENTS_ENGINES: list[_Engine] = []


def _after_fork_in_child() -> None:
    for client in list(_CLIENTS):
        client._forget_engine()


os.register_at_fork(after_in_child=_after_fork_in_child)  # a no-op until a client exists


def _refuse_inside_a_loop(name: str) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise ConfigurationError(
        f"SyncPaymentsClient.{name}() was called inside a running event loop (from async "
        f"code), where it would block the loop: use PaymentsClient there "
        f"(await client.{name}(...))"
    )


def _lost_submission(
    name: str, method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> OutcomeUnknownError | None:
    """What a call with a body cut short while it ran may have left: an unknown outcome."""
    try:
        bound = inspect.signature(method).bind(None, *args, **kwargs)
    except TypeError:
        return None
    message_id: str | None = None
    for value in bound.arguments.values():
        if isinstance(getattr(value, "message_id", None), str):
            message_id = value.message_id
    http_method = bound.arguments.get("method")
    if message_id is None and isinstance(http_method, str):
        if http_method.upper() not in _BODY_METHODS:
            return None
        message_id = bound.arguments.get("idempotency_id") or ""
    if message_id is None:
        return None
    return OutcomeUnknownError(
        f"{name} was cut short before its answer: the request may have been stored; "
        "resubmit the same message to learn its outcome",
        message_id=message_id,
    )


def _face(call: Callable[..., Any], method: Callable[..., Any], owner: str) -> None:
    """Give ``call`` the name, docstring and signature of the async ``method``."""
    functools.update_wrapper(call, method)
    call.__qualname__ = f"{owner}.{method.__name__}"
    call.__module__ = __name__


def _blocking(
    method: Callable[Concatenate[PaymentsClient, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[SyncPaymentsClient, P], R]:
    """The blocking twin of a ``PaymentsClient`` method: same parameters, result, errors."""
    name = method.__name__

    def call(self: SyncPaymentsClient, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._call(
            name, method, lambda client: method(client, *args, **kwargs), args, kwargs
        )

    _face(call, method, "SyncPaymentsClient")
    return call


def _answered(
    method: Callable[Concatenate[PaymentsClient, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[SyncWithResponse, P], Answered[R]]:
    """The blocking twin of ``client.with_response``'s method named like ``method``."""
    name = method.__name__

    def call(self: SyncWithResponse, /, *args: P.args, **kwargs: P.kwargs) -> Answered[R]:
        def start(client: PaymentsClient) -> Coroutine[Any, Any, Answered[R]]:
            twin: Callable[P, Coroutine[Any, Any, Answered[R]]]
            twin = getattr(client.with_response, name)
            return twin(*args, **kwargs)

        return self._client._call(name, method, start, args, kwargs)

    functools.update_wrapper(call, method)
    call.__doc__ = f"``SyncPaymentsClient.{name}`` and its answer."
    call.__qualname__ = f"SyncWithResponse.{name}"
    call.__module__ = __name__
    return call


class SyncPaymentsClient:
    """Blocking client of the service: ``PaymentsClient``'s operations for synchronous code.

    Takes what ``PaymentsClient`` takes (but no ``session``: it owns one, on its own
    loop) and offers the same operations with the same names, arguments, results and
    errors, as blocking methods. Use it as a context manager, or call ``close()``:

    ```python
    with SyncPaymentsClient(credentials, base_url=url) as client:
        submission = client.submit_credit_transfer(transfer)
    ```

    What a caller can rely on:

    - **One implementation.** The client runs one ``PaymentsClient`` on an event loop on
      a background thread and hands it each call. Retries, idempotent resubmission, the
      token cache, rate limits, hooks and telemetry are the async client's; hooks are
      called on that thread.
    - **Thread-safe.** Any number of threads may share one client: their calls run
      concurrently on its loop, with one session, one access token and one rate limiter.
    - **Deadlines.** A call's ``timeout`` is counted on the loop, as the async client
      counts it.
    - **Not inside async code.** Called in a thread whose event loop is running (from an
      ``async def``), a method raises ``ConfigurationError`` instead of blocking the loop:
      use ``PaymentsClient`` there.
    - **Fork-safe.** In a child process after ``os.fork()`` (gunicorn, Celery prefork)
      the client never touches its parent's loop, thread or connections: it starts its
      own on first use (a new session, a new access token).
    - **Interrupts.** A ``KeyboardInterrupt`` while a call waits cancels the call on the
      loop and waits until it has unwound, then goes on. When the call was a POST that
      may have reached the service, the interrupt's ``__cause__`` is an
      ``OutcomeUnknownError`` naming the message id to resubmit (a resubmission of the
      same message is idempotent); a call not yet started is never sent.
    - **Closing.** ``close()`` (or leaving the ``with`` block) closes the session and
      stops the thread; calls still running then fail. A client never closed is closed
      when it is garbage-collected or, at the latest, when the interpreter exits.

    Args:
        credentials: who we are (see ``Credentials``).
        base_url: the service's base address.
        session: must be None: the client owns its session (a session belongs to the
            event loop it was made on).
        ssl_context: see ``PaymentsClient``; so are the arguments below.
        retry: the retry policy of every operation.
        poll: the polling schedule of the waiters.
        timeout: how long each call may take; a call can pass its own.
        limits: requests in flight at most and the largest response body.
        hooks: metrics callbacks (called on the client's loop thread).
        proxy: a forward proxy for every request.
        trust_env: read the proxy variables once, here, when ``proxy`` is None.
        telemetry: OpenTelemetry spans and metrics.
        profile: the service edition's paths and client-id header.
        clock_skew_threshold: seconds of clock difference past which JWTs are signed on
            the service's time.
        rate_limit: requests per second at most (a number, a ``RateLimit`` or a
            ``RateLimiter`` used by this client's loop only).

    Raises:
        ConfigurationError: a setting is of the wrong type or out of range, or a
            ``session`` was passed.
    """

    def __init__(
        self,
        credentials: Credentials,
        *,
        base_url: str,
        session: aiohttp.ClientSession | None = None,
        ssl_context: ssl.SSLContext | None = None,
        retry: RetryPolicy | None = None,
        poll: PollPolicy | None = None,
        timeout: Timeout | None = None,
        limits: Limits | None = None,
        hooks: Hooks | None = None,
        proxy: str | None = None,
        trust_env: bool = False,
        telemetry: Telemetry | None = None,
        profile: ServiceProfile | None = None,
        clock_skew_threshold: float | None = CLOCK_SKEW_THRESHOLD,
        rate_limit: float | RateLimit | RateLimiter | None = None,
    ) -> None:
        if session is not None:
            raise ConfigurationError(
                "SyncPaymentsClient owns its session, on its own event loop: pass no session"
            )
        self._settings: dict[str, Any] = {
            "base_url": base_url,
            "ssl_context": ssl_context,
            "retry": retry,
            "poll": poll,
            "timeout": timeout,
            "limits": limits,
            "hooks": hooks,
            "proxy": proxy,
            "trust_env": trust_env,
            "telemetry": telemetry,
            "profile": profile,
            "clock_skew_threshold": clock_skew_threshold,
            "rate_limit": rate_limit,
        }
        self._credentials = credentials
        self._lock = threading.Lock()
        self._closed = False
        self._finalizer: weakref.finalize[[], SyncPaymentsClient] | None = None
        self._engine: _Engine | None = None
        self._engine = engine = self._start()  # here: a bad setting raises
        self._base_url = engine.client.base_url
        self._profile = engine.client.profile
        _CLIENTS.add(self)

    # --- the engine ----------------------------------------------------------------------

    def _start(self) -> _Engine:
        """A new loop thread and a ``PaymentsClient`` made on it (with ``_lock`` held)."""
        thread = LoopThread("payments-async-sync")
        try:
            client = thread.run(self._make_client())
        except BaseException:
            thread.stop()
            raise
        engine = _Engine(thread, client)
        self._finalizer = weakref.finalize(self, engine.close)
        return engine

    async def _make_client(self) -> PaymentsClient:
        return PaymentsClient(self._credentials, **self._settings)

    def _running(self) -> _Engine:
        engine = self._engine
        if engine is not None:
            return engine
        with self._lock:
            if self._closed:
                raise ConfigurationError("this SyncPaymentsClient is closed")
            if self._engine is None:  # first use in a forked child
                self._engine = self._start()
            return self._engine

    def _forget_engine(self) -> None:
        """In a forked child: drop the parent's engine without touching it."""
        self._lock = threading.Lock()  # another thread may have held it at the fork
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if self._engine is not None:
            _PARENTS_ENGINES.append(self._engine)
            self._engine = None

    def _call(
        self,
        name: str,
        method: Callable[..., Any],
        start: Callable[[PaymentsClient], Coroutine[Any, Any, R]],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> R:
        """Run ``start(client)`` on the loop as the operation ``name``; block for its end."""
        _refuse_inside_a_loop(name)
        engine = self._running()
        try:
            return engine.thread.run(
                start(engine.client),
                when_cut=lambda: _lost_submission(name, method, args, kwargs),
            )
        except asyncio.CancelledError:  # close() from another thread cancelled it
            lost = _lost_submission(name, method, args, kwargs)
            if lost is not None:
                raise lost from None
            raise ConfigurationError(f"the client was closed during {name}") from None
        except LoopStopped:
            raise ConfigurationError("this SyncPaymentsClient is closed") from None

    # --- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the session and stop the loop thread (idempotent); calls still running
        fail, later calls raise ``ConfigurationError``."""
        with self._lock:
            self._closed = True
            self._engine = None
            finalizer, self._finalizer = self._finalizer, None
        if finalizer is not None:
            finalizer()

    def __repr__(self) -> str:
        return (
            f"SyncPaymentsClient(base_url={self._base_url!r}, "
            f"client_id={self._credentials.client_id!r})"
        )

    # --- what PaymentsClient offers, blocking ---------------------------------------------

    @property
    def profile(self) -> ServiceProfile:
        """The service edition's paths and client-id header this client uses."""
        return self._profile

    @property
    def base_url(self) -> str:
        """The service's base address."""
        return self._base_url

    @property
    def clock_offset(self) -> float:
        """Seconds added to our clock when signing JWTs (see ``PaymentsClient``)."""
        return self._running().client.clock_offset

    @property
    def with_response(self) -> SyncWithResponse:
        """The operations that send or read a message, each returning ``Answered``."""
        return SyncWithResponse(self)

    _rotate = _blocking(PaymentsClient.rotate_credentials)

    def rotate_credentials(self, credentials: Credentials) -> None:
        self._rotate(credentials)
        self._credentials = credentials  # a forked child starts with the new ones

    _face(rotate_credentials, PaymentsClient.rotate_credentials, "SyncPaymentsClient")

    access_token_lifetime = _blocking(PaymentsClient.access_token_lifetime)
    submit_credit_transfer = _blocking(PaymentsClient.submit_credit_transfer)
    request_cancellation = _blocking(PaymentsClient.request_cancellation)
    request_status_update = _blocking(PaymentsClient.request_status_update)
    get_credit_transfer_status = _blocking(PaymentsClient.get_credit_transfer_status)
    get_cancellation_outcome = _blocking(PaymentsClient.get_cancellation_outcome)
    wait_for_cancellation_outcome = _blocking(PaymentsClient.wait_for_cancellation_outcome)
    wait_for_payment_status = _blocking(PaymentsClient.wait_for_payment_status)
    request = _blocking(PaymentsClient.request)


class SyncWithResponse:
    """``SyncPaymentsClient``'s operations that send or read a message, each returning
    ``Answered(result, response)``.

    Reached as ``client.with_response``; blocking, as the client's own methods are:

    ```python
    submission, response = client.with_response.submit_credit_transfer(transfer)
    print(response.status, response.headers.get("Date"), response.attempts)
    ```
    """

    __slots__ = ("_client",)

    def __init__(self, client: SyncPaymentsClient) -> None:
        self._client = client

    submit_credit_transfer = _answered(PaymentsClient.submit_credit_transfer)
    request_cancellation = _answered(PaymentsClient.request_cancellation)
    request_status_update = _answered(PaymentsClient.request_status_update)
    get_credit_transfer_status = _answered(PaymentsClient.get_credit_transfer_status)
    get_cancellation_outcome = _answered(PaymentsClient.get_cancellation_outcome)
