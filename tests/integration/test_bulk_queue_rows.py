"""One row's job (``process_row``) against a real PostgreSQL, with clients that fail on cue.

What the journal says after a failed attempt decides what a rerun does and what the
results tell a person: ``sent`` means the service may have the row (a rerun resends it
with its recorded id), ``planned`` means it certainly does not. These tests pin down when
a failed attempt may put a row back to ``planned``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from payments_async import ApiError, AuthenticationError, TransportError, ValidationError
from payments_async._constants import CAMT056_PATH, TOKEN_PATH
from payments_async.bulk import _queue as queue
from payments_async.bulk._stores import _postgres as pg
from payments_async.iso20022 import encode
from tests.factories import cancellation_for, credit_transfer

RUN = "RUN-ROWS"
LINE = 2


class FailingClient:
    """Fails ``request_cancellation`` with ``error`` after ``delay`` seconds."""

    def __init__(self, error: Exception, delay: float = 0.0) -> None:
        self.error = error
        self.delay = delay
        self.calls = 0

    async def request_cancellation(self, message: Any) -> Any:
        self.calls += 1
        await asyncio.sleep(self.delay)
        raise self.error


def token_refused() -> AuthenticationError:
    return AuthenticationError("token refused", status=401, method="POST", path=TOKEN_PATH)


def post_timed_out() -> TransportError:
    # The POST left (request_sent): the service may have stored it.
    return TransportError("read timeout", request_sent=True, method="POST", path=CAMT056_PATH)


def plan_one_row(dsn: str, state: str = "planned", attempts: int = 0) -> None:
    msg = cancellation_for(credit_transfer())
    conn = pg.connect(dsn)
    try:
        pg.ensure_schema(conn)
        conn.execute(
            "INSERT INTO payments_bulk_runs (run_id, input_sha256, created_at) "
            "VALUES (%s, 'sha', 0)",
            (RUN,),
        )
        conn.execute(
            "INSERT INTO payments_bulk_rows "
            "(run_id, line, assignment_id, body, state, attempts, updated_at) "
            "VALUES (%s, %s, 'CX-1', %s, %s, %s, 0)",
            (RUN, LINE, encode(msg), state, attempts),
        )
    finally:
        conn.close()


def row(dsn: str) -> tuple[str, int, str | None, str | None]:
    with psycopg.connect(dsn) as conn:
        found = conn.execute(
            "SELECT state, attempts, outcome, error FROM payments_bulk_rows "
            "WHERE run_id = %s AND line = %s",
            (RUN, LINE),
        ).fetchone()
    assert found is not None
    return found[0], found[1], found[2], found[3]


async def run_jobs(dsn: str, *clients: FailingClient) -> list[BaseException | None]:
    """Run the row's job once per client, all at once; what each job raised."""
    from psycopg_pool import AsyncConnectionPool

    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        dsn, min_size=1, max_size=4, open=False, kwargs={"autocommit": True}
    )
    await pool.open()
    writer = pg.GroupCommitter(dsn)
    try:
        states = [
            queue._WorkerState(client=c, pool=pool, writer=writer, timeout=5)  # type: ignore[arg-type]
            for c in clients
        ]
        results = await asyncio.gather(
            *(queue.process_row(state, RUN, LINE) for state in states), return_exceptions=True
        )
    finally:
        await writer.aclose()
        await pool.close()
    return [r if isinstance(r, BaseException) else None for r in results]


def test_an_attempt_refused_at_the_token_puts_a_planned_row_back(pg_dsn: str) -> None:
    plan_one_row(pg_dsn)
    client = FailingClient(token_refused())
    (raised,) = asyncio.run(run_jobs(pg_dsn, client))
    assert isinstance(raised, AuthenticationError)  # procrastinate retries the job
    state, attempts, outcome, error = row(pg_dsn)
    assert (state, attempts, outcome) == ("planned", 1, None)
    assert error is not None
    assert "token refused" in error


