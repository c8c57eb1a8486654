"""The fault matrix: each store under each fault, with real processes.

A cell runs the real command in its own process against a real sandbox (in a thread of
the test) or a real PostgreSQL (the pgserver fixture), injects its fault by pid
(SIGKILL, SIGSTOP/SIGCONT of the command or of every PostgreSQL server process), and
counts at the sandbox: no row lost, none stored twice, no traceback, a few stderr lines
at most, and the run finishes without a manual rerun wherever the fault ends within the
bound. Cells that cannot apply are skipped saying why; `docs/reliability.md` has the
table of every cell and what was seen.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from payments_async._constants import SANDBOX_CLIENT_ID
from payments_async.bulk import journal_counts
from payments_async.notifications._defaults import NOTIFY_OUTAGE_SETTLE
from payments_async.sandbox import SandboxConfig, SandboxServer
from tests.integration.test_bulk_kill import _command, _start, _wait_for
from tests.integration.test_bulk_queue import _cli, _run, _stored, _worker
from tests.reliability.test_notification_kills import _final_payments
from tests.support.cli import ThreadedSandbox, bulk_rows, threaded_sandbox, write_csv
from tests.support.listeners import Listeners, deliver
from tests.support.postgres import cut_off, restore

ROWS = 300
PAUSE = 2.0  # the short pause of the default run; the soak cell outlasts a call's total
LONG_PAUSE = 50.0  # past TIMEOUT_TOTAL: every call queued for a connection outlives its time
# Enough rows waiting for their outcome that, at SIGCONT, their reads and the submissions
# queue for the client's connections together (what halted a healthy run before).
LONG_ROWS = 3000
LONG_SETTLEMENT = 30.0
STDERR_LINES = 3  # at most, per outage
HANG = 8.0  # seconds every PostgreSQL server process stays stopped (under HANG_AFTER)
LONG_HANG = 30.0  # past HANG_AFTER: the hung transaction is dropped and made again
RESTART = 3.0  # seconds a restarted database refuses connections
# libpq's connect_timeout in the address `listen --status` is given: its smallest (libpq
# reads 1 as 2); the command's own bound (`CONNECT_TIMEOUT`) applies when none is given.
STATUS_CONNECT_TIMEOUT = 2


def _wait_for_progress(journal: Path, proc: subprocess.Popen[str], done: int) -> None:
    _wait_for(journal, proc, done, deadline=time.monotonic() + 60)


def _exactly_once(sb: ThreadedSandbox, rows: list[dict[str, str]]) -> None:
    stored = [c for c in sb.cancellations() if c.client_id == SANDBOX_CLIENT_ID]
    per_payment = Counter(c.original_end_to_end_id for c in stored)
    assert set(per_payment) == {r["original_end_to_end_id"] for r in rows}  # none lost
    assert max(per_payment.values()) == 1  # none twice


def _quiet(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr
    assert len(stderr.splitlines()) <= STDERR_LINES, stderr


@contextmanager
def _sandbox(settlement: float = 0.2) -> Iterator[ThreadedSandbox]:
    with threaded_sandbox(SandboxConfig(settlement_delay=settlement)) as sb:
        yield sb


def _paused_run(tmp_path: Path, pause: float, n: int = ROWS, settlement: float = 0.2) -> None:
    """bulk-cancel on a SQLite journal, SIGSTOPped mid-run for ``pause`` s, then SIGCONT:
    the same run finishes every row, once each."""
    rows = bulk_rows(n, prefix="E2E-PAUSE")
    src = write_csv(tmp_path / "pause.csv", rows)
    journal = tmp_path / "pause.results.journal.sqlite"
    with _sandbox(settlement) as sb:
        proc = _start(_command(sb, src))
        try:
            _wait_for_progress(journal, proc, done=n // 3)
            os.kill(proc.pid, signal.SIGSTOP)
            time.sleep(pause)  # the fault itself: the process is stopped for this long
            os.kill(proc.pid, signal.SIGCONT)
            out, err = proc.communicate(timeout=180)
        finally:
            proc.kill()
        summary = json.loads(out)
        assert proc.returncode in (0, 1), (proc.returncode, err)  # finished: no rerun asked
        assert summary["accepted"] + summary["rejected"] == n, summary
        _quiet(err)
        _exactly_once(sb, rows)


def test_sqlite_journal_x_process_paused(tmp_path: Path) -> None:
    _paused_run(tmp_path, PAUSE)


@pytest.mark.soak
def test_sqlite_journal_x_process_paused_past_a_call_s_total(tmp_path: Path) -> None:
    _paused_run(tmp_path, LONG_PAUSE, LONG_ROWS, LONG_SETTLEMENT)


def test_sqlite_journal_x_sigkill(tmp_path: Path) -> None:
    rows = bulk_rows(ROWS, prefix="E2E-KILL9")
    src = write_csv(tmp_path / "kill.csv", rows)
    journal = tmp_path / "kill.results.journal.sqlite"
    with _sandbox() as sb:
        cmd = _command(sb, src)
        proc = _start(cmd)
        try:
            _wait_for_progress(journal, proc, done=ROWS // 4)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.kill()
            proc.communicate(timeout=30)
        assert journal_counts(journal).get("final", 0) < ROWS  # it really was cut short
        again = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=180)
        assert again.returncode in (0, 1), again.stderr
        summary = json.loads(again.stdout)
        assert summary["resumed"] is True
        assert summary["accepted"] + summary["rejected"] == ROWS, summary
        _quiet(again.stderr)
        _exactly_once(sb, rows)


@contextmanager
def _hung(postgres_server: object, seconds_max: float) -> Iterator[None]:
    """Every PostgreSQL server process stopped (SIGSTOP), as a paused VM or a failover
    holds it, for at most ``seconds_max``; continued on exit.

    The server is this pytest process's own (each pytest-xdist worker starts one, see
    `tests/support/postgres.py`), so no other test's database stops: the hang cells run
    in the parallel run. Their hang is wall-clock time, which another test's CPU does not
    shorten; it only slows the run around it.
    """
    postmaster = int(postgres_server.get_pid())  # type: ignore[attr-defined]
    children = subprocess.run(
        ["ps", "-o", "pid=", "--ppid", str(postmaster)], capture_output=True, text=True
    ).stdout.split()
    pids = [postmaster, *map(int, children)]
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    started = time.monotonic()
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
        assert time.monotonic() - started < seconds_max


@pytest.mark.alone  # it bounds a command's latency (against its healthy twin's)
def test_postgresql_inbox_x_database_hang_listen_status_is_bounded(
    postgres_server: object, pg_dsn: str
) -> None:
    """`listen --status` under a hung server ends with exit 3 within a few connect
    timeouts: the address's own ``connect_timeout`` (a user's knob) is what bounds it."""
    sep = "&" if "?" in pg_dsn else "?"
    inbox = f"{pg_dsn}{sep}connect_timeout={STATUS_CONNECT_TIMEOUT}"
    cmd = [sys.executable, "-m", "payments_async", "listen", "--status", "--inbox", inbox]
    started = time.monotonic()
    healthy = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    healthy_took = time.monotonic() - started
    assert healthy.returncode == 0, healthy.stderr
    with _hung(postgres_server, seconds_max=40):
        started = time.monotonic()
        hung = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        took = time.monotonic() - started
    assert hung.returncode == 3, hung.stderr
    # What the hang added to the command: a few connect timeouts, not the hang (40 s at
    # most); with the command's own bound (`CONNECT_TIMEOUT`, 5 s) it would be over this.
    assert took - healthy_took < 4 * STATUS_CONNECT_TIMEOUT, (took, healthy_took)
    _quiet(hung.stderr)
    assert "cannot be reached" in hung.stderr
    assert "run the same command again" in hung.stderr
    assert "password" not in hung.stderr.lower()


def test_postgresql_stores_x_full_disk_does_not_apply() -> None:
    pytest.skip(
        "does not apply: a PostgreSQL store's disk is the server's; a full one is a "
        "server that refuses writes, met as an error of the database, not of this process"
    )


@pytest.mark.parametrize(
    "hang", [HANG, pytest.param(LONG_HANG, marks=pytest.mark.soak)], ids=["short", "long"]
)
def test_postgresql_journal_x_database_hang(
    tmp_path: Path, postgres_server: object, pg_dsn: str, hang: float
) -> None:
    rows = bulk_rows(ROWS, prefix="E2E-PGHANG")
    src = write_csv(tmp_path / "pghang.csv", rows)
    with _sandbox() as sb:
        cmd = [*_command(sb, src), "--journal", pg_dsn]
        proc = _start(cmd)
        try:
            _wait_for_stored(sb, proc, ROWS // 4)
            with _hung(postgres_server, seconds_max=hang + 30):
                time.sleep(hang)
            out, err = proc.communicate(timeout=180)
        finally:
            proc.kill()
        assert proc.returncode in (0, 1), (proc.returncode, err)  # ridden out: no rerun
        summary = json.loads(out)
        assert summary["accepted"] + summary["rejected"] == ROWS, summary
        _quiet(err)
        if hang == LONG_HANG:  # past the bound on a transaction: said when it went and back
            assert err.count("cannot be reached") == 1, err
            assert err.count("is back after") == 1, err
        _exactly_once(sb, rows)


def _wait_for_stored(sb: ThreadedSandbox, proc: subprocess.Popen[str], n: int) -> None:
    """Until the sandbox has stored ``n`` cancellations of the run."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, "bulk-cancel ended before the fault"
        if sb.stats()["cancellations_stored"] >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"the sandbox never stored {n} cancellations")


