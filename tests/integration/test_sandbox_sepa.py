"""The sandbox as strict as a SEPA service, over real HTTP: currency, settlement method,
amounts as numbers, no null for an optional field, and the full error envelope."""

from __future__ import annotations

import copy
import re
from decimal import Decimal
from typing import Any

import aiohttp
import msgspec
import msgspec.inspect as mi
import pytest

from payments_async import Camt056, Pacs008, PaymentsClient
from payments_async._constants import CAMT056_PATH, PACS008_PATH, TOKEN_PATH
from payments_async.iso20022 import encode, target2_today
from payments_async.sandbox import ErrorCode
from payments_async.testing import ManualClock, SandboxHandle
from tests.factories import cancellation, credit_transfer
from tests.support.sandbox import (
    PROCESSING_DELAY,
    RawClient,
    basic,
    form,
    predefined_client,
    tx_status,
)

pytest_plugins = ["tests.support.sandbox_fixtures"]

HYBRID = {"twnNm": "Berlin", "ctry": "DE", "adrLine": ["Hauptstrasse 1"]}
ENVELOPE_KEYS = {"code", "message", "level", "description"}


@pytest.fixture
def predefined(http: aiohttp.ClientSession, sandbox: SandboxHandle) -> RawClient:
    return predefined_client(http, sandbox)


def _problems(reply: Any) -> dict[str, str]:
    """description (the field's path) -> message, of every BODY_INVALID entry."""
    assert reply.status == 400, reply.json
    assert set(reply.codes) == {"BODY_INVALID"}
    return {e["description"]: e["message"] for e in reply.json["errors"]}


# --- currency and settlement method ------------------------------------------------------


@pytest.mark.parametrize("currency", ["USD", "JPY"])
async def test_a_payment_in_another_currency_than_eur_ends_rjct_am03(
    client: RawClient, clock: ManualClock, currency: str
) -> None:
    # notes 6: AM03 "currency not allowed" is a documented pacs.002 rejection; notes 8: SEPA is EUR
    reply = await client.submit_payment(credit_transfer(currency=currency, amount=Decimal("100")))
    assert reply.status == 201, reply.json
    psid = reply.data["paymentsServiceId"]
    clock.advance(PROCESSING_DELAY + 1)
    status = await client.payment_status(psid)
    assert tx_status(status) == "RJCT"
    reason = status.json["fitoFIPmtStsRpt"]["txInfAndSts"][0]["stsRsnInf"][0]["rsn"]["cd"]
    assert reason == "AM03"


async def test_a_payment_in_eur_still_settles(client: RawClient, clock: ManualClock) -> None:
    reply = await client.submit_payment(credit_transfer())
    clock.advance(PROCESSING_DELAY + 1)
    assert tx_status(await client.payment_status(reply.data["paymentsServiceId"])) == "ACCC"


@pytest.mark.parametrize("method", ["INDA", "INGA", "COVE"])
async def test_a_settlement_method_other_than_clrg_is_refused(
    predefined: RawClient, sandbox: SandboxHandle, method: str
) -> None:
    body = msgspec.json.decode(encode(credit_transfer()))
    body["fitoFICstmrCdtTrf"]["grpHdr"]["sttlmInf"]["sttlmMtd"] = method
    problems = _problems(await predefined.submit_payment(msgspec.json.encode(body)))
    path = "$.fitoFICstmrCdtTrf.grpHdr.sttlmInf.sttlmMtd"
    assert list(problems) == [path]
    assert "'CLRG'" in problems[path]
    assert sandbox.server.stats()["payments_stored"] == 0


# --- amounts are numbers -------------------------------------------------------------------


async def test_a_payment_amount_sent_as_a_string_is_refused(predefined: RawClient) -> None:
    raw = encode(credit_transfer(amount=Decimal("12.34")))
    assert b'"value":12.34' in raw
    problems = _problems(await predefined.submit_payment(raw.replace(b"12.34", b'"12.34"')))
    path = "$.fitoFICstmrCdtTrf.cdtTrfTxInf[0].intrBkSttlmAmt.value"
    assert list(problems) == [path]
    assert "must be a JSON number, not a string" in problems[path]


