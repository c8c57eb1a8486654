"""Idempotency, payment and cancellation timing, visibility (issue 4), over real HTTP."""

from __future__ import annotations

import re
from dataclasses import replace

import aiohttp
import pytest

from payments_async.iso20022 import encode
from payments_async.sandbox import REJECT_IBAN_AC04, SandboxConfig
from payments_async.testing import ManualClock, SandboxHandle, sandbox_server
from tests.factories import cancellation, credit_transfer
from tests.support.sandbox import (
    PROCESSING_DELAY,
    SETTLEMENT_DELAY,
    RawClient,
    cancellation_status,
    client_for,
    predefined_client,
    tx_status,
)

pytest_plugins = ["tests.support.sandbox_fixtures"]

NO_ZONE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}$")


async def test_pacs008_is_idempotent_on_msg_id(client: RawClient, sandbox: SandboxHandle) -> None:
    msg = credit_transfer()
    first = await client.submit_payment(msg)
    second = await client.submit_payment(msg)  # new SCA token, same bytes
    assert (first.status, second.status) == (201, 200)
    assert first.data["paymentsServiceId"] == second.data["paymentsServiceId"]
    assert first.data["paymentId"] == msg.message_id
    assert first.data["status"] == "PENDING"
    assert NO_ZONE.match(first.data["creationDateTime"])
    stats = sandbox.server.stats()
    assert (stats["payments_stored"], stats["replays_answered"]) == (1, 1)


async def test_same_msg_id_with_another_body_gets_the_stored_payment(
    client: RawClient, sandbox: SandboxHandle, clock: ManualClock
) -> None:
    # Service notes 2: a POST with an id already submitted answers 200 with the stored
    # paymentsServiceId; nothing new is created and the earlier message is unchanged.
    msg = credit_transfer(amount="10.00")
    first = await client.submit_payment(msg)
    other = credit_transfer(amount="1000000.01", message_id=msg.message_id)  # would end AM02
    reply = await client.submit_payment(other)
    assert reply.status == 200
    assert reply.data["paymentsServiceId"] == first.data["paymentsServiceId"]
    assert reply.data["paymentId"] == msg.message_id
    stats = sandbox.server.stats()
    assert (stats["payments_stored"], stats["replays_answered"]) == (1, 1)
    assert stats["replays_changed_body"] == 1
    clock.advance(PROCESSING_DELAY)
    status = await client.payment_status(first.data["paymentsServiceId"])
    tx = status.json["fitoFIPmtStsRpt"]["txInfAndSts"][0]
    assert (tx["txSts"], tx["orgnlEndToEndId"]) == ("ACCC", msg.end_to_end_id)


async def test_camt056_is_idempotent_on_assignment_id(
    client: RawClient, sandbox: SandboxHandle
) -> None:
    pay = credit_transfer()
    await client.submit_payment(pay)
    cxl = cancellation(pay.end_to_end_id)
    first = await client.submit_cancellation(cxl)
    second = await client.submit_cancellation(cxl)
    assert (first.status, second.status) == (201, 200)
    assert first.json["data"]["paymentsServiceId"] == second.json["data"]["paymentsServiceId"]
    assert first.json["data"]["paymentId"] == cxl.message_id
    assert first.json["data"]["status"] == "PENDING"
    changed = cancellation("E2E-OTHER", assignment_id=cxl.message_id, reason="DUPL")
    again = await client.submit_cancellation(changed)
    assert again.status == 200
    assert again.data["paymentsServiceId"] == first.data["paymentsServiceId"]
    stored = sandbox.server.state.cancellations[first.data["paymentsServiceId"]]
    assert stored.original_end_to_end_id == pay.end_to_end_id  # unchanged
    assert sandbox.server.stats()["replays_changed_body"] == 1


