"""The sandbox's skewed-clock option: its JWT checks and its Date header run on the skew."""

from __future__ import annotations

import email.utils
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest
import pytest_asyncio

from payments_async._clock import parse_http_date
from payments_async._jwt import JwtSigner
from payments_async.sandbox import SandboxConfig
from payments_async.sandbox._main import build_parser, config_from_args, main
from payments_async.testing import ManualClock, SandboxHandle, sandbox_server
from tests.support.sandbox import RawClient, client_for

FIVE_MINUTES = 300.0


@pytest_asyncio.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def _server_time(reply_headers: dict[str, str]) -> float:
    stamp = parse_http_date(reply_headers.get("Date"))
    assert stamp is not None, reply_headers
    return stamp


@pytest.mark.parametrize("skew", [-FIVE_MINUTES, FIVE_MINUTES])
async def test_date_header_follows_the_skewed_clock(
    http: aiohttp.ClientSession, skew: float
) -> None:
    async with sandbox_server(SandboxConfig(clock_skew=skew)) as sb:
        raw = client_for(http, sb)
        before = time.time()
        token = await raw.fetch_token()  # 200 ahead, 401 behind (iat in its future)
        refused = await raw.request("GET", "/payments/pacs002/v12/nope")  # 401, no token
        after = time.time()
    assert token.status == (200 if skew > 0 else 401)
    assert refused.status == 401
    for reply in (token, refused):
        # Date has a one-second resolution.
        assert before + skew - 1 <= _server_time(reply.headers) <= after + skew + 1


async def test_date_header_follows_a_manual_clock(http: aiohttp.ClientSession) -> None:
    clock = ManualClock(start=1_800_000_000.0)
    async with sandbox_server(SandboxConfig(clock=clock)) as sb:
        raw = RawClient(http, sb.url, "nobody", "nothing", None)
        reply = await raw.request("GET", "/payments/pacs002/v12/x")
    assert reply.headers["Date"] == email.utils.formatdate(1_800_000_000.0, usegmt=True)


@pytest.mark.parametrize(
    ("skew", "reason"),
    [(-FIVE_MINUTES, "issued in the future"), (FIVE_MINUTES, "expired")],
)
async def test_jwts_on_the_real_clock_are_refused_by_a_skewed_sandbox(
    http: aiohttp.ClientSession, skew: float, reason: str
) -> None:
    async with sandbox_server(SandboxConfig(clock_skew=skew)) as sb:
        handle: SandboxHandle = sb
        assert handle.private_key is not None
        assert handle.credentials is not None
        signer = JwtSigner(
            handle.private_key,
            key_id=handle.credentials.key_id,
            issuer=handle.credentials.issuer,
        )
        raw = client_for(http, sb)
        # A sandbox 5 min behind sees our iat in its future; one 5 min ahead sees a
        # 180-s assertion as long expired.
        stale = signer.assertion(handle.credentials.client_id, lifetime=180)
        refused = await raw.fetch_token(stale)
        assert refused.status == 401
        assert reason in refused.json["errors"][0]["message"]
        # Signed on the sandbox's time (what its Date said), the same client is accepted.
        fixed = signer.assertion(
            handle.credentials.client_id, now=_server_time(refused.headers), lifetime=180
        )
        assert (await raw.fetch_token(fixed)).status == 200


def test_cli_flag_sets_the_skew() -> None:
    args = build_parser().parse_args(["--clock-skew", "-300"])
    assert config_from_args(args).clock_skew == -300.0
    assert config_from_args(build_parser().parse_args([])).clock_skew == 0.0


def test_cli_refuses_a_non_finite_skew(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--clock-skew", "nan", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "error: clock_skew must be a finite number of seconds"
