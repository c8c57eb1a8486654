"""SyncPaymentsClient's surface is PaymentsClient's, and its loop thread keeps its promises."""

from __future__ import annotations

import asyncio
import inspect
import signal
import threading
from collections.abc import Iterator

import pytest

from payments_async import (
    ConfigurationError,
    Credentials,
    PaymentsClient,
    SyncPaymentsClient,
    Timeout,
)
from payments_async._portal import LoopStopped, LoopThread
from payments_async.sync import SyncWithResponse

BASE = "http://127.0.0.1:9"  # nothing is sent in this module

# What the async client has that the sync one names otherwise or leaves out, and why.
RENAMED = {"aclose": "close", "__aenter__": "__enter__", "__aexit__": "__exit__"}
ASYNC_ONLY = {"attach_notifications"}  # the notification receiver is async code


def _public(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_")} | (
        {n for n in dir(cls) if n in {"__aenter__", "__aexit__", "__enter__", "__exit__"}}
    )


def test_every_public_async_method_has_a_sync_twin_and_back() -> None:
    expected = {RENAMED.get(n, n) for n in _public(PaymentsClient) - ASYNC_ONLY}
    assert _public(SyncPaymentsClient) == expected


@pytest.mark.parametrize("name", sorted(_public(PaymentsClient) - ASYNC_ONLY - set(RENAMED)))
def test_each_twin_has_the_async_signature_and_docstring(name: str) -> None:
    async_attr = inspect.getattr_static(PaymentsClient, name)
    sync_attr = inspect.getattr_static(SyncPaymentsClient, name)
    if isinstance(async_attr, property):
        assert isinstance(sync_attr, property), name
        return
    assert inspect.iscoroutinefunction(async_attr), name
    assert not inspect.iscoroutinefunction(sync_attr), name
    assert inspect.signature(sync_attr) == inspect.signature(async_attr)
    assert sync_attr.__doc__ == async_attr.__doc__
    assert sync_attr.__qualname__ == f"SyncPaymentsClient.{name}"


def test_the_constructors_take_the_same_arguments() -> None:
    assert inspect.signature(SyncPaymentsClient.__init__) == inspect.signature(
        PaymentsClient.__init__
    )


def test_with_response_has_the_async_methods_blocking() -> None:
    async_type = inspect.signature(PaymentsClient.with_response.fget, eval_str=True)  # type: ignore[arg-type]
    methods = {n for n in dir(async_type.return_annotation) if not n.startswith("_")}
    assert methods == {n for n in dir(SyncWithResponse) if not n.startswith("_")}
    for name in methods:
        twin = getattr(SyncWithResponse, name)
        assert not inspect.iscoroutinefunction(twin)
        assert inspect.signature(twin) == inspect.signature(getattr(PaymentsClient, name))


@pytest.fixture
def client() -> Iterator[SyncPaymentsClient]:
    with SyncPaymentsClient(Credentials.sandbox(), base_url=BASE) as c:
        yield c


async def test_a_call_inside_a_running_loop_is_refused_not_blocking(
    client: SyncPaymentsClient,
) -> None:
    with pytest.raises(ConfigurationError, match="use PaymentsClient there"):
        client.get_credit_transfer_status("PS-1")


def test_a_call_inside_asyncio_run_is_refused(client: SyncPaymentsClient) -> None:
    async def main() -> None:
        client.access_token_lifetime()

    with pytest.raises(ConfigurationError, match=r"access_token_lifetime\(\).*PaymentsClient"):
        asyncio.run(main())


def test_bad_settings_raise_from_the_constructor_and_leave_no_thread() -> None:
    before = threading.active_count()
    with pytest.raises(ConfigurationError, match="timeout"):
        SyncPaymentsClient(Credentials.sandbox(), base_url=BASE, timeout=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="pass no session"):
        SyncPaymentsClient(Credentials.sandbox(), base_url=BASE, session=object())  # type: ignore[arg-type]
    assert threading.active_count() == before


