"""OpenTelemetry end to end: a real client against the sandbox, read back from the SDK."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind

from payments_async import (
    Hooks,
    NotFoundError,
    PaymentsClient,
    RequestEvent,
    RetryPolicy,
    Telemetry,
)
from payments_async.sandbox import FaultConfig, SandboxConfig
from payments_async.testing import SandboxHandle, sandbox_server
from tests.factories import CREDITOR_IBAN, credit_transfer
from tests.support.otel import Otel

FAST = RetryPolicy(wait_initial=0.01, wait_max=0.05)


@pytest.fixture
def otel() -> Iterator[Otel]:
    o = Otel()
    yield o
    o.close()


@pytest_asyncio.fixture
async def sb() -> AsyncIterator[SandboxHandle]:
    async with sandbox_server(SandboxConfig(processing_delay=0.2)) as handle:
        yield handle


def _everything_recorded(otel: Otel) -> str:
    """Every span name, attribute, event and metric attribute, as one text."""
    parts: list[str] = []
    for span in otel.spans():
        parts.append(span.name)
        parts.extend(f"{k}={v}" for k, v in (span.attributes or {}).items())
        for event in span.events:
            parts.append(event.name)
            parts.extend(f"{k}={v}" for k, v in (event.attributes or {}).items())
        parts.append(str(span.status.description))
    for points in otel.metrics().values():
        for point in points:
            parts.extend(f"{k}={v}" for k, v in point.attributes.items())
    return "\n".join(parts)


async def test_operations_attempts_and_token_fetch_form_one_trace_each(
    otel: Otel, sb: SandboxHandle
) -> None:
    assert sb.credentials is not None
    transfer = credit_transfer()
    async with PaymentsClient(
        sb.credentials, base_url=sb.url, telemetry=otel.telemetry()
    ) as client:
        sub = await client.submit_credit_transfer(transfer)
        again = await client.submit_credit_transfer(transfer)  # replayed: 200
        assert again.replayed
        await client.get_credit_transfer_status(sub.payments_service_id)
        final = await client.wait_for_payment_status(sub.payments_service_id, timeout=30)
        with pytest.raises(NotFoundError):
            await client.get_credit_transfer_status("no-such-id")
    psid = sub.payments_service_id
    spans = otel.spans()
    by_id = {s.context.span_id: s for s in spans}
    ops = [s for s in spans if s.parent is None]
    assert [s.name for s in ops] == [
        "payments.submit_credit_transfer",
        "payments.submit_credit_transfer",
        "payments.get_credit_transfer_status",
        "payments.wait_for_payment_status",
        "payments.get_credit_transfer_status",
    ]
    created, replayed, read, wait, missing = ops
    assert created.attributes["payments.outcome"] == "created"
    assert created.attributes["payments.created"] is True
    assert created.attributes["payments.message_id"] == transfer.message_id
    assert created.attributes["payments.service_id"] == psid
    assert replayed.attributes["payments.outcome"] == "replayed"
    assert replayed.attributes["payments.replayed"] is True
    assert read.attributes["payments.outcome"] == "ok"
    assert wait.attributes["payments.operation"] == "wait_for_payment_status"
    assert wait.attributes["payments.outcome"] == final.outcome.value
    assert missing.attributes["payments.outcome"] == "refused"
    assert missing.attributes["error.type"] == "NotFoundError"

    def children(parent: ReadableSpan) -> list[ReadableSpan]:
        return [
            s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id
        ]

    # The first operation fetched the token: a child span with its own HTTP attempt.
    [fetch, post] = children(created)
    assert fetch.name == "payments.token_fetch"
    [token_http] = children(fetch)
    assert token_http.name == "POST /oauth/token"
    assert post.name == "POST /payments/pacs008/v10"
    assert post.kind is SpanKind.CLIENT
    assert post.attributes["http.response.status_code"] == 201
    assert post.attributes["server.address"] == "127.0.0.1"
    assert post.attributes["server.port"] == sb.server.port
    assert post.attributes["payments.attempt"] == 1
    [replay_http] = children(replayed)
    assert replay_http.attributes["http.response.status_code"] == 200
    polls = children(wait)
    assert polls
    assert {p.name for p in polls} == {"GET /payments/pacs002/v12/{paymentsServiceId}"}
    assert all(p.attributes["url.full"].endswith(psid) for p in polls)
    [not_found] = children(missing)
    assert not_found.attributes["error.type"] == "404"
    # Ids live in attributes, never in span names (low cardinality).
    assert not any(psid in s.name or transfer.message_id in s.name for s in spans)
    assert all(s.parent is None or s.parent.span_id in by_id for s in spans)

    metrics = otel.metrics()
    http_spans = [s for s in spans if s.kind is SpanKind.CLIENT]
    assert sum(p.count for p in metrics["http.client.request.duration"]) == len(http_spans)
    outcomes = {
        (p.attributes["payments.operation"], p.attributes["payments.outcome"]): p.value
        for p in metrics["payments.client.operations"]
    }
    assert outcomes[("submit_credit_transfer", "created")] == 1
    assert outcomes[("submit_credit_transfer", "replayed")] == 1
    assert outcomes[("get_credit_transfer_status", "ok")] == 1
    assert outcomes[("get_credit_transfer_status", "refused")] == 1
    assert outcomes[("wait_for_payment_status", final.outcome.value)] == 1
    [fetches] = metrics["payments.client.token.fetches"]
    assert fetches.value == 1


async def test_no_secret_token_or_body_is_ever_recorded(otel: Otel, sb: SandboxHandle) -> None:
    assert sb.credentials is not None
    async with PaymentsClient(
        sb.credentials, base_url=sb.url, telemetry=otel.telemetry(), retry=FAST
    ) as client:
        sub = await client.submit_credit_transfer(credit_transfer())
        await client.get_credit_transfer_status(sub.payments_service_id)
        sb.server.state.revoke_tokens()  # a 401 and a token refresh are recorded too
        await client.get_credit_transfer_status(sub.payments_service_id)
        issued = list(sb.server.state._tokens)
    recorded = _everything_recorded(otel)
    assert "401" in recorded  # the refused attempt is there...
    assert len(issued) == 1  # ...and the token that replaced the revoked one
    for secret in (sb.credentials.client_secret, *issued, "Bearer", "Basic ", "eyJ"):
        assert secret not in recorded
    assert CREDITOR_IBAN not in recorded  # nothing of the body


async def test_retries_are_counted_and_each_attempt_is_a_span(
    otel: Otel, sb: SandboxHandle
) -> None:
    assert sb.credentials is not None
    sb.server.set_faults(FaultConfig(error_503=1.0))

    def heal(_: RequestEvent) -> None:
        sb.server.set_faults(FaultConfig())

    async with PaymentsClient(
        sb.credentials,
        base_url=sb.url,
        telemetry=otel.telemetry(),
        retry=FAST,
        hooks=Hooks(on_retry=heal),
    ) as client:
        sub = await client.submit_credit_transfer(credit_transfer())
    assert sub.attempts == 2
    posts = sorted(
        (s for s in otel.spans() if s.name == "POST /payments/pacs008/v10"),
        key=lambda s: s.attributes["payments.attempt"],
    )
    assert [p.attributes["http.response.status_code"] for p in posts] == [503, 201]
    assert posts[0].attributes["error.type"] == "503"
    assert posts[1].attributes["http.request.resend_count"] == 1
    [retries] = otel.metrics()["payments.client.retries"]
    assert retries.value == 1
    assert retries.attributes["error.type"] == "ServerError"


async def test_background_refresh_is_its_own_trace(otel: Otel) -> None:
    async with sandbox_server(SandboxConfig(token_lifetime=2)) as handle:
        assert handle.credentials is not None
        async with PaymentsClient(
            handle.credentials, base_url=handle.url, telemetry=otel.telemetry()
        ) as client:
            await client.access_token_lifetime()
            for _ in range(100):  # the refresher fetches after ~1.6 s of a 2-s token
                if handle.server.stats()["token_requests"] >= 2:
                    break
                await asyncio.sleep(0.05)
    fetches = [s for s in otel.spans() if s.name == "payments.token_fetch"]
    assert len(fetches) >= 2
    # Not parented to the finished call that started the refresher.
    assert all(f.parent is None for f in fetches)


async def _sent_headers(sb: SandboxHandle, telemetry: Telemetry) -> list[dict[str, str]]:
    sent: list[dict[str, str]] = []

    async def on_headers(_s: Any, _ctx: Any, params: aiohttp.TraceRequestHeadersSentParams) -> None:
        sent.append(dict(params.headers))

    trace = aiohttp.TraceConfig()
    trace.on_request_headers_sent.append(on_headers)
    assert sb.credentials is not None
    async with (
        aiohttp.ClientSession(trace_configs=[trace]) as session,
        PaymentsClient(
            sb.credentials, base_url=sb.url, session=session, telemetry=telemetry
        ) as client,
    ):
        await client.submit_credit_transfer(credit_transfer())
    return sent


async def test_trace_context_is_not_sent_unless_asked(otel: Otel, sb: SandboxHandle) -> None:
    sent = await _sent_headers(sb, otel.telemetry())
    assert len(sent) == 2  # token, POST
    assert not any("traceparent" in h for h in sent)


async def test_trace_context_is_sent_when_switched_on(otel: Otel, sb: SandboxHandle) -> None:
    sent = await _sent_headers(sb, otel.telemetry(propagate=True))
    http = {
        s.attributes["payments.request_id"]: s for s in otel.spans() if s.kind is SpanKind.CLIENT
    }
    assert len(sent) == 2
    for headers in sent:
        span = http[headers["X-Request-ID"]]
        _, trace_id, span_id, _ = headers["traceparent"].split("-")
        assert (int(trace_id, 16), int(span_id, 16)) == (
            span.context.trace_id,
            span.context.span_id,
        )


def test_without_telemetry_opentelemetry_is_never_imported() -> None:
    script = textwrap.dedent(
        """
        import asyncio, sys
        from tests.factories import credit_transfer
        from payments_async import PaymentsClient
        from payments_async.testing import sandbox_server

        async def main():
            async with sandbox_server() as sb:
                async with PaymentsClient(sb.credentials, base_url=sb.url) as client:
                    sub = await client.submit_credit_transfer(credit_transfer())
                    await client.get_credit_transfer_status(sub.payments_service_id)

        asyncio.run(main())
        loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
        print("loaded:", loaded)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        cwd=Path(__file__).resolve().parents[2],  # `python -c` imports `tests` from here
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "loaded: []"