def _pg_command(sb: ThreadedSandbox, src: Path, dsn: str) -> list[str]:
    return [*_command(sb, src), "--journal", dsn]


def test_postgresql_journal_x_sigkill(tmp_path: Path, pg_dsn: str) -> None:
    rows = bulk_rows(ROWS, prefix="E2E-PGKILL")
    src = write_csv(tmp_path / "pgkill.csv", rows)
    with _sandbox() as sb:
        cmd = _pg_command(sb, src, pg_dsn)
        proc = _start(cmd)
        try:
            _wait_for_stored(sb, proc, ROWS // 4)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.kill()
            proc.communicate(timeout=30)
        assert sb.stats()["cancellations_stored"] < ROWS  # it really was cut short
        again = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=180)
        assert again.returncode in (0, 1), again.stderr  # the rerun finishes the run
        summary = json.loads(again.stdout)
        assert summary["resumed"] is True
        assert summary["accepted"] + summary["rejected"] == ROWS, summary
        _quiet(again.stderr)
        _exactly_once(sb, rows)


@pytest.mark.parametrize(
    "pause", [PAUSE, pytest.param(LONG_PAUSE, marks=pytest.mark.soak)], ids=["short", "long"]
)
def test_postgresql_journal_x_process_paused(tmp_path: Path, pg_dsn: str, pause: float) -> None:
    rows = bulk_rows(ROWS, prefix="E2E-PGPAUSE")
    src = write_csv(tmp_path / "pgpause.csv", rows)
    with _sandbox() as sb:
        proc = _start(_pg_command(sb, src, pg_dsn))
        try:
            _wait_for_stored(sb, proc, ROWS // 3)
            os.kill(proc.pid, signal.SIGSTOP)
            time.sleep(pause)  # the fault itself: the process is stopped for this long
            os.kill(proc.pid, signal.SIGCONT)
            out, err = proc.communicate(timeout=180)
        finally:
            proc.kill()
        assert proc.returncode in (0, 1), (proc.returncode, err)  # finished: no rerun asked
        summary = json.loads(out)
        assert summary["accepted"] + summary["rejected"] == ROWS, summary
        _quiet(err)
        _exactly_once(sb, rows)


QUEUE_ROWS = 300


def _queue_sandbox() -> AbstractContextManager[ThreadedSandbox]:
    """No payment exists (every cancellation is rejected), settled after 1.5 s."""
    return threaded_sandbox(SandboxConfig(processing_delay=3600, settlement_delay=1.5))


@contextmanager
def _queued_run(
    sb: ThreadedSandbox, tmp_path: Path, dsn: str
) -> Iterator[list[subprocess.Popen[str]]]:
    """A run queued on ``dsn`` (nothing sent yet) and two workers taking it; on exit the
    workers are stopped (SIGINT), and each must have left by that stop, quietly."""
    src = write_csv(tmp_path / "q.csv", bulk_rows(QUEUE_ROWS, prefix="E2E-QM"))
    queued = _run(_cli(sb, "bulk-cancel", str(src), "--queue", dsn, "--no-wait"))
    assert queued.returncode == 0, queued.stderr
    workers = [_worker(sb, dsn) for _ in range(2)]
    try:
        _wait_until(lambda: sb.stats()["cancellations_stored"] >= QUEUE_ROWS // 4, workers)
        yield workers
    finally:
        for w in workers:
            w.send_signal(signal.SIGINT)
        errs = [w.communicate(timeout=60)[1] for w in workers]
    for w, err in zip(workers, errs, strict=True):
        assert w.returncode == 130, err  # stopped by the test, not by the fault
        _quiet(err)


def _wait_until(
    done: Callable[[], bool], workers: list[subprocess.Popen[str]], seconds: float = 60
) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        for w in workers:
            assert w.poll() is None, f"a worker exited: {w.communicate()[1]}"
        assert time.monotonic() < deadline, "the queued run never got there"
        time.sleep(0.1)


def _queue_finished(sb: ThreadedSandbox, dsn: str, workers: list[subprocess.Popen[str]]) -> None:
    """Until ``bulk-status`` says the run is over (no rerun: the workers finish it); then
    every row stored once at the sandbox."""
    status: list[subprocess.CompletedProcess[str]] = []

    def over() -> bool:
        status[:] = [_run(_cli(sb, "--json", "bulk-status", "--queue", dsn))]
        return status[0].returncode != 3

    _wait_until(over, workers, seconds=120)
    assert status[0].returncode == 1, status[0].stdout  # every row final: rejected (no payment)
    assert json.loads(status[0].stdout)["outcomes"] == {"rejected": QUEUE_ROWS}
    stored = _stored(sb)
    assert len(stored) == QUEUE_ROWS  # none lost
    assert max(stored.values()) == 1  # none twice


@pytest.mark.parametrize(
    "hang", [HANG, pytest.param(LONG_HANG, marks=pytest.mark.soak)], ids=["short", "long"]
)
def test_queue_workers_x_database_hang(
    tmp_path: Path, postgres_server: object, pg_dsn: str, hang: float
) -> None:
    with _queue_sandbox() as sb, _queued_run(sb, tmp_path, pg_dsn) as workers:
        with _hung(postgres_server, seconds_max=hang + 30):
            time.sleep(hang)  # the fault itself: the database answers nothing this long
        _queue_finished(sb, pg_dsn, workers)


@pytest.mark.parametrize(
    "pause", [PAUSE, pytest.param(LONG_PAUSE, marks=pytest.mark.soak)], ids=["short", "long"]
)
def test_queue_workers_x_process_paused(tmp_path: Path, pg_dsn: str, pause: float) -> None:
    with _queue_sandbox() as sb, _queued_run(sb, tmp_path, pg_dsn) as workers:
        os.kill(workers[0].pid, signal.SIGSTOP)
        time.sleep(pause)  # the fault itself: one worker is stopped this long
        os.kill(workers[0].pid, signal.SIGCONT)
        _queue_finished(sb, pg_dsn, workers)


# The inbox cells: `listen` itself, fed by the test playing the service (short notices,
# with duplicates, shuffled; what is not answered 202 is redelivered). The counter is the
# callbacks' deliveries: the "first" final lines `listen --json` printed, over every
# process a cell started.
INBOX_IDS = 120
KILLS = 3
# `listen --stalled-after` of the PostgreSQL cells (60 s by default): the jobs a killed
# listener was running, or whose end an outage kept from being written, go back to the
# queue within seconds; a loaded live listener, whose heartbeat is written every third
# of it, never looks dead.
STALLED_AFTER = 5.0
# ... and of the PostgreSQL pause cells: shorter than the pause, so the stopped listener
# outlives its lease and, once continued, must still process each of its items once.
PAUSED_STALLED_AFTER = 1.0
assert PAUSED_STALLED_AFTER < PAUSE


async def _inbox_cell(
    tmp_path: Path,
    inbox: str,
    fault: Callable[[Listeners], Awaitable[int]],
    args: tuple[str, ...] = (),
) -> None:
    """Deliver a stream to ``listen [args]`` on ``inbox`` while ``fault`` runs (it returns
    how many deliveries the documented window allows to be repeated: 0 unless it killed a
    process between a callback's return and its "delivered" mark); then 0 lost, 0 twice
    beyond that window, no traceback, a few stderr lines per process."""
    rng = random.Random(36)
    config = SandboxConfig(processing_delay=0.1, settlement_delay=0.1)
    async with SandboxServer(config) as sb:
        expected = await _final_payments(sb.url, INBOX_IDS)
        stream = [psid for psid in expected for _ in range(rng.choice((1, 1, 2, 3)))]
        rng.shuffle(stream)
        listeners = Listeners(sb.url, inbox, tmp_path, args)
        await listeners.start()
        try:
            sending = asyncio.create_task(deliver(listeners, sb.url, stream))
            window = await fault(listeners)
            await sending
            await listeners.until_delivered(expected)
            # Nothing waits in the inbox and nothing is sent any more: no item is left to
            # deliver a second time; stopping the listener reads all it printed.
            await listeners.until_idle()
            await listeners.stop()
        finally:
            await listeners.kill_all()
    delivered = listeners.delivered()
    lost = [p for p, s in expected.items() if f"{p} {s}" not in delivered]
    twice = sum(n - 1 for n in delivered.values())
    assert not lost, lost[:5]
    assert twice <= window, (twice, window)
    assert set(delivered) == {f"{p} {s}" for p, s in expected.items()}  # nothing else
    for err in listeners.stderr:
        _quiet(err)
    assert listeners.current.returncode == 130, listeners.stderr[-1]  # stopped by the test


async def _progress(listeners: Listeners, share: float) -> None:
    """Until a ``share`` of the ids were delivered (a fault lands mid-stream)."""
    want = int(share * INBOX_IDS)
    deadline = asyncio.get_running_loop().time() + 60
    while len(listeners.delivered()) < want:
        assert listeners.current.returncode is None, listeners.stderr[-1]
        assert asyncio.get_running_loop().time() < deadline, "the stream never got going"
        await asyncio.sleep(0.02)


async def _sigkill(listeners: Listeners) -> int:
    """SIGKILL the listener KILLS times mid-stream, restarting it each time; returns the
    deliveries made but not yet marked at the kills (`listen --status` of the dead
    process's inbox): the documented window, repeated after the restart."""
    window = 0
    for k in range(1, KILLS + 1):
        await _progress(listeners, k / (KILLS + 1))
        await listeners.kill()
        marked = int((await listeners.status())["delivered"])  # type: ignore[call-overload]
        window += max(0, len(listeners.delivered()) - marked)
        await listeners.start()
    return window


def _paused(seconds: float) -> Callable[[Listeners], Awaitable[int]]:
    async def fault(listeners: Listeners) -> int:
        await _progress(listeners, 1 / 3)
        os.kill(listeners.current.pid, signal.SIGSTOP)
        await asyncio.sleep(seconds)  # the fault itself: the listener is stopped this long
        os.kill(listeners.current.pid, signal.SIGCONT)
        return 0

    return fault


def _inbox_target(store: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if store == "sqlite":
        return str(tmp_path / "inbox.db")
    return str(request.getfixturevalue("pg_dsn"))


def _stalled_after(store: str, seconds: float) -> tuple[str, ...]:
    """``listen``'s lease option for a PostgreSQL inbox (a SQLite one has no lease)."""
    return () if store == "sqlite" else ("--stalled-after", str(seconds))


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
async def test_inbox_x_sigkill(tmp_path: Path, request: pytest.FixtureRequest, store: str) -> None:
    await _inbox_cell(
        tmp_path,
        _inbox_target(store, tmp_path, request),
        _sigkill,
        _stalled_after(store, STALLED_AFTER),
    )


@pytest.mark.parametrize(
    "pause", [PAUSE, pytest.param(LONG_PAUSE, marks=pytest.mark.soak)], ids=["short", "long"]
)
@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
async def test_inbox_x_process_paused(
    tmp_path: Path, request: pytest.FixtureRequest, store: str, pause: float
) -> None:
    await _inbox_cell(
        tmp_path,
        _inbox_target(store, tmp_path, request),
        _paused(pause),
        _stalled_after(store, PAUSED_STALLED_AFTER),
    )


async def test_postgresql_inbox_x_database_restart(
    tmp_path: Path, postgres_server: object, pg_dsn: str
) -> None:
    admin: str = postgres_server.get_uri()  # type: ignore[attr-defined]

    async def restart(listeners: Listeners) -> int:
        await _progress(listeners, 1 / 3)
        cut_off(pg_dsn, admin)  # every session ended, new ones refused: a restart
        await asyncio.sleep(RESTART)
        restore(pg_dsn, admin)
        return 0

    await _inbox_cell(tmp_path, pg_dsn, restart, _stalled_after("postgresql", STALLED_AFTER))


@pytest.mark.parametrize(
    "hang", [HANG, pytest.param(LONG_HANG, marks=pytest.mark.soak)], ids=["short", "long"]
)
async def test_postgresql_inbox_x_database_hang(
    tmp_path: Path, postgres_server: object, pg_dsn: str, hang: float
) -> None:
    async def hung(listeners: Listeners) -> int:
        await _progress(listeners, 1 / 3)
        with _hung(postgres_server, seconds_max=hang + 30):
            await asyncio.sleep(hang)  # the fault itself: the database answers nothing
        return 0

    await _inbox_cell(tmp_path, pg_dsn, hung, _stalled_after("postgresql", STALLED_AFTER))


# Full disk: a real size-limited file system (a tmpfs mounted for the test: the process
# meets ENOSPC from the kernel, not a simulated error).
SMALL_FS = "8m"


@contextmanager
def _small_file_system(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of `SMALL_FS` mounted for the test, unmounted at the end, failure or not."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SMALL_FS}", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"no size-limited file system here (mount: {mounted.stderr.strip()})")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)


def _write_forever(fd: int, data: bytes) -> None:
    while True:
        os.write(fd, data)


def _fill(mnt: Path) -> Path:
    """Fill the file system to its last byte (ENOSPC), with a file the test deletes."""
    filler = mnt / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for chunk in (1 << 16, 1 << 12, 1):
            with pytest.raises(OSError, match="No space left") as full:
                _write_forever(fd, b"\0" * chunk)
            assert full.value.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


def _full_disk_said(returncode: int | None, out: str, err: str) -> None:
    """Exit 3 and one line (`--json`: one JSON object on stdout) naming the full disk."""
    assert returncode == 3, (out, err)
    said = out + err
    assert "Traceback" not in said, said
    assert len(said.splitlines()) == 1, said  # one line
    assert "full" in said.lower(), said


def test_sqlite_journal_x_full_disk_while_planning(tmp_path: Path) -> None:
    rows = bulk_rows(ROWS, prefix="E2E-FULLP")
    with _small_file_system(tmp_path) as mnt, _sandbox() as sb:
        src = write_csv(mnt / "full.csv", rows)
        cmd = _command(sb, src)
        filler = _fill(mnt)
        full = subprocess.run(cmd, cwd=mnt, capture_output=True, text=True, timeout=180)
        _full_disk_said(full.returncode, full.stdout, full.stderr)
        filler.unlink()  # space is freed
        again = subprocess.run(cmd, cwd=mnt, capture_output=True, text=True, timeout=180)
        assert again.returncode in (0, 1), again.stderr  # the rerun finishes
        summary = json.loads(again.stdout)
        assert summary["accepted"] + summary["rejected"] == ROWS, summary
        _quiet(again.stderr)
        _exactly_once(sb, rows)


def test_sqlite_journal_x_full_disk_mid_run(tmp_path: Path) -> None:
    rows = bulk_rows(ROWS, prefix="E2E-FULLM")
    with _small_file_system(tmp_path) as mnt, _sandbox(settlement=2.0) as sb:
        src = write_csv(mnt / "full.csv", rows)
        cmd = _command(sb, src)
        proc = _start(cmd)
        try:
            _wait_for_stored(sb, proc, ROWS // 3)
            filler = _fill(mnt)  # the outcomes still to come cannot be written
            out, err = proc.communicate(timeout=180)
        finally:
            proc.kill()
        _full_disk_said(proc.returncode, out, err)
        filler.unlink()
        again = subprocess.run(cmd, cwd=mnt, capture_output=True, text=True, timeout=180)
        assert again.returncode in (0, 1), again.stderr  # the rerun finishes
        summary = json.loads(again.stdout)
        assert summary["resumed"] is True
        assert summary["accepted"] + summary["rejected"] == ROWS, summary
        _quiet(again.stderr)
        _exactly_once(sb, rows)


FULL_FOR = 3.0  # seconds the inbox's file system stays full mid-stream


async def test_sqlite_inbox_x_full_disk_at_start(tmp_path: Path) -> None:
    """`listen` on an inbox whose file system is full before the inbox is made: exit 3 and
    one line naming the full disk, before it binds; once space is freed it starts."""
    with _small_file_system(tmp_path) as mnt:
        async with SandboxServer(SandboxConfig()) as sb:
            listeners = Listeners(sb.url, str(mnt / "inbox.db"), tmp_path)
            filler = _fill(mnt)
            with pytest.raises(AssertionError, match="listen did not start"):
                await listeners.start()
            await listeners.current.wait()
            out = "".join(json.dumps(said) + "\n" for _, said in listeners.lines)
            _full_disk_said(listeners.current.returncode, out, listeners.stderr[0])
            filler.unlink()  # space is freed
            try:
                await listeners.start()
                await listeners.stop()
            finally:
                await listeners.kill_all()
            assert listeners.current.returncode == 130, listeners.stderr[-1]
            assert listeners.stderr[-1] == ""


async def test_sqlite_inbox_x_full_disk_mid_stream(tmp_path: Path) -> None:
    """The inbox's file system filled at a third of the stream for `FULL_FOR` s, then
    freed: `listen` keeps running, says the outage in one line when it goes and one when
    it is over (not one per refused delivery, nor one per part of the receiver), and every
    id is delivered once."""
    seen: list[Listeners] = []
    with _small_file_system(tmp_path) as mnt:

        async def full_disk(listeners: Listeners) -> int:
            seen.append(listeners)
            await _progress(listeners, 1 / 3)
            filler = _fill(mnt)
            await asyncio.sleep(FULL_FOR)  # the fault itself: deliveries meet a full disk
            filler.unlink()
            # the outage is said to be over once the inbox has worked this long
            await asyncio.sleep(NOTIFY_OUTAGE_SETTLE + 1.0)
            return 0

        await _inbox_cell(tmp_path, str(mnt / "inbox.db"), full_disk)
    (err,) = seen[0].stderr  # one process: the full disk stopped nothing
    assert err.count("the disk is full") == 1, err
    assert err.count("the inbox can be used again after") == 1, err
