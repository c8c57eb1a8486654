"""What tracing costs a GET: telemetry off vs on (API only, no SDK) vs on with the SDK.

Issue 13, item 2 ("zero cost when not enabled"). The sandbox runs as a separate process;
one client per variant reads pacs.002 statuses round-robin, 16 at a time. Variants:

* ``off``: ``PaymentsClient(...)`` without ``telemetry=`` (opentelemetry not imported).
* ``api-noop``: ``Telemetry()`` with no SDK configured: the API's no-op tracer and meter.
* ``sdk``: ``Telemetry()`` with an SDK ``TracerProvider`` (batch span processor to an
  exporter that drops spans) and ``MeterProvider``: spans and metrics really recorded.

Variants are interleaved ``rounds`` times; each row is the median round by client CPU.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from _harness import (
    BENCH_CLIENT_ID,
    BENCH_CLIENT_SECRET,
    BENCH_ISS,
    BENCH_KID,
    CREDITOR_IBAN,
    closed_loop,
    format_table,
    machine_info,
    parse_args,
    sandbox_process,
    write_result,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from payments_async import Credentials, PaymentsClient, Telemetry
from payments_async.iso20022 import build_credit_transfer
from payments_async.testing import generate_test_keypair

NAME = "telemetry"
CONCURRENCY = 16
VARIANTS = ("off", "api-noop", "sdk")
COLUMNS = (
    "variant",
    "n",
    "concurrency",
    "rps",
    "p50_ms",
    "p99_ms",
    "cpu_us_per_req",
    "cpu_over_off",
)


class _Drop(SpanExporter):
    """Accepts spans and forgets them: the cost measured is recording, not shipping."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def _client(creds: Credentials, url: str, variant: str) -> tuple[PaymentsClient, Any]:
    if variant == "off":
        return PaymentsClient(creds, base_url=url), None
    if variant == "api-noop":
        return PaymentsClient(creds, base_url=url, telemetry=Telemetry()), None
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(_Drop()))
    meter_provider = MeterProvider()
    telemetry = Telemetry(tracer_provider=tracer_provider, meter_provider=meter_provider)
    return PaymentsClient(creds, base_url=url, telemetry=telemetry), (
        tracer_provider,
        meter_provider,
    )


async def run(url: str, key: Any, n: int, m: int, rounds: int) -> list[dict[str, Any]]:
    creds = Credentials(
        BENCH_CLIENT_ID, BENCH_CLIENT_SECRET, key_id=BENCH_KID, issuer=BENCH_ISS, private_key=key
    )
    clients = {v: _client(creds, url, v) for v in VARIANTS}
    try:
        seed = clients["off"][0]
        ids = [
            (
                await seed.submit_credit_transfer(
                    build_credit_transfer(
                        debtor_name="Alice Example",
                        debtor_iban="DE89370400440532013000",
                        debtor_agent_id="37040044",
                        creditor_name="Bob Example",
                        creditor_iban=CREDITOR_IBAN,
                        creditor_agent_id="20041010",
                        amount=Decimal("10.00"),
                    )
                )
            ).payments_service_id
            for _ in range(m)
        ]
        runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
        for v in VARIANTS:  # warm up: token, connections
            client = clients[v][0]
            await closed_loop(
                lambda i, c=client: c.get_credit_transfer_status(ids[i % m]), 50, CONCURRENCY
            )
        for _ in range(rounds):
            for v in VARIANTS:
                client = clients[v][0]
                res = await closed_loop(
                    lambda i, c=client: c.get_credit_transfer_status(ids[i % m]), n, CONCURRENCY
                )
                runs[v].append(res.summary())
    finally:
        for client, providers in clients.values():
            await client.aclose()
            if providers is not None:
                providers[0].shutdown()
                providers[1].shutdown()
    rows = []
    for v in VARIANTS:
        by_cpu = sorted(runs[v], key=lambda r: r["cpu_us_per_req"])
        row = dict(by_cpu[len(by_cpu) // 2])
        row["variant"] = v
        row["cpu_us_per_req_rounds"] = [r["cpu_us_per_req"] for r in runs[v]]
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__.splitlines()[0], argv)
    n, m, rounds = (16, 2, 1) if args.smoke else (60, 5, 1) if args.quick else (3000, 100, 3)
    info = machine_info()
    key, pem = generate_test_keypair()
    with sandbox_process("--processing-delay", "0") as sb:
        sb.register(pem)
        rows = asyncio.run(run(sb.url, key, n, m, rounds))
    info["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    off = next(r for r in rows if r["variant"] == "off")["cpu_us_per_req"]
    for r in rows:
        r["cpu_over_off"] = round(r["cpu_us_per_req"] / off, 3) if off else None
    print(
        format_table(
            rows,
            COLUMNS,
            title=f"GET pacs.002, {CONCURRENCY} concurrent, median of {rounds} round(s)",
        )
    )
    result = {
        "benchmark": NAME,
        "quick": args.quick,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": info,
        "rows": rows,
        "spread_cpu_us_per_req": {
            r["variant"]: round(statistics.pstdev(r["cpu_us_per_req_rounds"]), 1) for r in rows
        },
    }
    path = write_result(args.out, NAME, result)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
