"""The client's promises hold the same through PaymentsClient and SyncPaymentsClient.

The behaviour tests take a ``way`` fixture: one test body, run once awaiting
``PaymentsClient`` and once calling ``SyncPaymentsClient`` from worker threads (a thread
with no running loop, as in a Django view). The sandbox runs on the test's loop meanwhile.
The tests after them are the sync client's own: many threads against the strict sandbox,
``fork``, Ctrl-C, closing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any, Protocol

import pytest

from payments_async import (
    Hooks,
    Limits,
    Outcome,
    OutcomeUnknownError,
    PaymentsClient,
    PaymentsError,
    PollPolicy,
    RateLimitedError,
    RequestEvent,
    RetryPolicy,
    SyncPaymentsClient,
    Timeout,
)
from payments_async.sandbox import FaultConfig, SandboxConfig
from payments_async.testing import SandboxHandle, sandbox_in_thread, sandbox_server
from tests.factories import cancellation_for, credit_transfer

FAST_POLL = PollPolicy(initial=0.02, maximum=0.05, not_found_grace=0.5)


class Call(Protocol):
    """Runs the client's operation ``name`` and returns its result (or raises its error)."""

    async def __call__(self, name: str, /, *args: Any, **kwargs: Any) -> Any: ...


class Way(Protocol):
    """Opens a client on a sandbox, one way or the other, and gives its ``Call``."""

    def __call__(self, sb: SandboxHandle, **settings: Any) -> Any: ...


def _settings(settings: dict[str, Any]) -> dict[str, Any]:
    settings.setdefault("retry", RetryPolicy.for_testing(attempts=6))
    settings.setdefault("timeout", Timeout(total=10))
    settings.setdefault("poll", FAST_POLL)
    return settings


@asynccontextmanager
async def _async_way(sb: SandboxHandle, **settings: Any) -> AsyncIterator[Call]:
    assert sb.credentials is not None
    async with PaymentsClient(sb.credentials, base_url=sb.url, **_settings(settings)) as client:

        async def call(name: str, /, *args: Any, **kwargs: Any) -> Any:
            return await getattr(client, name)(*args, **kwargs)

        yield call


@asynccontextmanager
async def _sync_way(sb: SandboxHandle, **settings: Any) -> AsyncIterator[Call]:
    assert sb.credentials is not None
    loop = asyncio.get_running_loop()
    # One caller thread per concurrent call, as a threaded web server has.
    with concurrent.futures.ThreadPoolExecutor(64) as callers:
        client = await loop.run_in_executor(
            callers,
            lambda: SyncPaymentsClient(sb.credentials, base_url=sb.url, **_settings(settings)),  # type: ignore[arg-type]
        )
        try:

            async def call(name: str, /, *args: Any, **kwargs: Any) -> Any:
                method = getattr(client, name)
                return await loop.run_in_executor(callers, lambda: method(*args, **kwargs))

            yield call
        finally:
            await loop.run_in_executor(callers, client.close)


@pytest.fixture(params=["async", "sync"])
def way(request: pytest.FixtureRequest) -> Way:
    return _async_way if request.param == "async" else _sync_way  # type: ignore[return-value]


# --- one body, both clients ---------------------------------------------------------------


