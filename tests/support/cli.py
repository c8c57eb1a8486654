"""Shared pieces of the CLI and bulk tests: a sandbox in a thread, input files, payments.

The CLI runs ``asyncio.run`` itself, so tests that drive it with ``CliRunner`` (or as a
subprocess) cannot share the test's event loop with the sandbox: the sandbox runs on its
own loop in a background thread, on 127.0.0.1, and tests read its state directly.
"""

from __future__ import annotations

import asyncio
import csv
import json
import socket
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from payments_async._constants import SANDBOX_CLIENT_ID
from payments_async.sandbox import SandboxConfig, SandboxServer
from payments_async.testing import SandboxHandle, sandbox_server
from tests.factories import CREDITOR_IBAN, credit_transfer

COLUMNS = (
    "original_end_to_end_id",
    "amount",
    "currency",
    "creditor_agent_bic",
    "creditor_iban",
    "reason",
    "assigner_bic",
    "assignee_bic",
    "originator_name",
)


@dataclass
class ThreadedSandbox:
    """A sandbox served from a background thread's event loop."""

    handle: SandboxHandle
    loop: asyncio.AbstractEventLoop

    @property
    def url(self) -> str:
        return self.handle.url

    @property
    def server(self) -> SandboxServer:
        return self.handle.server

    def call(self, fn: Any, *args: Any) -> Any:
        """Run ``fn(*args)`` on the sandbox's loop (state is only touched there)."""

        async def run() -> Any:
            return fn(*args)

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout=30)

    def stats(self) -> dict[str, Any]:
        return dict(self.call(self.server.stats))

    def cancellations(self) -> list[Any]:
        return list(self.call(lambda: list(self.server.state.cancellations.values())))

    def settle_pending(self) -> int:
        """Settle every cancellation still pending, now, through the sandbox's own trigger
        (`SandboxServer.resolve_cancellation`), with the outcome it decided when it stored
        it: what its ``settlement_delay`` would show later. Returns how many it settled.

        With a long ``settlement_delay``, a test keeps rows pending for as long as it
        watches them, then settles them instead of waiting.
        """

        def settle() -> int:
            server = self.server
            now = server.state.now()
            pending = [c for c in server.state.cancellations.values() if not c.status_at(now).final]
            for c in pending:
                if c.accepted:
                    server.resolve_cancellation(c.payments_service_id, "accepted")
                else:
                    server.resolve_cancellation(
                        c.payments_service_id, "rejected", c.reason_code, c.reason_text
                    )
            return len(pending)

        return int(self.call(settle))

    @contextmanager
    def settling(self, every: float = 0.05) -> Iterator[None]:
        """Within the block, `settle_pending` every ``every`` seconds (from a thread): each
        cancellation settles as soon as it is stored."""
        done = threading.Event()

        def loop() -> None:
            while not done.wait(every):
                self.settle_pending()

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join(30)


@contextmanager
def threaded_sandbox(config: SandboxConfig | None = None) -> Iterator[ThreadedSandbox]:
    """Start ``testing.sandbox_server`` on its own loop in a thread; stop it on exit."""
    ready = threading.Event()
    box: dict[str, Any] = {}

    async def main() -> None:
        stop = asyncio.Event()
        box["stop"] = stop
        try:
            async with sandbox_server(config) as handle:
                box["handle"] = handle
                box["loop"] = asyncio.get_running_loop()
                ready.set()
                await stop.wait()
        except BaseException as exc:  # surface start-up failures to the test
            box["error"] = exc
            ready.set()
            raise

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    if not ready.wait(30):
        raise RuntimeError("sandbox thread did not start")
    if "error" in box:
        raise box["error"]
    sb = ThreadedSandbox(box["handle"], box["loop"])
    try:
        yield sb
    finally:
        sb.loop.call_soon_threadsafe(box["stop"].set)
        thread.join(30)


def bulk_rows(n: int, prefix: str = "E2E-T") -> list[dict[str, str]]:
    """``n`` valid bulk rows with distinct end-to-end ids."""
    return [
        {
            "original_end_to_end_id": f"{prefix}-{i:06d}",
            "amount": f"{10 + i % 90}.{i % 100:02d}",
            "currency": "EUR",
            "creditor_agent_bic": "COBADEFFXXX",
            "creditor_iban": CREDITOR_IBAN,
            "reason": "DUPL",
            "assigner_bic": "BNPAFRPPXXX",
            "assignee_bic": "COBADEFFXXX",
            "originator_name": "Alice Martin" if i % 2 else "",
        }
        for i in range(n)
    ]