@pytest.mark.parametrize("key", [b"intrBkSttlmAmt", b"intrBkSttlAmt"])
async def test_a_cancellation_amount_sent_as_a_string_is_refused(
    predefined: RawClient, key: bytes
) -> None:
    raw = encode(cancellation("E2E-1", amount=Decimal("12.34")))
    raw = raw.replace(b'"intrBkSttlmAmt":{"value":12.34', b'"' + key + b'":{"value":"12.34"')
    problems = _problems(await predefined.submit_cancellation(raw))
    path = f"$.fitoFIPmtCxlReq.undrlyg[0].txInf[0].orgnlTxRef.{key.decode()}.value"
    assert list(problems) == [path]


# --- no null for an optional field --------------------------------------------------------


def _optional_paths(cls: type[msgspec.Struct], path: str) -> list[str]:
    """Every optional field's path in a message class, the first item of each list."""
    out: list[str] = []
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    for f in info.fields:
        at = f"{path}.{f.encode_name}"
        if not f.required:
            out.append(at)
        t = f.type
        while True:
            if isinstance(t, mi.Metadata):
                t = t.type
            elif isinstance(t, mi.UnionType):
                members = [m for m in t.types if not isinstance(m, mi.NoneType)]
                if len(members) != 1:
                    break
                t = members[0]
            elif isinstance(t, mi.ListType):
                t, at = t.item_type, f"{at}[0]"
            else:
                break
        if isinstance(t, mi.StructType):
            out.extend(_optional_paths(t.cls, at))
    return out


def _full_pacs008() -> dict[str, Any]:
    """A valid pacs.008 holding every optional container, so each optional field has a parent."""
    msg = credit_transfer(
        remittance="Invoice 1",
        tx_id="TX-1",
        debtor_account_name="Alice",
        creditor_account_name="Bob",
        creditor_reference="RF18539007547034",
        local_instrument="INST",
    )
    body: dict[str, Any] = msgspec.json.decode(encode(msg))
    header = body["fitoFICstmrCdtTrf"]["grpHdr"]
    tx = body["fitoFICstmrCdtTrf"]["cdtTrfTxInf"][0]
    header["sttlmInf"]["clrSys"] = {"prtry": "ST2"}
    header["ttlIntrBkSttlmAmt"] = dict(tx["intrBkSttlmAmt"])
    header["intrBkSttlmDt"] = tx["intrBkSttlmDt"] = "2026-11-24"
    header["instgAgt"] = {"finInstnId": {"bicfi": "COBADEFFXXX"}}
    header["instdAgt"] = {"finInstnId": {"bicfi": "BNPAFRPPXXX"}}
    tx["ultmtDbtr"] = {"nm": "Alice Senior"}
    tx["ultmtCdtr"] = {"nm": "Bob Senior"}
    tx["purp"] = {"cd": "GDDS"}
    reference = tx["rmtInf"]["strd"][0]
    reference["cdtrRefInf"]["tp"] = {"cdOrPrtry": {"cd": "SCOR"}, "issr": "Bob"}
    reference["addtlRmtInf"] = ["Thank you"]
    for party in (
        tx["dbtr"],
        tx["cdtr"],
        tx["ultmtDbtr"],
        tx["ultmtCdtr"],
        tx["dbtrAgt"]["finInstnId"],
        tx["cdtrAgt"]["finInstnId"],
        header["instgAgt"]["finInstnId"],
        header["instdAgt"]["finInstnId"],
    ):
        party["pstlAdr"] = dict(HYBRID)
    for party in (tx["dbtr"], tx["cdtr"], tx["ultmtDbtr"], tx["ultmtCdtr"]):
        party["id"] = {
            "orgId": {
                "anyBIC": "COBADEFFXXX",
                "lei": "7LTWFZYICNSX8D621K86",
                "othr": [{"id": "HRB 1", "schmeNm": {"cd": "COID"}, "issr": "Registry"}],
            }
        }
    return body


def _full_camt056() -> dict[str, Any]:
    msg = cancellation("E2E-1", originator_name="Alice", originator_bic="COBADEFFXXX")
    body: dict[str, Any] = msgspec.json.decode(encode(msg))
    ref = body["fitoFIPmtCxlReq"]["undrlyg"][0]["txInf"][0]["orgnlTxRef"]
    ref["cdtrAgt"]["finInstnId"]["pstlAdr"] = dict(HYBRID)
    ref["intrBkSttlmDt"] = target2_today().isoformat()  # settled today: in every window
    return body