def test_a_token_request_that_timed_out_is_still_a_post_never_sent(pg_dsn: str) -> None:
    # The token request itself left (request_sent) and got no answer: the POST never did.
    plan_one_row(pg_dsn)
    lost = TransportError("read timeout", request_sent=True, method="POST", path=TOKEN_PATH)
    asyncio.run(run_jobs(pg_dsn, FailingClient(lost)))
    assert row(pg_dsn)[0] == "planned"


def test_a_row_an_earlier_attempt_may_have_reached_stays_sent(pg_dsn: str) -> None:
    plan_one_row(pg_dsn, state="sent", attempts=1)  # an earlier attempt's POST left
    asyncio.run(run_jobs(pg_dsn, FailingClient(token_refused())))
    state, attempts, _, error = row(pg_dsn)
    assert (state, attempts) == ("sent", 2)
    assert error is not None


def test_an_attempt_never_sent_does_not_undo_a_concurrent_one_that_was(pg_dsn: str) -> None:
    # Two executions of the row's job at once (a worker taken for dead): A's POST left and
    # timed out, B's token was refused meanwhile. B must not put the row back to planned:
    # the service may have A's POST.
    plan_one_row(pg_dsn)
    sent = FailingClient(post_timed_out(), delay=0.5)
    refused = FailingClient(token_refused(), delay=0.05)
    raised = asyncio.run(run_jobs(pg_dsn, sent, refused))
    assert isinstance(raised[0], TransportError)
    assert isinstance(raised[1], AuthenticationError)
    assert (sent.calls, refused.calls) == (1, 1)
    state, attempts, _, _ = row(pg_dsn)
    assert (state, attempts) == ("sent", 2)


def test_a_message_refused_before_sending_ends_not_sent(pg_dsn: str) -> None:
    plan_one_row(pg_dsn)
    (raised,) = asyncio.run(run_jobs(pg_dsn, FailingClient(ValidationError.single("$", "bad"))))
    assert raised is None  # final: the job ends, nothing to retry
    state, _, outcome, _ = row(pg_dsn)
    assert (state, outcome) == ("final", "not_sent")


def test_a_sent_row_whose_message_is_now_refused_ends_unknown_not_refused(pg_dsn: str) -> None:
    # An earlier attempt sent it; this version's validation refuses the recorded message.
    plan_one_row(pg_dsn, state="sent", attempts=1)
    (raised,) = asyncio.run(run_jobs(pg_dsn, FailingClient(ValidationError.single("$", "bad"))))
    assert raised is None  # final: retrying cannot help
    state, _, outcome, _ = row(pg_dsn)
    assert (state, outcome) == ("final", "unknown")  # not "failed" (refused): it may be stored
    with psycopg.connect(pg_dsn) as conn:
        found = conn.execute(
            "SELECT reason_text FROM payments_bulk_rows WHERE run_id = %s AND line = %s",
            (RUN, LINE),
        ).fetchone()
    assert found is not None
    assert "an earlier attempt sent this message" in found[0]


class DecidedElsewhere(FailingClient):
    """While this attempt runs, another execution of the job learns the row's outcome."""

    def __init__(self, error: Exception, dsn: str) -> None:
        super().__init__(error)
        self.dsn = dsn

    async def request_cancellation(self, message: Any) -> Any:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(
                "UPDATE payments_bulk_rows SET state = 'final', outcome = 'accepted' "
                "WHERE run_id = %s AND line = %s",
                (RUN, LINE),
            )
        return await super().request_cancellation(message)


@pytest.mark.parametrize(
    "error",
    [
        ValidationError.single("$", "bad"),  # would end "unknown"
        ApiError("already used", status=400, method="POST", path=CAMT056_PATH),  # "failed"
    ],
    ids=["not-resent", "refused"],
)
def test_a_failed_attempt_never_overwrites_an_outcome_another_execution_learnt(
    pg_dsn: str, error: Exception
) -> None:
    plan_one_row(pg_dsn, state="sent", attempts=1)
    (raised,) = asyncio.run(run_jobs(pg_dsn, DecidedElsewhere(error, pg_dsn)))
    assert raised is None
    state, _, outcome, _ = row(pg_dsn)
    assert (state, outcome) == ("final", "accepted")
