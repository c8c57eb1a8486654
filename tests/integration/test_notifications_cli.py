"""`payments-async listen` in a real process fed by the sandbox; the sandbox's --notify flags."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path

import pytest

from payments_async import Credentials, PaymentsClient
from payments_async._constants import SANDBOX_CLIENT_ID
from payments_async.bulk import (
    JournalError,
    PlannedRow,
    SqliteJournal,
    awaited_cancellations,
    open_journal,
)
from payments_async.notifications import Notification, NotificationKind, SqliteInbox
from payments_async.sandbox import FaultConfig, SandboxConfig, SandboxServer
from payments_async.sandbox._main import build_parser, config_from_args
from payments_async.sandbox._notify import NotificationTarget
from tests.factories import cancellation_for, credit_transfer
from tests.support.listeners import Listeners, deliver


async def _spawn(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> asyncio.subprocess.Process:
    # listen keeps its inbox in the working directory: a temporary one, never the checkout
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "payments_async",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
        cwd=cwd or tempfile.mkdtemp(prefix="pa-listen-"),
    )


async def test_listen_prints_each_notification_and_its_confirmed_status() -> None:
    config = SandboxConfig(processing_delay=0.3, settlement_delay=0.2)
    async with SandboxServer(config) as sb:
        proc = await _spawn(
            "--sandbox",
            "--base-url",
            sb.url,
            "--json",
            "listen",
            "--port",
            "0",
            "--user",
            "svc",
            "--count",
            "2",
            env={"PAYMENTS_NOTIFY_PASSWORD": "pw-0123456789"},
        )
        try:
            assert proc.stdout is not None
            first = json.loads(await asyncio.wait_for(proc.stdout.readline(), 20))
            url = first["listening"]
            sb.notifier.subscribe(
                SANDBOX_CLIENT_ID,
                NotificationTarget(url=url, username="svc", password="pw-0123456789"),
            )
            async with PaymentsClient(Credentials.sandbox(), base_url=sb.url) as client:
                pay = credit_transfer()
                sub = await client.submit_credit_transfer(pay)
                cxl = await client.request_cancellation(cancellation_for(pay))
            out, err = await asyncio.wait_for(proc.communicate(), 20)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert proc.returncode == 0, err.decode()
    events = {e["payments_service_id"]: e for e in map(json.loads, out.decode().splitlines())}
    assert events[cxl.payments_service_id]["confirmed_status"] == "ACCC"
    assert events[cxl.payments_service_id]["outcome"] == "accepted"
    assert events[cxl.payments_service_id]["kind"] == "cancellation"
    assert events[sub.payments_service_id]["confirmed_status"] == "RJCT"
    assert all(e["final"] and e["first"] for e in events.values())


@pytest.mark.parametrize(
    "args",
    [
        ["listen", "--port", "0"],  # no credentials to check
        ["listen", "--port", "0", "--user", "svc"],  # no password
        ["listen", "--port", "0", "--user", "svc", "--jwt-key", __file__],  # both
        ["listen", "--port", "0", "--jwt-key", __file__],  # no issuer/audience
        ["listen", "--port", "0", "--user", "svc", "--password", "pw", "--header-timeout", "0"],
        ["listen", "--port", "0", "--user", "svc", "--password", "pw", "--header-timeout", "nan"],
        ["listen", "--port", "0", "--user", "svc", "--password", "pw", "--header-timeout", "inf"],
        ["listen", "--port", "0", "--user", "svc", "--password", "pw", "--sweep-grace", "nan"],
    ],
)
async def test_listen_usage_errors_are_one_line_exit_2(args: list[str]) -> None:
    proc = await _spawn("--sandbox", "--base-url", "http://127.0.0.1:1", *args)
    _, err = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == 2
    assert "Traceback" not in err.decode()
    assert len(err.decode().strip().splitlines()) == 1


async def test_listen_closes_a_connection_whose_headers_are_late_after_header_timeout() -> None:
    async with SandboxServer(SandboxConfig()) as sb:
        proc = await _spawn(
            *("--sandbox", "--base-url", sb.url, "--json", "listen", "--port", "0"),
            *("--user", "svc", "--header-timeout", "0.5"),
            env={"PAYMENTS_NOTIFY_PASSWORD": "pw-0123456789"},
        )
        try:
            assert proc.stdout is not None
            url = json.loads(await asyncio.wait_for(proc.stdout.readline(), 20))["listening"]
            host, port = url.split("/")[2].split(":")
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(b"POST /notifications HTTP/1.1\r\nHost: x\r\nX-Slow: a")
            started = asyncio.get_running_loop().time()
            # Closed without an answer; the default (10 s) would outlast this wait.
            assert await asyncio.wait_for(reader.read(), 5) == b""
            took = asyncio.get_running_loop().time() - started
            writer.close()
        finally:
            proc.terminate()
            await proc.wait()
    assert took >= 0.4, took  # not before its time either


@pytest.mark.parametrize(
    ("inbox", "value", "said"),
    [
        ("inbox.db", "5", "--stalled-after needs a postgresql:// --inbox"),  # one listener
        ("postgresql://u@127.0.0.1:1/db", "0", "'--stalled-after': 0.0 is not in the range"),
        ("postgresql://u@127.0.0.1:1/db", "nan", "'--stalled-after': nan is not a positive"),
        ("postgresql://u@127.0.0.1:1/db", "inf", "'--stalled-after': inf is not a positive"),
    ],
    ids=["sqlite", "zero", "nan", "inf"],
)
async def test_listen_stalled_after_is_checked_before_anything_starts(
    tmp_path: Path, inbox: str, value: str, said: str
) -> None:
    proc = await _spawn(
        "--sandbox",
        "--base-url",
        "http://127.0.0.1:1",  # reached, the command would exit 3
        "listen",
        "--port",
        "0",
        "--user",
        "svc",
        "--inbox",
        inbox,
        "--stalled-after",
        value,
        env={"PAYMENTS_NOTIFY_PASSWORD": "pw-0123456789"},
        cwd=tmp_path,
    )
    _, err = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == 2
    (line,) = err.decode().splitlines()
    assert said in line
    assert os.listdir(tmp_path) == []  # no inbox made


STALLED_AFTER = 2.0  # the lease of the takeover test below (60 s by default)


async def test_listen_stalled_after_hands_a_killed_listeners_notice_to_the_next_one(
    tmp_path: Path, pg_dsn: str
) -> None:
    """A listener SIGKILLed while it processes a notice (its confirming read hangs) holds
    the notice's job; the next listener on the PostgreSQL inbox processes it once its
    `--stalled-after` has passed, within a bound the default (60 s) would not meet."""
    config = SandboxConfig(processing_delay=0.1, settlement_delay=0.1)
    async with SandboxServer(config) as sb:
        async with PaymentsClient(Credentials.sandbox(), base_url=sb.url) as client:
            psid = (await client.submit_credit_transfer(credit_transfer())).payments_service_id
            final = await client.wait_for_payment_status(psid)
        listeners = Listeners(sb.url, pg_dsn, tmp_path, ("--stalled-after", str(STALLED_AFTER)))
        await listeners.start()
        try:
            sb.set_faults(FaultConfig(latency=1.0, latency_seconds=60.0))  # reads hang
            await deliver(listeners, sb.url, [psid])
            await _until_a_job_runs(pg_dsn)
            await listeners.kill()
            sb.set_faults(FaultConfig())
            killed = asyncio.get_running_loop().time()
            await listeners.start()
            # a process start, the lease and the stalled-job check (every second) at most,
            # with room for a loaded machine
            await listeners.until_delivered({psid: str(final.status)}, seconds=STALLED_AFTER + 25)
            took = asyncio.get_running_loop().time() - killed
            await listeners.until_idle()
            await listeners.stop()
        finally:
            await listeners.kill_all()
    assert listeners.delivered() == {f"{psid} {final.status}": 1}, took
    assert [i for i, line in listeners.lines if line.get("final")] == [1]  # the next one's
    assert "Traceback" not in "".join(listeners.stderr)


async def _until_a_job_runs(dsn: str) -> None:
    """Until a listener's worker holds a job of the inbox (procrastinate's ``doing``)."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        for _ in range(600):
            cur = await conn.execute(
                "SELECT count(*) FROM procrastinate_jobs WHERE status = 'doing'"
            )
            if (row := await cur.fetchone()) and row[0]:
                return
            await asyncio.sleep(0.05)
    raise AssertionError("no job ever ran")