def _with_null(body: dict[str, Any], path: str) -> dict[str, Any]:
    out = copy.deepcopy(body)
    *parents, last = re.findall(r"\.(\w+)(?:\[(\d+)\])?", path)
    node: Any = out
    for key, index in parents:
        assert key in node, f"the base message has no {key} on the way to {path}"
        node = node[key] if not index else node[key][int(index)]
    node[last[0]] = None
    return out


PACS008_OPTIONAL = _optional_paths(Pacs008, "$")
CAMT056_OPTIONAL = _optional_paths(Camt056, "$")


def test_every_optional_field_of_both_messages_is_tried() -> None:
    assert len(PACS008_OPTIONAL) >= 17
    assert len(CAMT056_OPTIONAL) >= 15
    assert "$.fitoFICstmrCdtTrf.cdtTrfTxInf[0].pmtId.uetr" in PACS008_OPTIONAL
    assert "$.fitoFIPmtCxlReq.undrlyg[0].txInf[0].orgnlTxRef.intrBkSttlmAmt" in CAMT056_OPTIONAL


async def test_the_full_messages_are_accepted(predefined: RawClient) -> None:
    assert (await predefined.submit_payment(msgspec.json.encode(_full_pacs008()))).status == 201
    reply = await predefined.submit_cancellation(msgspec.json.encode(_full_camt056()))
    assert reply.status == 201, reply.json


@pytest.mark.parametrize(
    ("full", "paths", "path", "stored"),
    [
        (_full_pacs008, PACS008_OPTIONAL, PACS008_PATH, "payments_stored"),
        (_full_camt056, CAMT056_OPTIONAL, CAMT056_PATH, "cancellations_stored"),
    ],
    ids=["pacs.008", "camt.056"],
)
async def test_null_for_any_optional_field_is_refused_with_its_path(
    predefined: RawClient,
    sandbox: SandboxHandle,
    full: Any,
    paths: list[str],
    path: str,
    stored: str,
) -> None:
    base = full()
    for field_path in paths:
        reply = await predefined.post(path, msgspec.json.encode(_with_null(base, field_path)))
        problems = _problems(reply)
        assert "must not be null" in problems.get(field_path, ""), (field_path, problems)
    assert sandbox.server.stats()[stored] == 0


async def test_every_problem_of_a_body_is_listed_at_once(predefined: RawClient) -> None:
    body = _full_pacs008()
    tx = body["fitoFICstmrCdtTrf"]["cdtTrfTxInf"][0]
    tx["pmtId"]["txId"] = None
    tx["intrBkSttlmAmt"]["value"] = "5.00"
    tx["cdtrAcct"]["id"]["othr"]["id"] = "DE5212345678"
    problems = _problems(await predefined.submit_payment(msgspec.json.encode(body)))
    assert set(problems) == {
        "$.fitoFICstmrCdtTrf.cdtTrfTxInf[0].pmtId.txId",
        "$.fitoFICstmrCdtTrf.cdtTrfTxInf[0].intrBkSttlmAmt.value",
        "$.fitoFICstmrCdtTrf.cdtTrfTxInf[0].cdtrAcct.id.othr.id",
    }
    assert (
        "a DE IBAN has 22 characters"
        in problems["$.fitoFICstmrCdtTrf.cdtTrfTxInf[0].cdtrAcct.id.othr.id"]
    )


async def test_the_client_library_still_sends_and_reads_through_the_strict_sandbox(
    sandbox: SandboxHandle,
) -> None:
    assert sandbox.credentials is not None
    async with PaymentsClient(sandbox.credentials, base_url=sandbox.url) as pc:
        payment = credit_transfer(remittance="Invoice 2", uetr=None)
        result = await pc.submit_credit_transfer(payment)
        assert result.payments_service_id.startswith("pmt-")
        cancel = await pc.request_cancellation(cancellation(payment.end_to_end_id))
        assert cancel.payments_service_id.startswith("cxl-")


# --- registries at the sandbox -------------------------------------------------------------


@pytest.mark.parametrize("iban", ["QQ76123456789012", "DE5212345678"])
async def test_an_iban_of_no_country_or_the_wrong_length_is_refused(
    predefined: RawClient, iban: str
) -> None:
    body = _full_camt056()
    body["fitoFIPmtCxlReq"]["undrlyg"][0]["txInf"][0]["orgnlTxRef"]["cdtrAcct"]["id"]["iban"] = iban
    problems = _problems(await predefined.submit_cancellation(msgspec.json.encode(body)))
    assert list(problems) == ["$.fitoFIPmtCxlReq.undrlyg[0].txInf[0].orgnlTxRef.cdtrAcct.id.iban"]


