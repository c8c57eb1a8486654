"""Distributed bulk runs on procrastinate: real PostgreSQL, real worker processes, the sandbox.

Every claim is checked against the sandbox's own state (what it stored) and the queue's
tables (what jobs exist), not against what the commands print.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from payments_async import PaymentsClient
from payments_async._constants import SANDBOX_CLIENT_ID
from payments_async.bulk import (
    RESULT_COLUMNS,
    PlannedRow,
    open_journal,
    queue_status,
    run_worker,
)
from payments_async.bulk import _queue as queue
from payments_async.sandbox import FaultConfig, SandboxConfig
from tests.support.cli import (
    FakeService,
    ThreadedSandbox,
    bulk_rows,
    fake_service,
    precreate_payments,
    read_results,
    threaded_sandbox,
    write_csv,
)

ROOT = Path(__file__).resolve().parents[2]
# The --grace of the workers these tests stop or interrupt: short, so that a test waits past
# it in moments (the default is for production, where rows take longer).
GRACE = 1.5


def _cli(sb: ThreadedSandbox, *args: str) -> list[str]:
    return [sys.executable, "-m", "payments_async", "--sandbox", "--base-url", sb.url, *args]


def _run(cmd: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def _worker(sb: ThreadedSandbox, dsn: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        _cli(
            sb,
            "worker",
            "--queue",
            dsn,
            "--concurrency",
            "16",
            "--timeout",
            "60",
            "--heartbeat",
            "0.5",
            "--stalled-after",
            "3",
            *extra,
        ),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _jobs(dsn: str) -> list[tuple[str, str]]:
    with psycopg.connect(dsn) as conn:
        return [
            (str(lock), str(status))
            for lock, status in conn.execute(
                "SELECT queueing_lock, status FROM procrastinate_jobs"
            ).fetchall()
        ]


def _job_lines(dsn: str) -> Counter[int]:
    """How many jobs (of any status) list each row."""
    with psycopg.connect(dsn) as conn:
        return Counter(
            int(line)
            for (line,) in conn.execute(
                "SELECT jsonb_array_elements_text(args->'lines') FROM procrastinate_jobs"
            ).fetchall()
        )


def _one_job_per_batch(dsn: str, rows: int) -> None:
    """Every row is in exactly one job, jobs of `queue.JOB_ROWS` rows, each its own lock."""
    jobs = _jobs(dsn)
    assert len(jobs) == -(-rows // queue.JOB_ROWS)
    assert len({lock for lock, _ in jobs}) == len(jobs)
    lines = _job_lines(dsn)
    assert len(lines) == rows
    assert set(lines.values()) == {1}


def _stored(sb: ThreadedSandbox) -> Counter[str]:
    stored = [c for c in sb.cancellations() if c.client_id == SANDBOX_CLIENT_ID]
    return Counter(c.original_end_to_end_id for c in stored)


def test_queue_run_end_to_end_with_status_and_results(pg_dsn: str, tmp_path: Path) -> None:
    config = SandboxConfig(processing_delay=3600, settlement_delay=0.1)
    with threaded_sandbox(config) as sb:
        rows = bulk_rows(80, prefix="E2E-Q")
        paid = {r["original_end_to_end_id"] for r in rows[::2]}
        precreate_payments(sb, sorted(paid))
        src = write_csv(tmp_path / "q.csv", rows)
        queued = _run(_cli(sb, "--json", "bulk-cancel", str(src), "--queue", pg_dsn, "--no-wait"))
        assert queued.returncode == 0, queued.stderr
        info = json.loads(queued.stdout)
        assert info["rows"] == 80
        assert info["enqueued"] == 80
        assert info["planned"] is True
        assert sb.stats()["cancellations_stored"] == 0  # queued, nothing sent yet

        status = _run(_cli(sb, "--json", "bulk-status", "--queue", pg_dsn))
        assert status.returncode == 3  # not final yet
        assert json.loads(status.stdout)["queued"] == 80

        worker = _run(_cli(sb, "worker", "--queue", pg_dsn, "--concurrency", "8", "--once"))
        assert worker.returncode == 0, worker.stderr

        status = _run(_cli(sb, "--json", "bulk-status", "--queue", pg_dsn))
        st = json.loads(status.stdout)
        assert status.returncode == 1  # all final, half rejected
        assert st["outcomes"] == {"accepted": 40, "rejected": 40}
        assert st["queued"] == 0

        out = tmp_path / "q.results.csv"
        res = _run(_cli(sb, "bulk-results", "--queue", pg_dsn, "--output", str(out)))
        assert res.returncode == 0, res.stderr
        results = read_results(out)
        assert tuple(results[0]) == RESULT_COLUMNS  # the single-process runner's columns
        assert [int(r["line"]) for r in results] == list(range(2, 82))
        for r in results:
            expected = "accepted" if r["original_end_to_end_id"] in paid else "rejected"
            assert r["outcome"] == expected
        assert max(_stored(sb).values()) == 1
        assert sb.stats()["cancellations_stored"] == 80


def _counts(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        return dict(
            conn.execute("SELECT state, COUNT(*) FROM payments_bulk_rows GROUP BY state").fetchall()
        )


def _last_worker_row(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT COALESCE(MAX(id), 0) FROM procrastinate_workers").fetchone()
    return int(row[0]) if row is not None else 0


def _wait_for_worker_row(dsn: str, *, after: int, proc: subprocess.Popen[str]) -> int:
    """The id of the first worker registered after row ``after`` (the one just started)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        with psycopg.connect(dsn) as conn:
            row = conn.execute(
                "SELECT MIN(id) FROM procrastinate_workers WHERE id > %s", (after,)
            ).fetchone()
        if row is not None and row[0] is not None:
            return int(row[0])
        time.sleep(0.05)
    raise AssertionError("the worker never registered")


