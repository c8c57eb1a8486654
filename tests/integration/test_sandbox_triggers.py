"""The sandbox's per-id triggers over real HTTP: settle, resolve, send and drop, now.

The sandbox's own timers are set to an hour, so whatever moves in these tests moved
because a trigger said so; waiters poll only after 60 s, so a waiter that finishes was
woken by a notification.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from payments_async import Outcome, PaymentsClient
from payments_async.iso20022 import summarize_resolution, summarize_status_report
from payments_async.sandbox import SandboxConfig
from payments_async.testing import sandbox_server
from tests.factories import cancellation_for, credit_transfer
from tests.support.notifications import Stack, notifying_stack

WAIT = 5.0
HOUR = 3600.0


async def _post(stack_or_url: Stack | str, path: str, body: Any = None) -> tuple[int, Any]:
    base = stack_or_url if isinstance(stack_or_url, str) else stack_or_url.sandbox.url
    async with (
        aiohttp.ClientSession() as http,
        http.post(base + "/_sandbox" + path, json=body) as resp,
    ):
        return resp.status, await resp.json()


async def test_settle_a_payment_now_accc_or_rjct_with_its_reason() -> None:
    async with notifying_stack(processing_delay=HOUR, settlement_delay=HOUR) as st:
        c = st.client
        p1 = credit_transfer()
        s1 = await c.submit_credit_transfer(p1)
        s2 = await c.submit_credit_transfer(credit_transfer())
        id1, id2 = s1.payments_service_id, s2.payments_service_id
        status, out = await _post(st, f"/payments/{id1}/settle", {"status": "ACCC"})
        assert (status, out) == (200, {"paymentsServiceId": id1, "status": "ACCC", "reason": None})
        status, out = await _post(
            st, f"/payments/{id2}/settle", {"status": "RJCT", "reason": "AC04"}
        )
        assert (status, out["status"], out["reason"]) == (200, "RJCT", "AC04")
        w1, w2 = await asyncio.wait_for(
            asyncio.gather(c.wait_for_payment_status(id1), c.wait_for_payment_status(id2)), WAIT
        )
        assert (w1.status, w1.outcome) == ("ACCC", Outcome.ACCEPTED)
        assert (w2.status, w2.outcome, w2.reason_codes) == ("RJCT", Outcome.REJECTED, ("AC04",))
        assert summarize_status_report(await c.get_credit_transfer_status(id2)).reason_codes == (
            "AC04",
        )
        # Final is final: a second settle is a conflict, and nothing changed.
        status, out = await _post(
            st, f"/payments/{id1}/settle", {"status": "RJCT", "reason": "AC01"}
        )
        assert status == 409
        assert out["errors"][0]["code"] == "CONFLICT"
        assert summarize_status_report(await c.get_credit_transfer_status(id1)).status == "ACCC"
        # A cancellation arriving now meets a processed payment: rejected as usual.
        x = await c.request_cancellation(cancellation_for(p1))
        status, out = await _post(
            st, f"/cancellations/{x.payments_service_id}/resolve", {"outcome": "accepted"}
        )
        assert status == 409
        assert "resolve it as rejected" in out["errors"][0]["message"]


async def test_resolve_a_cancellation_now_accepted_or_rejected() -> None:
    async with notifying_stack(processing_delay=HOUR, settlement_delay=HOUR) as st:
        c = st.client
        p1, p2 = credit_transfer(), credit_transfer()
        s1 = await c.submit_credit_transfer(p1)
        s2 = await c.submit_credit_transfer(p2)
        x1 = await c.request_cancellation(cancellation_for(p1))  # pending: would stop p1
        x2 = await c.request_cancellation(cancellation_for(p2))
        id1, id2 = x1.payments_service_id, x2.payments_service_id

        status, out = await _post(st, f"/cancellations/{id1}/resolve", {"outcome": "accepted"})
        assert (status, out["status"], out["txCxlSts"]) == (200, "ACCC", "ACCR")
        o1, p1_status = await asyncio.wait_for(
            asyncio.gather(
                c.wait_for_cancellation_outcome(id1),
                c.wait_for_payment_status(s1.payments_service_id),
            ),
            WAIT,
        )
        assert o1.outcome is Outcome.ACCEPTED
        assert (p1_status.status, p1_status.reason_codes) == ("RJCT", ("DS02",))

        body = {"outcome": "rejected", "reason": "LEGL", "text": "Court order"}
        status, out = await _post(st, f"/cancellations/{id2}/resolve", body)
        assert (status, out["status"], out["reason"]) == (200, "RJTC", "LEGL")
        o2 = await asyncio.wait_for(c.wait_for_cancellation_outcome(id2), WAIT)
        assert (o2.outcome, o2.reason_codes) == (Outcome.REJECTED, ("LEGL",))
        assert "Court order" in o2.reason_texts
        # The payment it was stopping is released: pending, then settled by its trigger.
        pid2 = s2.payments_service_id
        assert summarize_status_report(await c.get_credit_transfer_status(pid2)).status == "PEND"
        status, _ = await _post(st, f"/payments/{pid2}/settle", {"status": "ACCC"})
        assert status == 200
        w2 = await asyncio.wait_for(c.wait_for_payment_status(pid2), WAIT)
        assert w2.status == "ACCC"

        status, out = await _post(st, f"/cancellations/{id2}/resolve", {"outcome": "rejected"})
        assert (status, out["errors"][0]["code"]) == (409, "CONFLICT")


async def test_drop_the_next_notification_then_send_it_now() -> None:
    async with notifying_stack(processing_delay=HOUR, settlement_delay=HOUR) as st:
        c = st.client
        s = await c.submit_credit_transfer(credit_transfer())
        psid = s.payments_service_id
        status, out = await _post(st, f"/notifications/{psid}/drop")
        assert (status, out) == (200, {"paymentsServiceId": psid, "drops": 1})
        waiter = asyncio.create_task(c.wait_for_payment_status(psid))
        assert (await _post(st, f"/payments/{psid}/settle", {"status": "ACCC"}))[0] == 200
        await asyncio.sleep(0.5)
        assert not waiter.done()  # its notification was dropped; polling is an hour away
        assert st.sent()["dropped"] == 1
        assert st.sent()["delivered"] == 0

        status, out = await _post(st, f"/notifications/{psid}/send")
        assert (status, out) == (
            202,
            {"paymentsServiceId": psid, "kind": "payment", "status": "ACCC"},
        )
        assert (await asyncio.wait_for(waiter, WAIT)).status == "ACCC"
        # Sent again on request: a redelivery the receiver recognises.
        assert (await _post(st, f"/notifications/{psid}/send"))[0] == 202
        for _ in range(100):
            if st.sent()["delivered"] == 2:
                break
            await asyncio.sleep(0.02)
        assert st.sent()["delivered"] == 2
        await st.receiver.join()
        assert [p for p, _ in st.payments] == [psid]  # the callback heard it once


BAD_INPUT = [
    ("/payments/{pmt}/settle", b"{", 400),
    ("/payments/{pmt}/settle", b"[]", 400),
    ("/payments/{pmt}/settle", {"status": "PDNG"}, 400),
    ("/payments/{pmt}/settle", {}, 400),
    ("/payments/{pmt}/settle", {"status": "RJCT"}, 400),
    ("/payments/{pmt}/settle", {"status": "RJCT", "reason": "ac04"}, 400),
    ("/payments/{pmt}/settle", {"status": "RJCT", "reason": "AC045"}, 400),
    ("/payments/{pmt}/settle", {"status": "RJCT", "reason": 4}, 400),
    ("/payments/{pmt}/settle", {"status": "ACCC", "reason": "AC04"}, 400),
    ("/payments/{pmt}/settle", {"status": "ACCC", "extra": 1}, 400),
    ("/payments/{pmt}/settle", {"status": ["ACCC"]}, 400),
    ("/payments/pmt-unknown/settle", {"status": "ACCC"}, 404),
    ("/payments/{cxl}/settle", {"status": "ACCC"}, 404),
    ("/cancellations/{cxl}/resolve", {"outcome": "maybe"}, 400),
    ("/cancellations/{cxl}/resolve", {"outcome": "accepted", "reason": "CUST"}, 400),
    ("/cancellations/{cxl}/resolve", {"outcome": "rejected", "reason": "cust"}, 400),
    ("/cancellations/{cxl}/resolve", {"outcome": "rejected", "text": "x" * 106}, 400),
    ("/cancellations/{cxl}/resolve", {"outcome": "rejected", "text": 5}, 400),
    ("/cancellations/{cxl}/resolve", {"outcome": "rejected", "text": ""}, 400),
    ("/cancellations/{pmt}/resolve", {"outcome": "rejected"}, 404),
    ("/notifications/{pmt}/send", {"now": True}, 400),
    ("/notifications/nope/send", None, 404),
    ("/notifications/nope/drop", None, 404),
    ("/notifications/{pmt}/send", None, 409),  # this client has no notification target
]


async def test_triggers_refuse_bad_input_in_the_error_envelope() -> None:
    config = SandboxConfig(processing_delay=HOUR, settlement_delay=HOUR)
    async with sandbox_server(config) as sb:
        assert sb.credentials is not None
        async with PaymentsClient(sb.credentials, base_url=sb.url) as c:
            p = credit_transfer()
            pmt = (await c.submit_credit_transfer(p)).payments_service_id
            cxl = (await c.request_cancellation(cancellation_for(p))).payments_service_id
        async with aiohttp.ClientSession() as http:
            for path, body, expected in BAD_INPUT:
                url = sb.url + "/_sandbox" + path.format(pmt=pmt, cxl=cxl)
                kwargs: dict[str, Any] = (
                    {"data": body} if isinstance(body, bytes) else {"json": body}
                )
                async with http.post(url, **kwargs) as resp:
                    out = await resp.json()
                    assert resp.status == expected, (path, body, out)
                    assert out["errors"][0]["level"] == "ERROR"
                    assert out["errors"][0]["message"]
        # Nothing moved.
        assert sb.server.state.payments[pmt].status_at(sb.server.state.now()).code == "PEND"


async def test_the_same_triggers_in_process_on_the_server() -> None:
    config = SandboxConfig(processing_delay=HOUR, settlement_delay=HOUR)
    async with sandbox_server(config) as sb:
        assert sb.credentials is not None
        async with PaymentsClient(sb.credentials, base_url=sb.url) as c:
            p = credit_transfer()
            pmt = (await c.submit_credit_transfer(p)).payments_service_id
            cxl = (await c.request_cancellation(cancellation_for(p))).payments_service_id
            with pytest.raises(LookupError):
                sb.server.settle_payment("pmt-nope", "ACCC")
            with pytest.raises(ValueError, match="RJCT"):
                sb.server.settle_payment(pmt, "PDNG")
            with pytest.raises(ValueError, match="being stopped"):
                sb.server.settle_payment(pmt, "ACCC")  # the pending cancellation stops it
            sb.server.resolve_cancellation(cxl, "rejected", "AM04")
            sb.server.settle_payment(pmt, "RJCT", "AC06")
            status = summarize_status_report(await c.get_credit_transfer_status(pmt))
            assert (status.status, status.reason_codes) == ("RJCT", ("AC06",))
            outcome = summarize_resolution(await c.get_cancellation_outcome(cxl))
            assert (outcome.outcome, outcome.reason_codes) == (Outcome.REJECTED, ("AM04",))
            with pytest.raises(ValueError, match="no notification target"):
                sb.server.send_notification(pmt)
            sb.server.drop_next_notification(pmt)
            assert sb.server.stats()["notifications"]["dropped"] == 0
