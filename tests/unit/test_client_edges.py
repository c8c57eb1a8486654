"""The client at its edges: where errors come from, unknown outcomes, deadlines
while queueing, borrowed sessions, the retry budget, pickling, hooks, response checks and
configuration checks."""

from __future__ import annotations

import asyncio
import json
import pickle
import re
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aioresponses import CallbackResult, aioresponses

from payments_async import (
    ApiError,
    AuthenticationError,
    Camt056,
    ConfigurationError,
    Credentials,
    Hooks,
    InvalidResponseError,
    Limits,
    NotFoundError,
    Outcome,
    OutcomeUnknownError,
    PaymentsClient,
    PaymentsError,
    PermissionDeniedError,
    PollPolicy,
    PollTimeoutError,
    Problem,
    RateLimitedError,
    RequestEvent,
    RetryBudget,
    RetryPolicy,
    ServerError,
    ServiceErrorDetail,
    SigningError,
    Timeout,
    TransportError,
    ValidationError,
    _polling,
    build_cancellation,
)
from payments_async.bulk import (
    AlreadyRecalledError,
    BulkInputError,
    JournalBusyError,
    JournalError,
    JournalUnavailableError,
    Recall,
    ResultsWriteError,
    RowError,
    RunAbortedError,
    RunControlError,
    RunFinishedError,
    RunNotFoundError,
)
from payments_async.iso20022 import REJECTION_REASONS, decode_pacs008, return_request_needed
from payments_async.notifications import (
    InboxBusyError,
    InboxError,
    InboxFull,
    InboxUnavailableError,
    NotificationRejected,
)
from payments_async.signing import KeySigner
from tests.support.http_servers import Handler, Serve
from tests.support.otel import Otel
from tests.support.tokens import unhurried_token_fetch

BASE = "http://127.0.0.1:9"
TOKEN_URL = f"{BASE}/oauth/token"
CAMT056_URL = f"{BASE}/payments/camt056/v08"
CAMT029 = re.compile(rf"^{re.escape(BASE)}/payments/camt029/v09/.*$")
PACS002 = re.compile(rf"^{re.escape(BASE)}/payments/pacs002/v12/.*$")
TOKEN_BODY = {"access_token": "tok-1", "token_type": "bearer", "expires_in": 3600}
FAST_POLL = PollPolicy(initial=0.001, maximum=0.002, not_found_grace=0.05)


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


def _submission(data: Any, *, echo: str | None = None) -> dict[str, Any]:
    sent = json.loads(data)["fitoFIPmtCxlReq"]["assgnmt"]["id"]
    return {
        "data": {
            "paymentsServiceId": "PS-1",
            "paymentId": sent if echo is None else echo,
            "status": "PENDING",
            "creationDateTime": "2026-11-21T10:00:00.000",
        }
    }


def _answer(status: int, *, echo: str | None = None) -> Any:
    def callback(url: Any, **kwargs: Any) -> CallbackResult:
        return CallbackResult(status=status, payload=_submission(kwargs["data"], echo=echo))

    return callback


def _resolution(conf: str | None, *tx: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "assgnmt": {"id": "A-1"},
        "cxlDtls": [{"txInfAndSts": [{"cxlStsId": "C", "txCxlSts": t} for t in tx]}],
    }
    if conf is not None:
        body["sts"] = {"conf": conf}
    return {"rsltnOfInvstgtn": body}


def _client(**kwargs: Any) -> PaymentsClient:
    kwargs.setdefault("base_url", BASE)
    kwargs.setdefault("retry", RetryPolicy.for_testing(attempts=3))
    kwargs.setdefault("poll", FAST_POLL)
    return PaymentsClient(Credentials.sandbox(), **kwargs)


@pytest.fixture
def mocked() -> Iterator[aioresponses]:
    with aioresponses() as m:
        yield m


def _posts(m: aioresponses, url: str) -> int:
    return sum(len(c) for (meth, u), c in m.requests.items() if meth == "POST" and str(u) == url)


# --- a small fake service over real HTTP on 127.0.0.1 ------------------------------------


async def _token(request: web.Request) -> web.Response:
    await request.read()
    return web.json_response(TOKEN_BODY)


@pytest.fixture
def fake(serve: Serve) -> Serve:
    """``serve`` with a token endpoint that always grants."""

    async def start(routes: dict[tuple[str, str], Handler]) -> str:
        return await serve({("POST", "/oauth/token"): _token, **routes})

    return start


# --- 7. token endpoint failures are token errors, never "outcome unknown" -----------------


