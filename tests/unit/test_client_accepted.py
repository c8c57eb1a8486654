"""202 and 204 to a POST, and the pacs.028 status request, against a mocked transport."""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from aioresponses import CallbackResult, aioresponses
from yarl import URL

from payments_async import (
    Camt056,
    Credentials,
    OutcomeUnknownError,
    PaymentsClient,
    PollPolicy,
    RetryPolicy,
    Timeout,
    ValidationError,
    build_status_request,
)
from payments_async.iso20022 import encode
from tests.factories import cancellation

BASE = "http://127.0.0.1:9"
TOKEN_URL = f"{BASE}/oauth/token"
CAMT056_URL = f"{BASE}/payments/camt056/v08"
PACS028_URL = f"{BASE}/payments/pacs028/v03"
CAMT029 = re.compile(rf"^{re.escape(BASE)}/payments/camt029/v09/.*$")
TOKEN_BODY = {"access_token": "tok-1", "token_type": "bearer", "expires_in": 3600}


def _result(data: Any, psid: str = "PS-1") -> dict[str, Any]:
    body = json.loads(data)
    sent = body.get("fitoFIPmtCxlReq", {}).get("assgnmt", {}).get("id")
    sent = sent or body.get("fitoFIPmtStsReq", {}).get("grpHdr", {}).get("msgId")
    return {
        "data": {
            "paymentsServiceId": psid,
            "paymentId": sent,
            "status": "PENDING",
            "creationDateTime": "2026-11-28T06:00:00.000",
        }
    }


def _answer(status: int, *, body: bool = True, headers: dict[str, str] | None = None) -> Any:
    def answer(url: URL, **kwargs: Any) -> CallbackResult:
        if not body:
            return CallbackResult(status=status, body=b"", headers=headers)
        return CallbackResult(status=status, payload=_result(kwargs["data"]), headers=headers)

    return answer


def _cancellation() -> Camt056:
    return cancellation("E2E-0001", reason="DUPL")


@pytest.fixture
def mocked() -> Iterator[aioresponses]:
    with aioresponses() as m:
        m.post(TOKEN_URL, payload=TOKEN_BODY, repeat=True)
        yield m


@pytest.fixture
async def client() -> AsyncIterator[PaymentsClient]:
    async with PaymentsClient(
        Credentials.sandbox(), base_url=BASE, retry=RetryPolicy.for_testing(attempts=3)
    ) as c:
        yield c


def _calls(m: aioresponses, url: str) -> list[Any]:
    return list(m.requests.get(("POST", URL(url)), []))


async def test_a_202_with_its_result_is_a_submission(
    mocked: aioresponses, client: PaymentsClient
) -> None:
    mocked.post(CAMT056_URL, callback=_answer(202))
    cancellation = _cancellation()
    sub = await client.request_cancellation(cancellation)
    assert (sub.payments_service_id, sub.message_id) == ("PS-1", cancellation.message_id)
    assert sub.created
    assert sub.http_status == 202
    assert sub.attempts == 1
    assert len(_calls(mocked, CAMT056_URL)) == 1


@pytest.mark.parametrize("status", [202, 204])
async def test_an_answer_without_the_id_is_learned_by_resubmitting_the_same_bytes(
    mocked: aioresponses, client: PaymentsClient, status: int
) -> None:
    mocked.post(CAMT056_URL, callback=_answer(status, body=False))
    mocked.post(CAMT056_URL, callback=_answer(status, body=False))
    mocked.post(CAMT056_URL, callback=_answer(200))
    cancellation = _cancellation()
    sub = await client.request_cancellation(cancellation)
    assert sub.payments_service_id == "PS-1"
    assert sub.replayed  # the service named the id of what it had stored: 200
    assert sub.http_status == 200
    assert sub.attempts == 3
    calls = _calls(mocked, CAMT056_URL)
    assert len(calls) == 3
    # the same message: same bytes, same request id; never a new message id
    assert {c.kwargs["data"] for c in calls} == {encode(cancellation)}
    assert len({c.kwargs["headers"]["X-Request-ID"] for c in calls}) == 1


async def test_a_202_without_the_id_until_the_deadline_is_an_unknown_outcome(
    mocked: aioresponses,
) -> None:
    mocked.post(CAMT056_URL, callback=_answer(202, body=False), repeat=True)
    retry = RetryPolicy(attempts=3, wait_initial=0.02, wait_max=0.02, budget=None)
    cancellation = _cancellation()
    async with PaymentsClient(Credentials.sandbox(), base_url=BASE, retry=retry) as client:
        started = time.monotonic()
        with pytest.raises(OutcomeUnknownError) as info:
            await client.request_cancellation(cancellation, timeout=0.3)
        took = time.monotonic() - started
    assert took < 1.0  # the call's deadline, not the retry policy's attempts, ends it
    err = info.value
    assert err.message_id == cancellation.message_id
    assert err.status == 202
    assert "accepted the message (202) but named no id" in str(err)
    assert str(err).count("resubmit the same message") == 1, str(err)  # said once, not nested
    assert len(_calls(mocked, CAMT056_URL)) >= 2  # it did ask again