@pytest.mark.parametrize(
    "faults",
    [
        FaultConfig(error_500=0.3, seed=1),
        FaultConfig(error_503=0.3, seed=2),
        FaultConfig(rate_limit_429=0.3, retry_after=0, seed=3),
        FaultConfig(drop_before=0.3, seed=4),
        FaultConfig(commit_then_drop=0.3, seed=5),
    ],
    ids=["500", "503", "429", "drop", "commit-then-drop"],
)
async def test_a_faulty_service_stores_each_message_once(way: Way, faults: FaultConfig) -> None:
    config = SandboxConfig(processing_delay=0.2, settlement_delay=0.05, faults=faults)
    async with (
        sandbox_server(config) as sb,
        way(sb, retry=RetryPolicy.for_testing(attempts=10), timeout=Timeout(total=20)) as call,
    ):
        payments = [credit_transfer() for _ in range(10)]
        subs = [await call("submit_credit_transfer", p) for p in payments]
        cxls = [await call("request_cancellation", cancellation_for(p)) for p in payments]
        outcomes = [
            await call("wait_for_cancellation_outcome", c.payments_service_id, timeout=10)
            for c in cxls
        ]
        stats = sb.server.stats()
    assert stats["faults_total"] > 0
    assert stats["payments_stored"] == stats["cancellations_stored"] == len(payments)
    assert len({s.payments_service_id for s in subs}) == len(payments)
    assert all(o.outcome in (Outcome.ACCEPTED, Outcome.REJECTED) for o in outcomes)
    if faults.commit_then_drop:
        # a retry after a committed-then-dropped POST is answered 200: reported honestly
        assert any(s.replayed and s.attempts > 1 for s in subs + cxls)


async def test_a_401_refreshes_the_token_and_resends_with_a_fresh_sca_token(way: Way) -> None:
    async with sandbox_server() as sb, way(sb) as call:
        await call("access_token_lifetime")
        assert sb.server.state.revoke_tokens() == 1
        # The strict sandbox refuses a reused SCA token: the resend must carry a new one.
        sub = await call("submit_credit_transfer", credit_transfer())
        stats = sb.server.stats()
    assert sub.created
    assert stats["token_requests"] == 2
    assert stats["requests"]["pacs008"] == 2
    assert (stats["responses"]["401"], stats["responses"]["201"]) == (1, 1)


async def test_an_unanswered_post_is_outcome_unknown_then_resubmitted(way: Way) -> None:
    config = SandboxConfig(faults=FaultConfig(commit_then_drop=1.0, seed=7))
    async with sandbox_server(config) as sb:
        payment = credit_transfer()
        async with way(sb, retry=RetryPolicy.for_testing(attempts=2)) as call:
            with pytest.raises(OutcomeUnknownError) as info:
                await call("submit_credit_transfer", payment)
            assert info.value.message_id == payment.message_id
            sb.server.set_faults(FaultConfig())
            again = await call("submit_credit_transfer", payment)
        assert again.replayed
        assert sb.server.stats()["payments_stored"] == 1


@pytest.mark.parametrize("where", ["client", "call"])
async def test_a_deadline_holds_when_the_service_is_slow(way: Way, where: str) -> None:
    """The service answers after 5 s: the deadline (the client's, or the call's over the
    client's 10 s) ends the POST as outcome unknown, with retries left."""
    config = SandboxConfig(faults=FaultConfig(latency=1.0, latency_seconds=5.0, seed=1))
    deadline = Timeout(total=0.4, read=0.1)
    on_client = {"timeout": deadline} if where == "client" else {}
    on_call = {"timeout": deadline} if where == "call" else {}
    async with (
        sandbox_server(config) as sb,
        way(sb, retry=RetryPolicy.for_testing(attempts=10), **on_client) as call,
    ):
        await call("access_token_lifetime")
        start = time.monotonic()
        with pytest.raises(OutcomeUnknownError) as info:
            await call("request_cancellation", cancellation_for(credit_transfer()), **on_call)
        elapsed = time.monotonic() - start
    # The 0.4 s deadline ended it, not the ten attempts of 0.1 s reads (about 1 s, which a
    # bound on the elapsed time cannot tell apart on a loaded machine): 0.4 s holds four
    # reads, five with the one its last instant refuses to send, and a slow machine fewer.
    assert info.value.attempt is not None
    assert info.value.attempt <= 5, info.value.attempt
    assert 0.4 <= elapsed < 4.0  # nor the sandbox's answer after 5 s, or the client's 10 s