async def test_token_endpoint_5xx_raises_the_token_error(mocked: aioresponses) -> None:
    mocked.post(TOKEN_URL, status=503, repeat=True)
    mocked.post(CAMT056_URL, callback=_answer(201), repeat=True)
    # The deadline only has to outlast one mocked attempt (no network): the token fetch
    # gives up when its next backoff would pass it, raising the last answer.
    async with _client(retry=RetryPolicy.for_testing(attempts=3), timeout=Timeout(total=0.2)) as c:
        with pytest.raises(PaymentsError) as info:
            await c.request_cancellation(_cancellation())
    err = info.value
    assert not isinstance(err, OutcomeUnknownError)
    assert isinstance(err, ServerError)
    assert (err.method, err.path, err.status) == ("POST", "/oauth/token", 503)
    assert err.request_id
    assert "/oauth/token -> 503" in str(err)
    assert _posts(mocked, CAMT056_URL) == 0


async def test_garbled_token_answer_raises_the_token_error(mocked: aioresponses) -> None:
    mocked.post(TOKEN_URL, status=200, body=b"<html>hi</html>", repeat=True)
    async with _client() as c:
        with pytest.raises(InvalidResponseError) as info:
            await c.request_cancellation(_cancellation())
    assert not isinstance(info.value, OutcomeUnknownError)
    assert info.value.path == "/oauth/token"
    assert info.value.status == 200


async def test_token_timeout_is_not_outcome_unknown(mocked: aioresponses) -> None:
    mocked.post(TOKEN_URL, exception=TimeoutError(), repeat=True)
    async with _client(retry=RetryPolicy.for_testing(attempts=2), timeout=Timeout(total=0.2)) as c:
        with pytest.raises(TransportError) as info:
            await c.request_cancellation(_cancellation())
    assert not isinstance(info.value, OutcomeUnknownError)
    assert info.value.path == "/oauth/token"


async def test_refused_token_connection_names_the_token_endpoint() -> None:
    async with _client(retry=RetryPolicy.for_testing(attempts=2), timeout=Timeout(total=0.2)) as c:
        with pytest.raises(TransportError) as info:
            await c.request_cancellation(_cancellation())
    assert info.value.path == "/oauth/token"
    assert info.value.request_sent is False


async def test_a_token_failure_after_a_sent_post_stays_outcome_unknown(
    mocked: aioresponses,
) -> None:
    """The first POST got a 503 (it may have been stored); then the token endpoint fails."""
    mocked.post(TOKEN_URL, payload=TOKEN_BODY)
    mocked.post(CAMT056_URL, status=503)
    mocked.post(CAMT056_URL, status=401)  # forces a new token...
    mocked.post(TOKEN_URL, status=200, body=b"garbled", repeat=True)  # ...which fails
    async with _client() as c:
        with pytest.raises(OutcomeUnknownError) as info:
            await c.request_cancellation(_cancellation())
    assert isinstance(info.value.__cause__, InvalidResponseError)
    assert info.value.__cause__.path == "/oauth/token"


# --- 8. unknown outcomes surface promptly, with every raw code ------------------------------


def _gets(m: aioresponses) -> int:
    return sum(len(c) for (meth, _), c in m.requests.items() if meth == "GET")


@pytest.mark.parametrize(
    ("conf", "tx"),
    [("ACCC", ("RJCR",)), ("XXXX", ("PDCR",)), (None, ("ACCR", "RJCR"))],
)
async def test_unclassifiable_camt029_returns_unknown_within_two_polls(
    mocked: aioresponses, conf: str | None, tx: tuple[str, ...]
) -> None:
    mocked.post(TOKEN_URL, payload=TOKEN_BODY, repeat=True)
    mocked.get(CAMT029, payload=_resolution(conf, *tx), repeat=True)
    async with _client(poll=PollPolicy(initial=0.01, maximum=0.01)) as c:
        outcome = await c.wait_for_cancellation_outcome("PS-1", timeout=30)
    assert outcome.outcome is Outcome.UNKNOWN
    assert not outcome.accepted
    assert not outcome.rejected
    assert outcome.status == conf
    assert outcome.tx_statuses == tx
    assert all(code in outcome.message for code in tx)
    assert _gets(mocked) == 2


async def test_unclassifiable_pacs002_returns_unknown_within_two_polls(
    mocked: aioresponses,
) -> None:
    report = {"fitoFIPmtStsRpt": {"txInfAndSts": [{"txSts": "ZZZZ"}]}}
    mocked.post(TOKEN_URL, payload=TOKEN_BODY, repeat=True)
    mocked.get(PACS002, payload=report, repeat=True)
    async with _client(poll=PollPolicy(initial=0.01, maximum=0.01)) as c:
        status = await c.wait_for_payment_status("PS-1", timeout=30)
    assert status.outcome is Outcome.UNKNOWN
    assert status.tx_statuses == ("ZZZZ",)
    assert _gets(mocked) == 2


