"""Pause, resume and abort a running bulk run from another process, local and queued:
counted at the sandbox (what it was sent, what it stored), read back from the journal.

The scale is an option: ``PAYMENTS_CONTROL_ROWS`` rows (a few hundred by default; the
issue's 20,000 as a one-off run). A pause is checked over a window after it is obeyed
(the runner and every worker read the control state at most once per
``CONTROL_INTERVAL``): no POST reaches the sandbox then, while outcome reads go on.
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

from payments_async._constants import POLL_MAX, SANDBOX_CLIENT_ID
from payments_async.bulk import (
    journal_counts,
    read_results,
)
from payments_async.bulk._control import (
    ABORTED_ERROR,
    CONTROL_INTERVAL,
    Action,
    read_control,
    record_action,
)
from payments_async.sandbox import SandboxConfig
from tests.factories import accept_row, planned_journal
from tests.support.cli import ThreadedSandbox, bulk_rows, threaded_sandbox, write_csv

ROOT = Path(__file__).resolve().parents[2]
ROWS = int(os.environ.get("PAYMENTS_CONTROL_ROWS", "400"))
RATE = float(os.environ.get("PAYMENTS_CONTROL_RATE", "20"))  # requests/s, polls included: the
# run lasts long enough for a few command lines to start between resume and abort
PATIENCE = 120 + ROWS / 40  # seconds a run gets to get going, or to wind down
QUIET = 2.0  # seconds a paused run is watched for POSTs
# A pause is obeyed within this: the control read once per interval, the rate booked at
# most a second ahead, the requests in flight answered.
OBEYED = 2 * CONTROL_INTERVAL + 1.0
# The rows sent before a pause are still pending, and read, during it: a pending row is
# read at least once per POLL_MAX, however late a loaded machine obeys the pause. So no row
# settles on its own; once the pause has been watched, the test settles every pending row
# through the sandbox's trigger (`ThreadedSandbox.settle_pending`), and goes on settling
# those sent later until the run has ended, instead of waiting for a settlement delay.
CONFIG = SandboxConfig(processing_delay=3600, settlement_delay=3600)


def _cli(sb: ThreadedSandbox, *args: str) -> list[str]:
    return [sys.executable, "-m", "payments_async", "--sandbox", "--base-url", sb.url, *args]


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=PATIENCE)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def _posts(sb: ThreadedSandbox) -> int:
    return int(sb.stats()["requests"].get("camt056", 0))


def _reads(sb: ThreadedSandbox) -> int:
    requests = sb.stats()["requests"]
    return int(sum(n for kind, n in requests.items() if kind != "camt056"))


def _until(
    done: Callable[[], bool],
    what: str,
    timeout: float = PATIENCE,
    explain: Callable[[], str] = lambda: "",
) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} {explain()}".strip())
        time.sleep(0.05)


def _stored(sb: ThreadedSandbox) -> Counter[str]:
    return Counter(
        c.original_end_to_end_id for c in sb.cancellations() if c.client_id == SANDBOX_CLIENT_ID
    )


def _control(sb: ThreadedSandbox, action: str, *where: str) -> dict[str, object]:
    proc = _run(_cli(sb, "--json", "bulk-control", action, *where, "--reason", f"test {action}"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out: dict[str, object] = json.loads(proc.stdout)
    return out


def _pause_resume_abort(
    sb: ThreadedSandbox, where: list[str], sent: Callable[[], int]
) -> tuple[int, int]:
    """Pause once some rows are sent, check that nothing is POSTed while paused (outcomes
    still read), resume, then pause again and abort midway. Returns the POSTs before the
    abort and the rows sent then."""
    _until(lambda: sent() >= ROWS // 10, "the run never got going")
    paused = _control(sb, "pause", *where)
    assert paused["control"]["state"] == "paused"  # type: ignore[index]
    time.sleep(OBEYED)
    watched = time.monotonic()
    before, reads = _posts(sb), _reads(sb)
    _until(lambda: _reads(sb) > reads, "outcome reads stopped while paused", timeout=POLL_MAX + 1)
    time.sleep(max(0.0, watched + QUIET - time.monotonic()))
    after, reads_after = _posts(sb), _reads(sb)
    print(f"paused {time.monotonic() - watched:.1f} s: POSTs {before} -> {after}, "
          f"outcome reads {reads} -> {reads_after}")  # fmt: skip
    assert after == before, "a POST reached the service while the run was paused"
    assert sent() < ROWS, "the run ended before it could be aborted: raise the scale"
    # watched: the rows sent so far settle now, and are read while the run is resumed,
    # paused again and aborted (none of that waits for them)
    assert sb.settle_pending() > 0
    resumed = _control(sb, "resume", *where)
    assert resumed["control"]["state"] == "running"  # type: ignore[index]
    _until(lambda: _posts(sb) > before, "sending did not go on after resume", timeout=30)
    # Paused again, so that the run cannot end on its own before the abort (on a loaded
    # machine a command line takes seconds to start): an abort of a paused run.
    _control(sb, "pause", *where)
    assert sent() < ROWS, "the run ended before it could be aborted: raise the scale"
    aborted = _control(sb, "abort", *where)
    assert aborted["control"]["state"] == "aborted"  # type: ignore[index]
    return _posts(sb), sent()


def _check_aborted(sb: ThreadedSandbox, results: list[dict[str, object]]) -> int:
    """Every row is stored at most once, and every row not stored is aborted (never both):
    the outcome ``aborted``, its reason saying so."""
    stored = _stored(sb)
    assert max(stored.values()) == 1
    aborted = {str(r["original_end_to_end_id"]) for r in results if r["outcome"] == "aborted"}
    assert aborted, "no row was aborted"
    assert not aborted & set(stored)
    assert len(aborted) + len(stored) == ROWS
    print(f"{ROWS} rows: {len(stored)} stored once each, {len(aborted)} aborted")
    for r in results:
        if str(r["original_end_to_end_id"]) in aborted:
            assert str(r["reason"]).startswith(ABORTED_ERROR)
    return len(aborted)


def test_a_local_run_is_paused_resumed_and_aborted_from_another_process(tmp_path: Path) -> None:
    with threaded_sandbox(CONFIG) as sb:
        src = write_csv(tmp_path / "ctl.csv", bulk_rows(ROWS, prefix="E2E-CTL"))
        journal = tmp_path / "ctl.journal.sqlite"
        out = tmp_path / "ctl.results.csv"
        run = subprocess.Popen(
            _cli(sb, "--json", "bulk-cancel", str(src), "--journal", str(journal),
                 "--results", str(out), "--concurrency", "8", "--rate", str(RATE),
                 "--timeout", "60", "--yes"),
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:

            def sent() -> int:
                counts = journal_counts(journal) if journal.exists() else {}
                return counts.get("acknowledged", 0) + counts.get("final", 0)

            _pause_resume_abort(sb, ["--journal", str(journal)], sent)
            # the run waits for the outcomes of the rows it sent: settled as they come
            deadline = time.monotonic() + PATIENCE
            while True:
                sb.settle_pending()
                try:
                    stdout, stderr = run.communicate(timeout=0.1)
                    break
                except subprocess.TimeoutExpired:
                    assert time.monotonic() < deadline, "the aborted run never ended"
        finally:
            if run.poll() is None:
                run.kill()
                run.communicate()
        assert "Traceback" not in stderr, stderr
        assert run.returncode == 3, stderr  # rows not sent: not every row is done
        aborted = _check_aborted(sb, list(read_results(out)))
        summary = json.loads(stdout)
        assert (summary["aborted"], summary["not_sent"]) == (aborted, 0)

        status = _run(_cli(sb, "--json", "bulk-status", "--journal", str(journal)))
        shown = json.loads(status.stdout)
        assert status.returncode == 3  # the journal file gives the summary's outcomes
        assert (shown["aborted"], shown["outcomes"]["aborted"]) == (aborted, aborted)
        words = ("accepted", "rejected", "unknown", "refused", "not_sent", "aborted")
        assert {w: shown[w] for w in words} == {w: summary[w] for w in words}
        assert sum(shown[w] for w in words) == ROWS
        control = shown["control"]
        assert control["state"] == "aborted"
        assert control["aborted_rows"] == aborted
        actions = [e["action"] for e in control["history"]]
        assert actions == ["confirmed", "paused", "resumed", "paused", "aborted"]
        assert control["history"][0]["counts"]["to_send"] == ROWS
        assert all("@" in e["by"] for e in control["history"])
        # an aborted run cannot be resumed: one line, exit 2, nothing recorded
        again = _run(_cli(sb, "bulk-control", "resume", "--journal", str(journal)))
        assert again.returncode == 2
        assert again.stderr.startswith("error: run ")
        assert "aborted" in again.stderr


def _worker(sb: ThreadedSandbox, dsn: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        _cli(sb, "worker", "--queue", dsn, "--concurrency", "16", "--timeout", "60",
             "--heartbeat", "0.5", "--stalled-after", "3"),
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _states(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        return {
            str(s): int(n)
            for s, n in conn.execute(
                "SELECT state, COUNT(*) FROM payments_bulk_rows GROUP BY 1"
            ).fetchall()
        }


_LEFT: list[tuple[float, dict[str, int]]] = []


def _progress(dsn: str, since: float) -> int:
    """Rows not final yet (printed every few seconds: what a failed wait was left with)."""
    s = _states(dsn)
    left = s.get("planned", 0) + s.get("sent", 0) + s.get("acknowledged", 0)
    now = time.monotonic() - since
    if not _LEFT or now - _LEFT[-1][0] >= 5 or not left:
        _LEFT.append((now, s))
        print(f"{now:6.1f} s after the abort: {s}", flush=True)
    return left


def _left_after_abort(dsn: str) -> str:
    """What a wait after the abort was left with: the jobs by status and attempts, and
    the first rows not final with their errors (what the next failure must say)."""
    with psycopg.connect(dsn) as conn:
        jobs = conn.execute(
            "SELECT status, attempts, COUNT(*) FROM procrastinate_jobs GROUP BY 1, 2 ORDER BY 1, 2"
        ).fetchall()
        rows = conn.execute(
            "SELECT line, state, attempts, error FROM payments_bulk_rows "
            "WHERE state NOT IN ('final', 'invalid') ORDER BY line LIMIT 10"
        ).fetchall()
    return f"(progress {_LEFT[-6:]}; jobs {jobs}; rows {rows})"


def test_a_queued_run_on_two_workers_is_paused_resumed_and_aborted(
    pg_dsn: str, tmp_path: Path
) -> None:
    with threaded_sandbox(CONFIG) as sb:
        src = write_csv(tmp_path / "q.csv", bulk_rows(ROWS, prefix="E2E-QCTL"))
        queued = _run(
            _cli(sb, "--json", "bulk-cancel", str(src), "--queue", pg_dsn, "--no-wait",
                 "--rate", str(RATE), "--yes")
        )  # fmt: skip
        assert queued.returncode == 0, queued.stderr
        run_id = json.loads(queued.stdout)["run_id"]
        where = ["--queue", pg_dsn, "--run", run_id]
        workers = [_worker(sb, pg_dsn) for _ in range(2)]
        try:

            def sent() -> int:
                s = _states(pg_dsn)
                return s.get("acknowledged", 0) + s.get("final", 0)

            _pause_resume_abort(sb, where, sent)
            # every worker takes the rows still queued and ends them aborted
            aborted_at = time.monotonic()

            def settled_and_done() -> bool:
                sb.settle_pending()  # the outcomes of the rows sent, as they come
                return _progress(pg_dsn, aborted_at) == 0

            _until(
                settled_and_done,
                "rows left unfinished after the abort",
                explain=lambda: _left_after_abort(pg_dsn),
            )
            assert all(w.poll() is None for w in workers)  # obeyed without restarting
        finally:
            for w in workers:
                w.terminate()
            for w in workers:
                _, err = w.communicate(timeout=60)
                assert "Traceback" not in err, err
        out = tmp_path / "q.results.csv"
        exported = _run(_cli(sb, "bulk-results", "--queue", pg_dsn, "--output", str(out)))
        assert exported.returncode == 0, exported.stderr
        aborted = _check_aborted(sb, list(read_results(out)))

        status = _run(_cli(sb, "--json", "bulk-status", *where))
        shown = json.loads(status.stdout)
        assert status.returncode == 3  # rows aborted: not every row is done
        # aborted is an outcome of its own, and every count is its table's rows
        assert shown["aborted"] == shown["outcomes"]["aborted"] == aborted
        assert shown["not_sent"] == 0
        words = ("accepted", "rejected", "unknown", "refused", "not_sent", "aborted")
        assert sum(shown[w] for w in words) == ROWS
        control = shown["control"]
        assert control["state"] == "aborted"
        assert control["aborted_rows"] == aborted
        assert [e["action"] for e in control["history"]] == [
            "confirmed",
            "paused",
            "resumed",
            "paused",
            "aborted",
        ]


def _status_watch(journal: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "payments_async", "--json", "bulk-status", "--journal",
         str(journal), "--watch", "--interval", "0.05", *extra],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_watch_on_a_non_terminal_prints_each_interval_until_the_run_ends(tmp_path: Path) -> None:
    journal = tmp_path / "w.sqlite"
    j = planned_journal(journal, rows=2, run_id="RUNW")
    watch = _status_watch(journal)
    try:
        assert watch.stdout is not None
        first = json.loads(watch.stdout.readline())
        assert first["control"]["state"] == "running"
        assert first["states"] == {"planned": 2}
        record_action(journal, Action.PAUSED, by="ann", reason="threshold")
        while (line := json.loads(watch.stdout.readline()))["control"]["state"] != "paused":
            assert line["control"]["state"] == "running"
        assert line["control"]["by"] == "ann"
        accept_row(j, 2)
        accept_row(j, 3)
        stdout, stderr = watch.communicate(timeout=30)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.communicate()
        j.close()
    assert watch.returncode == 0, stderr  # the run ended: every row final
    last = json.loads(stdout.splitlines()[-1])
    assert last["exit_code"] == 0
    assert last["states"] == {"final": 2}
    assert last["control"]["history"][0]["reason"] == "threshold"


def test_ctrl_c_ends_a_watch_without_a_traceback(tmp_path: Path) -> None:
    journal = tmp_path / "w.sqlite"
    planned_journal(journal, rows=2, run_id="RUNW").close()
    watch = _status_watch(journal)
    assert watch.stdout is not None
    json.loads(watch.stdout.readline())  # it watches
    watch.send_signal(signal.SIGINT)
    _, stderr = watch.communicate(timeout=30)
    assert watch.returncode == 130
    assert "Traceback" not in stderr


def test_control_mistakes_are_one_line_and_exit_2_with_nothing_made(tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "payments_async", "bulk-control"]
    missing = tmp_path / "none.sqlite"
    journal = tmp_path / "done.sqlite"
    j = planned_journal(journal, rows=1, run_id="RUNW")
    accept_row(j, 2)
    j.close()
    for args, said in [
        (["pause", "--journal", str(missing)], "no journal file"),
        (["abort", "--journal", str(journal)], "is finished"),
        (["pause"], "give the run"),
        (["pause", "--journal", str(journal), "--run", "X"], "--run goes with"),
        (["halt", "--journal", str(journal)], "'halt' is not one of"),
        (["pause", "--queue", "mysql://u:pw-secret@h/q"], "not mysql://"),
        (["pause", "--journal", "mysql://u:pw-secret@h/q"], "is not a journal"),
    ]:
        proc = _run([*cli, *args])
        assert "secret" not in proc.stderr
        assert proc.returncode == 2, (args, proc.stderr)
        assert said in proc.stderr, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not missing.exists()
    assert read_control(journal).history == ()