async def test_listen_checks_the_service_before_listening() -> None:
    proc = await _spawn(
        "--sandbox",
        "--base-url",
        "http://127.0.0.1:1",
        "listen",
        "--port",
        "0",
        "--user",
        "svc",
        env={"PAYMENTS_NOTIFY_PASSWORD": "pw-0123456789"},
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 3
    assert b"listening" not in out
    assert "Traceback" not in err.decode()


def test_sandbox_notify_options_build_the_settings() -> None:
    args = build_parser().parse_args(
        [
            "--notify",
            "http://127.0.0.1:9000/notifications",
            "--notify-user",
            "svc",
            "--notify-password",
            "pw",
            "--notify-payload",
            "full",
            "--notify-fault",
            "loss=0.1",
            "--seed",
            "4",
        ]
    )
    settings = config_from_args(args).notifications
    target = settings.targets[SANDBOX_CLIENT_ID]
    assert (target.url, target.payload, target.username) == (
        "http://127.0.0.1:9000/notifications",
        "full",
        "svc",
    )
    assert (settings.faults.loss, settings.faults.seed) == (0.1, 4)
    other = config_from_args(
        build_parser().parse_args(["--notify", "acme=http://h/n", "--notify-bearer", "t"])
    )
    assert other.notifications.targets["acme"].bearer == "t"
    for bad in (
        ["--notify", "http://h/n"],  # no credentials
        ["--notify-fault", "loss=0.1"],  # faults without a target
        ["--notify", "http://h/n", "--notify-bearer", "t", "--notify-fault", "lost=1"],
    ):
        with pytest.raises(ValueError):  # noqa: PT011
            config_from_args(build_parser().parse_args(bad))


async def test_listen_status_shows_depth_failed_callbacks_and_the_oldest_item(
    tmp_path: Path,
) -> None:
    inbox = SqliteInbox(tmp_path / "inbox.db")
    await inbox.open()
    for psid in ("pay-1", "pay-2", "pay-3"):
        await inbox.put(Notification(psid, NotificationKind.PAYMENT, "short"))
    parked, done, _ = sorted(await inbox.claim(3), key=lambda i: i.key)
    await inbox.retry(parked, delay=0, park=True, error="RuntimeError('user bug')")
    await inbox.complete(done, "payment:pay-2:ACSC")
    await inbox.aclose()
    proc = await _spawn("--json", "listen", "--status", "--inbox", str(tmp_path / "inbox.db"))
    out, err = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == 0, err.decode()
    status = json.loads(out)
    assert (status["depth"], status["failed"], status["delivered"]) == (1, 1, 1)
    assert status["tracked"] == 0
    assert status["last_error"] == "RuntimeError('user bug')"
    assert 0 <= status["oldest_undone_age_s"] < 20

    proc = await _spawn("listen", "--status", "--inbox", str(tmp_path / "none.db"))
    _, err = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode != 0
    assert "no inbox at" in err.decode()
    assert not (tmp_path / "none.db").exists()  # looking never creates one


async def test_listen_tracks_what_a_bulk_journal_awaits_and_the_sweep_delivers_it(
    tmp_path: Path,
) -> None:
    config = SandboxConfig(processing_delay=0.1, settlement_delay=0.1)
    async with SandboxServer(config) as sb:
        async with PaymentsClient(Credentials.sandbox(), base_url=sb.url) as client:
            pay = credit_transfer()
            await client.submit_credit_transfer(pay)
            cxl = await client.request_cancellation(cancellation_for(pay))
        journal_path = tmp_path / "run.journal.sqlite"
        journal = SqliteJournal.open(journal_path, input_sha256="0" * 64, new_run_id="run-1")
        journal.plan(
            [
                PlannedRow(1, "E2E-1", "ASSGN-1", "CXL-1", b"{}"),
                PlannedRow(2, "E2E-2", "ASSGN-2", "CXL-2", b"{}"),  # never sent: no id
            ]
        )
        await journal.mark_sent(1)
        await journal.mark_acknowledged(1, cxl.payments_service_id, True)
        journal.close()
        assert awaited_cancellations(journal_path) == [cxl.payments_service_id]
        proc = await _spawn(
            "--sandbox",
            "--base-url",
            sb.url,
            "--json",
            "listen",
            "--port",
            "0",
            "--user",
            "svc",
            "--track-pending",
            str(journal_path),
            "--sweep-grace",
            "0.5",
            "--count",
            "1",
            env={"PAYMENTS_NOTIFY_PASSWORD": "pw-0123456789"},
            cwd=tmp_path,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), 20)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert proc.returncode == 0, err.decode()
    lines = [json.loads(line) for line in out.decode().splitlines()]
    assert lines[1] == {"tracking": 1, "journal": str(journal_path)}
    (event,) = lines[2:]
    assert event["payments_service_id"] == cxl.payments_service_id
    assert (event["confirmed_status"], event["final"], event["first"]) == ("ACCC", True, True)
    assert (tmp_path / "payments-notifications.db").exists()  # the default inbox, here