async def test_payment_moves_from_pend_to_accc(client: RawClient, clock: ManualClock) -> None:
    psid = (await client.submit_payment(credit_transfer())).data["paymentsServiceId"]
    assert tx_status(await client.payment_status(psid)) == "PEND"
    clock.advance(PROCESSING_DELAY - 0.5)
    assert tx_status(await client.payment_status(psid)) == "PEND"
    clock.advance(1)
    reply = await client.payment_status(psid)
    tx = reply.json["fitoFIPmtStsRpt"]["txInfAndSts"][0]
    assert tx["txSts"] == "ACCC"
    assert tx["stsRsnInf"][0]["addtlInf"][0] == "0000"
    assert reply.json["fitoFIPmtStsRpt"]["orgnlGrpInfAndSts"]["orgnlMsgNmId"] == ("pacs.008.001.10")


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [({"creditor_iban": REJECT_IBAN_AC04}, "AC04"), ({"amount": "1000000.01"}, "AM02")],
)
async def test_reject_rules_end_rjct_with_reason(
    client: RawClient, clock: ManualClock, kwargs: dict[str, str], reason: str
) -> None:
    psid = (await client.submit_payment(credit_transfer(**kwargs))).data["paymentsServiceId"]
    assert tx_status(await client.payment_status(psid)) == "PEND"
    clock.advance(PROCESSING_DELAY)
    tx = (await client.payment_status(psid)).json["fitoFIPmtStsRpt"]["txInfAndSts"][0]
    assert tx["txSts"] == "RJCT"
    assert tx["stsRsnInf"][0]["rsn"]["cd"] == reason


async def test_cancellation_before_processing_is_accepted_and_stops_the_payment(
    client: RawClient, clock: ManualClock
) -> None:
    pay = credit_transfer()
    pay_id = (await client.submit_payment(pay)).data["paymentsServiceId"]
    clock.advance(PROCESSING_DELAY / 2)  # still unprocessed when the camt.056 arrives
    cxl_id = (await client.submit_cancellation(cancellation(pay.end_to_end_id))).data[
        "paymentsServiceId"
    ]
    assert cancellation_status(await client.cancellation_outcome(cxl_id)) == ("PDCR", "PDCR")
    clock.advance(SETTLEMENT_DELAY)
    outcome = await client.cancellation_outcome(cxl_id)
    assert cancellation_status(outcome) == ("ACCC", "ACCR")
    assert outcome.json["rsltnOfInvstgtn"]["cxlDtls"][0]["orgnlGrpInfAndSts"] == {
        "orgnlMsgId": outcome.json["rsltnOfInvstgtn"]["cxlDtls"][0]["orgnlGrpInfAndSts"][
            "orgnlMsgId"
        ],
        "orgnlMsgNmId": "camt.056.001.08",
    }
    # The payment never gets processed: RJCT with DS02 (order cancelled), even long after.
    clock.advance(PROCESSING_DELAY * 10)
    tx = (await client.payment_status(pay_id)).json["fitoFIPmtStsRpt"]["txInfAndSts"][0]
    assert (tx["txSts"], tx["stsRsnInf"][0]["rsn"]["cd"]) == ("RJCT", "DS02")


async def test_payment_stays_pend_until_the_cancellation_settles(
    client: RawClient, clock: ManualClock
) -> None:
    pay = credit_transfer()
    pay_id = (await client.submit_payment(pay)).data["paymentsServiceId"]
    clock.advance(PROCESSING_DELAY - 1)
    await client.submit_cancellation(cancellation(pay.end_to_end_id))
    clock.advance(2)  # processing time passed, settlement not yet
    assert tx_status(await client.payment_status(pay_id)) == "PEND"


