"""Beyond the four operations against the sandbox: request(), a non-default profile, headers."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from payments_async import (
    ApiError,
    Hooks,
    NotFoundError,
    RequestEvent,
    ServiceProfile,
)
from payments_async.iso20022 import encode
from payments_async.sandbox import SandboxConfig
from payments_async.sandbox._main import build_parser, config_from_args
from payments_async.testing import SandboxHandle, sandbox_server
from tests.factories import cancellation_for, credit_transfer
from tests.integration.test_client_sandbox import client_for

EDITION = ServiceProfile(
    pacs008_path="/payments/pacs008/v08",
    pacs002_path="/payments/pacs002/v10",
    camt056_path="/payments/camt056/v07",
    camt029_path="/payments/camt029/v08",
    client_id_header="X-Client-Id",
)


@pytest.fixture
async def sandbox() -> AsyncIterator[SandboxHandle]:
    async with sandbox_server(SandboxConfig(processing_delay=0.1, settlement_delay=0.1)) as sb:
        yield sb


@pytest.fixture
async def edition() -> AsyncIterator[SandboxHandle]:
    config = SandboxConfig(processing_delay=0.1, settlement_delay=0.1, profile=EDITION)
    async with sandbox_server(config) as sb:
        yield sb


async def test_an_operation_the_sandbox_does_not_model_is_a_typed_404(
    sandbox: SandboxHandle,
) -> None:
    pacs004 = {"grpHdr": {"msgId": "RTR-1", "nbOfTxs": "1"}}
    async with client_for(sandbox) as client:
        for idempotency_id in (None, "RTR-1"):
            with pytest.raises(NotFoundError) as info:
                await client.request(
                    "POST", "/payments/pacs004/v09", json=pacs004, idempotency_id=idempotency_id
                )
            err = info.value
            assert (err.status, err.method, err.path) == (404, "POST", "/payments/pacs004/v09")
            assert err.codes == ("NOT_FOUND",)
            assert err.request_id is not None


async def test_request_reaches_a_modelled_operation_with_a_verified_sca(
    sandbox: SandboxHandle,
) -> None:
    events: list[RequestEvent] = []
    payment = credit_transfer()
    body = encode(payment)
    async with client_for(sandbox, hooks=Hooks(on_request=events.append)) as client:
        # The sandbox verifies the SCA token's hash against the bytes it received.
        first = await client.request(
            "POST", "/payments/pacs008/v10", content=body, idempotency_id=payment.message_id
        )
        again = await client.request(
            "POST", "/payments/pacs008/v10", content=body, idempotency_id=payment.message_id
        )
        psid = first.json()["data"]["paymentsServiceId"]
        report = await client.request("GET", f"/payments/pacs002/v12/{psid}")
    assert (first.status, again.status) == (201, 200)
    assert again.json()["data"]["paymentsServiceId"] == psid
    assert report.status == 200
    assert "fitoFIPmtStsRpt" in report.json()
    assert report.headers["Content-Type"].startswith("application/json")
    assert "Date" in report.headers
    dated = [e for e in events if e.kind == "request" and e.headers is not None]
    assert len(dated) == 3
    assert all("Date" in e.headers for e in dated if e.headers is not None)


async def test_client_and_sandbox_on_another_edition_end_to_end(edition: SandboxHandle) -> None:
    async with client_for(edition, profile=EDITION) as client:
        payment = credit_transfer()
        submission, response = await client.with_response.submit_credit_transfer(payment)
        assert submission.created
        assert response.status == 201
        status = await client.wait_for_payment_status(submission.payments_service_id, timeout=5)
        assert status.status is not None
        cancel = await client.request_cancellation(cancellation_for(payment))
        outcome = await client.wait_for_cancellation_outcome(cancel.payments_service_id, timeout=5)
        assert outcome.status is not None
        report = await client.get_credit_transfer_status(submission.payments_service_id)
        assert report is not None


async def test_the_spec_edition_is_not_served_by_another(edition: SandboxHandle) -> None:
    async with client_for(edition) as client:
        with pytest.raises(NotFoundError):
            await client.submit_credit_transfer(credit_transfer())
    # The paths of the edition, but the spec's client-id header: refused as missing.
    spec_header = ServiceProfile(
        pacs008_path=EDITION.pacs008_path,
        pacs002_path=EDITION.pacs002_path,
        camt056_path=EDITION.camt056_path,
        camt029_path=EDITION.camt029_path,
    )
    async with client_for(edition, profile=spec_header) as client:
        with pytest.raises(ApiError) as info:
            await client.submit_credit_transfer(credit_transfer())
    assert info.value.status == 400
    assert "X-Client-Id" in str(info.value)


def test_the_sandbox_program_takes_a_profile() -> None:
    args = build_parser().parse_args(
        ["--profile", "pacs008_path=/payments/pacs008/v08", "--profile", "client_id_header=X-C"]
    )
    profile = config_from_args(args).profile
    assert profile == ServiceProfile(pacs008_path="/payments/pacs008/v08", client_id_header="X-C")
    assert config_from_args(build_parser().parse_args([])).profile == ServiceProfile()
    with pytest.raises(ValueError, match=r"--profile: .*pacs009_path"):
        config_from_args(build_parser().parse_args(["--profile", "pacs009_path=/x"]))
