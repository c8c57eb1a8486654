"""Notifications over real HTTP: sandbox -> receiver -> confirming GET -> callbacks and waiters."""

from __future__ import annotations

import asyncio
import base64
import gc
import logging
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import pytest
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from joserfc import jwt
from joserfc.jwk import ECKey

from payments_async import (
    CancellationOutcome,
    ConfigurationError,
    Outcome,
    PollPolicy,
    ServiceProfile,
)
from payments_async._constants import CAMT029_PATH, CAMT056_PATH, PACS002_PATH, PACS008_PATH
from payments_async.iso20022 import summarize_status_report
from payments_async.notifications import (
    BasicAuth,
    BearerAuth,
    JwtBearerVerifier,
    NotificationReceiver,
    ReceiverLimits,
    ReceiverServer,
    Retries,
    create_app,
)
from payments_async.sandbox._notify import NotificationFaults
from tests.factories import cancellation_for, credit_transfer
from tests.support.notifications import HOOK_PASSWORD, HOOK_USER, Stack, notifying_stack, settle

WAIT = 5.0  # seconds; far below the 60 s safety-net poll of NO_POLL


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


async def test_outcomes_reach_waiters_and_callbacks_by_notification() -> None:
    async with notifying_stack() as st:
        c = st.client
        p1 = credit_transfer()
        s1 = await c.submit_credit_transfer(p1)
        x1 = await c.request_cancellation(cancellation_for(p1))  # p1 unprocessed: accepted
        p2 = credit_transfer()
        s2 = await c.submit_credit_transfer(p2)
        status2 = await asyncio.wait_for(c.wait_for_payment_status(s2.payments_service_id), WAIT)
        assert status2.status == "ACCC"
        x2 = await c.request_cancellation(cancellation_for(p2))  # p2 processed: rejected
        o1, o2, status1 = await asyncio.wait_for(
            asyncio.gather(
                c.wait_for_cancellation_outcome(x1.payments_service_id),
                c.wait_for_cancellation_outcome(x2.payments_service_id),
                c.wait_for_payment_status(s1.payments_service_id),
            ),
            WAIT,
        )
        assert o1.accepted
        assert o2.rejected
        assert o2.return_request_needed
        assert status1.status == "RJCT"
        assert status1.reason_codes == ("DS02",)
        await settle(st)

        assert sorted((o.payments_service_id, o.outcome) for o in st.outcomes) == sorted(
            [(x1.payments_service_id, Outcome.ACCEPTED), (x2.payments_service_id, Outcome.REJECTED)]
        )
        assert Counter(psid for psid, _ in st.payments) == {
            s1.payments_service_id: 1,
            s2.payments_service_id: 1,
        }
        # No waiter polled (the safety net is 60 s away): every GET was a confirmation.
        assert st.receiver.stats.confirm_reads == 4
        assert st.sandbox_gets() == 4
        assert st.sent()["delivered"] == 4


EDITION = ServiceProfile(
    pacs008_path="/payments/pacs008/v08",
    pacs002_path="/payments/pacs002/v10",
    camt056_path="/payments/camt056/v07",
    camt029_path="/payments/camt029/v08",
)


async def test_another_editions_short_notices_reach_callbacks_through_its_profile() -> None:
    seen: list[bytes] = []

    async with notifying_stack(profile=EDITION) as st:
        handle = st.receiver.handle

        async def spy(method: str, headers: Any, body: bytes, **kw: Any) -> tuple[int, bytes]:
            seen.append(body)
            return await handle(method, headers, body, **kw)

        st.receiver.handle = spy  # type: ignore[method-assign]
        c = st.client
        p = credit_transfer()
        s = await c.submit_credit_transfer(p)
        x = await c.request_cancellation(cancellation_for(p))
        outcome, status = await asyncio.wait_for(
            asyncio.gather(
                c.wait_for_cancellation_outcome(x.payments_service_id),
                c.wait_for_payment_status(s.payments_service_id),
            ),
            WAIT,
        )
        assert outcome.accepted
        assert status.status == "RJCT"
        await settle(st)
        assert [psid for psid, _ in st.payments] == [s.payments_service_id]
        assert [o.payments_service_id for o in st.outcomes] == [x.payments_service_id]
        assert st.receiver.stats.rejected == {}
        assert st.receiver.stats.confirm_reads == 2
        notices = sorted(msgspec.json.decode(body)["statusReportMessage"] for body in seen)
        assert notices == [
            f"{st.sandbox.url}/payments/camt029/v08/{x.payments_service_id}",
            f"{st.sandbox.url}/payments/pacs002/v10/{s.payments_service_id}",
        ]