async def test_poll_timeout_carries_every_code_seen(
    mocked: aioresponses, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The wait's clock is driven: its deadline passes as the second answer is read, never
    # sooner (a real 0.1 s deadline on a loaded machine passed before the second poll).
    late = [0.0]
    monkeypatch.setattr(
        _polling, "time", SimpleNamespace(monotonic=lambda: time.monotonic() + late[0])
    )

    def second(url: Any, **kwargs: Any) -> CallbackResult:
        late[0] = 3600.0
        return CallbackResult(payload=_resolution("PEND", "PDNG"))

    mocked.post(TOKEN_URL, payload=TOKEN_BODY, repeat=True)
    mocked.get(CAMT029, payload=_resolution("PDCR", "PDCR"))
    mocked.get(CAMT029, callback=second)
    async with _client() as c:
        with pytest.raises(PollTimeoutError) as info:
            await c.wait_for_cancellation_outcome("PS-1", timeout=60)
    assert info.value.statuses == ("PDCR", "PEND", "PDNG")
    assert "PDCR, PEND, PDNG" in str(info.value)


# --- 9. every deadline holds while queueing for a connection ------------------------------


async def test_a_waiters_deadline_holds_while_it_queues_for_a_connection(
    fake: Serve,
) -> None:
    release = asyncio.Event()
    holding = asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        holding.set()
        await asyncio.wait_for(release.wait(), 10)
        return web.json_response(_resolution("PDCR", "PDCR"))

    url = await fake({("GET", "/payments/camt029/v09/{id}"): slow})
    policy = RetryPolicy.for_testing(attempts=3)
    async with _client(
        base_url=url, limits=Limits(connections=1), retry=policy, timeout=Timeout(total=30)
    ) as c:
        await c.access_token_lifetime()  # the token first: only the polls compete
        blocker = asyncio.create_task(c.wait_for_cancellation_outcome("PS-A", timeout=20))
        await asyncio.wait_for(holding.wait(), 10)  # the blocker holds the only connection
        start = time.monotonic()
        with pytest.raises(PollTimeoutError):
            await c.wait_for_cancellation_outcome("PS-B", timeout=0.02)
        waited = time.monotonic() - start
        release.set()
        blocker.cancel()
        await asyncio.gather(blocker, return_exceptions=True)
    assert waited < 3  # the blocker holds the only connection for 10 s


# --- 9b. a call's own timeout: the caller's deadline, end to end ------------------------


@pytest.mark.parametrize("traced", [False, True])
async def test_a_submissions_own_timeout_ends_it_as_unknown_long_before_the_policys(
    fake: Serve, traced: bool
) -> None:
    hits: list[int] = []

    async def silent(request: web.Request) -> web.Response:
        await request.read()
        hits.append(1)
        await asyncio.sleep(10)  # the POST arrived: it may be stored, no answer comes
        return web.json_response({})

    url = await fake({("POST", "/payments/camt056/v08"): silent})
    policy = RetryPolicy.for_testing(attempts=3)
    telemetry = Otel().telemetry() if traced else None  # the traced path passes it on too
    async with _client(
        base_url=url, retry=policy, timeout=Timeout(total=30), telemetry=telemetry
    ) as c:
        await c.access_token_lifetime()
        msg = _cancellation()
        start = time.monotonic()
        with pytest.raises(OutcomeUnknownError) as info:
            await c.request_cancellation(msg, timeout=0.15)
        waited = time.monotonic() - start
    assert waited < 3  # the policy alone would have waited 30 s
    assert info.value.message_id == msg.message_id  # resubmit it to learn the outcome
    assert hits  # it was sent: hence "unknown", not "not sent"


async def test_a_calls_timeout_may_be_longer_than_the_policys(
    fake: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The answers (0.8 s) come only within a call's own 5 s, never within the client's
    # 0.3 s. The token fetch, which that 0.3 s would bound too and which a loaded machine
    # did not finish in time, gets a deadline of its own: this test is about the calls.
    unhurried_token_fetch(monkeypatch)

    async def slow_created(request: web.Request) -> web.Response:
        body = await request.read()
        await asyncio.sleep(0.8)
        return web.json_response(_submission(body), status=201)

    async def slow_read(request: web.Request) -> web.Response:
        await asyncio.sleep(0.8)
        return web.json_response(_resolution("CNCL", "CNCL"))

    url = await fake(
        {
            ("POST", "/payments/camt056/v08"): slow_created,
            ("GET", "/payments/camt029/v09/{id}"): slow_read,
        }
    )
    policy = RetryPolicy.for_testing(attempts=1)
    async with _client(base_url=url, retry=policy, timeout=Timeout(total=0.3)) as c:
        await c.access_token_lifetime()
        with pytest.raises(OutcomeUnknownError):  # the client's 0.3 s: too short
            await c.request_cancellation(_cancellation())
        sub = await c.request_cancellation(_cancellation(), timeout=5)
        assert sub.payments_service_id == "PS-1"
        with pytest.raises(TransportError):
            await c.get_cancellation_outcome("PS-1")
        resolution = await c.get_cancellation_outcome("PS-1", timeout=5)
    assert resolution.rsltn_of_invstgtn.sts is not None


async def test_a_calls_own_timeout_object_sets_its_read_timeout(fake: Serve) -> None:
    async def silent(request: web.Request) -> web.Response:
        await asyncio.sleep(10)
        return web.json_response({})

    url = await fake({("GET", "/payments/pacs002/v12/{id}"): silent})
    async with _client(base_url=url, retry=RetryPolicy.for_testing(attempts=1)) as c:
        await c.access_token_lifetime()
        start = time.monotonic()
        with pytest.raises(TransportError, match="timed out waiting for the response"):
            await c.get_credit_transfer_status("PS-1", timeout=Timeout(total=30, read=0.1))
        assert time.monotonic() - start < 3  # the client's read timeout is 30 s


async def test_timeout_token_bounds_a_token_fetch_the_call_waits_for(fake: Serve) -> None:
    requests: list[float] = []

    async def silent_token(request: web.Request) -> web.Response:
        requests.append(time.monotonic())
        await asyncio.sleep(10)
        return web.json_response({})

    url = await fake({("POST", "/oauth/token"): silent_token})  # replaces the granting one
    async with _client(base_url=url, timeout=Timeout(total=30, token=0.3)) as c:
        start = time.monotonic()
        with pytest.raises(TransportError) as info:
            await c.get_credit_transfer_status("PS-1")
        took = time.monotonic() - start
    assert took < 3  # the call's own total is 30 s
    assert info.value.path == "/oauth/token"
    assert len(requests) >= 2  # each token request got a third of it: the fetch retried


async def test_a_reads_own_timeout_holds(
    fake: Serve,
) -> None:
    async def silent(request: web.Request) -> web.Response:
        await asyncio.sleep(10)
        return web.json_response({})

    url = await fake({("GET", "/payments/pacs002/v12/{id}"): silent})
    async with _client(
        base_url=url, retry=RetryPolicy.for_testing(), timeout=Timeout(total=30)
    ) as c:
        await c.access_token_lifetime()
        start = time.monotonic()
        with pytest.raises(TransportError, match="timed out"):
            await c.get_credit_transfer_status("PS-1", timeout=0.1)
        assert time.monotonic() - start < 3


async def test_each_read_of_a_waiter_stays_within_the_policys_timeout(
    fake: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The token fetch, which the client's 0.1 s would bound too and which a loaded machine
    # did not finish in time, gets a deadline of its own: this test is about the reads.
    unhurried_token_fetch(monkeypatch)
    reads: list[int] = []

    async def silent(request: web.Request) -> web.Response:
        reads.append(1)
        await asyncio.sleep(10)
        return web.json_response({})

    url = await fake({("GET", "/payments/camt029/v09/{id}"): silent})
    async with _client(
        base_url=url, retry=RetryPolicy.for_testing(), timeout=Timeout(total=0.1)
    ) as c:
        await c.access_token_lifetime()
        with pytest.raises(PollTimeoutError):
            await c.wait_for_cancellation_outcome("PS-1", timeout=0.6)
    # Each read gave up at the policy's 0.1 s and the waiter polled again (about six
    # times); a read allowed the waiter's whole 0.6 s would have been the only one.
    assert len(reads) >= 3


async def test_a_calls_timeout_counts_the_token_fetch(serve: Serve) -> None:
    async def slow_token(request: web.Request) -> web.Response:
        await request.read()
        await asyncio.sleep(1.2)
        return web.json_response(TOKEN_BODY)

    async def silent(request: web.Request) -> web.Response:
        await request.read()
        await asyncio.sleep(10)
        return web.json_response({})

    url = await serve(
        {("POST", "/oauth/token"): slow_token, ("POST", "/payments/camt056/v08"): silent}
    )
    async with _client(
        base_url=url, retry=RetryPolicy.for_testing(), timeout=Timeout(total=30)
    ) as c:
        start = time.monotonic()
        with pytest.raises(OutcomeUnknownError):
            await c.request_cancellation(_cancellation(), timeout=1.5)
        waited = time.monotonic() - start
    assert waited < 2.3  # 1.2 s of token and 1.5 s more for the POST: 2.7 s


async def test_a_calls_timeout_counts_a_401_its_token_refresh_and_the_resend(
    serve: Serve,
) -> None:
    posts: list[int] = []

    async def slow_token(request: web.Request) -> web.Response:
        await request.read()
        await asyncio.sleep(0.4)
        return web.json_response(TOKEN_BODY)

    async def refused_then_silent(request: web.Request) -> web.Response:
        await request.read()
        posts.append(1)
        await asyncio.sleep(0.4 if len(posts) == 1 else 10)
        return web.json_response({"errors": [{"code": "UNAUTHORIZED"}]}, status=401)

    url = await serve(
        {
            ("POST", "/oauth/token"): slow_token,
            ("POST", "/payments/camt056/v08"): refused_then_silent,
        }
    )
    async with _client(
        base_url=url, retry=RetryPolicy.for_testing(), timeout=Timeout(total=30)
    ) as c:
        start = time.monotonic()
        with pytest.raises(OutcomeUnknownError):  # the resend left, then no answer
            await c.request_cancellation(_cancellation(), timeout=1.5)
        waited = time.monotonic() - start
    assert len(posts) == 2
    assert waited < 2.3  # 0.4 + 0.4 + 0.4, then 1.5 s more for the resend: 2.7 s


class _SlowSigner:
    """Signs at once until ``slow`` is set, then takes 10 s (a busy HSM)."""

    def __init__(self, key: Any) -> None:
        self._inner = KeySigner(key, key_id="kid-slow")
        self.key_id = "kid-slow"
        self.slow = False

    async def sign(self, data: bytes) -> bytes:
        if self.slow:
            await asyncio.sleep(10)
        return self._inner.sign(data)


async def test_a_calls_timeout_bounds_an_async_signature(fake: Serve, rsa_private_key: Any) -> None:
    posts: list[int] = []

    async def created(request: web.Request) -> web.Response:
        posts.append(1)
        return web.json_response(_submission(await request.read()), status=201)

    url = await fake({("POST", "/payments/camt056/v08"): created})
    signer = _SlowSigner(rsa_private_key)
    credentials = Credentials("cid", "secret", key_id="kid-slow", issuer="iss", signer=signer)
    policy = RetryPolicy.for_testing()
    async with PaymentsClient(
        credentials, base_url=url, retry=policy, timeout=Timeout(total=30)
    ) as c:
        await c.access_token_lifetime()  # the assertion signed at once
        signer.slow = True
        start = time.monotonic()
        with pytest.raises(SigningError, match="deadline"):
            await c.request_cancellation(_cancellation(), timeout=0.1)
        waited = time.monotonic() - start
    assert waited < 2
    assert posts == []  # nothing was sent: not "unknown"


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf"), 10**400, "1", True])
async def test_a_bad_call_timeout_is_refused_before_anything_is_sent(
    mocked: aioresponses, timeout: Any
) -> None:
    fixture = Path(__file__).parents[1] / "fixtures" / "pacs008_credit_transfer.json"
    transfer = decode_pacs008(fixture.read_bytes())
    async with _client() as c:
        for call in (
            lambda: c.submit_credit_transfer(transfer, timeout=timeout),
            lambda: c.request_cancellation(_cancellation(), timeout=timeout),
            lambda: c.get_cancellation_outcome("PS-1", timeout=timeout),
            lambda: c.get_credit_transfer_status("PS-1", timeout=timeout),
        ):
            with pytest.raises(ConfigurationError, match="timeout"):
                await call()
    assert not mocked.requests  # not even a token request


# --- 10. a borrowed session never changes the client's semantics -------------------------


async def test_a_borrowed_raise_for_status_session_does_not_retry_a_400(
    fake: Serve,
) -> None:
    hits: list[int] = []

    async def refuse(request: web.Request) -> web.Response:
        await request.read()
        hits.append(1)
        return web.json_response({"errors": [{"code": "E400", "message": "bad"}]}, status=400)

    url = await fake({("POST", "/payments/camt056/v08"): refuse})
    async with aiohttp.ClientSession(
        raise_for_status=True,
        headers={"Accept": "text/html", "X-Service-Client-Id": "someone-else"},
        timeout=aiohttp.ClientTimeout(total=0.000001),
    ) as session:
        async with _client(base_url=url, session=session) as c:
            with pytest.raises(ApiError) as info:
                await c.request_cancellation(_cancellation())
        assert not session.closed
    assert not isinstance(info.value, OutcomeUnknownError)
    assert info.value.status == 400
    assert info.value.codes == ("E400",)
    assert hits == [1]


async def test_a_borrowed_session_with_default_auth_is_refused() -> None:
    async with aiohttp.ClientSession(auth=aiohttp.BasicAuth("u", "p")) as session:
        with pytest.raises(ConfigurationError, match="auth"):
            _client(session=session)


# --- 11. the retry budget pays only for retries that happen ------------------------------


async def test_the_budget_is_not_charged_when_no_retry_follows() -> None:
    budget = RetryBudget(capacity=100, cost=5, timeout_cost=10, refill=1)
    policy = RetryPolicy(attempts=2, wait_initial=0, wait_max=0, budget=budget)
    calls = 0

    async def failing() -> None:
        nonlocal calls
        calls += 1
        raise ServerError("down", status=503)

    with pytest.raises(ServerError):
        await policy.run(failing)
    assert calls == 2
    assert budget.level == 95  # one retry happened; the last failure was not retried


# --- 12. every error pickles ---------------------------------------------------------------

_CTX: dict[str, Any] = {
    "method": "POST",
    "path": "/payments/camt056/v08",
    "status": 503,
    "request_id": "rid-1",
    "attempt": 2,
    "errors": (ServiceErrorDetail("E1", "m", "ERROR", "d"),),
}

_FACTORIES: dict[type[PaymentsError], Callable[[], PaymentsError]] = {
    PaymentsError: lambda: PaymentsError("root", **_CTX),
    ValidationError: lambda: ValidationError([Problem("$.a", "bad"), Problem("$.b", "worse")]),
    ConfigurationError: lambda: ConfigurationError("bad key", **_CTX),
    SigningError: lambda: SigningError("the HSM went away", **_CTX),
    TransportError: lambda: TransportError("reset", request_sent=False, retryable=False, **_CTX),
    OutcomeUnknownError: lambda: OutcomeUnknownError("unknown", message_id="M-1", **_CTX),
    PollTimeoutError: lambda: PollTimeoutError(
        "late", payments_service_id="PS-1", last_status="PDCR", statuses=("PDCR", "XXXX")
    ),
    ApiError: lambda: ApiError("refused", retry_after=3.0, **_CTX),
    AuthenticationError: lambda: AuthenticationError("401", **_CTX),
    PermissionDeniedError: lambda: PermissionDeniedError("403", **_CTX),
    NotFoundError: lambda: NotFoundError("404", **_CTX),
    RateLimitedError: lambda: RateLimitedError("429", retry_after=1.5, **_CTX),
    ServerError: lambda: ServerError("5xx", **_CTX),
    InvalidResponseError: lambda: InvalidResponseError("garbled", **_CTX),
    NotificationRejected: lambda: NotificationRejected("refused", status=401),
    InboxError: lambda: InboxError("the inbox is down", **_CTX),
    InboxFull: lambda: InboxFull("the inbox is full", **_CTX),
    InboxBusyError: lambda: InboxBusyError("inbox 'in.db' is in use", **_CTX),
    InboxUnavailableError: lambda: InboxUnavailableError("the disk is full", **_CTX),
    BulkInputError: lambda: BulkInputError([RowError(2, "amount", "bad"), RowError(3, None, "x")]),
    JournalError: lambda: JournalError("journal j.db belongs to another input"),
    JournalUnavailableError: lambda: JournalUnavailableError("the journal's database is away"),
    JournalBusyError: lambda: JournalBusyError("j.db", "pid 12 on host", lost=True),
    ResultsWriteError: lambda: ResultsWriteError(28, "No space left on device", "r.csv"),
    RunControlError: lambda: RunControlError("run R1 cannot be paused"),
    RunNotFoundError: lambda: RunNotFoundError("no run R1 in j.db"),
    RunFinishedError: lambda: RunFinishedError("run R1 has no row left to send"),
    RunAbortedError: lambda: RunAbortedError("run R1 was aborted"),
    AlreadyRecalledError: lambda: AlreadyRecalledError(
        Recall("E2E-1", "ASG-1", run_id="run-1", line=7, outcome="accepted")
    ),
}


def _all_subclasses(cls: type) -> set[type]:
    found = {cls}
    for sub in cls.__subclasses__():
        found |= _all_subclasses(sub)
    return found


def test_every_error_class_is_covered_by_the_pickle_test() -> None:
    assert _all_subclasses(PaymentsError) == set(_FACTORIES)


@pytest.mark.parametrize("cls", list(_FACTORIES), ids=lambda c: c.__name__)
def test_every_error_pickles_with_its_data(cls: type[PaymentsError]) -> None:
    err = _FACTORIES[cls]()
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls
    assert str(back) == str(err)
    assert back.args == err.args
    assert vars(back) == vars(err)
    assert back.codes == err.codes
    assert (back.status, back.request_id, back.path) == (err.status, err.request_id, err.path)


# --- 13. hooks say what happened ---------------------------------------------------------


async def test_retry_events_separate_the_attempt_time_from_the_planned_sleep(
    mocked: aioresponses,
) -> None:
    requests: list[RequestEvent] = []
    retries: list[RequestEvent] = []
    mocked.post(TOKEN_URL, payload=TOKEN_BODY, repeat=True)
    mocked.post(CAMT056_URL, status=503, headers={"Retry-After": "0.2"})
    mocked.post(CAMT056_URL, callback=_answer(201))
    hooks = Hooks(on_request=requests.append, on_retry=retries.append)
    policy = RetryPolicy(attempts=3, budget=None)
    async with _client(hooks=hooks, retry=policy, timeout=Timeout(total=5)) as c:
        await c.request_cancellation(_cancellation())
    (retry,) = retries
    assert retry.sleep == pytest.approx(0.2)
    assert retry.elapsed < 0.2  # the attempt itself, not the sleep after it
    assert retry.kind == "request"
    assert [e.kind for e in requests] == ["token", "request", "request"]
    assert all(e.sleep is None for e in requests)


async def test_raising_hooks_never_break_a_call(mocked: aioresponses) -> None:
    def boom(_: object) -> None:
        raise RuntimeError("hook bug")

    mocked.post(TOKEN_URL, payload=TOKEN_BODY, repeat=True)
    mocked.post(CAMT056_URL, status=503)
    mocked.post(CAMT056_URL, callback=_answer(201))
    hooks = Hooks(on_request=boom, on_retry=boom, on_token_refresh=boom)
    async with _client(hooks=hooks) as c:
        sub = await c.request_cancellation(_cancellation())
    assert sub.created
    assert sub.attempts == 2


# --- 14. answers to a POST are checked ---------------------------------------------------


async def test_an_echoed_id_that_differs_is_an_invalid_response(mocked: aioresponses) -> None:
    mocked.post(TOKEN_URL, payload=TOKEN_BODY, repeat=True)
    mocked.post(CAMT056_URL, callback=_answer(200, echo="SOMEONE-ELSE"))
    async with _client() as c:
        with pytest.raises(OutcomeUnknownError) as info:
            await c.request_cancellation(_cancellation())
    assert isinstance(info.value.__cause__, InvalidResponseError)
    assert "paymentId" in str(info.value)


@pytest.mark.parametrize("status", [203, 206])
async def test_a_2xx_the_service_does_not_list_is_an_invalid_response(
    mocked: aioresponses, status: int
) -> None:
    mocked.post(TOKEN_URL, payload=TOKEN_BODY, repeat=True)
    mocked.post(CAMT056_URL, callback=_answer(status))
    async with _client() as c:
        with pytest.raises(OutcomeUnknownError) as info:
            await c.request_cancellation(_cancellation())
    assert isinstance(info.value.__cause__, InvalidResponseError)
    assert info.value.status == status


@pytest.mark.parametrize("expires_in", [3600, 3599.5, "3600", "3599.5", " 60 "])
async def test_expires_in_as_int_float_or_numeric_string(
    mocked: aioresponses, expires_in: object
) -> None:
    mocked.post(TOKEN_URL, payload={**TOKEN_BODY, "expires_in": expires_in})
    async with _client() as c:
        lifetime = await c.access_token_lifetime()
    assert 0 < lifetime <= float(str(expires_in))


# A JSON answer holding a string that is not valid UTF-8: msgspec raises UnicodeDecodeError
# (not one of its own errors) for it, which must never leave the client untyped.
_NOT_UTF8 = b'{"data": {"paymentsServiceId": "PS-\xff", "status": "PENDING"}}'


async def test_a_2xx_answer_that_is_not_utf8_is_an_unknown_outcome(mocked: aioresponses) -> None:
    mocked.post(TOKEN_URL, payload=TOKEN_BODY, repeat=True)
    mocked.post(CAMT056_URL, status=201, body=_NOT_UTF8, content_type="application/json")
    async with _client() as c:
        with pytest.raises(OutcomeUnknownError) as info:
            await c.request_cancellation(_cancellation())
    assert isinstance(info.value.__cause__, InvalidResponseError)
    assert "not valid UTF-8" in str(info.value)


async def test_an_error_answer_that_is_not_utf8_keeps_its_status_error(
    mocked: aioresponses,
) -> None:
    body = b'{"errors": [{"code": "BODY_INVALID", "message": "caf\xe9"}]}'
    mocked.post(TOKEN_URL, payload=TOKEN_BODY, repeat=True)
    mocked.post(CAMT056_URL, status=400, body=body, content_type="application/json")
    async with _client() as c:
        with pytest.raises(ApiError) as info:
            await c.request_cancellation(_cancellation())
    assert info.value.status == 400
    assert not isinstance(info.value, OutcomeUnknownError | InvalidResponseError)
    assert f"{len(body)} bytes" in str(info.value)  # described, never copied


async def test_a_read_answer_that_is_not_utf8_is_an_invalid_response(
    mocked: aioresponses,
) -> None:
    mocked.post(TOKEN_URL, payload=TOKEN_BODY, repeat=True)
    mocked.get(
        CAMT029,
        status=200,
        body=b'{"rsltnOfInvstgtn": {"assgnmt": {"id": "A-\xff"}}}',
        content_type="application/json",
    )
    async with _client() as c:
        with pytest.raises(InvalidResponseError) as read:
            await c.get_cancellation_outcome("PS-1")
    assert str(read.value.path).startswith("/payments/camt029/")


async def test_a_token_answer_that_is_not_utf8_is_an_invalid_response(
    mocked: aioresponses,
) -> None:
    mocked.post(
        TOKEN_URL,
        status=200,
        body=b'{"access_token": "t\xff", "expires_in": 60}',
        content_type="application/json",
        repeat=True,
    )
    async with _client() as c:
        with pytest.raises(InvalidResponseError) as token:
            await c.access_token_lifetime()
    assert token.value.path == "/oauth/token"


@pytest.mark.parametrize("retry_after", ["9" * 400, "9" * 5000, "\u00b2"])
async def test_a_retry_after_header_nobody_can_read_never_breaks_a_call(
    mocked: aioresponses, retry_after: str
) -> None:
    mocked.post(TOKEN_URL, payload=TOKEN_BODY, repeat=True)
    mocked.post(CAMT056_URL, status=503, headers={"Retry-After": retry_after}, repeat=True)
    async with _client() as c:
        with pytest.raises(OutcomeUnknownError) as info:  # a 503 may follow a commit
            await c.request_cancellation(_cancellation())
    assert isinstance(info.value.__cause__, ServerError)
    assert info.value.__cause__.retry_after == (None if retry_after == "\u00b2" else 2.0**31)
    assert _posts(mocked, CAMT056_URL) == 3  # retried with the policy's own waits


# --- 15. nonsense configuration is refused at construction -------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: RetryPolicy(attempts=0),
        lambda: RetryPolicy(attempts=2.5),  # type: ignore[arg-type]
        lambda: Timeout(total=0),
        lambda: RetryPolicy(wait_initial=-1),
        lambda: RetryPolicy(wait_max="5"),  # type: ignore[arg-type]
        lambda: PollPolicy(initial=0),
        lambda: PollPolicy(maximum=-1),
        lambda: Timeout(connect="5"),  # type: ignore[arg-type]
        lambda: Timeout(read="30"),  # type: ignore[arg-type]
        lambda: Timeout(total=1, connect=5),  # a part longer than the whole call
        lambda: Timeout(total=1, read=1.5),
        lambda: Timeout(total=10, token=11),
        lambda: Timeout(read=float("inf")),
        lambda: Limits(connections=2.0),  # type: ignore[arg-type]
        lambda: _client(retry={"attempts": 3}),
        lambda: _client(ssl_context=True),
        lambda: Credentials(1, 2, key_id="k", issuer="i", sandbox_tokens=True),  # type: ignore[arg-type]
    ],
)
def test_nonsense_configuration_is_refused(make: Callable[[], object]) -> None:
    with pytest.raises(ConfigurationError):
        make()


def test_a_timeout_of_a_total_alone_cuts_every_part_to_it() -> None:
    assert Timeout(total=2) == Timeout(total=2, connect=2, read=2, token=2)
    assert Timeout(total=60) == Timeout(total=60, connect=5, read=30, token=30)
    assert Timeout(total=30, read=0.3).with_total(2) == Timeout(2, 2, 0.3, 2)
    # a part cut only because it was left out is its default again under a longer total
    assert Timeout(total=0.2).with_total(60) == Timeout(total=60)
    assert Timeout(total=5, read=4).with_total(60).read == 4
    with pytest.raises(ConfigurationError, match=r"Timeout.connect \(5s\) is longer"):
        Timeout(total=1, connect=5)


async def test_public_calls_never_raise_a_bare_type_error(mocked: aioresponses) -> None:
    async with _client() as c:
        with pytest.raises(ValidationError):
            await c.submit_credit_transfer("x")  # type: ignore[arg-type]
        with pytest.raises(ValidationError):
            await c.request_cancellation(None)  # type: ignore[arg-type]
        with pytest.raises(ValidationError):
            await c.get_cancellation_outcome(42)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError):
            await c.wait_for_payment_status("PS-1", timeout="soon")  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError):
            await c.wait_for_cancellation_outcome("PS-1", timeout=-1)
    assert not mocked.requests


