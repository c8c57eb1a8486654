"""The receiver's pure core: parse and authenticate from method, headers and body bytes."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import random
import time
from typing import Any

import msgspec
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from hypothesis import given, settings
from hypothesis import strategies as st
from joserfc import jwt
from joserfc.jwk import ECKey, RSAKey

from payments_async import (
    ConfigurationError,
    Outcome,
    PaymentsError,
    PollPolicy,
    PollTimeoutError,
    ServiceProfile,
)
from payments_async.notifications import (
    BasicAuth,
    BearerAuth,
    JwtBearerVerifier,
    NotificationKind,
    NotificationRejected,
    authenticate,
    parse,
)
from payments_async.sandbox._notify import NotificationFaults, NotificationTarget
from tests.support.polling import poll_until_final

BASE = "https://api.bank.example/v1"
JSON = {"Content-Type": "application/json"}
PSID = "cxl-0123456789abcdef"


def short(**fields: Any) -> bytes:
    return msgspec.json.encode({"paymentsServiceId": PSID, **fields})


def rejected_status(
    body: bytes, headers: dict[str, str] | None = None, method: str = "POST"
) -> int:
    with pytest.raises(NotificationRejected) as info:
        parse(
            method, JSON if headers is None else headers, body, base_url=BASE, max_body_bytes=2048
        )
    assert info.value.status is not None
    return info.value.status


# --- parse ----------------------------------------------------------------------------------


def test_short_notice_of_a_cancellation() -> None:
    n = parse(
        "POST",
        JSON,
        short(
            originalMessage=f"{BASE}/payments/camt056/v08/{PSID}",
            statusReportMessage=f"{BASE}/payments/camt029/v09/{PSID}",
            extra="ignored",
        ),
        base_url=BASE,
    )
    assert n.payments_service_id == PSID
    assert n.kind is NotificationKind.CANCELLATION
    assert n.payload == "short"


def test_short_notices_name_the_profiles_paths() -> None:
    edition = ServiceProfile(pacs002_path="/payments/pacs002/v10", camt056_path="/cxl/v7")
    body = short(
        originalMessage=f"{BASE}/cxl/v7/{PSID}",
        statusReportMessage=f"{BASE}/payments/camt029/v09/{PSID}",
    )
    n = parse("POST", JSON, body, base_url=BASE, profile=edition)
    assert n.kind is NotificationKind.CANCELLATION
    assert rejected_status(body) == 422  # the specification's paths by default
    payment = short(statusReportMessage=f"{BASE}/payments/pacs002/v10/{PSID}")
    assert parse("POST", JSON, payment, base_url=BASE, profile=edition).kind is (
        NotificationKind.PAYMENT
    )
    assert rejected_status(payment) == 422
    spec = short(statusReportMessage=f"{BASE}{ServiceProfile().pacs002_path}/{PSID}")
    with pytest.raises(NotificationRejected):  # an edition's paths replace the spec's
        parse("POST", JSON, spec, base_url=BASE, profile=edition)


def test_short_notice_of_a_payment_with_a_relative_uri_and_default_port() -> None:
    n = parse(
        "POST",
        {"content-type": "application/json; charset=utf-8"},
        short(statusReportMessage=f"https://api.bank.example:443/v1/payments/pacs002/v12/{PSID}"),
        base_url=BASE,
    )
    assert n.kind is NotificationKind.PAYMENT
    n = parse(
        "POST", JSON, short(originalMessage=f"/v1/payments/pacs008/v10/{PSID}"), base_url=BASE
    )
    assert n.kind is NotificationKind.PAYMENT


@pytest.mark.parametrize(
    "uri",
    [
        f"https://evil.example/v1/payments/camt029/v09/{PSID}",
        f"http://api.bank.example/v1/payments/camt029/v09/{PSID}",  # scheme downgrade
        f"https://api.bank.example:8443/v1/payments/camt029/v09/{PSID}",
        f"https://api.bank.example.evil.example/v1/payments/camt029/v09/{PSID}",
        f"https://user@api.bank.example/v1/payments/camt029/v09/{PSID}",
        f"https://api.bank.example/v2/payments/camt029/v09/{PSID}",  # outside the base path
        f"https://api.bank.example/v1/payments/camt029/v09/{PSID}?next=https://evil.example",
        f"https://api.bank.example/v1/../payments/camt029/v09/{PSID}",
        "https://api.bank.example/v1/payments/camt029/v09/another-id",
        f"https://api.bank.example/v1/payments/pacs008/v10/{PSID}",  # not a status URI
        "not a uri at all",
        "https://[::1/x",
    ],
)
def test_a_status_uri_not_under_base_url_is_refused(uri: str) -> None:
    assert rejected_status(short(statusReportMessage=uri)) == 422


def test_kinds_of_the_two_uris_must_agree() -> None:
    body = short(
        originalMessage=f"{BASE}/payments/pacs008/v10/{PSID}",
        statusReportMessage=f"{BASE}/payments/camt029/v09/{PSID}",
    )
    assert rejected_status(body) == 422


@pytest.mark.parametrize("root", ["fitoFIPmtStsRpt", "fIToFIPmtStsRpt", "FITOFIPMTSTSRPT"])
def test_full_pacs002_with_either_root_spelling(root: str) -> None:
    body = msgspec.json.encode(
        {"paymentsServiceId": "pmt-1", root: {"txInfAndSts": {"txSts": "ACCC"}}}
    )
    n = parse("POST", JSON, body, base_url=BASE)
    assert n.kind is NotificationKind.PAYMENT
    assert n.payload == "full"
    assert n.reported_status == "ACCC"


def test_full_camt029() -> None:
    body = msgspec.json.encode(
        {"rsltnOfInvstgtn": {"sts": {"conf": "RJTC"}, "new": 1}, "paymentsServiceId": PSID}
    )
    n = parse("POST", JSON, body, base_url=BASE)
    assert (n.kind, n.reported_status) == (NotificationKind.CANCELLATION, "RJTC")


@pytest.mark.parametrize(
    ("body", "headers", "method", "status"),
    [
        (b"{}", JSON, "GET", 405),
        (b"{" + b" " * 4096 + b"}", JSON, "POST", 413),
        (b"{}", {"Content-Type": "text/plain"}, "POST", 415),
        (b"{}", {}, "POST", 415),
        (b"{oops", JSON, "POST", 400),
        (b'"a string"', JSON, "POST", 400),
        (b"{}", JSON, "POST", 422),
        (b'{"paymentsServiceId": "x/../y", "originalMessage": "/v1/x"}', JSON, "POST", 422),
        (b'{"paymentsServiceId": "a"}', JSON, "POST", 422),
        (b'{"paymentsServiceId": null, "statusReportMessage": "/v1/x"}', JSON, "POST", 422),
        (b'{"rsltnOfInvstgtn": {}}', JSON, "POST", 422),  # a full report without its id
        (b'{"rsltnOfInvstgtn": 3, "paymentsServiceId": "a"}', JSON, "POST", 422),
        (b'{"rsltnOfInvstgtn": {}, "paymentsServiceId": 3}', JSON, "POST", 422),
    ],
)
def test_bad_input_is_a_4xx(body: bytes, headers: dict[str, str], method: str, status: int) -> None:
    assert rejected_status(body, headers, method) == status


# --- authenticate ---------------------------------------------------------------------------


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


async def test_basic_auth_accepts_only_the_exact_pair() -> None:
    auth = BasicAuth("svc", "s3cret-value")
    await authenticate({"authorization": _basic("svc", "s3cret-value")}, auth)
    for header in (
        None,
        _basic("svc", "s3cret-valuE"),
        _basic("svc", "s3cret-value "),
        _basic("svc2", "s3cret-value"),
        "Bearer s3cret-value",
        "Basic",
        "Basic ####",
    ):
        headers = {} if header is None else {"Authorization": header}
        with pytest.raises(NotificationRejected) as info:
            await authenticate(headers, auth)
        assert info.value.status == 401
    assert "s3cret" not in repr(auth)


def test_basic_auth_refuses_empty_settings() -> None:
    with pytest.raises(ConfigurationError):
        BasicAuth("", "x")
    with pytest.raises(ConfigurationError):
        BasicAuth("a:b", "x")


async def test_bearer_auth_uses_the_users_verifier_and_treats_errors_as_refusal() -> None:
    async def verify(token: str) -> bool:
        if token == "boom":
            raise RuntimeError("verifier crashed")
        return token == "good"

    auth = BearerAuth(verify)
    assert await auth.check("Bearer good")
    assert await auth.check("bearer   good ")
    for header in (None, "Bearer bad", "Bearer boom", "Bearer ", "Basic good", "good"):
        assert not await auth.check(header)


def _rsa_pem() -> tuple[RSAKey, bytes]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pub = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return RSAKey.import_key(pem), pub


def _ec_pem() -> tuple[ECKey, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    pub = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return ECKey.import_key(pem), pub


@pytest.fixture(scope="module")
def rsa_pair() -> tuple[RSAKey, bytes]:
    return _rsa_pem()


def _claims(**over: Any) -> dict[str, Any]:
    now = int(time.time())
    claims: dict[str, Any] = {"iss": "bank", "aud": "us", "exp": now + 300, "iat": now}
    claims.update(over)
    return {k: v for k, v in claims.items() if v is not None}


def test_jwt_verifier_accepts_rs256_and_es256(rsa_pair: tuple[RSAKey, bytes]) -> None:
    rkey, rpub = rsa_pair
    ekey, epub = _ec_pem()
    verifier = JwtBearerVerifier([rpub, epub], issuer="bank", audience="us")
    assert verifier.verify(jwt.encode({"alg": "RS256"}, _claims(), rkey))
    assert verifier.verify(jwt.encode({"alg": "ES256"}, _claims(aud=["x", "us"]), ekey))
    assert asyncio.run(verifier(jwt.encode({"alg": "RS256"}, _claims(), rkey)))


def _hs256_with_public_key_as_secret(pub: bytes) -> str:
    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    signing_input = b64(b'{"alg":"HS256","typ":"JWT"}') + "." + b64(msgspec.json.encode(_claims()))
    mac = hmac.new(pub, signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + b64(mac)


def test_jwt_verifier_refuses_everything_else(rsa_pair: tuple[RSAKey, bytes]) -> None:
    rkey, rpub = rsa_pair
    other, _ = _ec_pem()
    verifier = JwtBearerVerifier(rpub, issuer="bank", audience="us", leeway=0)
    bad = [
        jwt.encode({"alg": "RS256"}, _claims(iss="someone"), rkey),
        jwt.encode({"alg": "RS256"}, _claims(aud="them"), rkey),
        jwt.encode({"alg": "RS256"}, _claims(aud=None), rkey),
        jwt.encode({"alg": "RS256"}, _claims(iss=None), rkey),
        jwt.encode({"alg": "RS256"}, _claims(exp=int(time.time()) - 10), rkey),
        jwt.encode({"alg": "RS256"}, _claims(exp=None), rkey),
        jwt.encode({"alg": "RS256"}, _claims(nbf=int(time.time()) + 300), rkey),
        jwt.encode({"alg": "RS512"}, _claims(), rkey, algorithms=["RS512"]),
        jwt.encode({"alg": "ES256"}, _claims(), other),  # not our key
        _hs256_with_public_key_as_secret(rpub),  # algorithm confusion
        "eyJhbGciOiJub25lIn0.eyJpc3MiOiJiYW5rIiwiYXVkIjoidXMifQ.",  # alg none
        "not.a.jwt",
        "x" * 20_000,
    ]
    for token in bad:
        assert not verifier.verify(token), token[:40]


def test_jwt_verifier_settings_are_checked(rsa_pair: tuple[RSAKey, bytes]) -> None:
    _, rpub = rsa_pair
    with pytest.raises(ConfigurationError):
        JwtBearerVerifier(rpub, issuer="bank", audience="us", algorithms=["HS256"])
    with pytest.raises(ConfigurationError):
        JwtBearerVerifier(b"not a key", issuer="bank", audience="us")
    with pytest.raises(ConfigurationError):
        JwtBearerVerifier(rpub, issuer="", audience="us")


# --- waiters woken by a notification --------------------------------------------------------


def _status_of(result: str) -> tuple[Outcome, tuple[str, ...]]:
    return (Outcome.ACCEPTED if result == "final" else Outcome.PENDING), (result,)


async def test_a_woken_waiter_returns_the_confirmed_result_without_polling() -> None:
    wake = asyncio.Event()
    confirmed: list[str] = []
    fetches = 0

    async def fetch() -> str:
        nonlocal fetches
        fetches += 1
        return "pending"

    async def notify() -> None:
        await asyncio.sleep(0.05)
        confirmed.append("final")
        wake.set()

    task = asyncio.create_task(notify())
    start = time.monotonic()
    result = await poll_until_final(
        fetch,
        _status_of,
        payments_service_id="x",
        timeout=30,
        policy=PollPolicy(initial=20, maximum=20),
        what="test",
        wake=wake,
        peek=lambda: confirmed[0] if confirmed else None,
    )
    await task
    assert result == "final"
    assert fetches == 0
    assert time.monotonic() - start < 10  # returned on the wake, not after the 20 s poll


async def test_without_a_notification_the_safety_net_poll_still_finds_it() -> None:
    results = iter(["pending", "final"])

    async def fetch() -> str:
        return next(results)

    result = await poll_until_final(
        fetch,
        _status_of,
        payments_service_id="x",
        timeout=5,
        policy=PollPolicy(initial=0.01, maximum=0.01),
        what="test",
        rng=random.Random(1),
        wake=asyncio.Event(),
        peek=lambda: None,
    )
    assert result == "final"

    async def pending() -> str:
        return "pending"

    with pytest.raises(PollTimeoutError):
        await poll_until_final(
            pending,
            _status_of,
            payments_service_id="x",
            timeout=0.05,
            policy=PollPolicy(initial=0.01, maximum=0.01),
            what="test",
            wake=asyncio.Event(),
        )


# --- sandbox sender settings ----------------------------------------------------------------


def test_notification_target_needs_exactly_one_credential_and_hides_it() -> None:
    t = NotificationTarget(url="http://127.0.0.1:1/n", username="u", password="pw-secret")
    assert "pw-secret" not in repr(t)
    assert t.authorization() == _basic("u", "pw-secret")
    assert t.authorization(wrong=True) != t.authorization()
    b = NotificationTarget(url="http://127.0.0.1:1/n", bearer="tok-secret", payload="full")
    assert "tok-secret" not in repr(b)
    assert b.describe() == {"url": "http://127.0.0.1:1/n", "payload": "full", "auth": "bearer"}
    for kwargs in (
        {"url": "http://x/n"},  # no credentials: the endpoint is protected
        {"url": "http://x/n", "username": "u", "password": "p", "bearer": "t"},
        {"url": "http://x/n", "username": "u"},
        {"url": "ftp://x/n", "bearer": "t"},
        {"url": "http://x/n", "bearer": "t", "payload": "medium"},
    ):
        with pytest.raises(ValueError):  # noqa: PT011
            NotificationTarget(**kwargs)  # type: ignore[arg-type]


def test_notification_faults_from_dict() -> None:
    f = NotificationFaults.from_dict({"loss": 0.5, "seed": 3})
    assert f.enabled
    assert f.to_dict()["loss"] == 0.5
    assert not NotificationFaults().enabled
    for data in ({"lost": 0.1}, {"loss": 2}, {"loss": True}, {"seed": 1.5}, {"delay": "x"}):
        with pytest.raises(ValueError):  # noqa: PT011
            NotificationFaults.from_dict(data)


def test_the_notifications_surface_is_documented_and_its_errors_in_the_tree() -> None:
    import payments_async.notifications as notifications

    assert len(set(notifications.__all__)) == len(notifications.__all__)  # ruff sorts it
    for name in notifications.__all__:
        obj = getattr(notifications, name)
        if callable(obj):
            assert obj.__doc__, name
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, PaymentsError), name


# --- any body: a notification or a 4xx refusal, never anything else ----------------------

_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=20), inner),
    max_leaves=15,
)
_keys = st.sampled_from(
    [
        "paymentsServiceId",
        "originalMessage",
        "statusReportMessage",
        "fitoFIPmtStsRpt",
        "FIToFIPmtStsRpt",
        "rsltnOfInvstgtn",
    ]
)
_objects = st.dictionaries(_keys, _values | st.just(f"{BASE}/payments/pacs002/v12/PS-1"))


def _not_utf8_at(obj: dict[str, Any], n: int) -> bytes:
    """``obj`` as JSON with a byte that is not UTF-8 after its ``n``-th quote (in a string)."""
    parts = msgspec.json.encode(obj).split(b'"')
    if len(parts) > 1:
        k = 1 + n % (len(parts) - 1)
        parts[k] = b"\xff" + parts[k]
    return b'"'.join(parts)


_bodies = (
    st.binary(max_size=300)
    | _objects.map(lambda o: msgspec.json.encode(o))
    # a byte that is not UTF-8 inside a key or a string; an integer beyond a float
    | st.tuples(_objects, st.integers(0, 12)).map(lambda t: _not_utf8_at(*t))
    | _objects.map(
        lambda o: msgspec.json.encode(o).replace(b"}", b', "n": 1' + b"0" * 400 + b"}", 1)
    )
)


@settings(max_examples=400, deadline=None)
@given(body=_bodies)
def test_any_body_is_a_notification_or_a_4xx_refusal(body: bytes) -> None:
    status = None
    try:
        parse("POST", JSON, body, base_url=BASE)
    except NotificationRejected as exc:
        status = exc.status
        assert status is not None
    assert status is None or 400 <= status < 500
