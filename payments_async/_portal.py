"""An event loop on a thread of its own, to which blocking code hands coroutines to run."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import os
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["LoopStopped", "LoopThread"]

R = TypeVar("R")

# Seconds a caller blocks at most before its thread looks at pending signals. A blocked
# lock wait is woken by a signal only if the signal arrives during the wait; one that
# arrives just before it would otherwise go unseen until the call ends.
_SIGNAL_CHECK = 0.2


class LoopStopped(RuntimeError):
    """The loop thread is stopped: nothing more runs on it."""


# Every loop thread of this process: a forked child marks them stopped (their threads did
# not come along), so that a call in the child raises instead of waiting forever.
_LOOP_THREADS: weakref.WeakSet[LoopThread] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for thread in list(_LOOP_THREADS):
        thread._forked()


os.register_at_fork(after_in_child=_after_fork_in_child)  # a no-op until a thread exists


class LoopThread:
    """One ``asyncio.Runner`` on a thread of its own; ``run`` blocks the caller until a
    coroutine has finished on it.

    Any number of threads may call ``run`` at once; their coroutines run concurrently on
    the one loop. The thread is a daemon: the interpreter joins non-daemon threads before
    it runs ``atexit`` handlers, so an owner that stops the thread at exit (a weakref
    finalizer does) needs it to be one. ``stop`` cancels what is still running, shuts the
    loop down as ``asyncio.run`` does, and joins the thread. In a child forked from this
    process the loop thread is stopped (its thread was not copied): ``run`` raises
    ``LoopStopped`` and ``stop`` returns at once, touching nothing of the parent's.

    Args:
        name: the thread's name.
    """

    def __init__(self, name: str) -> None:
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._stop_lock = threading.Lock()
        self._stopped = False
        self._closing = False  # set on the loop once stopping: nothing new starts
        # Every call handed over and not yet returned, with its coroutine: a call handed
        # over as the loop closed is failed (and its coroutine closed) by ``stop``.
        self._pending: dict[concurrent.futures.Future[Any], Coroutine[Any, Any, Any]] = {}
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()
        _LOOP_THREADS.add(self)

    def _forked(self) -> None:
        """In a forked child: stopped; the parent's loop is kept, never closed here."""
        self._stop_lock = threading.Lock()  # another thread may have held it at the fork
        self._stopped = True

    @property
    def thread(self) -> threading.Thread:
        """The thread the loop runs on."""
        return self._thread

    def _main(self) -> None:
        with asyncio.Runner() as runner:  # closing it cancels and awaits what is left
            runner.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self._ready.set()
        await self._stopping.wait()
        self._closing = True

    def run(
        self,
        coro: Coroutine[Any, Any, R],
        *,
        when_cut: Callable[[], BaseException | None] | None = None,
    ) -> R:
        """Run ``coro`` on the loop; block until it is done and return what it returns.

        If the caller is interrupted while waiting (``KeyboardInterrupt``), the coroutine
        is cancelled on the loop and awaited until it has unwound, then the interrupt is
        raised. Its ``__cause__`` is then the coroutine's own error when it ended with
        one, else ``when_cut()`` when the coroutine had started and was cancelled; a
        coroutine not yet started never starts. A result that arrived anyway is named in
        a note of the interrupt.

        Raises:
            LoopStopped: the loop is stopped (``coro`` is closed, never started).
            asyncio.CancelledError: ``stop`` cancelled the coroutine while it ran.
            BaseException: what ``coro`` raised.
        """
        loop = self._loop
        future: concurrent.futures.Future[R] = concurrent.futures.Future()
        tasks: list[asyncio.Task[R]] = []

        def start() -> None:
            if not future.set_running_or_notify_cancel():
                coro.close()  # the caller gave up before it started: nothing ran
                return
            if self._closing:
                coro.close()
                future.set_exception(LoopStopped("the loop thread is stopped"))
                return
            task = asyncio.ensure_future(coro)
            tasks.append(task)
            task.add_done_callback(functools.partial(_settle, future))

        self._pending[future] = coro
        try:
            try:
                if loop is None or self._stopped:
                    raise LoopStopped("the loop thread is stopped")
                loop.call_soon_threadsafe(start)
            except RuntimeError as exc:  # LoopStopped, or the loop is closed
                coro.close()
                raise LoopStopped("the loop thread is stopped") from exc
            while True:
                try:
                    future.exception(_SIGNAL_CHECK)  # returns once done, whatever the outcome
                except TimeoutError:
                    continue  # back in Python for a moment: a pending Ctrl-C is raised here
                return future.result()
        except BaseException as interrupt:
            if isinstance(interrupt, LoopStopped) or future.done():
                raise  # the coroutine's own outcome
            if future.cancel():
                coro.close()  # not started, and now it never will be
                raise
            # Cancel it on the loop (after ``start``: callbacks run in order), wait until it
            # has unwound, then let the interrupt go on.
            if loop is not None:
                with contextlib.suppress(RuntimeError):  # closed: ``stop`` settles it
                    loop.call_soon_threadsafe(lambda: tasks[0].cancel())
            concurrent.futures.wait([future])
            _explain(interrupt, future, when_cut)
            raise
        finally:
            self._pending.pop(future, None)

    def stop(self) -> None:
        """Cancel every task on the loop, close the loop and join the thread (idempotent).

        Raises:
            RuntimeError: called from the loop's own thread.
        """
        if threading.current_thread() is self._thread:
            raise RuntimeError("a loop thread cannot stop itself")
        with self._stop_lock:
            if self._stopped:
                return
            self._stopped = True
            loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None:
            loop.call_soon_threadsafe(stopping.set)
        self._thread.join()
        for future, coro in list(self._pending.items()):
            if future.done():
                continue
            if future.set_running_or_notify_cancel():  # handed over as the loop closed
                coro.close()
                future.set_exception(LoopStopped("the loop thread is stopped"))


def _settle(future: concurrent.futures.Future[R], task: asyncio.Task[R]) -> None:
    if task.cancelled():
        future.set_exception(asyncio.CancelledError())
    elif (exc := task.exception()) is not None:
        future.set_exception(exc)
    else:
        future.set_result(task.result())


def _explain(
    interrupt: BaseException,
    future: concurrent.futures.Future[Any],
    when_cut: Callable[[], BaseException | None] | None,
) -> None:
    """Chain to ``interrupt`` what became of the call it cut short."""
    exc = future.exception()
    if isinstance(exc, asyncio.CancelledError):
        cause = when_cut() if when_cut is not None else None
        if cause is not None:
            interrupt.__cause__ = cause
    elif exc is not None:
        interrupt.__cause__ = exc
    else:
        interrupt.add_note(f"the call had completed: {future.result()!r}")