async def test_cancellation_after_processing_is_rejected_cust(
    client: RawClient, clock: ManualClock
) -> None:
    pay = credit_transfer()
    pay_id = (await client.submit_payment(pay)).data["paymentsServiceId"]
    clock.advance(PROCESSING_DELAY + 1)
    cxl_id = (await client.submit_cancellation(cancellation(pay.end_to_end_id))).data[
        "paymentsServiceId"
    ]
    assert cancellation_status(await client.cancellation_outcome(cxl_id)) == ("PDCR", "PDCR")
    clock.advance(SETTLEMENT_DELAY)
    outcome = await client.cancellation_outcome(cxl_id)
    assert cancellation_status(outcome) == ("RJTC", "RJCR")
    reason = outcome.json["rsltnOfInvstgtn"]["cxlDtls"][0]["txInfAndSts"][0]["cxlStsRsnInf"][0]
    # CUST: the funds are with the beneficiary (a return must be requested), not ARDT
    # ("already returned"), which would tell the caller no money moved.
    assert reason["rsn"]["cd"] == "CUST"
    assert "already processed" in reason["addtlInf"][0]
    assert tx_status(await client.payment_status(pay_id)) == "ACCC"


async def test_cancellation_of_unknown_payment_is_rejected_noor(
    client: RawClient, clock: ManualClock
) -> None:
    cxl_id = (await client.submit_cancellation(cancellation("E2E-NEVER-SENT"))).data[
        "paymentsServiceId"
    ]
    clock.advance(SETTLEMENT_DELAY)
    outcome = await client.cancellation_outcome(cxl_id)
    assert cancellation_status(outcome) == ("RJTC", "RJCR")
    reason = outcome.json["rsltnOfInvstgtn"]["cxlDtls"][0]["txInfAndSts"][0]["cxlStsRsnInf"][0]
    assert reason["rsn"]["cd"] == "NOOR"
    assert reason["addtlInf"][0]


async def test_second_cancellation_of_a_cancelled_payment_is_rejected(
    client: RawClient, clock: ManualClock
) -> None:
    pay = credit_transfer()
    await client.submit_payment(pay)
    first = await client.submit_cancellation(cancellation(pay.end_to_end_id))
    second = await client.submit_cancellation(cancellation(pay.end_to_end_id))
    clock.advance(SETTLEMENT_DELAY)
    a = await client.cancellation_outcome(first.data["paymentsServiceId"])
    b = await client.cancellation_outcome(second.data["paymentsServiceId"])
    assert cancellation_status(a) == ("ACCC", "ACCR")
    assert cancellation_status(b) == ("RJTC", "RJCR")
    reason = b.json["rsltnOfInvstgtn"]["cxlDtls"][0]["txInfAndSts"][0]["cxlStsRsnInf"][0]
    assert reason["rsn"]["cd"] == "ARDT"  # already cancelled: the funds never left


async def test_cancellation_of_a_rejected_payment_is_rejected_ardt(
    client: RawClient, clock: ManualClock
) -> None:
    pay = credit_transfer(creditor_iban=REJECT_IBAN_AC04)
    await client.submit_payment(pay)
    clock.advance(PROCESSING_DELAY)  # processed: RJCT AC04, no money moved
    cxl = await client.submit_cancellation(cancellation(pay.end_to_end_id))
    clock.advance(SETTLEMENT_DELAY)
    outcome = await client.cancellation_outcome(cxl.data["paymentsServiceId"])
    assert cancellation_status(outcome) == ("RJTC", "RJCR")
    reason = outcome.json["rsltnOfInvstgtn"]["cxlDtls"][0]["txInfAndSts"][0]["cxlStsRsnInf"][0]
    assert reason["rsn"]["cd"] == "ARDT"
    assert "rejected" in reason["addtlInf"][0]


async def test_another_clients_cancellation_cannot_match_my_payment(
    client: RawClient, http: aiohttp.ClientSession, sandbox: SandboxHandle, clock: ManualClock
) -> None:
    pay = credit_transfer()
    await client.submit_payment(pay)
    other = predefined_client(http, sandbox)
    cxl_id = (await other.submit_cancellation(cancellation(pay.end_to_end_id))).data[
        "paymentsServiceId"
    ]
    clock.advance(SETTLEMENT_DELAY)
    assert cancellation_status(await other.cancellation_outcome(cxl_id))[0] == "RJTC"