# --- 16. rejection advice follows the reason ---------------------------------------------


@pytest.mark.parametrize(
    ("codes", "needed"),
    [
        ((), True),
        (("CUST",), True),
        (("NOAS",), True),
        (("LEGL",), True),
        (("AM04",), True),
        (("AC04",), True),
        (("ZZ99",), True),  # unknown: the funds may be with the beneficiary
        (("NOOR",), False),
        (("ARDT",), False),
        (("ACLR",), False),
        (("ARDT", "NOOR"), False),
        (("NOOR", "CUST"), True),
    ],
)
def test_return_request_needed_follows_the_reason(codes: tuple[str, ...], needed: bool) -> None:
    assert return_request_needed(codes) is needed


@pytest.mark.parametrize(("reason", "needed"), [("CUST", True), ("NOOR", False), ("ARDT", False)])
async def test_the_rejected_outcome_carries_the_advice(
    mocked: aioresponses, reason: str, needed: bool
) -> None:
    body = _resolution("RJCR", "RJCR")
    tx = body["rsltnOfInvstgtn"]["cxlDtls"][0]["txInfAndSts"][0]
    tx["cxlStsRsnInf"] = [{"rsn": {"cd": reason}}]
    mocked.post(TOKEN_URL, payload=TOKEN_BODY, repeat=True)
    mocked.get(CAMT029, payload=body)
    async with _client() as c:
        outcome = await c.wait_for_cancellation_outcome("PS-1", timeout=5)
    assert outcome.rejected
    assert outcome.return_request_needed is needed
    assert ("pacs.004" in outcome.message) is needed


def test_the_docs_table_matches_the_code_table() -> None:
    text = (Path(__file__).parents[2] / "docs" / "outcomes.md").read_text()
    for code, reason in REJECTION_REASONS.items():
        row = next((line for line in text.splitlines() if line.startswith(f"| {code} ")), None)
        assert row is not None, code
        assert ("| yes |" in row) is reason.funds_may_be_with_beneficiary, row
