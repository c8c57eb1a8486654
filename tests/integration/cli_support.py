"""Shared pieces of the CLI and bulk tests: a sandbox in a thread, input files, payments.

The CLI runs ``asyncio.run`` itself, so tests that drive it with ``CliRunner`` (or as a
subprocess) cannot share the test's event loop with the sandbox: the sandbox runs on its
own loop in a background thread, on 127.0.0.1, and tests read its state directly.
"""

from __future__ import annotations

import asyncio
import csv
import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from payments_async._constants import SANDBOX_CLIENT_ID
from payments_async.iso20022 import build_credit_transfer
from payments_async.sandbox import SandboxConfig, SandboxServer
from payments_async.testing import SandboxHandle, sandbox_server

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
CREDITOR_IBAN = "DE89370400440532013000"
DEBTOR_IBAN = "FR1420041010050500013M02606"


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
    msgs = [
        build_credit_transfer(
            debtor_name="Alice Martin",
            debtor_iban=DEBTOR_IBAN,
            debtor_agent_id="30004",
            creditor_name="Bob Schmidt",
            creditor_iban=CREDITOR_IBAN,
            creditor_agent_id="37040044",
            amount=Decimal("10.00"),
            end_to_end_id=e2e,
        )
        for e2e in end_to_end_ids
    ]

    def store() -> None:
        for i, msg in enumerate(msgs):
            sb.server.state.submit_payment(client_id, msg, f"hash-{i}")

    sb.call(store)


def read_results(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))
