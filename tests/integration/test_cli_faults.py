"""The command line under faults: signals, a closed stdout, endless or huge files, a
database that cannot be reached. Each runs ``payments-async`` as a real process against
a sandbox on a free port."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from aiohttp import web

from payments_async.iso20022 import encode
from payments_async.sandbox import SandboxConfig
from tests.factories import CREDITOR_IBAN, credit_transfer
from tests.support.cli import ThreadedSandbox, bulk_rows, threaded_sandbox, write_csv
from tests.support.proxy import make_tls

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sb() -> Iterator[ThreadedSandbox]:
    # Nothing settles while a test waits: every wait is interrupted, never finished.
    config = SandboxConfig(processing_delay=3600, settlement_delay=3600)
    with threaded_sandbox(config) as sandbox:
        yield sandbox


def _cli(sb: ThreadedSandbox, *args: str) -> list[str]:
    return [sys.executable, "-m", "payments_async", "--sandbox", "--base-url", sb.url, *args]


def _payment(tmp_path: Path, *, prefix: bytes = b"") -> Path:
    msg = credit_transfer()
    path = tmp_path / f"{msg.end_to_end_id}.json"
    path.write_bytes(prefix + encode(msg))
    return path


def _stored(sb: ThreadedSandbox, key: str) -> int:
    return int(sb.stats()[key])


def _wait_for(check: Callable[[], bool], proc: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + 30
    while not check():
        assert proc.poll() is None, (what, proc.communicate())
        assert time.monotonic() < deadline, f"never saw {what}"
        time.sleep(0.05)


def _requests(sb: ThreadedSandbox) -> int:
    return sum(sb.stats()["requests"].values())


def _stop(proc: subprocess.Popen[str], sig: signal.Signals) -> tuple[str, str]:
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, (sig, out, err)
    assert "Traceback" not in out + err
    return out, err


# --- one signal policy ---------------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_an_interrupted_cancel_wait_is_130_and_names_the_cancellation_it_created(
    sb: ThreadedSandbox, tmp_path: Path, sig: signal.Signals, as_json: bool
) -> None:
    row = {
        "original_end_to_end_id": f"E2E-SIG-{sig.name}-{as_json}",
        "amount": "42.00",
        "creditor_agent_bic": "COBADEFFXXX",
        "creditor_iban": CREDITOR_IBAN,
        "reason": "DUPL",
        "assigner_bic": "BNPAFRPPXXX",
        "assignee_bic": "COBADEFFXXX",
    }
    cxl = tmp_path / "cancel.json"
    cxl.write_text(json.dumps(row))
    before = _stored(sb, "cancellations_stored")
    flags = ["--json"] if as_json else []
    proc = subprocess.Popen(
        _cli(sb, *flags, "cancel", str(cxl), "--wait"),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_for(lambda: _stored(sb, "cancellations_stored") > before, proc, "the cancellation")
    out, err = _stop(proc, sig)
    if as_json:
        error = json.loads(out.splitlines()[-1])
        assert error["exit_code"] == 130
        ident = error["created"]["cancellation"]
        assert f"payments-async outcome {ident}" in error["error"]
    else:
        (line,) = [x for x in err.splitlines() if x.startswith("error: ")]
        assert line.startswith("error: interrupted after creating cancellation cxl-"), line
        ident = line.split()[5]
        assert f"see it with: payments-async outcome {ident})" in line
    assert _stored(sb, "cancellations_stored") == before + 1
    assert ident in sb.call(lambda: set(sb.server.state.cancellations))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_an_interrupted_status_wait_is_130(
    sb: ThreadedSandbox, tmp_path: Path, sig: signal.Signals
) -> None:
    pay = subprocess.run(
        _cli(sb, "--json", "pay", str(_payment(tmp_path))),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    psid = json.loads(pay.stdout)["payments_service_id"]
    proc = subprocess.Popen(
        _cli(sb, "status", psid, "--wait"),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    reads = _requests(sb)
    _wait_for(lambda: _requests(sb) >= reads + 2, proc, "the token and a first read")
    _, err = _stop(proc, sig)
    assert [x for x in err.splitlines() if x.startswith("error: ")] == ["error: interrupted"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_listen_stopped_by_a_signal_is_130(sb: ThreadedSandbox, sig: signal.Signals) -> None:
    proc = subprocess.Popen(
        _cli(sb, "listen", "--port", "0", "--user", "u", "--password", "p"),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert "listening on http://127.0.0.1:" in proc.stdout.readline()
    _stop(proc, sig)


def test_bulk_cancel_stopped_by_sigterm_is_130_and_resumable(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    src = write_csv(tmp_path / "sigterm.csv", bulk_rows(200, "E2E-TERM"))
    proc = subprocess.Popen(
        _cli(sb, "bulk-cancel", str(src), "--concurrency", "4"),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    before = _stored(sb, "cancellations_stored")
    _wait_for(lambda: _stored(sb, "cancellations_stored") >= before + 10, proc, "10 rows sent")
    _, err = _stop(proc, signal.SIGTERM)
    assert "run the same command again" in err or "rerun" in err, err


# --- a closed stdout -------------------------------------------------------------------------


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_closed_stdout_after_a_stored_payment_is_exit_0_without_a_traceback(
    sb: ThreadedSandbox, tmp_path: Path, as_json: bool
) -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is printed: `pay FILE | true`
    before = _stored(sb, "payments_stored")
    try:
        proc = subprocess.run(
            _cli(sb, *(["--json"] if as_json else []), "pay", str(_payment(tmp_path))),
            cwd=ROOT,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert _stored(sb, "payments_stored") == before + 1


@pytest.mark.parametrize(
    "args", [["--help"], ["--version"], ["status", "--help"], ["keygen", "--dir", "KEYS"]]
)
def test_a_closed_stdout_is_exit_0_for_help_version_and_keygen(
    tmp_path: Path, args: list[str]
) -> None:
    args = [str(tmp_path / "keys") if a == "KEYS" else a for a in args]
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "payments_async", *args],
            cwd=ROOT,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write)
    assert (proc.returncode, proc.stderr) == (0, "")


# --- bounded inputs and messages -------------------------------------------------------------


def test_pay_dev_zero_is_refused_at_once_with_exit_2() -> None:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "payments_async", "--sandbox", "pay", "/dev/zero"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: '/dev/zero' is larger than 4,096 KiB"), proc.stderr
    assert "Traceback" not in proc.stderr
    assert time.monotonic() - started < 20  # the whole process; reading stops at the cap


def test_a_20_mb_pacs008_is_refused_before_anything_is_sent(
    sb: ThreadedSandbox, tmp_path: Path
) -> None:
    # Valid JSON of 20 MB: a long debtor name would fail validation first, so pad with
    # whitespace, which JSON allows and which only a size cap catches.
    small = _payment(tmp_path)
    big = tmp_path / "big.json"
    big.write_bytes(small.read_bytes() + b" " * (20 * 1024 * 1024))
    requests = _requests(sb)
    proc = subprocess.run(
        _cli(sb, "--json", "pay", str(big)), cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2, proc.stdout
    error = json.loads(proc.stdout)
    assert "is larger than 4,096 KiB" in error["error"]
    assert "nothing was sent" in error["error"]
    assert _requests(sb) == requests  # not even a token request


def test_a_json_file_with_a_utf8_bom_is_accepted(sb: ThreadedSandbox, tmp_path: Path) -> None:
    path = _payment(tmp_path, prefix=b"\xef\xbb\xbf")  # Notepad's "UTF-8"
    proc = subprocess.run(
        _cli(sb, "--json", "pay", str(path)), cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["created"] is True


# --- a database that cannot be used ----------------------------------------------------------


def test_a_database_that_answers_no_is_exit_2_and_one_that_is_down_exit_3(
    pg_dsn: str, tmp_path: Path
) -> None:
    no_such_db = urlsplit(pg_dsn)._replace(path="/no_such_database").geturl()
    down = f"postgresql://u:pw-secret@/db?host={tmp_path}&connect_timeout=2"
    for dsn, code in ((no_such_db, 2), (down, 3)):
        proc = subprocess.run(
            [sys.executable, "-m", "payments_async", "--sandbox", "bulk-status", "--queue", dsn],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == code, (dsn, proc.stderr)
        assert "Traceback" not in proc.stderr
        assert [x for x in proc.stderr.splitlines() if x.startswith("error: ")] == [
            proc.stderr.strip()
        ]


# --- TLS with a private CA -------------------------------------------------------------------


@contextmanager
def _tls_server(tmp_path: Path) -> Iterator[str]:
    """An HTTPS server on 127.0.0.1 with a self-signed certificate, answering 404 to all."""
    tls = make_tls(tmp_path)
    ready = threading.Event()
    box: dict[str, Any] = {}

    async def main() -> None:
        runner = web.AppRunner(web.Application(), handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls.server)
        await site.start()
        box["port"] = runner.addresses[0][1]
        box["stop"] = stop = asyncio.Event()
        box["loop"] = asyncio.get_running_loop()
        ready.set()
        await stop.wait()
        await runner.cleanup()

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(30)
    try:
        yield f"https://127.0.0.1:{box['port']}"
    finally:
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(30)


def test_a_tls_failure_says_how_to_trust_a_private_ca_and_ca_file_does(tmp_path: Path) -> None:
    with _tls_server(tmp_path) as url:
        base = [sys.executable, "-m", "payments_async", "--sandbox", "--base-url", url]
        untrusted = subprocess.run(
            [*base, "token"], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert untrusted.returncode == 3, untrusted.stderr
        (line,) = untrusted.stderr.splitlines()
        assert "TLS failed" in line
        assert "--ca-file FILE (PEM)" in line
        assert "SSL_CERT_FILE=FILE" in line
        assert "ssl_context" not in line  # the library's advice, for programs
        trusted = subprocess.run(
            [*base, "--ca-file", str(tmp_path / "cert.pem"), "token"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        # The handshake succeeds: what fails now is the token endpoint (this server has none).
        assert trusted.returncode == 3, trusted.stderr
        assert "TLS failed" not in trusted.stderr
        assert "404" in trusted.stderr
        env = {**os.environ, "SSL_CERT_FILE": str(tmp_path / "cert.pem")}
        by_env = subprocess.run(
            [*base, "token"], cwd=ROOT, capture_output=True, text=True, timeout=60, env=env
        )
        assert "TLS failed" not in by_env.stderr
        assert "404" in by_env.stderr, by_env.stderr


def test_a_ca_file_without_a_certificate_is_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate\n")
    proc = subprocess.run(
        [sys.executable, "-m", "payments_async", "--sandbox", "--ca-file", str(bad), "token"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"error: --ca-file {str(bad)!r} holds no usable PEM"), proc.stderr


# --- without the cli extra -------------------------------------------------------------------


@pytest.mark.parametrize("missing", ["click", "rich"])
def test_python_m_without_the_cli_extra_says_what_to_install(missing: str) -> None:
    code = (
        f"import sys; sys.modules[{missing!r}] = None; import runpy; "
        "runpy.run_module('payments_async', run_name='__main__')"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert proc.stderr == (
        f"error: the command line needs the 'cli' extra ({missing} not installed): "
        "pip install 'payments-async[cli]'\n"
    )