# --- the error envelope: four fields on every entry ----------------------------------------


def _entries_complete(reply: Any) -> None:
    assert reply.json is not None, reply.body[:200]
    assert reply.json["errors"]
    for entry in reply.json["errors"]:
        assert set(entry) == ENVELOPE_KEYS, entry
        assert all(isinstance(entry[k], str) and entry[k] for k in ENVELOPE_KEYS), entry
        assert entry["level"] == "ERROR"


def test_every_sandbox_error_code_has_a_description() -> None:
    from payments_async.sandbox._responses import DESCRIPTIONS

    codes = {v for k, v in vars(ErrorCode).items() if k.isupper()}
    assert codes == set(DESCRIPTIONS)


async def test_404_405_and_406_entries_carry_all_four_fields(predefined: RawClient) -> None:
    headers = await predefined.api_headers()
    not_found = await predefined.request(
        "GET", "/payments/pacs002/v12/pmt-unknown", headers=headers
    )
    assert (not_found.status, not_found.codes) == (404, ["NOT_FOUND"])
    _entries_complete(not_found)
    wrong_method = await predefined.request("GET", PACS008_PATH, headers=headers)
    assert (wrong_method.status, wrong_method.codes) == (405, ["METHOD_NOT_ALLOWED"])
    _entries_complete(wrong_method)
    not_acceptable = await predefined.request(
        "GET", "/payments/camt029/v09/cxl-x", headers={**headers, "Accept": "text/html"}
    )
    assert (not_acceptable.status, not_acceptable.codes) == (406, ["NOT_ACCEPTABLE"])
    _entries_complete(not_acceptable)


async def test_an_operation_the_sandbox_does_not_model_is_a_404_envelope(
    predefined: RawClient,
) -> None:
    # The pacs.004 return is outside the spec: a client must see the service's 404 envelope.
    body = b'{"pmtRtr": {}}'
    reply = await predefined.post("/payments/pacs004/v09", body)
    assert (reply.status, reply.codes) == (404, ["NOT_FOUND"])
    _entries_complete(reply)


async def test_header_and_body_errors_carry_all_four_fields(predefined: RawClient) -> None:
    body = encode(credit_transfer())
    missing = await predefined.post(PACS008_PATH, body, omit=("sca-token",))
    assert (missing.status, missing.codes) == (400, ["HEADER_MISSING"])
    _entries_complete(missing)
    assert "sca-token" in missing.json["errors"][0]["description"]
    invalid = await predefined.post(CAMT056_PATH, b'{"fitoFIPmtCxlReq": {}}')
    assert invalid.status == 400
    _entries_complete(invalid)


@pytest.mark.parametrize(
    ("headers", "data", "status", "code"),
    [
        (
            {"Authorization": "Basic !!", "Accept": "application/json"},
            form("x"),
            400,
            "INVALID_REQUEST",
        ),
        ({"Accept": "application/json"}, form("x"), 401, "INVALID_CLIENT"),
        (
            {"Authorization": basic("sandbox-client", "wrong"), "Accept": "application/json"},
            form("x"),
            401,
            "INVALID_CLIENT",
        ),
        (
            {
                "Authorization": basic("sandbox-client", "sandbox-secret"),
                "Accept": "application/json",
            },
            form("x", grant_type="password"),
            400,
            "UNSUPPORTED_GRANT_TYPE",
        ),
        (
            {
                "Authorization": basic("sandbox-client", "sandbox-secret"),
                "Accept": "application/json",
            },
            form("x", scope="other"),
            400,
            "INVALID_SCOPE",
        ),
        (
            {
                "Authorization": basic("sandbox-client", "sandbox-secret"),
                "Accept": "application/json",
            },
            form("not-a-jwt"),
            401,
            "INVALID_GRANT",
        ),
        (
            {"Authorization": basic("sandbox-client", "sandbox-secret"), "Accept": "text/html"},
            form("x"),
            406,
            "NOT_ACCEPTABLE",
        ),
    ],
)
async def test_token_endpoint_errors_carry_all_four_fields(
    predefined: RawClient, headers: dict[str, str], data: dict[str, str], status: int, code: str
) -> None:
    reply = await predefined.request("POST", TOKEN_PATH, headers=headers, data=data)
    assert (reply.status, reply.codes) == (status, [code])
    _entries_complete(reply)