def test_close_stops_the_thread_and_later_calls_are_refused() -> None:
    before = set(threading.enumerate())
    client = SyncPaymentsClient(Credentials.sandbox(), base_url=BASE)
    assert len(set(threading.enumerate()) - before) == 1
    client.close()
    client.close()  # idempotent
    assert set(threading.enumerate()) == before
    assert (
        repr(client)
        == "SyncPaymentsClient(base_url='http://127.0.0.1:9', client_id='sandbox-client')"
    )
    with pytest.raises(ConfigurationError, match="closed"):
        client.get_cancellation_outcome("PS-1", timeout=Timeout(total=1))


def test_a_client_dropped_unclosed_is_closed_by_its_finalizer() -> None:
    import gc

    before = set(threading.enumerate())
    client = SyncPaymentsClient(Credentials.sandbox(), base_url=BASE)
    del client
    gc.collect()
    assert set(threading.enumerate()) == before


# --- the loop thread ----------------------------------------------------------------------


@pytest.fixture
def loop_thread() -> Iterator[LoopThread]:
    thread = LoopThread("test-loop")
    yield thread
    thread.stop()


async def _other_tasks() -> int:
    return len(asyncio.all_tasks()) - 1


def test_run_returns_the_result_and_raises_the_error(loop_thread: LoopThread) -> None:
    async def ok() -> int:
        return 7

    async def bad() -> None:
        raise ValueError("no")

    assert loop_thread.run(ok()) == 7
    with pytest.raises(ValueError, match="no"):
        loop_thread.run(bad())


def test_a_stopped_loop_refuses_and_closes_the_coroutine() -> None:
    thread = LoopThread("test-loop")
    thread.stop()

    async def never() -> None:  # pragma: no cover - never started
        raise AssertionError

    with pytest.raises(LoopStopped):
        thread.run(never())  # no "never awaited" warning: the suite would fail on it


def test_stop_cancels_what_runs_and_fails_its_caller(loop_thread: LoopThread) -> None:
    started = threading.Event()
    errors: list[BaseException] = []

    async def forever() -> None:
        started.set()
        await asyncio.Event().wait()

    def caller() -> None:
        try:
            loop_thread.run(forever())
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=caller)
    t.start()
    started.wait(5)
    loop_thread.stop()
    t.join(5)
    assert [type(e) for e in errors] == [asyncio.CancelledError]


@pytest.fixture
def sigint_raises() -> Iterator[None]:
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _interrupt_main_when(event: threading.Event) -> threading.Thread:
    """A thread that sends SIGINT to the main thread once ``event`` is set."""
    main = threading.main_thread().ident
    assert main is not None

    def fire() -> None:
        event.wait(5)
        signal.pthread_kill(main, signal.SIGINT)

    t = threading.Thread(target=fire)
    t.start()
    return t


@pytest.mark.usefixtures("sigint_raises")
def test_an_interrupt_cancels_the_call_and_waits_for_it_to_unwind(
    loop_thread: LoopThread,
) -> None:
    assert threading.current_thread() is threading.main_thread()
    started, unwound = threading.Event(), threading.Event()

    async def slow() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0)  # a cleanup that itself awaits
            unwound.set()

    threads, tasks = threading.active_count(), loop_thread.run(_other_tasks())
    firer = _interrupt_main_when(started)
    with pytest.raises(KeyboardInterrupt) as info:
        loop_thread.run(slow(), when_cut=lambda: ValueError("cut short"))
    firer.join()
    assert unwound.is_set()  # awaited to the end before the interrupt went on
    assert isinstance(info.value.__cause__, ValueError)
    assert loop_thread.run(_other_tasks()) == tasks
    assert threading.active_count() == threads


@pytest.mark.usefixtures("sigint_raises")
def test_a_ctrl_c_delivered_to_another_thread_still_interrupts_the_caller(
    loop_thread: LoopThread,
) -> None:
    """A terminal's Ctrl-C goes to the process, and the kernel may hand it to any thread:
    here the loop thread. Python runs the handler in the main thread, which is blocked in
    its wait and is not woken by a signal another thread took: it must look by itself."""
    unwound = threading.Event()

    async def interrupt_then_hang() -> None:
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # this, the loop thread
        try:
            await asyncio.Event().wait()
        finally:
            unwound.set()

    with pytest.raises(KeyboardInterrupt):
        loop_thread.run(interrupt_then_hang())
    assert unwound.is_set()