async def test_unknown_ids_are_404(client: RawClient) -> None:
    for reply in (
        await client.payment_status("pmt-unknown"),
        await client.cancellation_outcome("cxl-unknown"),
    ):
        assert (reply.status, reply.codes) == (404, ["NOT_FOUND"])


async def test_ids_of_the_other_kind_are_404(client: RawClient) -> None:
    pay = credit_transfer()
    pay_id = (await client.submit_payment(pay)).data["paymentsServiceId"]
    cxl_id = (await client.submit_cancellation(cancellation(pay.end_to_end_id))).data[
        "paymentsServiceId"
    ]
    assert (await client.cancellation_outcome(pay_id)).status == 404
    assert (await client.payment_status(cxl_id)).status == 404


async def test_another_clients_ids_are_404_by_default(
    client: RawClient, http: aiohttp.ClientSession, sandbox: SandboxHandle
) -> None:
    other = predefined_client(http, sandbox)
    pay_id = (await client.submit_payment(credit_transfer())).data["paymentsServiceId"]
    reply = await other.payment_status(pay_id)
    assert (reply.status, reply.codes) == (404, ["NOT_FOUND"])
    assert (await client.payment_status(pay_id)).status == 200


async def test_another_clients_ids_can_be_403(
    http: aiohttp.ClientSession, sandbox_config: SandboxConfig
) -> None:
    async with sandbox_server(replace(sandbox_config, other_client_status=403)) as sb:
        mine = client_for(http, sb)
        pay = credit_transfer()
        pay_id = (await mine.submit_payment(pay)).data["paymentsServiceId"]
        cxl_id = (await mine.submit_cancellation(cancellation(pay.end_to_end_id))).data[
            "paymentsServiceId"
        ]
        other = predefined_client(http, sb)
        for reply in (await other.payment_status(pay_id), await other.cancellation_outcome(cxl_id)):
            assert (reply.status, reply.codes) == (403, ["FORBIDDEN"])


async def test_bare_payment_result_option(
    http: aiohttp.ClientSession, sandbox_config: SandboxConfig
) -> None:
    async with sandbox_server(replace(sandbox_config, wrap_payment_result=False)) as sb:
        reply = await client_for(http, sb).submit_payment(credit_transfer())
    assert reply.status == 201
    assert "data" not in reply.json
    assert reply.json["paymentsServiceId"].startswith("pmt-")


async def test_messages_endpoint_lists_states(client: RawClient, clock: ManualClock) -> None:
    pay = credit_transfer()
    pay_id = (await client.submit_payment(pay)).data["paymentsServiceId"]
    cxl_id = (await client.submit_cancellation(cancellation(pay.end_to_end_id))).data[
        "paymentsServiceId"
    ]
    clock.advance(SETTLEMENT_DELAY)
    listing = (await client.request("GET", "/_sandbox/messages")).json
    assert [(p["paymentsServiceId"], p["status"]) for p in listing["payments"]] == [
        (pay_id, "RJCT")
    ]
    assert [(c["paymentsServiceId"], c["status"]) for c in listing["cancellations"]] == [
        (cxl_id, "ACCC")
    ]
    only_other = await client.request("GET", "/_sandbox/messages?client_id=nobody")
    assert only_other.json == {"payments": [], "cancellations": []}


async def test_body_validation_on_camt056(client: RawClient) -> None:
    import json

    doc = json.loads(encode(cancellation("E2E1")))
    doc["fitoFIPmtCxlReq"]["assgnmt"]["assgnr"]["agt"]["finInstnId"]["bicfi"] = "not a bic"
    reply = await client.submit_cancellation(json.dumps(doc).encode())
    assert reply.status == 400
    assert reply.codes == ["BODY_INVALID"]
    assert "assgnr" in reply.json["errors"][0]["description"]