async def test_a_deadline_holds_while_the_call_queues_for_a_connection(way: Way) -> None:
    """One connection, held by a POST the sandbox answers only after 5 s: a call queued
    behind it ends at its own deadline, counted from when it was made."""
    config = SandboxConfig(faults=FaultConfig(latency=1.0, latency_seconds=5.0, seed=1))
    retry = RetryPolicy.for_testing(attempts=1)
    async with (
        sandbox_server(config) as sb,
        way(sb, limits=Limits(connections=1), retry=retry) as call,
    ):
        await call("access_token_lifetime")
        holder = asyncio.ensure_future(
            call("submit_credit_transfer", credit_transfer(), timeout=3.0)
        )
        # Until the holder's POST has arrived (the sandbox's counters have no event).
        while sb.server.stats()["requests"].get("pacs008", 0) < 1:  # noqa: ASYNC110
            await asyncio.sleep(0.005)
        start = time.monotonic()
        with pytest.raises(PaymentsError):
            await call("submit_credit_transfer", credit_transfer(), timeout=0.3)
        queued = time.monotonic() - start
        with pytest.raises(OutcomeUnknownError):
            await holder
        stats = sb.server.stats()
    assert queued < 1.5  # not the 2.7 s the holder still had
    assert stats["requests"]["pacs008"] == 1  # the queued one never got the connection


async def test_the_services_rate_limit_ends_as_rate_limited(way: Way) -> None:
    config = SandboxConfig(faults=FaultConfig(rate_limit_429=1.0, retry_after=0, seed=3))
    async with (
        sandbox_server(config) as sb,
        way(sb, retry=RetryPolicy.for_testing(attempts=3)) as call,
    ):
        with pytest.raises(RateLimitedError) as info:
            await call("submit_credit_transfer", credit_transfer())
        stats = sb.server.stats()
    assert info.value.status == 429
    assert stats["requests"]["pacs008"] == 3
    assert stats["payments_stored"] == 0


async def test_concurrent_callers_share_the_clients_rate(way: Way) -> None:
    sent: list[float] = []  # when each GET was sent, as the client's hook saw it

    def on_request(event: RequestEvent) -> None:
        if event.method == "GET":
            sent.append(time.monotonic() - event.elapsed)

    async with (
        sandbox_server(SandboxConfig(processing_delay=3600)) as sb,
        way(sb, rate_limit=20, hooks=Hooks(on_request=on_request)) as call,
    ):
        sub = await call("submit_credit_transfer", credit_transfer())
        started = time.monotonic()
        await asyncio.gather(
            *(call("get_credit_transfer_status", sub.payments_service_id) for _ in range(40))
        )
    times = sorted(sent)
    assert len(times) == 40
    # At most 20 a second: the k-th GET goes no earlier than k/20 s after the callers
    # started (one slot at once, RateLimit's burst). A late wake-up on a loaded machine
    # sends a request later, never earlier: counting sends in a window, which two late
    # wake-ups can crowd, is not what the limiter promises.
    assert all(t >= started + k / 20 - 1e-3 for k, t in enumerate(times)), [
        round(t - started, 3) for t in times
    ]


async def test_many_concurrent_callers_share_one_token_request(way: Way) -> None:
    async with sandbox_server() as sb, way(sb) as call:
        subs = await asyncio.gather(
            *(call("submit_credit_transfer", credit_transfer()) for _ in range(40))
        )
        stats = sb.server.stats()
    assert all(s.created for s in subs)
    assert stats["token_requests"] == 1


# --- many threads, one SyncPaymentsClient, the strict sandbox -------------------------------


THREADS, CALLS = 16, 200


