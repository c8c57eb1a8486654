"""A stopping worker's fetch loops: ``all_loops`` returns only once every loop has ended.

The app, pool and client the loops share are closed as soon as it returns, so returning
while one loop still gives its row the grace period would close them under it. The fake
loops behave as procrastinate's ``Worker.run``: the loop runs shielded; on cancel it is
told to stop, awaited, and the cancellation raised again.
"""

from __future__ import annotations

import asyncio

import pytest

from payments_async._store import all_loops, through_outages
from payments_async.bulk._errors import JOURNAL_ERRORS


class Loops:
    def __init__(self) -> None:
        self.log: list[str] = []

    async def worker(self, name: str, grace: float = 0.0) -> None:
        stop = asyncio.Event()

        async def loop() -> None:
            await stop.wait()
            await asyncio.sleep(grace)  # a busy loop's row: its grace, then back in the queue
            self.log.append(f"{name} done")

        task = asyncio.create_task(loop())
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            stop.set()
            await task
            raise


async def test_one_cancel_waits_for_the_busy_loop() -> None:
    loops = Loops()
    run = asyncio.ensure_future(all_loops([loops.worker("idle"), loops.worker("busy", 0.2)]))
    await asyncio.sleep(0.02)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert sorted(loops.log) == ["busy done", "idle done"]


async def test_a_second_cancel_still_waits_for_the_busy_loop() -> None:
    loops = Loops()
    run = asyncio.ensure_future(all_loops([loops.worker("idle"), loops.worker("busy", 0.3)]))
    await asyncio.sleep(0.02)
    run.cancel()
    await asyncio.sleep(0.05)
    run.cancel()  # an outer timeout or task group cancelling again
    with pytest.raises(asyncio.CancelledError):
        await run
    assert "busy done" in loops.log  # before all_loops returned


async def test_a_loop_that_ends_cancelled_on_its_own_stops_the_others() -> None:
    loops = Loops()

    async def gives_up() -> None:
        await asyncio.sleep(0.02)
        raise asyncio.CancelledError

    run = asyncio.ensure_future(all_loops([gives_up(), loops.worker("idle")]))
    done, _ = await asyncio.wait({run}, timeout=5)
    assert done, "all_loops hung"
    with pytest.raises(asyncio.CancelledError):
        run.result()
    assert loops.log == ["idle done"]


async def test_a_failure_while_stopping_keeps_the_others_grace_and_the_cancellation() -> None:
    loops = Loops()

    async def fails_on_stop() -> None:
        try:
            await asyncio.sleep(100)
        except asyncio.CancelledError:
            raise RuntimeError("unregister_worker failed") from None

    run = asyncio.ensure_future(all_loops([fails_on_stop(), loops.worker("busy", 0.2)]))
    await asyncio.sleep(0.02)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):  # the stop asked for, not the loop's error
        await run
    assert loops.log == ["busy done"]


async def test_a_failing_loop_stops_the_others_and_its_error_is_raised() -> None:
    loops = Loops()

    async def fails() -> None:
        await asyncio.sleep(0.02)
        raise RuntimeError("database gone")

    with pytest.raises(RuntimeError, match="database gone"):
        await all_loops([fails(), loops.worker("busy", 0.1)])
    assert loops.log == ["busy done"]


async def test_loops_that_end_by_themselves_end_the_run() -> None:
    async def drained() -> None:
        await asyncio.sleep(0.01)

    await asyncio.wait_for(all_loops([drained(), drained()]), 5)


async def test_loggers_made_once_the_loops_run_are_kept_quiet_about_the_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import logging
    import secrets

    import procrastinate

    name = f"procrastinate.worker.loop-{secrets.token_hex(4)}"  # made by the loop only

    async def loop() -> None:
        lost = procrastinate.exceptions.ConnectorException()
        logging.getLogger(name).error("side task failed", exc_info=lost)
        logging.getLogger(name).error("something else")

    with caplog.at_level(logging.WARNING):
        await through_outages(
            "postgresql://",
            lambda: [loop()],
            wait=False,
            errors=JOURNAL_ERRORS,
            what="journal",
            loggers=[name],
        )
    assert [r.getMessage() for r in caplog.records if r.name == name] == ["something else"]


def test_the_worker_module_s_logger_is_kept_quiet_though_imported_once_the_loops_run() -> None:
    """procrastinate imports its worker module only when a worker starts; that module's
    logger says a failed abort poll with a traceback. In a fresh process (the module not
    yet imported), an outage it meets is kept off stderr like every other."""
    import subprocess
    import sys

    script = """
import asyncio, logging, sys
import procrastinate
from payments_async._store import through_outages
from payments_async.bulk._errors import JOURNAL_ERRORS
assert "procrastinate.worker" not in sys.modules
logging.basicConfig()

async def loop():
    from procrastinate import worker  # as App.run_worker_async does
    worker.logger.exception(
        "poll_jobs_to_abort error", exc_info=procrastinate.exceptions.ConnectorException()
    )
    worker.logger.error("something else")

asyncio.run(
    through_outages(
        "postgresql://", lambda: [loop()], wait=False, errors=JOURNAL_ERRORS, what="journal"
    )
)
"""
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert "poll_jobs_to_abort" not in ran.stderr, ran.stderr
    assert "something else" in ran.stderr