def write_csv(path: Path, rows: Sequence[dict[str, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else list(COLUMNS))
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_jsonl(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def precreate_payments(
    sb: ThreadedSandbox, end_to_end_ids: Sequence[str], client_id: str = SANDBOX_CLIENT_ID
) -> None:
    """Store pacs.008 payments with these end-to-end ids directly in the sandbox's state.

    With a long ``processing_delay`` they stay unprocessed, so their cancellations are
    accepted; rows without a payment are rejected (NOOR).
    """
    msgs = [credit_transfer(amount=Decimal("10.00"), end_to_end_id=e2e) for e2e in end_to_end_ids]

    def store() -> None:
        for i, msg in enumerate(msgs):
            sb.server.state.submit_payment(client_id, msg, f"hash-{i}")

    sb.call(store)


def read_results(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


# --- a small fake service, for what the sandbox cannot be made to do -----------------------

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@dataclass
class FakeService:
    """What the fake answers; tests change these fields between runs.

    Attributes:
        token_status: the status of ``POST /oauth/token`` (200 gives a token).
        refuse_e2e: end-to-end ids whose camt.056 is refused with 400
            DUPLICATE_MESSAGE_ID (a reused ``assgnmt.id``).
        conf: the camt.029 ``sts.conf`` (and ``txCxlSts``) every outcome read returns.
        tx_cxl_sts: the camt.029 ``txCxlSts``.
        tx_sts: the pacs.002 ``txSts`` every status read returns.
        read_delay: seconds every status or outcome read waits before it answers.
        token_delay: seconds every token request waits before it answers.
        requests: path -> requests received.
    """

    url: str = ""
    token_status: int = 200
    refuse_e2e: frozenset[str] = frozenset()
    conf: str = "CNCL"
    tx_cxl_sts: str = "ACCR"
    tx_sts: str = "ACCC"
    read_delay: float = 0.0
    token_delay: float = 0.0
    requests: dict[str, int] | None = None


def _fake_app(state: FakeService) -> Any:
    from aiohttp import web

    resolution = json.loads((FIXTURES / "camt029_resolution.json").read_text())
    report = json.loads((FIXTURES / "pacs002_accc.json").read_text())
    counter = {"n": 0}

    def count(request: web.Request) -> None:
        key = request.path.split("/")[2] if request.path.count("/") > 1 else request.path
        assert state.requests is not None
        state.requests[key] = state.requests.get(key, 0) + 1

    async def token(request: web.Request) -> web.Response:
        count(request)
        await request.read()
        await asyncio.sleep(state.token_delay)
        if state.token_status != 200:
            return web.json_response(
                {"errors": [{"code": "UNAVAILABLE", "message": "try later"}]},
                status=state.token_status,
            )
        return web.json_response(
            {"access_token": "fake-token", "token_type": "bearer", "expires_in": 3600}
        )

    async def camt056(request: web.Request) -> web.Response:
        count(request)
        body = await request.json()
        req = body["fitoFIPmtCxlReq"]
        e2e = req["undrlyg"][0]["txInf"][0]["orgnlEndToEndId"]
        if e2e in state.refuse_e2e:
            return web.json_response(
                {
                    "errors": [
                        {
                            "code": "DUPLICATE_MESSAGE_ID",
                            "message": "assgnmt.id already used for another message",
                        }
                    ]
                },
                status=400,
            )
        counter["n"] += 1
        return web.json_response(
            {
                "data": {
                    "paymentsServiceId": f"cxl-fake-{counter['n']}",
                    "paymentId": req["assgnmt"]["id"],
                    "status": "PENDING",
                    "creationDateTime": "2024-08-01T08:00:00.000",
                }
            },
            status=201,
        )

    async def camt029(request: web.Request) -> web.Response:
        count(request)
        await asyncio.sleep(state.read_delay)
        doc = json.loads(json.dumps(resolution))
        doc["rsltnOfInvstgtn"]["sts"]["conf"] = state.conf
        doc["rsltnOfInvstgtn"]["cxlDtls"][0]["txInfAndSts"][0]["txCxlSts"] = state.tx_cxl_sts
        return web.json_response(doc)

    async def pacs002(request: web.Request) -> web.Response:
        count(request)
        await asyncio.sleep(state.read_delay)
        doc = json.loads(json.dumps(report))
        doc["fitoFIPmtStsRpt"]["txInfAndSts"][0]["txSts"] = state.tx_sts
        return web.json_response(doc)

    app = web.Application()
    app.router.add_post("/oauth/token", token)
    app.router.add_post("/payments/camt056/v08", camt056)
    app.router.add_get("/payments/camt029/v09/{id}", camt029)
    app.router.add_get("/payments/pacs002/v12/{id}", pacs002)
    return app


@contextmanager
def fake_service(state: FakeService | None = None) -> Iterator[FakeService]:
    """Serve a :class:`FakeService` on 127.0.0.1 from a background thread."""
    from aiohttp import web

    state = state or FakeService()
    state.requests = {}
    ready = threading.Event()
    box: dict[str, Any] = {}

    async def main() -> None:
        runner = web.AppRunner(_fake_app(state))
        await runner.setup()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(runner, sock).start()
        state.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        stop = asyncio.Event()
        box["stop"], box["loop"] = stop, asyncio.get_running_loop()
        ready.set()
        try:
            await stop.wait()
        finally:
            await runner.cleanup()

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    if not ready.wait(30):
        raise RuntimeError("fake service did not start")
    try:
        yield state
    finally:
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(30)


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