async def test_a_202_asking_to_come_back_later_is_honoured_within_the_deadline(
    mocked: aioresponses,
) -> None:
    # Retry-After longer than the call's deadline: no resubmission, the outcome is unknown
    mocked.post(CAMT056_URL, callback=_answer(202, body=False, headers={"Retry-After": "5"}))
    async with PaymentsClient(Credentials.sandbox(), base_url=BASE) as client:
        with pytest.raises(OutcomeUnknownError):
            await client.request_cancellation(_cancellation(), timeout=1.0)
    assert len(_calls(mocked, CAMT056_URL)) == 1


@pytest.mark.parametrize(
    "body",
    [{"accepted": True}, {"data": {"status": "PENDING"}}, {}],
    ids=["other", "no-id", "empty-object"],
)
async def test_a_202_whose_json_names_no_id_is_learned_by_resubmitting(
    mocked: aioresponses, client: PaymentsClient, body: dict[str, Any]
) -> None:
    """An acknowledgement in JSON that names no id is a 202 without a submission result:
    a success whose id is learnt from the same message again, not an unknown outcome."""
    mocked.post(CAMT056_URL, status=202, payload=body)
    mocked.post(CAMT056_URL, callback=_answer(200))
    cancellation = _cancellation()
    sub = await client.request_cancellation(cancellation)
    assert sub.payments_service_id == "PS-1"
    calls = _calls(mocked, CAMT056_URL)
    assert [c.kwargs["data"] for c in calls] == [encode(cancellation)] * 2


async def test_a_202_whose_result_echoes_another_id_is_an_unknown_outcome(
    mocked: aioresponses, client: PaymentsClient
) -> None:
    """A result that names an id but echoes another message's: the answer is wrong, and
    that is said, not papered over by resubmitting."""
    result = {"paymentsServiceId": "PS-9", "paymentId": "SOMEONE-ELSE", "status": "PENDING"}
    mocked.post(CAMT056_URL, status=202, payload=result)
    with pytest.raises(OutcomeUnknownError) as info:
        await client.request_cancellation(_cancellation())
    assert info.value.status == 202
    assert len(_calls(mocked, CAMT056_URL)) == 1


async def test_status_update_is_posted_signed_at_the_profile_path(
    mocked: aioresponses, client: PaymentsClient
) -> None:
    mocked.post(PACS028_URL, callback=_answer(201))
    mocked.post(PACS028_URL, callback=_answer(200))
    request = build_status_request(_cancellation())
    first = await client.request_status_update(request)
    again = await client.request_status_update(request)
    assert first.created
    assert again.replayed
    assert first.message_id == request.message_id
    calls = _calls(mocked, PACS028_URL)
    assert [c.kwargs["data"] for c in calls] == [encode(request)] * 2
    assert all(c.kwargs["headers"]["sca-token"] for c in calls)


async def test_status_update_refuses_another_message_before_sending(
    mocked: aioresponses, client: PaymentsClient
) -> None:
    with pytest.raises(ValidationError, match="expects a Pacs028"):
        await client.request_status_update(_cancellation())  # type: ignore[arg-type]
    bad = build_status_request(assignment_id="bad id with spaces" * 3)
    with pytest.raises(ValidationError):
        await client.request_status_update(bad)
    assert _calls(mocked, PACS028_URL) == []


async def test_with_response_gives_the_status_update_and_its_answer(
    mocked: aioresponses, client: PaymentsClient
) -> None:
    mocked.post(PACS028_URL, callback=_answer(202))
    sub, response = await client.with_response.request_status_update(
        build_status_request(assignment_id="A-1"), timeout=Timeout(total=5)
    )
    assert sub.created
    assert response.status == 202


async def test_a_chase_whose_outcome_is_unknown_is_resent_as_the_same_message(
    mocked: aioresponses,
) -> None:
    chased: list[bytes] = []

    def pacs028(url: URL, **kwargs: Any) -> CallbackResult:
        chased.append(kwargs["data"])
        if len(chased) == 1:
            return CallbackResult(status=503)  # may have been stored: unknown
        return CallbackResult(status=200, payload=_result(kwargs["data"], "SRQ-1"))

    def camt029(url: URL, **kwargs: Any) -> CallbackResult:
        conf, tx = ("ACCC", "ACCR") if len(chased) > 1 else ("PDCR", "PDCR")
        return CallbackResult(
            status=200,
            payload={
                "rsltnOfInvstgtn": {
                    "assgnmt": {"id": "A-1"},
                    "sts": {"conf": conf},
                    "cxlDtls": [{"txInfAndSts": [{"cxlStsId": "C-1", "txCxlSts": tx}]}],
                }
            },
        )

    mocked.post(PACS028_URL, callback=pacs028, repeat=True)
    mocked.get(CAMT029, callback=camt029, repeat=True)
    async with PaymentsClient(
        Credentials.sandbox(),
        base_url=BASE,
        retry=RetryPolicy.for_testing(attempts=1),
        poll=PollPolicy(initial=0.005, maximum=0.005, jitter=0.0),
    ) as client:
        outcome = await client.wait_for_cancellation_outcome(
            "cxl-1", timeout=10, chase_after=0.02, recall="ASG-1"
        )
    assert outcome.accepted
    assert len(chased) == 2
    assert chased[0] == chased[1]  # the same message again: stored once at most
    assert json.loads(chased[0])["fitoFIPmtStsReq"]["txInf"][0]["orgnlGrpInf"]["orgnlMsgId"] == (
        "ASG-1"
    )
