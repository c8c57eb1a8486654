"""The sandbox's pacs.028 route and its 202/204 injection, from the outside (raw HTTP)."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import msgspec
import pytest

from payments_async import Camt056, build_status_request
from payments_async._constants import PACS028_PATH
from payments_async.iso20022 import encode
from payments_async.sandbox import FaultConfig, SandboxConfig
from payments_async.testing import ManualClock, SandboxHandle, sandbox_server
from tests.factories import cancellation_for, credit_transfer
from tests.support.sandbox import SETTLEMENT_DELAY, RawClient, cancellation_status, client_for

pytest_plugins = ["tests.support.sandbox_fixtures"]


async def _pending_recall(client: RawClient) -> tuple[str, Camt056]:
    """A camt.056 stored and still pending (its outcome not readable yet)."""
    payment = credit_transfer()
    assert (await client.submit_payment(payment)).status == 201
    recall = cancellation_for(payment)
    reply = await client.submit_cancellation(recall)
    assert reply.status == 201
    psid = reply.json["data"]["paymentsServiceId"]
    assert cancellation_status(await client.cancellation_outcome(psid)) == ("PDCR", "PDCR")
    return psid, recall


async def test_a_status_request_answers_the_pending_recall_201_then_200(
    client: RawClient, sandbox: SandboxHandle
) -> None:
    psid, recall = await _pending_recall(client)
    body = encode(build_status_request(recall))
    first = await client.post(PACS028_PATH, body)
    again = await client.post(PACS028_PATH, body)
    assert (first.status, again.status) == (201, 200)
    assert first.body == again.body  # the stored answer, replayed
    assert first.json["data"]["paymentsServiceId"].startswith("srq-")
    # the chase made the recall's decided outcome readable at once (no clock moved)
    assert cancellation_status(await client.cancellation_outcome(psid)) == ("ACCC", "ACCR")
    stats = sandbox.server.stats()
    assert stats["status_requests_stored"] == 1
    assert stats["recalls_chased"] == 1
    assert stats["replays_answered"] == 1


async def test_the_same_id_with_other_bytes_gets_the_stored_answer(
    client: RawClient, sandbox: SandboxHandle
) -> None:
    _, recall = await _pending_recall(client)
    request = build_status_request(recall, message_id="SRQ-SAME-ID")
    other = build_status_request(recall, message_id="SRQ-SAME-ID", status_request_id="OTHER")
    first = await client.post(PACS028_PATH, encode(request))
    changed = await client.post(PACS028_PATH, encode(other))
    assert (first.status, changed.status) == (201, 200)
    assert first.body == changed.body
    stats = sandbox.server.stats()
    assert (stats["status_requests_stored"], stats["replays_changed_body"]) == (1, 1)


async def test_a_final_recall_is_left_as_it_was(
    client: RawClient, sandbox: SandboxHandle, clock: ManualClock
) -> None:
    psid, recall = await _pending_recall(client)
    clock.advance(SETTLEMENT_DELAY + 1)
    before = await client.cancellation_outcome(psid)
    reply = await client.post(PACS028_PATH, encode(build_status_request(recall)))
    assert reply.status == 201
    assert (await client.cancellation_outcome(psid)).body == before.body
    assert sandbox.server.stats()["recalls_chased"] == 0


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (
            {"orgnlMsgId": "NO-SUCH-RECALL"},
            "$.fitoFIPmtStsReq.txInf[0].orgnlGrpInf.orgnlMsgId",
        ),
        (
            {"orgnlMsgNmId": "pacs.008.001.10"},
            "$.fitoFIPmtStsReq.txInf[0].orgnlGrpInf.orgnlMsgNmId",
        ),
        ({"orgnlMsgId": None}, "$.fitoFIPmtStsReq.txInf[0].orgnlGrpInf.orgnlMsgId"),
    ],
    ids=["unknown-recall", "not-a-recall", "null"],
)
async def test_a_request_naming_no_recall_of_ours_is_refused_400(
    client: RawClient, sandbox: SandboxHandle, change: dict[str, object], path: str
) -> None:
    _, recall = await _pending_recall(client)
    doc = msgspec.json.decode(encode(build_status_request(recall)))
    doc["fitoFIPmtStsReq"]["txInf"][0]["orgnlGrpInf"].update(change)
    reply = await client.post(PACS028_PATH, msgspec.json.encode(doc))
    assert reply.status == 400
    assert set(reply.json) == {"errors"}
    assert any(path in e["message"] or e.get("path") == path for e in reply.json["errors"])
    assert sandbox.server.stats()["status_requests_stored"] == 0


@pytest.mark.parametrize(
    "body",
    [b"", b"{", b"[]", b'{"fitoFIPmtStsReq": {}}', b'{"fitoFIPmtStsReq": {"grpHdr": 1}}'],
    ids=["empty", "truncated", "array", "no-header", "wrong-type"],
)
async def test_bad_bodies_get_the_envelope_never_a_500(
    client: RawClient, sandbox: SandboxHandle, body: bytes
) -> None:
    reply = await client.post(PACS028_PATH, body)
    assert reply.status == 400
    assert set(reply.json) == {"errors"}
    assert sandbox.server.stats()["status_requests_stored"] == 0


async def test_a_status_request_without_sca_is_refused(
    client: RawClient, sandbox: SandboxHandle
) -> None:
    _, recall = await _pending_recall(client)
    reply = await client.post(
        PACS028_PATH,
        encode(build_status_request(recall)),
        omit=("sca-token",),
    )
    assert reply.status in (400, 401)
    assert sandbox.server.stats()["status_requests_stored"] == 0


@pytest.mark.parametrize(
    ("kind", "status", "has_body"),
    [
        ("accepted_202", 202, True),
        ("accepted_202_empty", 202, False),
        ("no_content_204", 204, False),
    ],
)
async def test_injected_202_and_204_replace_a_201_only(
    client: RawClient, sandbox: SandboxHandle, kind: str, status: int, has_body: bool
) -> None:
    sandbox.server.set_faults(FaultConfig(**{kind: 1.0}))
    payment = credit_transfer()
    first = await client.submit_payment(payment)
    again = await client.submit_payment(payment)
    assert first.status == status
    assert bool(first.body) is has_body
    assert again.status == 200  # a resubmission names the id
    if has_body:
        assert first.json == again.json
    stats = sandbox.server.stats()
    assert stats["payments_stored"] == 1
    assert stats["faults"][kind] == 1
    # a read is answered as ever
    result = again.json.get("data", again.json)
    psid = result["paymentsServiceId"]
    assert (await client.payment_status(psid)).status == 200


async def test_a_restarted_sandbox_keeps_status_requests_and_chased_recalls(
    tmp_path: Path, http: aiohttp.ClientSession, clock: ManualClock
) -> None:
    config = SandboxConfig(
        clock=clock, processing_delay=3600, settlement_delay=3600, persist_path=tmp_path / "s.db"
    )
    async with sandbox_server(config) as first:
        c = client_for(http, first)
        cxl_id, recall = await _pending_recall(c)
        body = encode(build_status_request(recall))
        stored = await c.post(PACS028_PATH, body)
        assert stored.status == 201
    async with sandbox_server(config, register_key=False) as second:
        again = RawClient(http, second.url, c.client_id, c.secret, c.signer)
        replay = await again.post(PACS028_PATH, body)
        assert cancellation_status(await again.cancellation_outcome(cxl_id)) == ("ACCC", "ACCR")
        stats = second.server.stats()
    assert (replay.status, replay.body) == (200, stored.body)
    assert stats["status_requests_stored"] == 0  # nothing new stored