def _es256_pair() -> tuple[bytes, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private, public


async def test_full_reports_with_a_jwt_bearer_are_confirmed_then_delivered() -> None:
    private, public = _es256_pair()
    claims = {"iss": "bank-hooks", "aud": "our-receiver", "exp": int(time.time()) + 600}
    token = jwt.encode({"alg": "ES256"}, claims, ECKey.import_key(private))
    auth = BearerAuth(JwtBearerVerifier(public, issuer="bank-hooks", audience="our-receiver"))
    async with notifying_stack(
        payload="full", auth=auth, target_credentials={"bearer": token}
    ) as st:
        c = st.client
        p = credit_transfer()
        s = await c.submit_credit_transfer(p)
        x = await c.request_cancellation(cancellation_for(p))
        outcome = await asyncio.wait_for(
            c.wait_for_cancellation_outcome(x.payments_service_id), WAIT
        )
        assert outcome.accepted
        await settle(st)
        assert [o.payments_service_id for o in st.outcomes] == [x.payments_service_id]
        assert [psid for psid, _ in st.payments] == [s.payments_service_id]
        assert st.sent()["targets"][st.sandbox.credentials.client_id]["payload"] == "full"  # type: ignore[union-attr]
        # A full report is still only a hint: both were confirmed by a GET.
        assert st.receiver.stats.confirm_reads == 2
        assert st.receiver.stats.rejected == {}


async def test_duplicates_reordering_delay_loss_and_bad_credentials_each_final_once() -> None:
    faults = NotificationFaults(
        loss=0.25,
        duplicate=0.4,
        reorder=0.3,
        delay=0.2,
        wrong_credentials=0.3,
        delay_seconds=0.3,
        reorder_seconds=0.15,
        seed=3,
    )
    fallback = PollPolicy(initial=1.0, maximum=1.0, not_found_grace=5.0)
    async with notifying_stack(faults=faults, poll=fallback) as st:
        c = st.client
        subs = [await c.submit_credit_transfer(credit_transfer()) for _ in range(12)]
        cancels = []
        payments = [credit_transfer() for _ in range(6)]
        for p in payments:
            s = await c.submit_credit_transfer(p)
            subs.append(s)
            cancels.append(await c.request_cancellation(cancellation_for(p)))
        results = await asyncio.wait_for(
            asyncio.gather(
                *(c.wait_for_payment_status(s.payments_service_id) for s in subs),
                *(c.wait_for_cancellation_outcome(x.payments_service_id) for x in cancels),
            ),
            20,
        )
        assert all(r is not None for r in results)  # every waiter finished
        await settle(st)

        sent = st.sent()
        for kind in ("loss", "duplicate", "reorder", "delay", "wrong_credentials"):
            assert sent["faults"][kind] > 0, kind
        payment_ids = Counter(psid for psid, _ in st.payments)
        outcome_ids = Counter(o.payments_service_id for o in st.outcomes)
        assert max(payment_ids.values()) == 1
        assert max(outcome_ids.values()) == 1
        # Everything not lost reached a callback exactly once; the lost ones were found by
        # the waiters' poll fallback instead.
        notified = sent["notifications"] - sent["faults"]["loss"]
        assert sum(payment_ids.values()) + sum(outcome_ids.values()) == notified
        assert st.receiver.stats.rejected[401] == sent["faults"]["wrong_credentials"]
        assert st.receiver.stats.known_final > 0  # duplicates answered without a GET


async def test_lost_notifications_cost_latency_not_outcomes() -> None:
    fallback = PollPolicy(initial=0.3, maximum=0.3, not_found_grace=5.0)
    async with notifying_stack(faults=NotificationFaults(loss=1.0), poll=fallback) as st:
        c = st.client
        p = credit_transfer()
        s = await c.submit_credit_transfer(p)
        x = await c.request_cancellation(cancellation_for(p))
        outcome = await asyncio.wait_for(
            c.wait_for_cancellation_outcome(x.payments_service_id), WAIT
        )
        status = await asyncio.wait_for(c.wait_for_payment_status(s.payments_service_id), WAIT)
        assert outcome.accepted
        assert status.status == "RJCT"
        await settle(st)
        assert st.sent()["faults"]["loss"] == 2
        assert st.outcomes == []
        assert st.payments == []


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        basic(HOOK_USER, HOOK_PASSWORD + "x"),
        basic(HOOK_USER + "x", HOOK_PASSWORD),
        "Bearer " + HOOK_PASSWORD,
        "Basic !!!not-base64",
    ],
)
async def test_wrong_or_missing_credentials_get_401_and_nothing_is_processed(
    authorization: str | None,
) -> None:
    async with notifying_stack() as st:
        s = await st.client.submit_credit_transfer(credit_transfer())
        body = msgspec.json.encode(
            {
                "paymentsServiceId": s.payments_service_id,
                "statusReportMessage": f"{st.sandbox.url}{PACS002_PATH}/{s.payments_service_id}",
            }
        )
        headers = {"Content-Type": "application/json"}
        if authorization is not None:
            headers["Authorization"] = authorization
        gets_before = st.sandbox_gets()
        async with aiohttp.ClientSession() as http:
            async with http.post(st.server.url, data=body, headers=headers) as resp:
                assert resp.status == 401
                assert "WWW-Authenticate" in resp.headers
            # the right credentials on the same body are accepted: the 401 was the auth
            headers["Authorization"] = basic(HOOK_USER, HOOK_PASSWORD)
            async with http.post(st.server.url, data=body, headers=headers) as resp:
                assert resp.status == 202
        await st.receiver.join()
        assert st.receiver.stats.rejected[401] == 1
        assert st.receiver.stats.accepted == 1
        assert st.sandbox_gets() == gets_before + 1


