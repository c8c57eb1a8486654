"""The sandbox applies the EPC address rule on its own date, over HTTP, as a SEPA service."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, time, timedelta
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from payments_async import EPC_ADDRESS_CUTOVER, Address, PaymentsClient, ValidationError
from payments_async._constants import PACS008_PATH
from payments_async.iso20022 import encode
from payments_async.sandbox import SandboxConfig
from payments_async.testing import ManualClock, SandboxHandle, sandbox_server
from tests.factories import credit_transfer
from tests.support.sandbox import RawClient, predefined_client

pytest_plugins = ["tests.support.sandbox_fixtures"]

DBTR = "$.fitoFICstmrCdtTrf.cdtTrfTxInf[0].dbtr.pstlAdr"
CDTR = "$.fitoFICstmrCdtTrf.cdtTrfTxInf[0].cdtr.pstlAdr"
BEFORE = EPC_ADDRESS_CUTOVER - timedelta(days=1)
UNSTRUCTURED = Address(lines=("Hauptstrasse 1", "10115 Berlin"))


def _body(**addresses: Address) -> bytes:
    """A pacs.008 with these parties' (``dbtr``, ``cdtr``) addresses, valid or not: the
    sandbox, not the builder, is what is tested."""
    wire = json.loads(encode(credit_transfer()))
    tx = wire["fitoFICstmrCdtTrf"]["cdtTrfTxInf"][0]
    for party, address in addresses.items():
        tx[party]["pstlAdr"] = json.loads(encode(address.to_iso()))
    return json.dumps(wire).encode()


def _refusal(reply: Any) -> list[tuple[str, str]]:
    assert reply.status == 400, reply.json
    return [(e["code"], e["description"]) for e in reply.json["errors"]]


async def test_an_unstructured_address_gets_400_with_code_and_path(client: RawClient) -> None:
    reply = await client.post(PACS008_PATH, _body(dbtr=UNSTRUCTURED))
    assert _refusal(reply) == [("BODY_INVALID", DBTR)]
    message = reply.json["errors"][0]["message"]
    assert message.startswith(f"{DBTR}: unstructured address")
    assert "EPC 153-22 v2.1" in message


async def test_a_hybrid_address_with_three_lines_gets_400(client: RawClient) -> None:
    three = Address(town="Paris", country="FR", lines=("1 rue de la Paix", "Batiment B", "2e"))
    reply = await client.post(PACS008_PATH, _body(cdtr=three))
    assert _refusal(reply) == [("BODY_INVALID", f"{CDTR}.adrLine")]
    assert "at most 2 address lines" in reply.json["errors"][0]["message"]


async def test_structured_and_hybrid_addresses_are_stored(
    client: RawClient, sandbox: SandboxHandle
) -> None:
    structured = Address(
        street="Hauptstrasse", building="1", post_code="10115", town="Berlin", country="DE"
    )
    hybrid = Address(town="Paris", country="FR", lines=("1 rue de la Paix",))
    reply = await client.post(PACS008_PATH, _body(dbtr=structured, cdtr=hybrid))
    assert reply.status == 201, reply.json
    assert sandbox.server.stats()["payments_stored"] == 1


async def test_the_client_refuses_an_unstructured_address_before_sending(
    sandbox: SandboxHandle,
) -> None:
    msg = credit_transfer(debtor_address=UNSTRUCTURED, rules_on=BEFORE)
    async with PaymentsClient(sandbox.credentials, base_url=sandbox.url) as payments:  # type: ignore[arg-type]
        with pytest.raises(ValidationError) as info:
            await payments.submit_credit_transfer(msg)
    assert info.value.paths == (DBTR,)
    assert sandbox.server.stats()["payments_stored"] == 0


# --- opting out: a sandbox whose clock reads a date before the cut-over ------------------


@pytest_asyncio.fixture
async def old_sandbox() -> AsyncIterator[SandboxHandle]:
    noon = datetime.combine(BEFORE, time(12), tzinfo=UTC).timestamp()
    async with sandbox_server(SandboxConfig(clock=ManualClock(noon))) as sb:
        yield sb


async def test_a_sandbox_dated_before_the_cutover_accepts_lines_alone(
    old_sandbox: SandboxHandle, http: aiohttp.ClientSession
) -> None:
    client = predefined_client(http, old_sandbox)  # predefined tokens: no real-time JWTs
    reply = await client.post(PACS008_PATH, _body(dbtr=UNSTRUCTURED))
    assert reply.status == 201, reply.json
    three = Address(town="Paris", country="FR", lines=("a", "b", "c"))
    reply = await client.post(PACS008_PATH, _body(cdtr=three))
    assert _refusal(reply) == [("BODY_INVALID", f"{CDTR}.adrLine")]
