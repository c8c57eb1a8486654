"""The kit's stalled-job check against a real PostgreSQL: a job whose end was never
written (the database was away when it ended) is put back although its worker lives on."""

from __future__ import annotations

import asyncio
import time

import procrastinate

from payments_async._store import install_jobs_schema, retry_stalled
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
    async with app.open_async():
        worker = await app.job_manager.register_worker()  # alive: its heartbeat is fresh
        jobs = []
        for _ in range(3):
            await noop.defer_async()
            job = await app.job_manager.fetch_job(queues=[QUEUE], worker_id=worker)
            assert job is not None
            assert job.id is not None
            jobs.append(job.id)
        unwritten, recent, running = jobs
        now = time.monotonic()
        ended = {
            unwritten: (worker, now - STALLED_AFTER - 1),  # ended, its end never written
            recent: (worker, now),  # just ended: its end may still be on its way
        }
        check = asyncio.create_task(
            retry_stalled(
                app,
                QUEUE,
                stalled_after=STALLED_AFTER,
                every=0.01,
                running={running},
                ended=ended,
            )
        )
        try:
            deadline = time.monotonic() + 30
            while await _status(app, unwritten) != "todo":
                assert time.monotonic() < deadline, "never put back"
                await asyncio.sleep(0.02)
        finally:
            check.cancel()
            await asyncio.gather(check, return_exceptions=True)
        assert await _status(app, recent) == "doing"
        assert await _status(app, running) == "doing"
        assert list(ended) == [recent]  # looked at once, then forgotten