@pytest.mark.slow
async def test_16_threads_share_one_sync_client_and_one_token() -> None:
    async with sandbox_server() as sb:
        assert sb.credentials is not None
        creds = sb.credentials

        def run() -> list[Any]:
            with SyncPaymentsClient(creds, base_url=sb.url) as client:

                def caller() -> list[Any]:
                    return [client.submit_credit_transfer(credit_transfer()) for _ in range(CALLS)]

                with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
                    futures = [pool.submit(caller) for _ in range(THREADS)]
                    return [s for f in futures for s in f.result()]

        subs = await asyncio.to_thread(run)
        stats = sb.server.stats()
    assert len(subs) == THREADS * CALLS
    assert all(s.created and s.attempts == 1 for s in subs)  # no SCA token refused
    assert stats["payments_stored"] == THREADS * CALLS
    assert stats["requests"]["pacs008"] == THREADS * CALLS
    assert stats["responses"] == {"200": 1, "201": THREADS * CALLS}  # no 401: no SCA reused
    assert stats["token_requests"] == 1


# One event loop has no thread interleavings to hunt: 16 tasks in flight at once from the
# first call exercise the token's single flight and a fresh SCA token per request (a reused
# one is answered 401 and counted) as well at 25 calls a task as at 200.
TASK_CALLS = 25


@pytest.mark.slow
async def test_16_tasks_share_one_async_client_and_one_token() -> None:
    """The same shape of load through PaymentsClient, for comparison."""
    async with sandbox_server() as sb:
        assert sb.credentials is not None
        async with PaymentsClient(sb.credentials, base_url=sb.url) as client:

            async def caller() -> list[Any]:
                return [
                    await client.submit_credit_transfer(credit_transfer())
                    for _ in range(TASK_CALLS)
                ]

            subs = [
                s
                for batch in await asyncio.gather(*(caller() for _ in range(THREADS)))
                for s in batch
            ]
        stats = sb.server.stats()
    assert len(subs) == THREADS * TASK_CALLS
    assert all(s.created and s.attempts == 1 for s in subs)
    assert stats["responses"] == {"200": 1, "201": THREADS * TASK_CALLS}
    assert stats["token_requests"] == 1


# --- the sync client's own promises ---------------------------------------------------------


@pytest.fixture
def sandbox() -> Iterator[SandboxHandle]:
    with sandbox_in_thread(SandboxConfig(processing_delay=0.2, settlement_delay=0.05)) as sb:
        yield sb


def _client(sb: SandboxHandle, **settings: Any) -> SyncPaymentsClient:
    assert sb.credentials is not None
    return SyncPaymentsClient(sb.credentials, base_url=sb.url, **_settings(settings))


def test_the_flow_end_to_end_from_plain_functions(sandbox: SandboxHandle) -> None:
    with _client(sandbox) as client:
        payment = credit_transfer()
        sub = client.submit_credit_transfer(payment)
        cxl = client.request_cancellation(cancellation_for(payment))
        outcome = client.wait_for_cancellation_outcome(cxl.payments_service_id, timeout=10)
        read = client.get_cancellation_outcome(cxl.payments_service_id)
        answered, response = client.with_response.get_credit_transfer_status(
            sub.payments_service_id
        )
        raw = client.request("GET", f"{client.profile.pacs002_path}/{sub.payments_service_id}")
    assert outcome.payments_service_id == cxl.payments_service_id
    assert read is not None
    assert response.status == 200
    assert answered is not None
    assert raw.json() is not None


def _socket_fds() -> int:
    fds = os.listdir("/proc/self/fd")
    count = 0
    for fd in fds:
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            continue
    return count


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts sockets in /proc")
def test_close_leaves_no_thread_socket_or_task(sandbox: SandboxHandle) -> None:
    threads, sockets = set(threading.enumerate()), _socket_fds()
    client = _client(sandbox)
    for _ in range(3):
        client.submit_credit_transfer(credit_transfer())
    assert _socket_fds() > sockets  # a kept-alive connection (and its peer in the sandbox)
    client.close()
    sandbox_threads = set(threading.enumerate())
    assert sandbox_threads == threads
    # The sandbox closes its side once the client has gone: wait for that, bounded.
    deadline = time.monotonic() + 5
    while _socket_fds() > sockets and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _socket_fds() <= sockets


