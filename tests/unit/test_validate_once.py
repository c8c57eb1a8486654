"""Every message is validated exactly once before it is sent, and again after a change."""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec
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
    builders,
    decode_camt056,
    encode,
    encode_validated,
    find_problems,
    validate,
)
from payments_async.iso20022.builders import _accept

BASE = "http://127.0.0.1:9"
CAMT056_URL = f"{BASE}/payments/camt056/v08"
PACS008_URL = f"{BASE}/payments/pacs008/v10"
SUBMISSION = {"data": {"paymentsServiceId": "PS-1", "status": "PENDING"}}
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


class _Counter:
    """Counts the rule checks the library runs: full walks (``find_problems``) and the
    builders' checks of their inputs that passed (a failed one is followed by a walk)."""

    def __init__(self) -> None:
        self.calls = 0
        self.walks = 0

    def __call__(self, msg: Any) -> Any:
        self.calls += 1
        self.walks += 1
        return find_problems(msg)

    def accept(self, msg: Any, inputs_ok: bool, rules_on: Any) -> None:
        self.calls += inputs_ok
        _accept(msg, inputs_ok, rules_on)


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> _Counter:
    counter = _Counter()
    monkeypatch.setattr(_validate, "find_problems", counter)
    monkeypatch.setattr(builders, "_accept", counter.accept)
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
    assert checks.walks == 0  # it checked the inputs it was given, not the whole message
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


def test_validate_then_encode_validated_checks_once(checks: _Counter) -> None:
    # copies decoded from the bytes: not the builder's objects, so each is checked itself
    messages = [decode_camt056(encode(_cancellation(f"ASG-{i}"))) for i in range(5)]
    for msg in messages:
        validate(msg)
    assert checks.walks == 5
    for msg in messages:
        encode_validated(msg)
    assert checks.walks == 5
    validate(messages[0])  # validate() itself always checks
    assert checks.walks == 6


def test_a_builders_message_changed_before_its_first_submit_is_checked(
    checks: _Counter,
) -> None:
    msg = _cancellation()
    tx = msg.body.undrlyg[0].tx_inf[0]
    tx.cxl_rsn_inf[0].rsn.cd = "NOPE"  # deep inside a nested list
    with pytest.raises(ValidationError) as info:
        encode_validated(msg)
    assert info.value.paths == ("$.fitoFIPmtCxlReq.undrlyg[0].txInf[0].cxlRsnInf[0].rsn.cd",)
    tx.cxl_rsn_inf[0].rsn.cd = "DUPL"  # valid again, but not the bytes the builder made
    tx.cxl_rsn_inf.append(tx.cxl_rsn_inf[0])
    walks = checks.walks
    encode_validated(msg)
    assert checks.walks == walks + 1


def test_a_mark_copied_from_another_message_does_not_pass_it(checks: _Counter) -> None:
    # What counts is the message's own bytes, not where the mark came from.
    made = _cancellation("ASG-1")
    other = decode_camt056(encode(_cancellation("ASG-2")))
    other.body.assgnmt.assgnr.agt.fin_instn_id.bicfi = "not a bic"
    vars(other).update(vars(made))
    with pytest.raises(ValidationError):
        encode_validated(other)


def test_builders_messages_are_never_walked_and_a_copy_is_walked_once(checks: _Counter) -> None:
    messages = [_cancellation(f"ASG-{i}") for i in range(100)]
    for msg in messages:
        encode_validated(msg)
    assert checks.walks == 0
    copy = decode_camt056(encode(messages[0]))  # as the bulk runner resubmits a row
    encode_validated(copy)
    encode_validated(copy)
    assert checks.walks == 1


def test_the_mark_is_not_part_of_the_message(checks: _Counter) -> None:
    msg = _cancellation()
    copy = decode_camt056(encode(msg))
    assert copy == msg
    assert encode(copy) == encode(msg)  # the mark is not encoded
    for unmarked in (pickle.loads(pickle.dumps(msg)), msgspec.structs.replace(msg)):
        assert unmarked == msg
        encode_validated(unmarked)  # a copy is checked on its own
    assert checks.walks == 2


def test_encode_validated_refuses_what_is_not_a_message() -> None:
    with pytest.raises(TypeError, match="no validation rules"):
        encode_validated({"grpHdr": {}})  # type: ignore[arg-type]
