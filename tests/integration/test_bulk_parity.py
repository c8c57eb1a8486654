"""One bulk input, run by the single-process runner and by the queue: the same rows, words
and exit code (``docs/cli.md``, Exit codes).

Both runs go through the command line (``bulk-cancel``; ``bulk-cancel --queue``, one
``worker`` and ``bulk-status`` on a real PostgreSQL) against a small fake service that
answers each row as its end-to-end id says: accepted; rejected with a reason that needs a
pacs.004 return (CUST) or one that does not (NOOR); refused for good (400); a final code
nobody can classify (unknown). A not-sent row is one whose recorded message this version
of the library refuses to send (its body is made unreadable in the journal after planning,
before anything was sent): the service never gets it.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from payments_async.bulk import open_run
from payments_async.bulk._input import check_input
from tests.support.cli import bulk_rows, read_results, write_csv

ROOT = Path(__file__).resolve().parents[2]
UNREADABLE = b'{"fitoFIPmtCxlReq": {}}'  # no longer a camt.056: refused before sending

_RESOLUTION: dict[str, tuple[str, str, str | None]] = {
    # kind: (sts.conf, txCxlSts, rejection reason)
    "ACC": ("CNCL", "ACCR", None),
    "CUST": ("RJCR", "RJCR", "CUST"),
    "NOOR": ("RJCR", "RJCR", "NOOR"),
    "UNK": ("ZZZZ", "ZZZZ", None),
}


def _kind(e2e: str) -> str:
    return e2e.split("-", 1)[0]


def _fake_app() -> Any:
    from aiohttp import web

    async def token(request: web.Request) -> web.Response:
        await request.read()
        return web.json_response(
            {"access_token": "fake-token", "token_type": "bearer", "expires_in": 3600}
        )

    async def camt056(request: web.Request) -> web.Response:
        req = (await request.json())["fitoFIPmtCxlReq"]
        e2e = req["undrlyg"][0]["txInf"][0]["orgnlEndToEndId"]
        if _kind(e2e) == "REF":
            error = {"code": "DUPLICATE_MESSAGE_ID", "message": "assgnmt.id already used"}
            return web.json_response({"errors": [error]}, status=400)
        data = {
            "paymentsServiceId": f"cxl-{e2e}",
            "paymentId": req["assgnmt"]["id"],
            "status": "PENDING",
            "creationDateTime": "2024-08-01T08:00:00.000",
        }
        return web.json_response({"data": data}, status=201)

    async def camt029(request: web.Request) -> web.Response:
        e2e = request.match_info["id"].removeprefix("cxl-")
        conf, tx, reason = _RESOLUTION[_kind(e2e)]
        info: dict[str, Any] = {"addtlInf": [f"{_kind(e2e)} answer"]}
        if reason is not None:
            info["rsn"] = {"cd": reason}
        doc = {
            "rsltnOfInvstgtn": {
                "assgnmt": {
                    "id": "ASG-RES-0001",
                    "assgnr": {"agt": {"finInstnId": {"bicfi": "COBADEFFXXX"}}},
                    "assgne": {"agt": {"finInstnId": {"bicfi": "BNPAFRPPXXX"}}},
                    "creDtTm": "2024-08-01T09:00:00.000+00:00",
                },
                "sts": {"conf": conf},
                "cxlDtls": [
                    {
                        "txInfAndSts": [
                            {"cxlStsId": "CXLSTS-1", "txCxlSts": tx, "cxlStsRsnInf": [info]}
                        ]
                    }
                ],
            }
        }
        return web.json_response(doc)

    app = web.Application()
    app.router.add_post("/oauth/token", token)
    app.router.add_post("/payments/camt056/v08", camt056)
    app.router.add_get("/payments/camt029/v09/{id}", camt029)
    return app


@contextmanager
def fake_bank() -> Iterator[str]:
    """Serve the fake service on 127.0.0.1 from a background thread; yield its URL."""
    from aiohttp import web

    ready = threading.Event()
    box: dict[str, Any] = {}

    async def main() -> None:
        runner = web.AppRunner(_fake_app())
        await runner.setup()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(runner, sock).start()
        box["url"] = f"http://127.0.0.1:{sock.getsockname()[1]}"
        box["stop"], box["loop"] = asyncio.Event(), asyncio.get_running_loop()
        ready.set()
        try:
            await box["stop"].wait()
        finally:
            await runner.cleanup()

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(30), "the fake service did not start"
    try:
        yield str(box["url"])
    finally:
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(30)


def _cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "payments_async", "--sandbox", "--base-url", url, *args]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def _input(tmp_path: Path, kinds: list[str]) -> Path:
    rows = bulk_rows(len(kinds))
    for i, (row, kind) in enumerate(zip(rows, kinds, strict=True)):
        row["original_end_to_end_id"] = f"{kind}-{i:04d}"
    return write_csv(tmp_path / "mixed.csv", rows)


_TOTALS = (
    "accepted",
    "rejected",
    "unknown",
    "refused",
    "not_sent",
    "aborted",
    "in_flight",
    "pending",
    "invalid",
    "return_requests",
    "unsendable",
)
_ROW_WORDS = ("line", "original_end_to_end_id", "outcome", "return_request_needed", "reason_codes")


def _words(rows: list[dict[str, str]]) -> list[tuple[str, ...]]:
    return [tuple(r[c] for c in _ROW_WORDS) for r in rows]


MIXED = ["ACC", "ACC", "CUST", "NOOR", "REF", "UNK", "BAD"]


@pytest.mark.parametrize(
    ("kinds", "totals", "exit_code"),
    [
        pytest.param(
            MIXED,
            {"accepted": 2, "rejected": 2, "return_requests": 1, "refused": 1, "unknown": 1}
            | {"not_sent": 1, "unsendable": 1},
            3,  # an outcome nobody can tell, and a row not completed
            id="every-outcome",
        ),
        pytest.param(
            ["ACC", "CUST", "NOOR", "REF"],
            {"accepted": 1, "rejected": 2, "return_requests": 1, "refused": 1},
            1,  # every row final; the service said no to some
            id="said-no",
        ),
        pytest.param(
            ["BAD", "BAD"], {"not_sent": 2, "unsendable": 2}, 3, id="nothing-sent-is-not-done"
        ),
        pytest.param(["ACC", "ACC"], {"accepted": 2}, 0, id="all-accepted"),
    ],
)
def test_local_and_queued_runs_agree_on_totals_words_and_exit_code(
    pg_dsn: str, tmp_path: Path, kinds: list[str], totals: dict[str, int], exit_code: int
) -> None:
    src = _input(tmp_path, kinds)
    expected = {name: totals.get(name, 0) for name in _TOTALS}
    bad = [f"BAD-{i:04d}" for i, kind in enumerate(kinds) if kind == "BAD"]
    with fake_bank() as url:
        # The local run: planned first so some recorded messages can be spoilt, then resumed.
        journal_path = tmp_path / "local.journal.sqlite"
        journal, resumed = open_run(check_input(src), journal_path)
        journal.close()
        assert not resumed
        with sqlite3.connect(journal_path) as db:
            db.executemany(
                "UPDATE rows SET body = ? WHERE original_end_to_end_id = ?",
                [(UNREADABLE, e2e) for e2e in bad],
            )
        local_results = tmp_path / "local.results.csv"
        local = _cli(
            url,
            "--json",
            "bulk-cancel",
            str(src),
            "--results",
            str(local_results),
            "--journal",
            str(journal_path),
        )
        assert local.returncode == exit_code, local.stderr
        local_summary = json.loads(local.stdout)
        assert {k: local_summary[k] for k in _TOTALS} == expected
        assert local_summary["exit_code"] == exit_code

        # The same input through the queue: plan and queue, spoil the same messages, one
        # worker, then the status and the watching command.
        queued = _cli(url, "--json", "bulk-cancel", str(src), "--queue", pg_dsn, "--no-wait")
        assert queued.returncode == 0, queued.stderr
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            for e2e in bad:
                conn.execute(
                    "UPDATE payments_bulk_rows SET body = %s WHERE original_end_to_end_id = %s",
                    (UNREADABLE, e2e),
                )
        worker = _cli(url, "worker", "--queue", pg_dsn, "--once", "--timeout", "60")
        assert worker.returncode == 0, worker.stderr
        status = _cli(url, "--json", "bulk-status", "--queue", pg_dsn)
        watched = _cli(url, "--json", "bulk-cancel", str(src), "--queue", pg_dsn)
        for proc in (status, watched):
            assert proc.returncode == exit_code, proc.stderr
            summary = json.loads(proc.stdout)
            assert {k: summary[k] for k in _TOTALS} == expected
            assert summary["exit_code"] == exit_code
            assert summary["queued"] == 0
        queue_results = tmp_path / "queue.results.csv"
        exported = _cli(url, "bulk-results", "--queue", pg_dsn, "--output", str(queue_results))
        assert exported.returncode == 0, exported.stderr

        # People read the same summary either way.
        again = ("--journal", str(journal_path), "--results", str(local_results))
        procs = [
            _cli(url, "bulk-status", "--queue", pg_dsn),
            _cli(url, "bulk-cancel", str(src), *again),
        ]
    for proc in procs:
        text = proc.stdout
        assert ("ask for a pacs.004 return" in text) is bool(totals.get("return_requests"))
        assert "failed" not in text
        # Every row is final: a row whose message is refused before sending is said to be
        # so, and no rerun is advised, since a rerun would send nothing.
        unsendable = f"{len(bad)} row(s) cannot be sent (the reason is in the results file)"
        assert (unsendable in proc.stderr) is bool(bad), proc.stderr
        assert "run the same" not in proc.stderr, proc.stderr
        assert "rerun to send" not in text
        # The advice for refused and unknown rows, in both summaries.
        refused = "row(s) refused by the service: the results give each reason"
        assert (refused in proc.stderr) is bool(totals.get("refused")), proc.stderr
        unknown = "row(s) ended with an outcome nobody can tell"
        assert (unknown in proc.stderr) is bool(totals.get("unknown")), proc.stderr

    # Row by row, the same words in both results files.
    assert _words(read_results(local_results)) == _words(read_results(queue_results))
    outcomes = [r["outcome"] for r in read_results(local_results)]
    assert sorted(outcomes) == sorted(
        {"ACC": "accepted", "CUST": "rejected", "NOOR": "rejected", "REF": "refused"}.get(
            k, {"UNK": "unknown", "BAD": "not_sent"}.get(k, "")
        )
        for k in kinds
    )
    for row in read_results(local_results):
        assert row["return_request_needed"] == (
            "true" if row["original_end_to_end_id"].startswith("CUST") else "false"
        )
