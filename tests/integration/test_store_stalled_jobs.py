"""The kit's stalled-job check against a real PostgreSQL: a job whose end was never
written (the database was away when it ended) is put back although its worker lives on."""

from __future__ import annotations

import asyncio
import contextlib
import time

import procrastinate

from payments_async._store import LocalJobs, install_jobs_schema, retry_stalled
from payments_async.notifications._items import INBOX_ERRORS

QUEUE = "stalled-test"
STALLED_AFTER = 300.0  # the worker, never beating, stays alive throughout


async def _status(app: procrastinate.App, job_id: int) -> str:
    (job,) = await app.job_manager.list_jobs_async(id=job_id)
    return str(job.status)


async def test_a_job_its_live_worker_still_holds_after_its_end_is_put_back(pg_dsn: str) -> None:
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=pg_dsn))

    @app.task(name="noop", queue=QUEUE)
    async def noop() -> None:  # never run: the test fetches its jobs itself
        pass

    await install_jobs_schema(app, pg_dsn, INBOX_ERRORS)
    now = [1000.0]  # the clock of the jobs run here, driven by the test
    here = LocalJobs(clock=lambda: now[0])
    async with app.open_async():
        worker = await app.job_manager.register_worker()  # alive: its heartbeat is fresh
        fetched = []
        for _ in range(3):
            await noop.defer_async()
            job = await app.job_manager.fetch_job(queues=[QUEUE], worker_id=worker)
            assert job is not None
            assert job.id is not None
            fetched.append(job)
        unwritten, recent, running = fetched
        with contextlib.ExitStack() as still:
            still.enter_context(here.run(running))  # running here throughout: never put back
            with here.run(unwritten):
                pass  # ended, its end never written
            now[0] += STALLED_AFTER + 1
            with here.run(recent):
                pass  # just ended: its end may still be on its way
            assert running.id in here
            assert unwritten.id not in here
            check = asyncio.create_task(
                retry_stalled(app, QUEUE, stalled_after=STALLED_AFTER, every=0.01, jobs=here)
            )
            try:
                deadline = time.monotonic() + 30
                while await _status(app, unwritten.id) != "todo":  # type: ignore[arg-type]
                    assert time.monotonic() < deadline, "never put back"
                    await asyncio.sleep(0.02)
            finally:
                check.cancel()
                await asyncio.gather(check, return_exceptions=True)
            assert await _status(app, running.id) == "doing"  # type: ignore[arg-type]
        assert await _status(app, recent.id) == "doing"  # type: ignore[arg-type]
        # Each ended job is looked at once, then forgotten: taken again by its worker (not
        # through `run`), the job put back is not among the unwritten ends, while the two
        # that ended since (the running one has now) are.
        again = await app.job_manager.fetch_job(queues=[QUEUE], worker_id=worker)
        assert again is not None
        assert again.id == unwritten.id
        assert sorted(await here.unwritten_ends(app, 0)) == sorted([recent.id, running.id])