def test_an_unclosed_client_is_closed_at_interpreter_exit(sandbox: SandboxHandle) -> None:
    script = (
        "import sys\n"
        "from payments_async import Credentials, SyncPaymentsClient\n"
        "client = SyncPaymentsClient(Credentials.sandbox(), base_url=sys.argv[1])\n"
        "assert client.access_token_lifetime() > 0\n"
        "print('ok')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-X", "dev", "-W", "error", "-c", script, sandbox.url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "ok\n", "")


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_starts_its_own_loop_and_the_parent_goes_on(
    sandbox: SandboxHandle,
) -> None:
    with _client(sandbox) as client:
        client.submit_credit_transfer(credit_transfer())  # the parent's loop is running
        parent_thread_names = sorted(t.name for t in threading.enumerate())
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            code = 1
            try:
                os.close(read)
                # Only this thread came along; the parent's loop thread is not here.
                assert [t.name for t in threading.enumerate()] == [threading.current_thread().name]
                sub = client.submit_credit_transfer(credit_transfer())
                assert sub.created
                assert len(threading.enumerate()) == 2  # this one and its own loop thread
                client.close()
                assert len(threading.enumerate()) == 1
                os.write(write, b"ok")
                code = 0
            except BaseException:
                os.write(write, traceback.format_exc().encode())
            finally:
                os._exit(code)
        os.close(write)
        for _ in range(5):  # the parent's calls go on while the child works
            assert client.submit_credit_transfer(credit_transfer()).created
        with os.fdopen(read, "rb") as pipe:
            report = pipe.read().decode()
        _, status = os.waitpid(pid, 0)
        assert (os.waitstatus_to_exitcode(status), report) == (0, "ok")
        assert client.submit_credit_transfer(credit_transfer()).created
        assert sorted(t.name for t in threading.enumerate()) == parent_thread_names
    assert sandbox.server.stats()["token_requests"] == 2  # the parent's and the child's


@pytest.fixture
def sigint_raises() -> Iterator[None]:
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _interrupt_main_when(ready: Callable[[], bool]) -> threading.Thread:
    main = threading.main_thread().ident
    assert main is not None

    def fire() -> None:
        deadline = time.monotonic() + 10
        while not ready() and time.monotonic() < deadline:
            time.sleep(0.005)
        signal.pthread_kill(main, signal.SIGINT)

    thread = threading.Thread(target=fire)
    thread.start()
    return thread


async def _tasks() -> int:
    return len(asyncio.all_tasks())


@pytest.mark.usefixtures("sigint_raises")
def test_ctrl_c_during_a_post_cancels_it_and_names_the_id_to_resubmit(
    sandbox: SandboxHandle,
) -> None:
    assert threading.current_thread() is threading.main_thread()
    with _client(sandbox) as client:
        client.access_token_lifetime()
        loop_thread = client._running().thread
        threads, tasks = threading.active_count(), loop_thread.run(_tasks())
        sandbox.server.set_faults(FaultConfig(latency=1.0, latency_seconds=30.0, seed=1))
        payment = credit_transfer()
        firer = _interrupt_main_when(
            lambda: sandbox.server.stats()["requests"].get("pacs008", 0) >= 1
        )
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt) as info:
            client.submit_credit_transfer(payment)
        firer.join()
        assert time.monotonic() - start < 5  # not the 30 s the sandbox holds it
        cause = info.value.__cause__
        assert isinstance(cause, OutcomeUnknownError)
        assert cause.message_id == payment.message_id
        assert threading.active_count() == threads
        assert loop_thread.run(_tasks()) == tasks  # the cancelled call has unwound
        sandbox.server.set_faults(FaultConfig())
        again = client.submit_credit_transfer(payment)  # the id to resubmit: idempotent
    assert again.payments_service_id
    assert sandbox.server.stats()["payments_stored"] <= 1
