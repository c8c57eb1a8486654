"""client.request(), with_response and the hooks' headers against a fake server over real HTTP."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from aiohttp import web

from payments_async import (
    ConfigurationError,
    Credentials,
    Hooks,
    NotFoundError,
    OutcomeUnknownError,
    PaymentsClient,
    RateLimitedError,
    RawResponse,
    RequestEvent,
    RetryPolicy,
    ServiceProfile,
    Timeout,
    ValidationError,
)
from payments_async._telemetry import id_routes, url_template
from tests.factories import credit_transfer
from tests.support.http_servers import Handler, Serve

TOKEN_BODY = {"access_token": "tok-1", "token_type": "bearer", "expires_in": 3600}
PACS004 = "/payments/pacs004/v09"
EDITION_READ = "/p/pacs002/v10"


async def _token(request: web.Request) -> web.Response:
    await request.read()
    return web.json_response(TOKEN_BODY)


class Recorder:
    """A route that answers from a list of (status, headers) and keeps what it received."""

    def __init__(self, *answers: tuple[int, dict[str, str]], body: Any = None) -> None:
        self.answers = list(answers)
        self.body = body if body is not None else {"paymentsServiceId": "PS-9"}
        self.seen: list[tuple[dict[str, str], bytes]] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append((dict(request.headers), await request.read()))
        status, headers = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if status >= 400:
            envelope = {"errors": [{"code": "X-1", "message": "refused"}]}
            return web.json_response(envelope, status=status, headers=headers)
        return web.json_response(self.body, status=status, headers=headers)


def _client(url: str, credentials: Credentials | None = None, **kwargs: Any) -> PaymentsClient:
    kwargs.setdefault("retry", RetryPolicy.for_testing(attempts=3))
    kwargs.setdefault("timeout", Timeout(total=5))
    return PaymentsClient(credentials or Credentials.sandbox(), base_url=url, **kwargs)


async def _serve(serve: Serve, routes: dict[tuple[str, str], Handler]) -> str:
    return await serve({("POST", "/oauth/token"): _token, **routes})


def _claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))  # type: ignore[no-any-return]


# --- request(): the same pipeline as the four operations ------------------------------------


async def test_an_idempotent_post_is_retried_with_the_same_bytes_and_an_sca_over_them(
    serve: Serve, rsa_credentials: Credentials
) -> None:
    route = Recorder((503, {}), (201, {"X-RateLimit-Remaining": "41"}))
    url = await _serve(serve, {("POST", PACS004): route.handle})
    body = {"grpHdr": {"msgId": "RTR-1"}, "rtrdIntrBkSttlmAmt": Decimal("10.50")}
    async with _client(url, rsa_credentials) as client:
        response = await client.request("POST", PACS004, json=body, idempotency_id="RTR-1")
    assert isinstance(response, RawResponse)
    assert (response.status, response.attempts) == (201, 2)
    assert response.json() == {"paymentsServiceId": "PS-9"}
    assert response.headers["x-ratelimit-remaining"] == "41"
    assert len(response.request_id) == 32
    (first_headers, first), (second_headers, second) = route.seen
    assert first == second
    assert b'"rtrdIntrBkSttlmAmt":10.50' in first  # money as a JSON number
    for headers, sent in route.seen:
        claims = _claims(headers["sca-token"])
        assert claims["hd"] == base64.b64encode(hashlib.sha256(sent).digest()).decode()
        assert claims["payment_id"] == "RTR-1"
        assert headers["Authorization"] == "Bearer tok-1"
        assert headers["X-Service-Client-Id"] == "test-client"
        assert headers["Content-Type"] == "application/json"
    # Two sends of one call: one request id, two single-use SCA tokens.
    assert first_headers["X-Request-ID"] == second_headers["X-Request-ID"] == response.request_id
    assert first_headers["sca-token"] != second_headers["sca-token"]


async def test_content_is_sent_byte_for_byte(serve: Serve, rsa_credentials: Credentials) -> None:
    route = Recorder((200, {}))
    url = await _serve(serve, {("POST", PACS004): route.handle})
    exact = b'{ "b" : 1,  "a":2 }'
    async with _client(url, rsa_credentials) as client:
        await client.request("POST", PACS004, content=exact)
    headers, sent = route.seen[0]
    assert sent == exact
    assert (
        _claims(headers["sca-token"])["hd"]
        == base64.b64encode(hashlib.sha256(exact).digest()).decode()
    )


async def test_a_post_without_idempotency_id_is_sent_once_and_its_outcome_is_unknown(
    serve: Serve,
) -> None:
    route = Recorder((503, {}))
    url = await _serve(serve, {("POST", PACS004): route.handle})
    async with _client(url) as client:
        with pytest.raises(OutcomeUnknownError) as info:
            await client.request("POST", PACS004, json={"a": 1})
    assert len(route.seen) == 1
    err = info.value
    assert (err.method, err.path, err.status, err.attempt) == ("POST", PACS004, 503, 1)
    assert err.message_id == ""
    assert "idempotency_id" in str(err)


async def test_an_idempotent_post_whose_retries_run_out_is_unknown(serve: Serve) -> None:
    route = Recorder((503, {}))
    url = await _serve(serve, {("POST", PACS004): route.handle})
    async with _client(url) as client:
        with pytest.raises(OutcomeUnknownError) as info:
            await client.request("POST", PACS004, json={"a": 1}, idempotency_id="M-1")
    assert len(route.seen) == 3
    assert info.value.message_id == "M-1"
    assert len({sent for _, sent in route.seen}) == 1


async def test_a_get_is_retried_and_raises_the_typed_error(serve: Serve) -> None:
    route = Recorder((503, {}), (404, {}))
    url = await _serve(serve, {("GET", "/payments/camt056/v08/{id}"): route.handle})
    async with _client(url) as client:
        with pytest.raises(NotFoundError) as info:
            await client.request("GET", "/payments/camt056/v08/PS-1")
    assert len(route.seen) == 2
    assert info.value.codes == ("X-1",)
    assert (info.value.method, info.value.path, info.value.attempt) == (
        "GET",
        "/payments/camt056/v08/PS-1",
        2,
    )
    headers, sent = route.seen[0]
    assert sent == b""
    assert "sca-token" not in headers
    assert "Content-Type" not in headers


async def test_sca_false_sends_no_sca_token(serve: Serve) -> None:
    route = Recorder((200, {}))
    url = await _serve(serve, {("PUT", "/things/1"): route.handle})
    async with _client(url) as client:
        response = await client.request("put", "/things/1", json=[1], sca=False)
    assert response.status == 200
    assert "sca-token" not in route.seen[0][0]


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda c: c.request("TRACE", "/a"), "method"),
        (lambda c: c.request(b"GET", "/a"), "method"),
        (lambda c: c.request("GET", "https://evil.example/a"), "path"),
        (lambda c: c.request("GET", "//evil.example/a"), "path"),
        (lambda c: c.request("GET", "payments/x"), "path"),
        (lambda c: c.request("GET", "/payments/../oauth/token"), "path"),
        (lambda c: c.request("GET", "/payments/%2e%2e/x"), "path"),
        (lambda c: c.request("GET", "/a?b=1"), "path"),
        (lambda c: c.request("GET", "/a b"), "path"),
        (lambda c: c.request("POST", "/oauth/token", json={}), "path"),
        (lambda c: c.request("POST", "/a", json={}, content=b"{}"), "$"),
        (lambda c: c.request("POST", "/a", content="{}"), "$"),
        (lambda c: c.request("POST", "/a", json=object()), "$"),
        (lambda c: c.request("GET", "/a", json={"a": 1}), "$"),
        (lambda c: c.request("POST", "/a", json={}, idempotency_id=""), "idempotency_id"),
        (lambda c: c.request("DELETE", "/a", idempotency_id="M-1"), "idempotency_id"),
    ],
)
async def test_a_bad_request_is_refused_before_sending(
    serve: Serve, call: Callable[[PaymentsClient], Any], field: str
) -> None:
    sent: list[str] = []

    async def anything(request: web.Request) -> web.Response:
        sent.append(request.path)
        return web.json_response({})

    url = await serve({("*", "/{tail:.*}"): anything})
    async with _client(url) as client:
        with pytest.raises(ValidationError) as info:
            await call(client)
    assert info.value.paths == (field,)
    assert sent == []


# --- response metadata: with_response and the hooks ----------------------------------------


async def test_with_response_gives_the_answer_beside_the_result_without_cookies(
    serve: Serve,
) -> None:
    async def pacs008(request: web.Request) -> web.Response:
        msg_id = json.loads(await request.read())["fitoFICstmrCdtTrf"]["grpHdr"]["msgId"]
        data = {"paymentsServiceId": "PS-1", "paymentId": msg_id, "status": "PENDING"}
        response = web.json_response({"data": data}, status=201)
        response.headers["X-Correlation-Id"] = "corr-7"
        response.set_cookie("session", "s3cret")
        return response

    url = await _serve(serve, {("POST", "/payments/pacs008/v10"): pacs008})
    async with _client(url) as client:
        payment = credit_transfer()
        submission, response = await client.with_response.submit_credit_transfer(payment)
        plain = await client.submit_credit_transfer(payment)
    assert submission.payments_service_id == plain.payments_service_id == "PS-1"
    assert (response.status, response.attempts) == (201, 1)
    assert response.request_id == submission.request_id
    assert response.headers["x-correlation-id"] == "corr-7"
    assert "Date" in response.headers
    assert response.elapsed > 0
    # A session cookie is a secret: not in the headers, whatever the spelling.
    assert "Set-Cookie" not in response.headers
    assert "set-cookie" not in {name.lower() for name in response.headers}
    assert response.headers.getall("Set-Cookie") == []
    with pytest.raises(KeyError):
        response.headers["SET-COOKIE"]
    assert "s3cret" not in repr(response.headers)


async def test_with_response_on_reads(serve: Serve) -> None:
    async def camt029(request: web.Request) -> web.Response:
        body = {"rsltnOfInvstgtn": {"assgnmt": {"id": "A-1"}, "sts": {"conf": "RJCR"}}}
        return web.json_response(body, headers={"X-RateLimit-Remaining": "3"})

    url = await _serve(serve, {("GET", "/payments/camt029/v09/{id}"): camt029})
    async with _client(url) as client:
        resolution, response = await client.with_response.get_cancellation_outcome("PS-1")
    assert resolution.rsltn_of_invstgtn is not None
    assert response.headers["X-RateLimit-Remaining"] == "3"
    assert response.status == 200


async def test_hooks_see_retry_after_and_rate_limit_headers(serve: Serve) -> None:
    route = Recorder(
        (429, {"Retry-After": "0", "X-RateLimit-Limit": "100"}), (200, {"X-RateLimit-Limit": "100"})
    )
    url = await _serve(serve, {("GET", "/payments/pacs028/v03/{id}"): route.handle})
    events: list[RequestEvent] = []
    retries: list[RequestEvent] = []
    hooks = Hooks(on_request=events.append, on_retry=retries.append)
    async with _client(url, hooks=hooks) as client:
        response = await client.request("GET", "/payments/pacs028/v03/PS-1")
    assert response.attempts == 2
    calls = [e for e in events if e.kind == "request"]
    assert [e.status for e in calls] == [429, 200]
    assert calls[0].headers is not None
    assert calls[0].headers["retry-after"] == "0"
    assert calls[0].headers["X-RateLimit-Limit"] == "100"
    assert isinstance(retries[0].error, RateLimitedError)
    token_events = [e for e in events if e.kind == "token"]
    assert token_events
    assert token_events[0].headers is not None


# --- the service profile --------------------------------------------------------------------


async def test_the_client_sends_to_the_profiles_paths_and_header(serve: Serve) -> None:
    profile = ServiceProfile(pacs002_path="/p/pacs002/v10", client_id_header="X-Client-Id")
    seen: list[str] = []

    async def pacs002(request: web.Request) -> web.Response:
        seen.append(request.headers.get("X-Client-Id", "missing"))
        assert "X-Service-Client-Id" not in request.headers
        body = {"fitoFIPmtStsRpt": {"grpHdr": {"msgId": "S-1"}, "txInfAndSts": []}}
        return web.json_response(body)

    url = await _serve(serve, {("GET", "/p/pacs002/v10/{id}"): pacs002})
    async with _client(url, profile=profile) as client:
        assert client.profile is profile
        await client.get_credit_transfer_status("PS-1")
    assert seen == [Credentials.sandbox().client_id]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"pacs008_path": "payments/pacs008/v08"},
        {"pacs008_path": "/payments/pacs008/v08/"},
        {"pacs008_path": "/payments/../v08"},
        {"pacs008_path": "/payments//v08"},
        {"pacs008_path": "https://evil.example/x"},
        {"pacs008_path": "/oauth/token"},
        {"pacs002_path": "/payments/camt029/v09"},
        {"client_id_header": "Authorization"},
        {"client_id_header": "sca-token"},
        {"client_id_header": "X Client"},
        {"client_id_header": ""},
    ],
)
def test_a_profile_refuses_what_the_client_cannot_send(kwargs: dict[str, str]) -> None:
    with pytest.raises(ConfigurationError):
        ServiceProfile(**kwargs)


def test_a_profile_from_settings() -> None:
    profile = ServiceProfile.parse(
        ["pacs008_path=/payments/pacs008/v08", " client_id_header = X-Client-Id "]
    )
    assert profile == ServiceProfile(
        pacs008_path="/payments/pacs008/v08", client_id_header="X-Client-Id"
    )
    assert ServiceProfile.parse([]) == ServiceProfile()
    assert ServiceProfile().pacs008_path == "/payments/pacs008/v10"
    with pytest.raises(ConfigurationError, match="no such profile field: pacs009_path"):
        ServiceProfile.parse(["pacs009_path=/x"])
    with pytest.raises(ConfigurationError, match="field=value"):
        ServiceProfile.parse(["pacs008_path"])


def test_the_client_refuses_a_profile_of_another_type() -> None:
    with pytest.raises(ConfigurationError, match="profile"):
        PaymentsClient(Credentials.sandbox(), base_url="http://127.0.0.1:9", profile={})  # type: ignore[arg-type]


def test_span_routes_follow_the_profile() -> None:
    routes = id_routes(EDITION_READ, "/p/camt029/v08")
    assert url_template(f"{EDITION_READ}/PS-1", routes) == f"{EDITION_READ}/{{paymentsServiceId}}"
    assert url_template("/payments/pacs002/v12/PS-1", routes) == "/payments/pacs002/v12/PS-1"
    assert url_template("/payments/pacs002/v12/PS-1") == "/payments/pacs002/v12/{paymentsServiceId}"