@pytest.mark.parametrize(
    "nested",
    [
        b'{"paymentsServiceId": "p-1", "x": ' + b"[" * 1000 + b"]" * 1000 + b"}",
        b'{"fitoFIPmtStsRpt": ' + b"[" * 1000 + b"]" * 1000 + b', "paymentsServiceId": "p"}',
        b'{"paymentsServiceId": ' + b"[" * 1000 + b"]" * 1000 + b"}",
    ],
    ids=["short-notice", "full-report", "id"],
)
async def test_an_authenticated_notification_nested_1000_deep_gets_400_not_500(
    nested: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    """A 2 KB body is no cost to send; the receiver answers it like malformed JSON."""
    assert 2000 <= len(nested) <= 2100
    async with notifying_stack() as st, aiohttp.ClientSession() as http:
        headers = {
            "Content-Type": "application/json",
            "Authorization": basic(HOOK_USER, HOOK_PASSWORD),
        }
        async with http.post(st.server.url, data=nested, headers=headers) as resp:
            assert resp.status == 400
            assert "nested too deeply" in (await resp.json())["error"]
        assert st.receiver.stats.rejected[400] == 1
    assert not [r for r in caplog.records if r.exc_info], "no traceback"


async def test_a_malformed_request_never_echoes_or_logs_the_credentials(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """aiohttp's parser quotes the offending header line in its answer and its log."""
    caplog.set_level(logging.DEBUG)
    credential = basic(HOOK_USER, HOOK_PASSWORD).split(" ", 1)[1]
    heads = {
        400: b"Authorization Basic " + credential.encode(),  # no colon
        431: b"Authorization: Basic " + credential.encode() + b"A" * 9000,  # over the limit
    }
    async with notifying_stack() as st:
        host, port = st.server.url.removeprefix("http://").split("/")[0].rsplit(":", 1)
        for status, line in heads.items():
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(b"POST /notifications HTTP/1.1\r\nHost: x\r\n" + line + b"\r\n\r\n")
            answer = await asyncio.wait_for(reader.read(), timeout=5)
            writer.close()
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.split(b" ")[1] == b"%d" % status, head
            assert b"application/json" in head
            assert msgspec.json.decode(body)["error"]
            assert credential.encode() not in answer
    for record in caplog.records:
        assert record.exc_info is None, record.getMessage()
        assert credential not in record.getMessage()
    assert any("malformed request" in r.getMessage() for r in caplog.records)


async def test_a_notification_naming_a_foreign_host_is_never_fetched() -> None:
    hits: list[str] = []

    async def record(request: web.Request) -> web.Response:
        hits.append(request.path)
        return web.json_response({})

    foreign = web.Application()
    foreign.router.add_route("*", "/{tail:.*}", record)
    runner = web.AppRunner(foreign)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    foreign_url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        async with notifying_stack() as st:
            s = await st.client.submit_credit_transfer(credit_transfer())
            psid = s.payments_service_id
            sandbox_host_other_port = st.sandbox.url.rsplit(":", 1)[0] + ":1"
            bad_uris = [
                {"statusReportMessage": f"{foreign_url}{PACS002_PATH}/{psid}"},
                {"originalMessage": f"{foreign_url}{PACS008_PATH}/{psid}"},
                {"statusReportMessage": f"{sandbox_host_other_port}{PACS002_PATH}/{psid}"},
                {"statusReportMessage": f"//127.0.0.2{PACS002_PATH}/{psid}"},
                {"statusReportMessage": f"{st.sandbox.url}/elsewhere/{psid}"},
                {"statusReportMessage": f"{st.sandbox.url}{CAMT029_PATH}/other-id"},
                {
                    "statusReportMessage": (
                        f"http://user:pw@{st.sandbox.url[7:]}{PACS002_PATH}/{psid}"
                    )
                },
            ]
            gets_before = st.sandbox_gets()
            async with aiohttp.ClientSession() as http:
                for uris in bad_uris:
                    body = msgspec.json.encode({"paymentsServiceId": psid, **uris})
                    async with http.post(
                        st.server.url,
                        data=body,
                        headers={
                            "Content-Type": "application/json",
                            "Authorization": basic(HOOK_USER, HOOK_PASSWORD),
                        },
                    ) as resp:
                        assert resp.status == 422, uris
            await st.receiver.join()
            assert hits == []
            assert st.sandbox_gets() == gets_before
            assert st.receiver.stats.accepted == 0
    finally:
        await runner.cleanup()


async def test_oversized_or_malformed_bodies_are_4xx_never_500(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with notifying_stack(limits=ReceiverLimits(max_body_bytes=4096)) as st:
        auth = {"Authorization": basic(HOOK_USER, HOOK_PASSWORD)}
        json_ct = {**auth, "Content-Type": "application/json"}

        async def chunked_big():  # type: ignore[no-untyped-def]
            for _ in range(10):
                yield b" " * 1024

        cases: list[tuple[str, dict[str, str], object, int]] = [
            ("POST", json_ct, b"{" + b" " * 10_000 + b"}", 413),
            ("POST", json_ct, chunked_big(), 413),
            ("POST", json_ct, b"{not json", 400),
            ("POST", json_ct, b"[1, 2]", 400),
            ("POST", json_ct, b"", 400),
            ("POST", {**auth, "Content-Type": "text/plain"}, b"{}", 415),
            ("POST", json_ct, b'{"hello": "world"}', 422),
            ("POST", json_ct, b'{"paymentsServiceId": "../../etc"}', 422),
            ("POST", json_ct, b'{"paymentsServiceId": 42}', 422),
            ("POST", json_ct, b'{"paymentsServiceId": "abc"}', 422),
            ("POST", json_ct, b'{"paymentsServiceId": "abc", "statusReportMessage": 5}', 422),
            (
                "POST",
                json_ct,
                b'{"fitoFIPmtStsRpt": {"txInfAndSts": 5}, "paymentsServiceId": "a"}',
                422,
            ),
            ("POST", json_ct, b'{"rsltnOfInvstgtn": {"sts": {"conf": "ACCC"}}}', 422),
            ("POST", json_ct, b'{"rsltnOfInvstgtn": []}', 422),
            # Not UTF-8 inside a key or a string (a 500 once).
            ("POST", json_ct, b'{"payments\xffServiceId": "a"}', 400),
            ("POST", json_ct, b'{"paymentsServiceId": "a\xff"}', 422),
            (
                "POST",
                json_ct,
                b'{"paymentsServiceId": "a", "fitoFIPmtStsRpt": {"grpHdr": {"msgId": "\xff"}}}',
                422,
            ),
            (
                "POST",
                json_ct,
                b'{"paymentsServiceId": "a\xff", "fitoFIPmtStsRpt": {"txInfAndSts": []}}',
                422,
            ),
            # A body that cannot be inflated (a 500 once, or aiohttp's text/plain 400).
            ("POST", {**json_ct, "Content-Encoding": "gzip"}, b"not-a-zip", 400),
            ("POST", {**json_ct, "Content-Encoding": "deflate"}, b"not-a-zip", 400),
            ("GET", auth, None, 405),
            ("PUT", json_ct, b"{}", 405),
        ]
        async with aiohttp.ClientSession() as http:
            for method, headers, body, expected in cases:
                async with http.request(method, st.server.url, data=body, headers=headers) as resp:
                    assert resp.status == expected, (method, body)
                    assert resp.status < 500
                    if method == "POST":
                        assert resp.content_type == "application/json", body
        assert st.receiver.stats.accepted == 0
        assert st.sandbox_gets() == 0
    # aiohttp drained a body it could not decode after the 400 and logged the failure
    # as an "Unhandled exception" with a traceback.
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, errors


async def test_a_body_slower_than_the_read_timeout_gets_408_and_the_connection_closed() -> None:
    """A body announced and never sent held the connection and its task forever."""
    async with (
        notifying_stack() as st,
        ReceiverServer(st.receiver, body_read_timeout=0.3) as server,
    ):
        host, port = server.url.removeprefix("http://").split("/")[0].rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        started = time.monotonic()
        writer.write(
            b"POST /notifications HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: " + basic(HOOK_USER, HOOK_PASSWORD).encode() + b"\r\n"
            b"Content-Length: 100\r\n\r\n" + b'{"paymen' + b"ts"
        )
        answer = await asyncio.wait_for(reader.read(), timeout=5)  # to EOF: it was closed
        elapsed = time.monotonic() - started
        writer.close()
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.split(b" ")[1] == b"408", head
        assert b"application/json" in head
        assert b"connection: close" in head.lower()
        assert msgspec.json.decode(body)["error"]
        assert 0.3 <= elapsed < 3
        assert st.receiver.stats.rejected[408] == 1
        assert st.receiver.stats.accepted == 0
        for bad in (0, -1, float("nan"), float("inf")):
            with pytest.raises(ConfigurationError, match="body_read_timeout"):
                create_app(st.receiver, body_read_timeout=bad)


async def test_a_caller_gone_before_its_body_arrived_logs_no_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with notifying_stack() as st:
        host, port = st.server.url.removeprefix("http://").split("/")[0].rsplit(":", 1)
        _reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(
            b"POST /notifications HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: " + basic(HOOK_USER, HOOK_PASSWORD).encode() + b"\r\n"
            b"Content-Length: 100\r\n\r\n" + b'{"paymen'
        )
        await writer.drain()
        await asyncio.sleep(0.1)
        writer.close()
        await asyncio.sleep(0.2)
        assert st.receiver.stats.accepted == 0
    # Was "Error handling request" with a ConnectionResetError traceback (and a 500).
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, errors


async def test_a_full_queue_answers_503_so_the_service_redelivers() -> None:
    async with notifying_stack(limits=ReceiverLimits(queue_size=1, workers=1)) as st:
        s = await st.client.submit_credit_transfer(credit_transfer())
        body = msgspec.json.encode(
            {
                "paymentsServiceId": s.payments_service_id,
                "statusReportMessage": f"{st.sandbox.url}{PACS002_PATH}/{s.payments_service_id}",
            }
        )
        headers = {
            "Content-Type": "application/json",
            "Authorization": basic(HOOK_USER, HOOK_PASSWORD),
        }
        # No await between the two: the worker cannot have taken the first one yet.
        first = await st.receiver.handle("POST", headers, body)
        second = await st.receiver.handle("POST", headers, body)
        assert first[0] == 202
        assert second[0] == 503
        assert st.receiver.stats.queue_full == 1


async def test_mounted_as_a_sub_app_and_503_until_started() -> None:
    async with notifying_stack() as st:
        s = await st.client.submit_credit_transfer(credit_transfer())
        body = msgspec.json.encode(
            {
                "paymentsServiceId": s.payments_service_id,
                "statusReportMessage": f"{st.sandbox.url}{PACS002_PATH}/{s.payments_service_id}",
            }
        )
        headers = {
            "Content-Type": "application/json",
            "Authorization": basic(HOOK_USER, HOOK_PASSWORD),
        }
        idle = NotificationReceiver(st.client, auth=BasicAuth(HOOK_USER, HOOK_PASSWORD))
        assert (await idle.handle("POST", headers, body))[0] == 503  # not started: redeliver

        parent = web.Application()
        parent.add_subapp("/hooks", create_app(st.receiver))
        runner = web.AppRunner(parent)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        try:
            url = f"http://127.0.0.1:{runner.addresses[0][1]}/hooks/notifications"
            async with (
                aiohttp.ClientSession() as http,
                http.post(url, data=body, headers=headers) as resp,
            ):
                assert resp.status == 202
            await st.receiver.join()
            assert st.receiver.stats.confirm_reads == 1
        finally:
            await runner.cleanup()


async def test_a_failing_callback_is_retried_then_parked_and_the_receiver_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[str] = []

    async def broken(outcome: CancellationOutcome) -> None:
        calls.append(outcome.payments_service_id)
        raise RuntimeError("user bug")

    async with notifying_stack(
        on_cancellation_outcome=broken, retries=Retries(callback_attempts=3, wait=0.05)
    ) as st:
        c = st.client
        xs = []
        for _ in range(2):
            p = credit_transfer()
            await c.submit_credit_transfer(p)
            xs.append(await c.request_cancellation(cancellation_for(p)))
        outcomes = await asyncio.wait_for(
            asyncio.gather(*(c.wait_for_cancellation_outcome(x.payments_service_id) for x in xs)),
            WAIT,
        )
        assert all(o.accepted for o in outcomes)
        await settle(st)
        status = await st.receiver.inbox.status()
        assert (status.failed, status.depth) == (2, 0)  # parked, visible, not waiting
        assert status.last_error is not None
        assert "user bug" in status.last_error
        assert (st.receiver.stats.callback_errors, st.receiver.stats.parked) == (6, 2)
        # The two payments' final statuses reached their (working) callback once each.
        assert st.receiver.stats.callbacks == len(st.payments) == 2
    # Each tried callback_attempts times, then parked: never dropped silently.
    assert sorted(calls) == sorted(x.payments_service_id for x in xs for _ in range(3))
    assert "user bug" in caplog.text
    assert "parked as failed" in caplog.text


@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_a_notice_for_an_id_the_service_does_not_know_is_parked_after_a_few_reads(
    store: str, tmp_path: Path
) -> None:
    """A forged id was read again once a minute for as long as the receiver ran."""
    inbox = str(tmp_path / "inbox.db") if store == "sqlite" else None
    retries = Retries(not_found_reads=3, not_found_wait=0.01)  # time driven: 3 reads, 30 ms
    async with notifying_stack(retries=retries, inbox=inbox) as st:
        forged = "forged-" + "0" * 20
        notice = {
            "paymentsServiceId": forged,
            "originalMessage": f"{st.sandbox.url}{CAMT056_PATH}/{forged}",
            "statusReportMessage": f"{st.sandbox.url}{CAMT029_PATH}/{forged}",
        }
        auth = {"Authorization": basic(HOOK_USER, HOOK_PASSWORD)}
        async with (
            aiohttp.ClientSession() as http,
            http.post(st.server.url, json=notice, headers=auth) as resp,
        ):
            assert resp.status == 202
        await asyncio.wait_for(st.receiver.join(), WAIT)  # it never returned
        assert st.sandbox_gets() == 3
        assert (st.receiver.stats.parked, st.receiver.stats.not_found) == (1, 1)
        status = await st.receiver.inbox.status()
        assert (status.failed, status.depth) == (1, 0)
        assert status.last_error is not None
        assert forged in status.last_error
        assert "404" in status.last_error
        assert await st.receiver.inbox.claim(10) == []  # parked: never due again
        assert st.outcomes == []


async def test_sandbox_control_routes_refuse_bad_input_and_never_echo_secrets() -> None:
    async with notifying_stack() as st, aiohttp.ClientSession() as http:
        base = st.sandbox.url + "/_sandbox"
        bad = [
            ("/notifications", b"not json"),
            ("/notifications", b"[]"),
            ("/notifications", b"{}"),
            ("/notifications", b'{"client_id": "c", "url": "http://h/n"}'),
            ("/notifications", b'{"client_id": "c", "url": 5, "bearer": "t"}'),
            ("/notifications", b'{"client_id": "c", "url": "http://h/n", "bearer": "t", "x": 1}'),
            ("/notifications/remove", b"{}"),
            ("/notification-faults", b'{"loss": 2}'),
            ("/notification-faults", b'{"nope": 0.1}'),
            ("/notification-faults", b"[1]"),
            # Accepted once; then every delivery failed adding it (int too large for a float).
            ("/notification-faults", b'{"delay": 1, "delay_seconds": 1' + b"0" * 400 + b"}"),
        ]
        for path, body in bad:
            async with http.post(base + path, data=body) as resp:
                assert resp.status == 400, (path, body)
        ok = {"client_id": "acme", "url": "http://127.0.0.1:1/n", "bearer": "tok-secret-1"}
        async with http.post(base + "/notifications", json=ok) as resp:
            assert resp.status == 201
            assert "tok-secret-1" not in await resp.text()
        async with http.get(base + "/notifications") as resp:
            text = await resp.text()
            assert "acme" in text
            assert "tok-secret-1" not in text
            assert HOOK_PASSWORD not in text
        async with http.post(base + "/notifications/remove", json={"client_id": "acme"}) as resp:
            assert (await resp.json()) == {"removed": True}


async def test_sandbox_stats_time_scheduling_and_delivery_separately() -> None:
    # Every notification held 0.3 s by the delay fault: it is fired on time by the
    # scheduler, and its delivery (final -> first 2xx) shows the hold.
    faults = NotificationFaults(delay=1.0, delay_seconds=0.3, seed=7)
    async with notifying_stack(faults=faults) as st:
        before = st.sent()
        assert before["fire_lag_ms"] == {"n": 0, "p50": None, "p99": None, "max": None}
        p = credit_transfer()
        await st.client.submit_credit_transfer(p)
        x = await st.client.request_cancellation(cancellation_for(p))
        outcome = await asyncio.wait_for(
            st.client.wait_for_cancellation_outcome(x.payments_service_id), WAIT
        )
        assert outcome.accepted
        await settle(st)
        sent = st.sent()
        fired, delivered = sent["fire_lag_ms"], sent["delivery_lag_ms"]
        assert fired["n"] == delivered["n"] == sent["delivered"] == 2  # payment + cancellation
        assert 0 <= fired["p50"] <= fired["max"] < 300
        assert 300 <= delivered["p50"] <= delivered["max"]


async def _cancel_a_pending_payment(st: Stack) -> tuple[str, str]:
    """A payment read while pending, then cancelled; both finals awaited and settled.

    Returns:
        The payment's and the cancellation's ids.
    """
    c = st.client
    p = credit_transfer()
    s = await c.submit_credit_transfer(p)
    pending = await c.get_credit_transfer_status(s.payments_service_id)
    assert summarize_status_report(pending).status == "PEND"
    x = await c.request_cancellation(cancellation_for(p))
    outcome = await asyncio.wait_for(c.wait_for_cancellation_outcome(x.payments_service_id), WAIT)
    status = await asyncio.wait_for(c.wait_for_payment_status(s.payments_service_id), WAIT)
    await settle(st)
    assert outcome.accepted
    assert status.status == "RJCT"
    return s.payments_service_id, x.payments_service_id


async def test_confirmed_finals_are_kept_encoded_out_of_the_collectors_way() -> None:
    # 10,000 cached decoded messages (~15 tracked objects each) set off a full garbage
    # collection in the middle of the benchmark's settlement stream: the cache keeps bytes,
    # and what it gives back equals what the confirming read returned.
    async with notifying_stack() as st:
        c = st.client
        payment, cancellation = await _cancel_a_pending_payment(st)
        cached = st.receiver.waiters._final  # white box: what the cache holds
        assert len(cached) == 2
        assert all(isinstance(v, bytes) and not gc.is_tracked(v) for v in cached.values())
        assert st.receiver.confirmed(
            cancellation, "cancellation"
        ) == await c.get_cancellation_outcome(cancellation)
        assert st.receiver.confirmed(payment, "payment") == await c.get_credit_transfer_status(
            payment
        )


def test_the_sandbox_rebuilds_a_read_body_when_its_time_moves_without_its_status() -> None:
    # The body carries the status and the time it took effect; a cached body is served
    # only while both are unchanged (a time can move with the status staying the same).
    from payments_async.sandbox._bodies import BodyCache
    from payments_async.sandbox._lifecycle import PaymentStatus

    cache = BodyCache()
    status = PaymentStatus("ACCC", None, "Accepted", True)
    cache.put("PS-1", status, 100.0, b"body at 100")
    assert cache.get("PS-1", PaymentStatus("ACCC", None, "Accepted", True), 100.0) == (
        b"body at 100"
    )
    assert cache.get("PS-1", status, 101.0) is None
    assert cache.get("PS-1", PaymentStatus("RJCT", "AC01", "Rejected", True), 100.0) is None


async def test_the_sandbox_keeps_read_bodies_out_of_the_collectors_way() -> None:
    # The sandbox's cache of GET bodies held each status object: two tracked objects per
    # id read, which made the sandbox's full collections long enough (0.1-0.15 s) to delay
    # its notifications. Its entries are now plain data the collector does not track, and
    # a status change still gives a new body (the payment's, read while pending, is RJCT).
    from payments_async.sandbox._bodies import BODIES_KEY

    async with notifying_stack() as st:
        payment, cancellation = await _cancel_a_pending_payment(st)
        again = await st.client.get_credit_transfer_status(payment)
        assert summarize_status_report(again).status == "RJCT"
        cache = st.sandbox.server.app[BODIES_KEY]  # white box: what the cache holds
        assert {payment, cancellation} <= set(cache._statuses) == set(cache._bodies)
        gc.collect()
        entries = [*cache._statuses.values(), *cache._bodies.values()]
        assert not any(gc.is_tracked(entry) for entry in entries)
