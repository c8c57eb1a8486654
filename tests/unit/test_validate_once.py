"""Every message is validated exactly once before it is sent, and again after a change."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from aioresponses import aioresponses
from yarl import URL

from payments_async import (
    Credentials,
    PaymentsClient,
    RetryPolicy,
    ValidationError,
    build_cancellation,
    build_credit_transfer,
)
from payments_async.iso20022 import (
    Camt056,
    _validate,
    decode_camt056,
    encode,
    encode_validated,
    find_problems,
    validate,
)

BASE = "http://127.0.0.1:9"
CAMT056_URL = f"{BASE}/payments/camt056/v08"
PACS008_URL = f"{BASE}/payments/pacs008/v10"
SUBMISSION = {"data": {"paymentsServiceId": "PS-1", "status": "PENDING"}}
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


class _Counter:
    """Counts the full rule checks (``find_problems``) the library runs."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, msg: Any) -> Any:
        self.calls += 1
        return find_problems(msg)


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> _Counter:
    monkeypatch.setattr(_validate, "_VALID", {})  # nothing remembered from other tests
    counter = _Counter()
    monkeypatch.setattr(_validate, "find_problems", counter)
    return counter


@pytest.fixture
def mocked() -> Iterator[aioresponses]:
    with aioresponses() as m:
        m.post(
            f"{BASE}/oauth/token",
            payload={"access_token": "tok-1", "token_type": "bearer", "expires_in": 3600},
            repeat=True,
        )
        m.post(CAMT056_URL, status=201, payload=SUBMISSION, repeat=True)
        m.post(PACS008_URL, status=201, payload=SUBMISSION, repeat=True)
        yield m


@pytest.fixture
async def client() -> AsyncIterator[PaymentsClient]:
    async with PaymentsClient(
        Credentials.sandbox(), base_url=BASE, retry=RetryPolicy.for_testing(attempts=1)
    ) as c:
        yield c


def _sent(m: aioresponses, url: str) -> list[bytes]:
    return [call.kwargs["data"] for call in m.requests.get(("POST", URL(url)), [])]


def _cancellation(assignment_id: str = "ASG-1") -> Camt056:
    return build_cancellation(
        original_end_to_end_id="E2E-0001",
        amount=Decimal("12.30"),
        creditor_agent_bic="BNPAFRPPXXX",
        creditor_iban="FR1420041010050500013M02606",
        assigner_bic="COBADEFFXXX",
        assignee_bic="BNPAFRPPXXX",
        assignment_id=assignment_id,
    )


async def test_a_builder_made_message_is_validated_once_builder_then_client(
    checks: _Counter, mocked: aioresponses, client: PaymentsClient
) -> None:
    msg = _cancellation()
    assert checks.calls == 1  # the builder's
    await client.request_cancellation(msg)
    assert checks.calls == 1  # the client did not check the same bytes again
    assert _sent(mocked, CAMT056_URL) == [encode(msg)]


async def test_a_message_changed_after_validation_is_validated_again(
    checks: _Counter, mocked: aioresponses, client: PaymentsClient
) -> None:
    msg = _cancellation()
    await client.request_cancellation(msg)
    assert checks.calls == 1

    msg.body.assgnmt.id = "ASG-2"  # a valid change: checked again, then sent
    await client.request_cancellation(msg)
    assert checks.calls == 2
    assert _sent(mocked, CAMT056_URL)[-1] == encode(msg)

    msg.body.assgnmt.assgnr.agt.fin_instn_id.bicfi = "not a bic"  # an invalid change: refused
    with pytest.raises(ValidationError) as info:
        await client.request_cancellation(msg)
    assert checks.calls == 3
    assert any("assgnr" in p for p in info.value.paths)
    assert len(_sent(mocked, CAMT056_URL)) == 2  # nothing sent for the invalid one

    msg.body.assgnmt.assgnr.agt.fin_instn_id.bicfi = "COBADEFFXXX"  # back to what passed before
    await client.request_cancellation(msg)
    assert checks.calls == 3  # the same bytes as the second submission: not checked again


async def test_a_message_not_made_by_a_builder_is_validated_once_per_submit(
    checks: _Counter, mocked: aioresponses, client: PaymentsClient
) -> None:
    msg = decode_camt056((FIXTURES / "camt056_cancellation_request.json").read_bytes())
    assert checks.calls == 0
    await client.request_cancellation(msg)
    assert checks.calls == 1


async def test_an_invalid_message_not_made_by_a_builder_is_never_sent(
    checks: _Counter, mocked: aioresponses, client: PaymentsClient
) -> None:
    transfer = build_credit_transfer(
        debtor_name="Alice Example",
        debtor_iban="DE89370400440532013000",
        debtor_agent_id="37040044",
        creditor_name="Bob Example",
        creditor_iban="FR1420041010050500013M02606",
        creditor_agent_id="20041010",
        amount=Decimal("12.30"),
    )
    transfer.fito_fi_cstmr_cdt_trf.cdt_trf_tx_inf[0].intr_bk_sttlm_amt.value = 12.3  # type: ignore[assignment]
    with pytest.raises(ValidationError, match="float"):
        await client.submit_credit_transfer(transfer)
    assert _sent(mocked, PACS008_URL) == []


def test_encode_validated_returns_the_bytes_and_their_digest(checks: _Counter) -> None:
    msg = _cancellation()
    body, digest = encode_validated(msg)
    assert body == encode(msg)
    assert digest == hashlib.sha256(body).digest()


def test_validate_remembers_and_the_table_stays_bounded(
    checks: _Counter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_validate, "VALIDATED_DIGESTS_MAX", 3)
    messages = [_cancellation(f"ASG-{i}") for i in range(5)]
    assert checks.calls == 5
    assert len(_validate._VALID) == 3  # the oldest two were forgotten
    encode_validated(messages[-1])
    assert checks.calls == 5
    encode_validated(messages[0])  # forgotten: checked again
    assert checks.calls == 6
    validate(messages[0])  # validate() itself always checks
    assert checks.calls == 7


def test_encode_validated_refuses_what_is_not_a_message() -> None:
    with pytest.raises(TypeError, match="no validation rules"):
        encode_validated({"grpHdr": {}})  # type: ignore[arg-type]


def test_a_full_table_forgets_its_oldest_eighth_at_once(
    checks: _Counter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One deletion per insert from the front of a dict scans the holes earlier deletions
    # left (~2 us per message once the table is full); forgetting in batches does not.
    monkeypatch.setattr(_validate, "VALIDATED_DIGESTS_MAX", 16)
    digests = [bytes([i]) * 32 for i in range(17)]
    for d in digests:
        _validate._remember(Camt056, d)
    assert list(_validate._VALID) == [(Camt056, d) for d in digests[2:]]  # 16 - 2 + 1
    for d in digests[2:]:
        _validate._remember(Camt056, d)  # already known: nothing moves
    assert len(_validate._VALID) == 15
