"""PaymentsClient against a mocked transport (aioresponses): pipeline, retries, error mapping."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
from aioresponses import CallbackResult, aioresponses
from yarl import URL

from payments_async import (
    ApiError,
    AuthenticationError,
    Camt056,
    ConfigurationError,
    Credentials,
    InvalidResponseError,
    Limits,
    NotFoundError,
    Outcome,
    OutcomeUnknownError,
    Pacs008,
    PaymentsClient,
    PaymentsError,
    PermissionDeniedError,
    PollPolicy,
    PollTimeoutError,
    RateLimitedError,
    RetryPolicy,
    ServerError,
    Timeout,
    TransportError,
    ValidationError,
    _polling,
    build_cancellation,
    build_credit_transfer,
)
from payments_async.iso20022 import encode

BASE = "http://127.0.0.1:9"
TOKEN_URL = f"{BASE}/oauth/token"
PACS008_URL = f"{BASE}/payments/pacs008/v10"
CAMT056_URL = f"{BASE}/payments/camt056/v08"
CAMT029 = re.compile(rf"^{re.escape(BASE)}/payments/camt029/v09/.*$")
PACS002 = re.compile(rf"^{re.escape(BASE)}/payments/pacs002/v12/.*$")
TOKEN_BODY = {"access_token": "tok-1", "token_type": "bearer", "expires_in": 3600}
SUBMISSION = {
    "data": {
        "paymentsServiceId": "PS-1",
        "paymentId": "MSG-1",
        "status": "PENDING",
        "creationDateTime": "2026-11-21T10:00:00.000",
    }
}


def _echo(data: Any) -> dict[str, Any]:
    """SUBMISSION with ``paymentId`` echoing the id the request carried, as the service does."""
    body = json.loads(data)
    sent = body.get("fitoFICstmrCdtTrf", {}).get("grpHdr", {}).get("msgId")
    sent = sent or body.get("fitoFIPmtCxlReq", {}).get("assgnmt", {}).get("id")
    return {"data": {**SUBMISSION["data"], "paymentId": sent}}


def _stored(status: int = 201) -> Any:
    """An aioresponses callback answering ``status`` with the echoed submission result."""

    def answer(url: URL, **kwargs: Any) -> CallbackResult:
        return CallbackResult(status=status, payload=_echo(kwargs["data"]))

    return answer


def _transfer() -> Pacs008:
    return build_credit_transfer(
        debtor_name="Alice Example",
        debtor_iban="DE89370400440532013000",
        debtor_agent_id="37040044",
        creditor_name="Bob Example",
        creditor_iban="FR1420041010050500013M02606",
        creditor_agent_id="20041010",
        amount=Decimal("12.30"),
        remittance="Invoice 42",
    )


def _cancellation() -> Camt056:
    return build_cancellation(
        original_end_to_end_id="E2E-0001",
        amount=Decimal("12.30"),
        creditor_agent_bic="BNPAFRPPXXX",
        creditor_iban="FR1420041010050500013M02606",
        assigner_bic="COBADEFFXXX",
        assignee_bic="BNPAFRPPXXX",
        reason="DUPL",
    )


def _resolution(conf: str, tx: str, reason: str | None = None) -> dict[str, Any]:
    tx_inf: dict[str, Any] = {"cxlStsId": "CXL-1", "txCxlSts": tx}
    if reason:
        tx_inf["cxlStsRsnInf"] = [{"rsn": {"cd": reason}, "addtlInf": ["already paid", None]}]
    return {
        "rsltnOfInvstgtn": {
            "assgnmt": {"id": "A-1"},
            "sts": {"conf": conf},
            "cxlDtls": [{"txInfAndSts": [tx_inf]}],
        }
    }


@pytest.fixture
def mocked() -> Iterator[aioresponses]:
    with aioresponses() as m:
        m.post(TOKEN_URL, payload=TOKEN_BODY, repeat=True)
        yield m


@pytest.fixture
async def client() -> AsyncIterator[PaymentsClient]:
    async with PaymentsClient(
        Credentials.sandbox(),
        base_url=BASE,
        retry=RetryPolicy.for_testing(attempts=3),
        poll=PollPolicy(initial=0.001, maximum=0.002, not_found_grace=0.05),
    ) as c:
        yield c


def _calls(m: aioresponses, method: str, url: str) -> list[Any]:
    return list(m.requests.get((method, URL(url)), []))


async def test_submit_sends_the_signed_bytes_once_encoded(
    mocked: aioresponses, client: PaymentsClient
) -> None:
    mocked.post(PACS008_URL, callback=_stored(201))
    transfer = _transfer()
    sub = await client.submit_credit_transfer(transfer)

    assert sub.created
    assert not sub.replayed
    assert sub.attempts == 1
    assert sub.payments_service_id == "PS-1"
    assert sub.message_id == transfer.message_id
    (call,) = _calls(mocked, "POST", PACS008_URL)
    body = call.kwargs["data"]
    assert isinstance(body, bytes)  # never json=: the exact bytes are what was hashed
    assert body == encode(transfer)
    headers = call.kwargs["headers"]
    assert headers["Authorization"] == "Bearer tok-1"
    assert headers["X-Service-Client-Id"] == "sandbox-client"
    assert headers["Content-Type"] == "application/json"
    assert headers["Accept"] == "application/json"
    assert headers["sca-token"]
    assert re.fullmatch(r"[0-9a-f]{32}", headers["X-Request-ID"])


async def test_signed_mode_puts_the_body_hash_in_the_sca_token(
    mocked: aioresponses, rsa_credentials: Credentials
) -> None:
    mocked.post(CAMT056_URL, callback=_stored(201))
    async with PaymentsClient(rsa_credentials, base_url=BASE) as c:
        await c.request_cancellation(_cancellation())
    (call,) = _calls(mocked, "POST", CAMT056_URL)
    token = call.kwargs["headers"]["sca-token"]
    payload = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    expected = base64.b64encode(hashlib.sha256(call.kwargs["data"]).digest()).decode()
    assert payload["hd"] == expected


async def test_retry_resends_same_bytes_and_reports_replay(
    mocked: aioresponses, client: PaymentsClient
) -> None:
    mocked.post(CAMT056_URL, status=503)
    mocked.post(CAMT056_URL, callback=_stored(200))
    sub = await client.request_cancellation(_cancellation())

    assert not sub.created
    assert sub.replayed
    assert sub.attempts == 2
    first, second = _calls(mocked, "POST", CAMT056_URL)
    assert first.kwargs["data"] == second.kwargs["data"]
    assert first.kwargs["headers"]["sca-token"] == second.kwargs["headers"]["sca-token"]
    assert first.kwargs["headers"]["X-Request-ID"] == second.kwargs["headers"]["X-Request-ID"]


async def test_5xx_until_exhausted_is_outcome_unknown(
    mocked: aioresponses, client: PaymentsClient
) -> None:
    mocked.post(CAMT056_URL, status=500, repeat=True)
    cancellation = _cancellation()
    with pytest.raises(OutcomeUnknownError) as info:
        await client.request_cancellation(cancellation)
    assert info.value.message_id == cancellation.message_id
    assert info.value.attempt == 3
    # The HTTP requests of this one call, named so: not a bulk row's submissions.
    assert "outcome unknown after 3 HTTP attempt(s)" in str(info.value)
    assert isinstance(info.value.__cause__, ServerError)
    assert len(_calls(mocked, "POST", CAMT056_URL)) == 3


async def test_dropped_connection_on_post_is_outcome_unknown(
    mocked: aioresponses, client: PaymentsClient
) -> None:
    mocked.post(CAMT056_URL, exception=aiohttp.ServerDisconnectedError(), repeat=True)
    with pytest.raises(OutcomeUnknownError) as info:
        await client.request_cancellation(_cancellation())
    assert isinstance(info.value.__cause__, TransportError)


async def test_connection_refused_is_a_plain_transport_error(
    mocked: aioresponses, client: PaymentsClient
) -> None:
    refused = aiohttp.ClientConnectorError(
        aiohttp.client_reqrep.ConnectionKey("127.0.0.1", 9, False, True, None, None, None),
        OSError(111, "Connection refused"),
    )
    mocked.post(CAMT056_URL, exception=refused, repeat=True)
    with pytest.raises(TransportError) as info:
        await client.request_cancellation(_cancellation())
    assert not isinstance(info.value, OutcomeUnknownError)
    assert info.value.request_sent is False


@pytest.mark.parametrize(
    ("status", "error"),
    [(400, ApiError), (403, PermissionDeniedError), (404, NotFoundError), (409, ApiError)],
)
async def test_client_errors_are_not_retried(
    mocked: aioresponses, client: PaymentsClient, status: int, error: type[ApiError]
) -> None:
    envelope = {"errors": [{"code": "E42", "message": "nope", "level": "ERROR"}]}
    mocked.post(PACS008_URL, status=status, payload=envelope, repeat=True)
    with pytest.raises(error) as info:
        await client.submit_credit_transfer(_transfer())
    assert len(_calls(mocked, "POST", PACS008_URL)) == 1
    err = info.value
    assert err.status == status
    assert err.codes == ("E42",)
    assert err.method == "POST"
    assert err.path == "/payments/pacs008/v10"
    assert err.request_id
    assert str(err).startswith(f"POST /payments/pacs008/v10 -> {status}")


async def test_429_with_retry_after_is_retried(
    mocked: aioresponses, client: PaymentsClient
) -> None:
    mocked.post(CAMT056_URL, status=429, headers={"Retry-After": "1"})
    mocked.post(CAMT056_URL, callback=_stored(201))
    sub = await client.request_cancellation(_cancellation())
    assert sub.created
    assert sub.attempts == 2


async def test_429_exhausted_on_get_is_rate_limited(
    mocked: aioresponses, client: PaymentsClient
) -> None:
    mocked.get(CAMT029, status=429, headers={"Retry-After": "3"}, repeat=True)
    with pytest.raises(RateLimitedError) as info:
        await client.get_cancellation_outcome("PS-1")
    assert info.value.retry_after == 3.0


async def test_401_refreshes_the_token_once_then_succeeds() -> None:
    with aioresponses() as m:
        m.post(TOKEN_URL, payload={**TOKEN_BODY, "access_token": "old"})
        m.post(TOKEN_URL, payload={**TOKEN_BODY, "access_token": "new"})
        m.get(CAMT029, status=401)
        m.get(CAMT029, payload=_resolution("ACCC", "ACCR"))
        async with PaymentsClient(Credentials.sandbox(), base_url=BASE) as c:
            res = await c.get_cancellation_outcome("PS-1")
        assert res is not None
        calls = [c for (meth, url), cs in m.requests.items() if meth == "GET" for c in cs]
        assert [c.kwargs["headers"]["Authorization"] for c in calls] == [
            "Bearer old",
            "Bearer new",
        ]
        assert len(m.requests[("POST", URL(TOKEN_URL))]) == 2


async def test_401_twice_is_authentication_error_not_a_loop(mocked: aioresponses) -> None:
    mocked.get(CAMT029, status=401, repeat=True)
    async with PaymentsClient(
        Credentials.sandbox(), base_url=BASE, retry=RetryPolicy.for_testing()
    ) as c:
        with pytest.raises(AuthenticationError):
            await c.get_cancellation_outcome("PS-1")
    gets = [c for (meth, _), cs in mocked.requests.items() if meth == "GET" for c in cs]
    assert len(gets) == 2


@pytest.mark.parametrize(
    ("status", "body", "content_type", "error"),
    [
        (502, b"<html><body>Bad gateway</body></html>", "text/html", ServerError),
        (200, b"<html>maintenance</html>", "text/html", InvalidResponseError),
        (200, b'{"rsltnOfInvstgtn": ', "application/json", InvalidResponseError),
        (
            200,
            b'{"rsltnOfInvstgtn": {"sts": {"conf": 7}}}',
            "application/json",
            InvalidResponseError,
        ),
        (200, b"[1, 2, 3]", "application/json", InvalidResponseError),
        (418, b"teapot", "text/plain", ApiError),
    ],
)
async def test_malformed_responses_give_typed_errors(
    mocked: aioresponses,
    client: PaymentsClient,
    status: int,
    body: bytes,
    content_type: str,
    error: type[PaymentsError],
) -> None:
    mocked.get(CAMT029, status=status, body=body, content_type=content_type, repeat=True)
    with pytest.raises(error) as info:
        await client.get_cancellation_outcome("PS-1")
    assert info.value.status == status
    assert info.value.request_id
    assert "maintenance" not in str(info.value)  # bodies are never echoed


async def test_unreadable_success_body_on_post_is_outcome_unknown(
    mocked: aioresponses, client: PaymentsClient
) -> None:
    mocked.post(PACS008_URL, status=201, body=b"{}", content_type="application/json")
    with pytest.raises(OutcomeUnknownError) as info:
        await client.submit_credit_transfer(_transfer())
    assert info.value.status == 201


async def test_oversized_body_is_refused(mocked: aioresponses) -> None:
    mocked.get(CAMT029, status=200, body=b"x" * 2048, content_type="application/json")
    async with PaymentsClient(
        Credentials.sandbox(),
        base_url=BASE,
        limits=Limits(response_bytes=1024),
        retry=RetryPolicy.for_testing(attempts=1),
    ) as c:
        with pytest.raises(InvalidResponseError, match="limit"):
            await c.get_cancellation_outcome("PS-1")


async def test_invalid_message_is_refused_before_sending(
    mocked: aioresponses, client: PaymentsClient
) -> None:
    transfer = _transfer()
    tx = transfer.fito_fi_cstmr_cdt_trf.cdt_trf_tx_inf[0]
    tx.cdtr_acct.id.othr.id = "FR0000000000000000000000000"  # fails mod-97
    with pytest.raises(ValidationError) as info:
        await client.submit_credit_transfer(transfer)
    assert any("cdtrAcct" in p for p in info.value.paths)
    assert _calls(mocked, "POST", PACS008_URL) == []
    assert _calls(mocked, "POST", TOKEN_URL) == []


@pytest.mark.parametrize("bad_id", ["", "../admin", "a/b", "x" * 200, "id with space", "é"])
async def test_ids_that_would_change_the_path_are_refused(
    mocked: aioresponses, client: PaymentsClient, bad_id: str
) -> None:
    with pytest.raises(ValidationError):
        await client.get_cancellation_outcome(bad_id)
    assert _calls(mocked, "POST", TOKEN_URL) == []


async def test_wait_polls_until_final_and_classifies(
    mocked: aioresponses, client: PaymentsClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The wait's clock stands still: the first 404 is within the 0.05 s grace however
    # late a loaded machine reads it (the token fetch before it once took longer).
    # Its deadlines, handed to the reads, are still on the real clock: 5 s from now.
    now = time.monotonic()
    monkeypatch.setattr(_polling, "time", SimpleNamespace(monotonic=lambda: now))
    mocked.get(CAMT029, status=404)
    mocked.get(CAMT029, payload=_resolution("PDCR", "PDCR"))
    mocked.get(CAMT029, payload=_resolution("RJTC", "RJCR", "CUST"))
    outcome = await client.wait_for_cancellation_outcome("PS-1", timeout=5)
    assert outcome.outcome is Outcome.REJECTED
    assert outcome.rejected
    assert not outcome.accepted
    assert outcome.return_request_needed
    assert "pacs.004" in outcome.message
    assert outcome.reason_codes == ("CUST",)
    assert outcome.reason_texts == ("already paid",)
    gets = [c for (meth, _), cs in mocked.requests.items() if meth == "GET" for c in cs]
    assert len(gets) == 3


async def test_wait_accepted(mocked: aioresponses, client: PaymentsClient) -> None:
    mocked.get(CAMT029, payload=_resolution("CNCL", "ACCR"))
    outcome = await client.wait_for_cancellation_outcome("PS-1", timeout=5)
    assert outcome.accepted
    assert not outcome.return_request_needed
    assert outcome.status == "CNCL"


async def test_wait_times_out_with_the_last_status(
    mocked: aioresponses, client: PaymentsClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The wait's clock is driven: its deadline passes as the first answer is read, never
    # sooner (a real 0.05 s deadline on a loaded machine passed during the token fetch).
    late = [0.0]
    monkeypatch.setattr(
        _polling, "time", SimpleNamespace(monotonic=lambda: time.monotonic() + late[0])
    )

    def answer(url: Any, **kwargs: Any) -> CallbackResult:
        late[0] = 3600.0
        return CallbackResult(payload=_resolution("PDCR", "PDCR"))

    mocked.get(CAMT029, callback=answer, repeat=True)
    with pytest.raises(PollTimeoutError) as info:
        await client.wait_for_cancellation_outcome("PS-1", timeout=60)
    assert info.value.last_status == "PDCR"
    assert info.value.payments_service_id == "PS-1"


async def test_wait_404_after_grace_is_not_found(
    mocked: aioresponses, client: PaymentsClient
) -> None:
    mocked.get(CAMT029, status=404, repeat=True)
    with pytest.raises(NotFoundError):
        await client.wait_for_cancellation_outcome("PS-1", timeout=5)


async def test_wait_for_payment_status(mocked: aioresponses, client: PaymentsClient) -> None:
    mocked.get(PACS002, payload={"fitoFIPmtStsRpt": {"txInfAndSts": {"txSts": "PEND"}}})
    mocked.get(
        PACS002,
        payload={"fIToFIPmtStsRpt": {"txInfAndSts": [{"txSts": "ACCC"}]}},
    )
    status = await client.wait_for_payment_status("PS-1", timeout=5)
    assert status.outcome is Outcome.ACCEPTED
    assert status.status == "ACCC"


@pytest.mark.parametrize(
    "url",
    ["http://payments.example.com", "ftp://127.0.0.1", "payments.example.com", "http://10.0.0.1"],
)
def test_base_url_must_be_https_off_loopback(url: str) -> None:
    with pytest.raises(ConfigurationError):
        PaymentsClient(Credentials.sandbox(), base_url=url)


def test_https_and_loopback_http_are_accepted() -> None:
    for url in ("https://payments.example.com/api/", "http://127.0.0.1:8080", "http://[::1]:80"):
        PaymentsClient(Credentials.sandbox(), base_url=url)


async def test_hooks_see_every_attempt_and_retry(mocked: aioresponses) -> None:
    from payments_async import Hooks, RequestEvent

    requests: list[RequestEvent] = []
    retries: list[RequestEvent] = []
    mocked.post(CAMT056_URL, status=502)
    mocked.post(CAMT056_URL, callback=_stored(201))
    async with PaymentsClient(
        Credentials.sandbox(),
        base_url=BASE,
        retry=RetryPolicy.for_testing(),
        hooks=Hooks(on_request=requests.append, on_retry=retries.append),
    ) as c:
        await c.request_cancellation(_cancellation())
    assert [(e.kind, e.status) for e in requests] == [
        ("token", 200),
        ("request", 502),
        ("request", 201),
    ]
    assert [e.attempt for e in requests] == [1, 1, 2]
    assert requests[0].path == "/oauth/token"
    assert len(retries) == 1
    assert retries[0].status == 502
    assert retries[0].sleep == 0.0  # for_testing never sleeps
    assert retries[0].elapsed == requests[1].elapsed  # the attempt's duration, not the sleep


def test_repr_shows_no_secret() -> None:
    c = PaymentsClient(Credentials.sandbox(), base_url=BASE)
    assert "sandbox-secret" not in repr(c)


async def test_callback_exceptions_never_escape_untyped(
    mocked: aioresponses, client: PaymentsClient
) -> None:
    def explode(url: URL, **kwargs: Any) -> CallbackResult:
        raise aiohttp.ClientPayloadError("truncated")

    mocked.get(CAMT029, callback=explode, repeat=True)
    with pytest.raises(TransportError):
        await client.get_cancellation_outcome("PS-1")


async def test_cancelling_a_waiter_stops_polling_at_once(mocked: aioresponses) -> None:
    polled_twice = asyncio.Event()

    def pending(url: URL, **kwargs: Any) -> CallbackResult:
        if len(_gets(mocked)) >= 2:
            polled_twice.set()
        return CallbackResult(payload=_resolution("PDCR", "PDCR"))

    mocked.get(CAMT029, callback=pending, repeat=True)
    async with PaymentsClient(
        Credentials.sandbox(), base_url=BASE, poll=PollPolicy(initial=0.02, maximum=0.02)
    ) as c:
        task = asyncio.create_task(c.wait_for_cancellation_outcome("PS-1", timeout=30))
        await asyncio.wait_for(polled_twice.wait(), 20)  # however loaded the machine
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        polled = len(_gets(mocked))
        assert polled >= 2
        await asyncio.sleep(0.1)
        assert len(_gets(mocked)) == polled  # nothing polls after the cancellation
    assert not [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]


def _gets(m: aioresponses) -> list[Any]:
    return [c for (meth, _), cs in m.requests.items() if meth == "GET" for c in cs]


async def test_every_attempt_carries_a_fresh_sca_token_over_the_same_bytes(
    mocked: aioresponses, rsa_credentials: Credentials
) -> None:
    sent: list[tuple[str, bytes]] = []

    def record(status: int) -> Any:
        def callback(url: URL, **kwargs: Any) -> CallbackResult:
            sent.append((kwargs["headers"]["sca-token"], kwargs["data"]))
            return CallbackResult(
                status=status, payload=_echo(kwargs["data"]) if status < 300 else None
            )

        return callback

    mocked.post(TOKEN_URL, payload=TOKEN_BODY, repeat=True)
    mocked.post(CAMT056_URL, callback=record(502))
    mocked.post(CAMT056_URL, callback=record(401))
    mocked.post(CAMT056_URL, callback=record(201))
    async with PaymentsClient(rsa_credentials, base_url=BASE, retry=RetryPolicy.for_testing()) as c:
        sub = await c.request_cancellation(_cancellation())
    assert sub.created
    tokens = [token for token, _ in sent]
    assert len(tokens) == 3
    assert len(set(tokens)) == 3  # single-use tokens: the resend after a 401 too
    assert len({body for _, body in sent}) == 1  # the body bytes never change
    claims = [json.loads(base64.urlsafe_b64decode(t.split(".")[1] + "==")) for t in tokens]
    assert len({c["jti"] for c in claims}) == 3
    assert len({c["nonce"] for c in claims}) == 3
    digest = base64.b64encode(hashlib.sha256(sent[0][1]).digest()).decode()
    assert {c["hd"] for c in claims} == {digest}


@pytest.mark.parametrize(
    "make",
    [
        lambda: Limits(connections=0),
        lambda: Timeout(connect=0),
        lambda: Timeout(read=-1),
        lambda: PaymentsClient(Credentials.sandbox(), base_url=BASE, timeout=5.0),  # type: ignore[arg-type]
        lambda: PaymentsClient(Credentials.sandbox(), base_url=BASE, limits=100),  # type: ignore[arg-type]
    ],
)
def test_nonsense_limits_are_refused(make: Callable[[], object]) -> None:
    with pytest.raises(ConfigurationError):
        make()