async def test_awaited_cancellations_of_a_postgres_journal(pg_dsn: str, tmp_path: Path) -> None:
    with pytest.raises(JournalError):
        awaited_cancellations(pg_dsn)  # no bulk tables yet
    with pytest.raises(JournalError):
        awaited_cancellations(tmp_path / "none.journal.sqlite")
    journal = open_journal(pg_dsn, input_sha256="a" * 64, new_run_id="RUN1")
    journal.plan([PlannedRow(n, f"E2E-{n}", f"A-{n}", f"C-{n}", b"{}") for n in (1, 2, 3)])
    for n in (1, 2):
        await journal.mark_sent(n)
        await journal.mark_acknowledged(n, f"cxl-{n}", True)
    await journal.mark_final(
        2,
        outcome="accepted",
        status="ACCC",
        reason_codes=(),
        reason_text=None,
        return_request_needed=False,
    )
    await journal.aclose()
    assert awaited_cancellations(pg_dsn) == ["cxl-1"]


async def test_a_second_listen_on_a_sqlite_inbox_is_refused_before_it_binds(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "in" / "inbox.db")
    env = {"PAYMENTS_NOTIFY_PASSWORD": "pw-0123456789"}
    listen = ["listen", "--port", "0", "--user", "svc", "--inbox", db]
    async with SandboxServer(SandboxConfig()) as sb:
        cli = ["--sandbox", "--base-url", sb.url, "--json"]
        first = await _spawn(*cli, *listen, env=env)
        try:
            assert first.stdout is not None
            ready = json.loads(await asyncio.wait_for(first.stdout.readline(), 20))
            assert "listening" in ready
            second = await _spawn(*cli, *listen, "--port", "0", env=env)
            out, err = await asyncio.wait_for(second.communicate(), 20)
            said = (out + err).decode()
            assert second.returncode == 2, said
            assert "listening" not in said  # refused before it bound a port
            assert f"pid {first.pid}" in said, said  # names the holder
            assert "Traceback" not in said
            # The receiver that holds the inbox keeps it; --status reads it beside it.
            status = await _spawn("--json", "listen", "--status", "--inbox", db)
            out, err = await asyncio.wait_for(status.communicate(), 20)
            assert status.returncode == 0, err.decode()
            assert json.loads(out)["depth"] == 0
        finally:
            first.terminate()
            await first.wait()
    again = SqliteInbox(db)  # released when its receiver stopped
    await again.open()
    await again.aclose()