def _jobs_doing(dsn: str, worker_id: int) -> list[int]:
    with psycopg.connect(dsn) as conn:
        return [
            int(r[0])
            for r in conn.execute(
                "SELECT id FROM procrastinate_jobs WHERE status = 'doing' AND worker_id = %s",
                (worker_id,),
            ).fetchall()
        ]


def _stop(procs: list[subprocess.Popen[str]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate(timeout=30)


KILL_ROWS = 600
KILL_FAULTS = FaultConfig(
    error_503=0.02,
    commit_then_drop=0.03,  # stored, then the answer is lost: the retry must get a 200
    seed=11,
)


def test_sigkill_one_of_three_workers_loses_nothing_and_stores_nothing_twice(
    pg_dsn: str, tmp_path: Path
) -> None:
    config = SandboxConfig(processing_delay=3600, settlement_delay=1.0, faults=KILL_FAULTS)
    with threaded_sandbox(config) as sb:
        rows = bulk_rows(KILL_ROWS, prefix="E2E-QK")
        paid = {r["original_end_to_end_id"] for r in rows[::3]}
        precreate_payments(sb, sorted(paid))
        src = write_csv(tmp_path / "kill.csv", rows)
        queued = _run(_cli(sb, "--json", "bulk-cancel", str(src), "--queue", pg_dsn, "--no-wait"))
        assert queued.returncode == 0, queued.stderr
        # The victim starts alone, so that its row in procrastinate_workers is known: the
        # jobs it holds when it dies are then exactly the ones that must be run again.
        before = _last_worker_row(pg_dsn)
        victim = _worker(sb, pg_dsn)
        workers = [victim]
        try:
            victim_id = _wait_for_worker_row(pg_dsn, after=before, proc=victim)
            workers += [_worker(sb, pg_dsn) for _ in range(2)]
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                c = _counts(pg_dsn)
                if (
                    c.get("acknowledged", 0) + c.get("final", 0) >= KILL_ROWS // 4
                    and _jobs_doing(pg_dsn, victim_id)  # killed while it holds jobs
                ):
                    break
                assert all(w.poll() is None for w in workers)
                time.sleep(0.05)
            os.kill(victim.pid, signal.SIGKILL)
            victim.communicate(timeout=30)
            at_kill = _counts(pg_dsn)
            # A dead worker's jobs stay 'doing' under its id until another worker finds
            # them stalled, long after this read.
            doing = _jobs_doing(pg_dsn, victim_id)
            assert at_kill.get("final", 0) < KILL_ROWS, at_kill  # it really was cut short
            workers.append(_worker(sb, pg_dsn))  # a replacement, as an operator would

            # Generous: under a loaded machine the tail (rows waiting on their outcome)
            # can take minutes; the loop ends as soon as every row is final.
            deadline = time.monotonic() + 300
            while _counts(pg_dsn).get("final", 0) < KILL_ROWS:
                assert time.monotonic() < deadline, _counts(pg_dsn)
                time.sleep(0.2)
        finally:
            _stop(workers)
        assert victim.returncode == -signal.SIGKILL
        assert doing  # jobs were running when it died

        # exactly once at the service: one stored cancellation per payment, no refusals
        per_payment = _stored(sb)
        assert set(per_payment) == {r["original_end_to_end_id"] for r in rows}
        assert max(per_payment.values()) == 1
        stats = sb.stats()
        assert stats["cancellations_stored"] == KILL_ROWS
        assert stats["replays_answered"] > 0  # resends were answered 200, not stored again
        assert stats["replays_changed_body"] == 0  # every resend was the very same message

        # each row in one job, every one succeeded (the dead worker's jobs were run again)
        _one_job_per_batch(pg_dsn, KILL_ROWS)
        assert {status for _, status in _jobs(pg_dsn)} == {"succeeded"}
        with psycopg.connect(pg_dsn) as conn:
            # the dead worker's jobs were put back (doing -> todo) and started again
            rerun = conn.execute(
                "SELECT COUNT(*) FROM (SELECT job_id FROM procrastinate_events "
                "WHERE type = 'started' AND job_id = ANY(%s) GROUP BY job_id "
                "HAVING COUNT(*) > 1) AS twice",
                (doing,),
            ).fetchone()
            put_back = conn.execute(
                "SELECT COUNT(DISTINCT job_id) FROM procrastinate_events "
                "WHERE type = 'deferred_for_retry' AND job_id = ANY(%s)",
                (doing,),
            ).fetchone()
        assert rerun is not None
        assert rerun[0] == len(doing)  # every job it held was started again
        assert put_back is not None
        assert put_back[0] >= rerun[0]

        out = tmp_path / "kill.results.csv"
        assert (
            _run(_cli(sb, "bulk-results", "--queue", pg_dsn, "--output", str(out))).returncode == 0
        )
        results = read_results(out)
        assert len(results) == KILL_ROWS
        by_id = {c.payments_service_id: c for c in sb.cancellations()}
        for r in results:
            assert by_id[r["payments_service_id"]].assignment_id == r["assignment_id"]
            expected = "accepted" if r["original_end_to_end_id"] in paid else "rejected"
            assert r["outcome"] == expected
        print(f"at kill: {at_kill}, jobs running {len(doing)}, run again {rerun[0]}, stats {stats}")


def test_enqueueing_twice_and_racing_commands_queue_each_row_once(
    pg_dsn: str, tmp_path: Path
) -> None:
    config = SandboxConfig(processing_delay=3600, settlement_delay=0)
    with threaded_sandbox(config) as sb:
        rows = bulk_rows(300, prefix="E2E-QR")
        src = write_csv(tmp_path / "race.csv", rows)
        cmd = _cli(sb, "--json", "bulk-cancel", str(src), "--queue", pg_dsn, "--no-wait")
        racers = [
            subprocess.Popen(
                cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            for _ in range(2)
        ]
        outs = [p.communicate(timeout=120) for p in racers]
        assert [p.returncode for p in racers] == [0, 0], outs
        reports = [json.loads(out) for out, _ in outs]
        assert len({r["run_id"] for r in reports}) == 1  # one run for one input
        assert sorted(r["planned"] for r in reports) == [False, True]  # one plan
        assert sum(r["enqueued"] for r in reports) == 300  # each row queued by one of them
        again = json.loads(_run(cmd).stdout)
        assert again["enqueued"] == 0
        _one_job_per_batch(pg_dsn, 300)

        assert _run(_cli(sb, "worker", "--queue", pg_dsn, "--once")).returncode == 0
        after = json.loads(_run(cmd).stdout)  # every row final: nothing to queue
        assert after["enqueued"] == 0
        _one_job_per_batch(pg_dsn, 300)
        assert max(_stored(sb).values()) == 1
        assert sb.stats()["cancellations_stored"] == 300


def test_a_worker_once_runs_the_rows_it_took_to_their_outcome(pg_dsn: str, tmp_path: Path) -> None:
    # The rows' outcomes come later than the grace a stopping worker gives its rows. A
    # worker run --once stops because no job is waiting, not because it was told to: it
    # must wait for the rows it took, not cut them after the grace and exit 0 with their
    # jobs put back for a retry that no worker is left to run (on a loaded machine, rows
    # that were slow to send then read as never sent).
    config = SandboxConfig(processing_delay=3600, settlement_delay=GRACE + 2)
    with threaded_sandbox(config) as sb:
        src = write_csv(tmp_path / "slow.csv", bulk_rows(3, prefix="E2E-QO"))
        queued = _run(_cli(sb, "--json", "bulk-cancel", str(src), "--queue", pg_dsn, "--no-wait"))
        assert queued.returncode == 0, queued.stderr
        worker = _run(_cli(sb, "worker", "--queue", pg_dsn, "--once", "--grace", str(GRACE)))
        assert worker.returncode == 0, worker.stderr
        assert _row_states(pg_dsn) == {"final:rejected:false": 3}
        assert [status for _, status in _jobs(pg_dsn)] == ["succeeded"]
        assert sb.stats()["cancellations_stored"] == 3


_FETCH_CANDIDATE = """
EXPLAIN SELECT jobs.id FROM procrastinate_jobs AS jobs
 WHERE jobs.status = 'todo' AND jobs.queue_name = ANY(ARRAY['payments-bulk'])
   AND (jobs.scheduled_at IS NULL OR jobs.scheduled_at <= now())
 ORDER BY jobs.priority DESC, jobs.id ASC LIMIT 1 FOR UPDATE OF jobs SKIP LOCKED
"""


def test_enqueueing_leaves_statistics_that_let_each_fetch_take_the_first_job(
    pg_dsn: str, tmp_path: Path
) -> None:
    # Issue 15: without statistics after the insert, procrastinate's fetch query read and
    # sorted every waiting job for each fetch (~6 ms per job with 10,000 waiting).
    # 2000 rows are one job per `queue.JOB_ROWS` rows.
    with threaded_sandbox(SandboxConfig(processing_delay=3600, settlement_delay=0)) as sb:
        src = write_csv(tmp_path / "stats.csv", bulk_rows(2000, prefix="E2E-QS"))
        queued = _run(_cli(sb, "--json", "bulk-cancel", str(src), "--queue", pg_dsn, "--no-wait"))
        assert queued.returncode == 0, queued.stderr
    with psycopg.connect(pg_dsn) as conn:
        rec = conn.execute(
            "SELECT reltuples FROM pg_class WHERE relname = 'procrastinate_jobs'"
        ).fetchone()
        plan = "\n".join(str(r[0]) for r in conn.execute(_FETCH_CANDIDATE).fetchall())
    assert rec is not None
    assert rec[0] >= 2000 // queue.JOB_ROWS  # analysed (never-analysed tables say -1)
    assert "procrastinate_jobs_priority_idx_v1" in plan, plan
    assert "Sort" not in plan, plan


def test_an_unreachable_database_is_one_line_and_exit_3(tmp_path: Path) -> None:
    bad = f"postgresql://u:pw-secret@/db?host={tmp_path}&connect_timeout=2"
    for args in (
        ["bulk-status", "--queue", bad],
        ["bulk-results", "--queue", bad, "--output", str(tmp_path / "r.csv")],
        ["worker", "--queue", bad, "--once"],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "payments_async", "--sandbox", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 3, (args, proc.stderr)  # a service error: rerun later
        assert "Traceback" not in proc.stderr
        assert "pw-secret" not in proc.stderr
        assert "cannot connect to PostgreSQL" in proc.stderr


UNREADABLE_ADDRESSES = [
    "mysql://bulk:pw-secret@localhost/q",  # another scheme: libpq reads key=value
    "postgresql://bulk:pw secret@localhost/q",  # a space in the password
    "postgresql://bulk:pw-secret%zz@localhost/q",  # a bad percent-encoding
    "postgresql://bulk:pw-secret@[::1/q",  # an unclosed IPv6 bracket
]


def _refused_address_commands(tmp_path: Path, url: str) -> list[list[str]]:
    src = write_csv(tmp_path / "x.csv", bulk_rows(1))
    commands = [
        ["bulk-status", "--queue", url],
        ["bulk-results", "--queue", url, "--output", str(tmp_path / "r.csv")],
        ["worker", "--queue", url, "--once"],
        ["bulk-cancel", str(src), "--queue", url, "--no-wait"],
    ]
    if url.startswith("postgresql://"):  # the single-process runner's journal
        results = str(tmp_path / "r.csv")
        commands.append(["bulk-cancel", str(src), "--journal", url, "--results", results])
    return commands


def _refused_address_is_one_line(
    url: str, args: list[str], flags: list[str], code: int, said: str
) -> None:
    # Some libpq versions read a space in a password; that address is then only
    # unreachable (nothing listens there): exit 3, like any database that is down.
    read_by_libpq = "Connection refused" in said
    assert code == (3 if read_by_libpq else 2), (args, flags, said)
    assert not read_by_libpq or " " in url, (args, said)
    assert flags == ["-vv"] or "Traceback" not in said, (args, said)  # -v shows them
    assert "secret" not in said, (args, flags)
    assert "cannot connect to PostgreSQL" in said, (args, flags, said)


@pytest.mark.parametrize("url", UNREADABLE_ADDRESSES)
def test_an_address_libpq_cannot_read_is_one_line_without_the_password(
    tmp_path: Path, url: str
) -> None:
    """Every command and output mode, in process: the same code as the program's."""
    from click.testing import CliRunner

    from payments_async.cli import cli

    with threaded_sandbox() as sb:  # bulk-cancel --journal checks the service first
        pre = ["--sandbox", "--base-url", sb.url]
        for args in _refused_address_commands(tmp_path, url):
            for flags in ([], ["--json"], ["-vv"]):
                result = CliRunner().invoke(cli, [*pre, *flags, *args])
                said = result.stdout + result.stderr
                _refused_address_is_one_line(url, args, flags, result.exit_code, said)


def test_an_address_libpq_cannot_read_is_one_line_from_the_program(tmp_path: Path) -> None:
    """The same as a real process shows it: its stderr (and with --json, its stdout)."""
    url = UNREADABLE_ADDRESSES[2]
    with threaded_sandbox() as sb:
        cli = [sys.executable, "-m", "payments_async", "--sandbox", "--base-url", sb.url]
        status, _, _, cancel, _ = _refused_address_commands(tmp_path, url)
        for args, flags in ((status, []), (cancel, ["--json"])):
            proc = subprocess.run(
                [*cli, *flags, *args], cwd=ROOT, capture_output=True, text=True, timeout=60
            )
            said = proc.stdout + proc.stderr
            _refused_address_is_one_line(url, args, flags, proc.returncode, said)
            lines = (proc.stdout if flags else proc.stderr).strip().splitlines()
            assert len(lines) == 1, said


def test_status_and_results_of_a_database_without_runs_are_one_line(
    pg_dsn: str, tmp_path: Path
) -> None:
    for args in (
        ["bulk-status", "--queue", pg_dsn],
        ["bulk-results", "--queue", pg_dsn, "--output", str(tmp_path / "r.csv")],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "payments_async", "--sandbox", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2, (args, proc.stderr)
        assert "Traceback" not in proc.stderr
        assert "no bulk runs" in proc.stderr
    assert not (tmp_path / "r.csv").exists()


async def test_status_of_a_journal_database_without_a_queue(pg_dsn: str) -> None:
    # A single-process run keeps its journal in PostgreSQL (--journal): the database has
    # the journal's tables but not procrastinate's. bulk-status reads it, nothing queued.
    journal = open_journal(pg_dsn, input_sha256="a" * 64, new_run_id="RUNJ", input_name="j.csv")
    journal.plan([PlannedRow(2, "E2E", "BC-1", "CX-1", b"{}")])
    await journal.aclose()
    st = queue_status(pg_dsn)
    assert (st.run_id, st.rows, st.queued, st.states) == ("RUNJ", 1, 0, {"planned": 1})


def test_bad_input_for_the_queue_is_told_as_for_the_single_process_runner(
    tmp_path: Path,
) -> None:
    """Checked before any connection: the same problems, in the --json error too."""
    from click.testing import CliRunner

    from payments_async.cli import cli

    bad = tmp_path / "bad.csv"
    bad.write_text(
        "original_end_to_end_id,amount\nE2E-1,abc\n", encoding="utf-8"
    )  # columns missing, a bad amount
    latin1 = tmp_path / "latin1.csv"
    latin1.write_bytes(b"original_end_to_end_id,amount\nCaf\xe9,1.00\n")
    nowhere = "postgresql://u:pw@127.0.0.1:1/db"  # never reached
    told = {}
    for mode in (["--journal", str(tmp_path / "j.sqlite")], ["--queue", nowhere]):
        result = CliRunner().invoke(cli, ["--json", "--sandbox", "bulk-cancel", str(bad), *mode])
        assert result.exit_code == 2, result.output
        error = json.loads(result.stdout.splitlines()[-1])
        assert error["problems"], error
        told[mode[0]] = error
        result = CliRunner().invoke(cli, ["--sandbox", "bulk-cancel", str(latin1), *mode])
        assert result.exit_code == 2, result.output
        assert "line 2" in result.stderr, result.stderr
    assert told["--journal"]["problems"] == told["--queue"]["problems"]


def test_losing_the_database_while_watching_a_run_is_one_line(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from payments_async import bulk
    from payments_async.cli import cli

    def gone(*args: object) -> None:
        raise bulk.JournalError("cannot read the PostgreSQL journal: the connection was lost")

    monkeypatch.setattr(bulk, "queue_status", gone)
    src = write_csv(tmp_path / "watch.csv", bulk_rows(2, prefix="E2E-WATCH"))
    with threaded_sandbox() as sb:
        result = CliRunner().invoke(
            cli, ["--sandbox", "--base-url", sb.url, "bulk-cancel", "--queue", pg_dsn, str(src)]
        )
    assert result.exit_code == 3, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    errors = [x for x in result.stderr.splitlines() if x.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    assert "the connection was lost" in errors[0]
    assert "bulk-status" in result.stderr  # how to watch it again
    assert [status for _, status in _jobs(pg_dsn)] == ["todo"]  # queued all the same
    lines = _job_lines(pg_dsn)
    assert (len(lines), set(lines.values())) == (2, {1})  # both rows, in one job


def test_bulk_results_refuses_an_output_it_could_not_write_before_reading(
    pg_dsn: str, tmp_path: Path
) -> None:
    src = write_csv(tmp_path / "o.csv", bulk_rows(3))
    cmd = [sys.executable, "-m", "payments_async", "--sandbox"]
    queued = _run([*cmd, "bulk-cancel", str(src), "--queue", pg_dsn, "--no-wait"])
    assert queued.returncode == 0, queued.stderr
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "afile").write_text("x")
    for output in (str(fifo), "", str(tmp_path / "afile" / "r.csv")):
        proc = _run([*cmd, "bulk-results", "--queue", pg_dsn, "--output", output])
        assert proc.returncode == 2, (output, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert fifo.is_fifo()  # not replaced by a regular file


@pytest.mark.parametrize(
    "args",
    [
        ["bulk-cancel", "SRC", "--no-wait"],
        ["bulk-cancel", "SRC", "--queue", "postgresql://x/y", "--journal", "j.sqlite"],
        ["bulk-cancel", "SRC", "--queue", "postgresql://x/y", "--results", "r.csv"],
        ["worker", "--queue", "postgresql://x/y", "--heartbeat", "5", "--stalled-after", "2"],
        ["worker", "--queue", "postgresql://x/y", "--heartbeat", "nan"],
        ["worker", "--queue", "postgresql://x/y", "--stalled-after", "nan"],
        ["worker", "--queue", "postgresql://x/y", "--stalled-after", "inf"],
        ["worker", "--queue", "postgresql://x/y", "--grace", "-1"],
        ["worker", "--queue", "postgresql://x/y", "--grace", "nan"],
    ],
)
def test_option_mistakes_exit_2(tmp_path: Path, args: list[str]) -> None:
    src = write_csv(tmp_path / "x.csv", bulk_rows(1))
    cmd = [str(src) if a == "SRC" else a for a in args]
    proc = subprocess.run(
        [sys.executable, "-m", "payments_async", "--sandbox", *cmd],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "cannot connect" not in proc.stderr  # refused before any connection


@pytest.mark.parametrize("grace", [-1.0, float("nan"), float("inf")])
async def test_run_worker_refuses_a_grace_that_is_not_seconds_before_connecting(
    grace: float,
) -> None:
    def no_client(limit: int) -> PaymentsClient:
        raise AssertionError("no client is made")

    # wait=False: without the check, the unreachable database is raised at once (the
    # test fails), not waited for
    with pytest.raises(ValueError, match="grace must be a finite number of seconds >= 0"):
        await run_worker("postgresql://nobody@127.0.0.1:1/none", no_client, grace=grace, wait=False)


def _sigterm_once_acknowledged(
    sb: ThreadedSandbox, dsn: str, src: Path, acknowledged: int
) -> tuple[int | None, str, float]:
    """Queue ``src``, start a worker, SIGTERM it once ``acknowledged`` rows are.

    Returns its exit code, its stderr and the seconds it took to stop.
    """
    queued = _run(_cli(sb, "--json", "bulk-cancel", str(src), "--queue", dsn, "--no-wait"))
    assert queued.returncode == 0, queued.stderr
    worker = _worker(sb, dsn, "--grace", str(GRACE))
    try:
        deadline = time.monotonic() + 60
        while _counts(dsn).get("acknowledged", 0) < acknowledged:
            assert time.monotonic() < deadline, _counts(dsn)
            time.sleep(0.05)
        stopped_at = time.monotonic()
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=60)
        return worker.returncode, err, time.monotonic() - stopped_at
    finally:
        _stop([worker])


def test_sigterm_puts_a_workers_rows_back_and_another_finishes_them(
    pg_dsn: str, tmp_path: Path
) -> None:
    # No row settles on its own: a worker that waited for them would never stop. Once the
    # first worker has stopped, the test settles every row the service has (those the
    # second worker sends too) through the sandbox's trigger.
    config = SandboxConfig(processing_delay=3600, settlement_delay=3600)
    with threaded_sandbox(config) as sb:
        src = write_csv(tmp_path / "term.csv", bulk_rows(200, prefix="E2E-QT"))
        code, err, took = _sigterm_once_acknowledged(sb, pg_dsn, src, 50)
        assert code == 130, err
        assert "Traceback" not in err
        assert took < GRACE + 10  # the grace, not the rows' whole wait
        at_stop = _counts(pg_dsn)
        assert at_stop.get("final", 0) == 0, at_stop  # rows were left unfinished
        second = _worker(sb, pg_dsn)
        try:
            deadline = time.monotonic() + 300
            while _counts(pg_dsn).get("final", 0) < 200:
                assert time.monotonic() < deadline, _counts(pg_dsn)
                sb.settle_pending()
                time.sleep(0.2)
        finally:
            _stop([second])
        assert max(_stored(sb).values()) == 1
        assert sb.stats()["cancellations_stored"] == 200
        assert {status for _, status in _jobs(pg_dsn)} == {"succeeded"}


def test_a_stopped_worker_waits_for_every_fetch_loop_and_puts_its_row_back(
    pg_dsn: str, tmp_path: Path
) -> None:
    # One row: one of the worker's fetch loops runs it, the others have nothing to do and
    # stop at once. The worker must still give the row its grace, then put it back in the
    # queue (not leave it "doing" for another worker to find stalled), without a traceback.
    config = SandboxConfig(processing_delay=3600, settlement_delay=3600)
    with threaded_sandbox(config) as sb:
        src = write_csv(tmp_path / "one.csv", bulk_rows(1, prefix="E2E-Q1"))
        code, err, took = _sigterm_once_acknowledged(sb, pg_dsn, src, 1)
        assert code == 130, err
        assert "Traceback" not in err
        assert GRACE < took < GRACE + 10  # the row's grace, not its whole wait
        assert [status for _, status in _jobs(pg_dsn)] == ["todo"]  # back in the queue
        assert sb.stats()["cancellations_stored"] == 1


def _row_states(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        return dict(
            conn.execute(
                "SELECT state || ':' || COALESCE(outcome, '-') || ':' || (error IS NOT NULL), "
                "COUNT(*) FROM payments_bulk_rows GROUP BY 1"
            ).fetchall()
        )


def test_a_worker_whose_requests_cannot_leave_leaves_its_rows_not_sent(
    pg_dsn: str, tmp_path: Path
) -> None:
    # The worker's token endpoint refuses it: no POST of its can leave. Its rows go back
    # to planned (as the single-process runner records them), not "sent", which would
    # read "in flight: the service may have it".
    config = SandboxConfig(processing_delay=3600, settlement_delay=0.1)
    with threaded_sandbox(config) as sb, fake_service(FakeService(token_status=401)) as down:
        rows = bulk_rows(12, prefix="E2E-QNS")
        src = write_csv(tmp_path / "ns.csv", rows)
        queued = _run(_cli(sb, "--json", "bulk-cancel", str(src), "--queue", pg_dsn, "--no-wait"))
        assert queued.returncode == 0, queued.stderr
        cmd = [sys.executable, "-m", "payments_async", "--sandbox", "--base-url", down.url]
        refused = _run([*cmd, "worker", "--queue", pg_dsn, "--concurrency", "4", "--once"])
        assert refused.returncode == 0, refused.stderr
        assert (down.requests or {}).get("camt056", 0) == 0
        assert _row_states(pg_dsn) == {"planned:-:true": 12}  # each with its error

        out = tmp_path / "ns.results.csv"
        res = _run(_cli(sb, "bulk-results", "--queue", pg_dsn, "--output", str(out)))
        assert res.returncode == 0, res.stderr
        assert {r["outcome"] for r in read_results(out)} == {"not_sent"}
        assert sb.stats()["cancellations_stored"] == 0

        # Procrastinate retries the jobs (the first retry waits BULK_JOB_RETRY_WAIT):
        # a worker that reaches the service sends every row, once.
        deadline = time.monotonic() + 60
        while _counts(pg_dsn).get("final", 0) < 12:
            assert time.monotonic() < deadline, _counts(pg_dsn)
            up = _run(_cli(sb, "worker", "--queue", pg_dsn, "--concurrency", "4", "--once"))
            assert up.returncode == 0, up.stderr
            time.sleep(0.5)
        assert max(_stored(sb).values()) == 1
        assert sb.stats()["cancellations_stored"] == 12


def test_ctrl_c_on_a_worker_once_waits_for_its_rows_outcomes(pg_dsn: str, tmp_path: Path) -> None:
    # Ctrl-C (SIGINT, by pid) on `worker --once` lets the rows it took run to their
    # outcomes within --timeout, not the stop grace of a worker serving the queue: their
    # outcomes are decided by the test, one before and the others after that grace.
    config = SandboxConfig(processing_delay=3600, settlement_delay=3600)  # until resolved
    with threaded_sandbox(config) as sb:
        rows = bulk_rows(3, prefix="E2E-QINT")
        precreate_payments(sb, [r["original_end_to_end_id"] for r in rows])
        src = write_csv(tmp_path / "int.csv", rows)
        queued = _run(_cli(sb, "--json", "bulk-cancel", str(src), "--queue", pg_dsn, "--no-wait"))
        assert queued.returncode == 0, queued.stderr
        worker = subprocess.Popen(
            _cli(sb, "worker", "--queue", pg_dsn, "--once", "--timeout", "120", "--grace",
                 str(GRACE)),
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            _wait_for(lambda: _row_states(pg_dsn) == {"acknowledged:-:false": 3}, worker)
            worker.send_signal(signal.SIGINT)
            interrupted = time.monotonic()
            cxl = sorted(sb.cancellations(), key=lambda c: c.original_end_to_end_id)
            sb.call(sb.server.resolve_cancellation, cxl[0].payments_service_id, "accepted")
            _wait_for(lambda: _row_states(pg_dsn).get("final:accepted:false") == 1, worker)
            # past the grace a worker serving the queue gives its rows, the others are
            # still waited for: the process runs, their job is not put back
            _wait_for(lambda: time.monotonic() - interrupted > GRACE + 0.5, worker)
            assert [status for _, status in _jobs(pg_dsn)] == ["doing"]
            for c in cxl[1:]:
                sb.call(sb.server.resolve_cancellation, c.payments_service_id, "accepted")
            _, stderr = worker.communicate(timeout=120)
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.communicate()
        assert "Traceback" not in stderr, stderr
        assert worker.returncode == 130, stderr  # interrupted, its rows finished
        assert _row_states(pg_dsn) == {"final:accepted:false": 3}
        assert [status for _, status in _jobs(pg_dsn)] == ["succeeded"]
        assert sb.stats()["requests"].get("camt056") == 3  # nothing resent
        assert sb.stats()["cancellations_stored"] == 3


def _wait_for(done: Callable[[], bool], worker: subprocess.Popen[str], limit: float = 120) -> None:
    """Until ``done()``, while the worker runs (its exit before that is the failure)."""
    deadline = time.monotonic() + limit
    while not done():
        assert worker.poll() is None, worker.communicate()[1]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
