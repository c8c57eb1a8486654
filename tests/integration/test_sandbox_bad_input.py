"""Bad input over raw sockets: never a 500, always the JSON envelope, logs one line each.

Issue 11 item 5. Every test writes bytes to a real socket, reads what the sandbox sends
back, and checks the log records the sandbox (and aiohttp under it) produced.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from decimal import Decimal

import msgspec
import pytest
import pytest_asyncio

from payments_async._constants import CAMT056_PATH, PACS002_PATH, PACS008_PATH, TOKEN_PATH
from payments_async.iso20022 import encode
from payments_async.sandbox import FaultConfig, SandboxConfig
from payments_async.sandbox._notify import NotificationFaults, NotificationSettings
from payments_async.testing import ManualClock, SandboxHandle, sandbox_server
from tests.factories import cancellation, credit_transfer
from tests.support.sandbox import RawClient, basic

pytest_plugins = ["tests.support.sandbox_fixtures"]

READ_TIMEOUT = 0.5  # the sandbox's body_read_timeout in these tests
BODY_LIMIT = 4096


@pytest.fixture
def sandbox_config(clock: ManualClock) -> SandboxConfig:
    return SandboxConfig(clock=clock, body_read_timeout=READ_TIMEOUT, max_body_size=BODY_LIMIT)


@dataclass
class Raw:
    status: int
    headers: dict[str, str]
    body: bytes
    closed: bool  # the server closed the connection after the response

    @property
    def codes(self) -> list[str]:
        doc = msgspec.json.decode(self.body)
        assert set(doc) == {"errors"}
        for item in doc["errors"]:
            assert set(item) >= {"code", "message", "level"}
        return [e["code"] for e in doc["errors"]]


@pytest_asyncio.fixture
async def logs(caplog: pytest.LogCaptureFixture) -> AsyncIterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.DEBUG, logger="payments_async.sandbox")
    caplog.set_level(logging.INFO, logger="aiohttp")
    yield caplog


def _assert_no_traceback(logs: pytest.LogCaptureFixture) -> None:
    for record in logs.records:
        assert record.exc_info is None, record.getMessage()
        assert record.levelno < logging.ERROR, record.getMessage()
        assert "\n" not in record.getMessage(), record.getMessage()


async def _exchange(
    url: str,
    head: bytes,
    body_parts: tuple[bytes, ...] | list[bytes] = (),
    *,
    pause: float = 0.0,
    expect_close: bool = False,
) -> Raw:
    """Send a request in pieces over a fresh connection; read the answer.

    With ``expect_close``, also wait for the server to close the connection.
    """
    host, port = url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(head)
        for part in body_parts:
            await writer.drain()
            if pause:
                await asyncio.sleep(pause)
            writer.write(part)
        await writer.drain()
        raw = await asyncio.wait_for(_read_response(reader), timeout=5)
        closed = False
        if expect_close:
            closed = await asyncio.wait_for(reader.read(1), timeout=2) == b""
        return Raw(*raw, closed=closed)
    finally:
        writer.close()


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return status, headers, body


def _request(path: str, headers: dict[str, str], *, method: str = "POST") -> bytes:
    lines = [
        f"{method} {path} HTTP/1.1",
        "Host: 127.0.0.1",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _api_headers(client: RawClient, body: bytes) -> dict[str, str]:
    headers = await client.api_headers(body=body)
    headers["Content-Length"] = str(len(body))
    return headers


async def test_non_utf8_and_malformed_form_bodies_are_400(
    client: RawClient, sandbox: SandboxHandle, logs: pytest.LogCaptureFixture
) -> None:
    head = {
        "Authorization": basic(client.client_id, client.secret),
        "Accept": "application/json",
        "Content-Type": "application/x-www-form-urlencoded",
    }
    for body in (b"grant_type=\xff\xfe&scope=x", b"assertion=%FF%FE&scope=x&grant_type=y", b"&&=="):
        reply = await _exchange(
            sandbox.url, _request(TOKEN_PATH, {**head, "Content-Length": str(len(body))}), [body]
        )
        assert (reply.status, reply.codes) == (400, ["INVALID_REQUEST"]), body
    _assert_no_traceback(logs)


async def test_non_utf8_and_malformed_json_bodies_are_400(
    client: RawClient, sandbox: SandboxHandle, logs: pytest.LogCaptureFixture
) -> None:
    for body in (
        b'{"fitoFICstmrCdtTrf": "\xff\xfe"}',
        b"\xef\xbb\xbf{}",
        b"[" * 2000 + b"]" * 2000,
        b"null",
    ):
        headers = await _api_headers(client, body)  # a valid SCA token over these bytes
        reply = await _exchange(sandbox.url, _request(PACS008_PATH, headers), [body])
        assert reply.status == 400, body[:20]
        assert set(reply.codes) == {"BODY_INVALID"}
    # Invalid UTF-8 inside a string of an otherwise valid message (a 500 once).
    for path, valid, text in (
        (PACS008_PATH, encode(credit_transfer()), b"Alice"),
        (CAMT056_PATH, encode(cancellation("E2E-1")), b"XXX"),
    ):
        body = valid.replace(text, b"\xff" + text, 1)
        assert body != valid
        headers = await _api_headers(client, body)
        reply = await _exchange(sandbox.url, _request(path, headers), [body])
        assert (reply.status, set(reply.codes)) == (400, {"BODY_INVALID"}), path
    for body in (b"\xff\xfe", b'{"client_id": "\xff"}', b"[1,2]", b'{"client_id": 1}'):
        head = _request("/_sandbox/clients", {"Content-Length": str(len(body))})
        reply = await _exchange(sandbox.url, head, [body])
        assert (reply.status, reply.codes) == (400, ["INVALID_REQUEST"]), body
    pem = {"client_id": "c", "client_secret": "s", "kid": "k", "iss": "i"}
    for bad_pem in ("é" * 50, "-----BEGIN PUBLIC KEY-----\n\x00\n-----END PUBLIC KEY-----"):
        body = msgspec.json.encode({**pem, "public_key_pem": bad_pem})
        head = _request("/_sandbox/clients", {"Content-Length": str(len(body))})
        reply = await _exchange(sandbox.url, head, [body])
        assert (reply.status, reply.codes) == (400, ["INVALID_REQUEST"]), bad_pem
    _assert_no_traceback(logs)


async def test_a_body_over_the_limit_is_413(
    client: RawClient, sandbox: SandboxHandle, logs: pytest.LogCaptureFixture
) -> None:
    body = b"{" + b" " * BODY_LIMIT + b"}"
    declared = await _exchange(
        sandbox.url, _request(PACS008_PATH, await _api_headers(client, body)), [body]
    )
    assert (declared.status, declared.codes) == (413, ["BODY_TOO_LARGE"])
    # Chunked: no Content-Length to refuse up front; refused while reading.
    headers = await client.api_headers(body=body)
    headers["Transfer-Encoding"] = "chunked"
    chunks = [b"%x\r\n%s\r\n" % (len(body), body), b"0\r\n\r\n"]
    chunked = await _exchange(sandbox.url, _request(PACS008_PATH, headers), chunks)
    assert (chunked.status, chunked.codes) == (413, ["BODY_TOO_LARGE"])
    token = await _exchange(
        sandbox.url,
        _request(TOKEN_PATH, {"Content-Length": str(BODY_LIMIT + 1)}),
        [b"a" * (BODY_LIMIT + 1)],
    )
    assert (token.status, token.codes) == (413, ["BODY_TOO_LARGE"])
    assert sandbox.server.stats()["payments_stored"] == 0
    _assert_no_traceback(logs)


async def test_a_header_too_long_is_431_json(
    sandbox: SandboxHandle, logs: pytest.LogCaptureFixture
) -> None:
    size = sandbox.server.config.max_header_size + 10
    head = _request(f"{PACS002_PATH}/x", {"X-Long": "a" * size}, method="GET")
    reply = await _exchange(sandbox.url, head, expect_close=True)
    assert (reply.status, reply.codes) == (431, ["HEADER_TOO_LARGE"])
    assert reply.headers["content-type"].startswith("application/json")
    assert reply.closed
    many = _request(f"{PACS002_PATH}/x", {f"X-H{i}": "v" for i in range(200)}, method="GET")
    too_many = await _exchange(sandbox.url, many)
    assert (too_many.status, too_many.codes) == (431, ["HEADER_TOO_LARGE"])
    long_url = f"GET /{'a' * size} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    url = await _exchange(sandbox.url, long_url)
    assert (url.status, url.codes) == (431, ["HEADER_TOO_LARGE"])  # documented: same limit
    secret = _request(f"{PACS002_PATH}/x", {"Authorization": "Bearer " + "s" * size}, method="GET")
    hidden = await _exchange(sandbox.url, secret)
    assert hidden.status == 431
    assert b"sss" not in hidden.body
    garbage = await _exchange(sandbox.url, b"GET / HTTP/1.1\r\nBad Header\r\n\r\n")
    assert (garbage.status, garbage.codes) == (400, ["INVALID_REQUEST"])
    _assert_no_traceback(logs)
    assert any("malformed request" in r.getMessage() for r in logs.records)
    assert not any("sss" in r.getMessage() for r in logs.records)


async def test_a_body_slower_than_the_read_timeout_is_408_and_closed(
    client: RawClient, sandbox: SandboxHandle, logs: pytest.LogCaptureFixture
) -> None:
    body = encode(credit_transfer())
    headers = await _api_headers(client, body)
    parts = [body[:10], body[10:20]]  # the rest never comes
    reply = await _exchange(
        sandbox.url,
        _request(PACS008_PATH, headers),
        parts,
        pause=READ_TIMEOUT * 0.6,
        expect_close=True,
    )
    assert (reply.status, reply.codes) == (408, ["REQUEST_TIMEOUT"])
    assert reply.closed
    assert reply.headers.get("connection", "").lower() == "close"
    assert sandbox.server.stats()["payments_stored"] == 0
    _assert_no_traceback(logs)


async def test_a_client_gone_mid_body_is_one_log_line(
    client: RawClient, sandbox: SandboxHandle, logs: pytest.LogCaptureFixture
) -> None:
    body = encode(credit_transfer())
    headers = await _api_headers(client, body)
    host, port = sandbox.url.removeprefix("http://").rsplit(":", 1)
    _, writer = await asyncio.open_connection(host, int(port))
    writer.write(_request(PACS008_PATH, headers) + body[:50])
    await writer.drain()
    await asyncio.sleep(0.1)
    writer.close()
    for _ in range(50):
        if any("disconnected" in r.getMessage() for r in logs.records):
            break
        await asyncio.sleep(0.02)
    lines = [r for r in logs.records if PACS008_PATH in r.getMessage()]
    assert len(lines) == 1  # the access log line, saying what happened
    assert "disconnected" in lines[0].getMessage()
    _assert_no_traceback(logs)
    assert sandbox.server.stats()["payments_stored"] == 0


async def test_control_characters_in_ids_never_reach_a_log_line_raw(
    client: RawClient, sandbox: SandboxHandle, logs: pytest.LogCaptureFixture
) -> None:
    forged = "pmt-x%0a2026-01-01 payments_async.sandbox GET / 200 client=admin%0d%1b[31m"
    reply = await client.request(
        "GET", f"{PACS002_PATH}/{forged}", headers=await client.api_headers()
    )
    assert (reply.status, reply.codes) == (404, ["NOT_FOUND"])
    lines = [r for r in logs.records if "pmt-x" in r.getMessage()]
    assert len(lines) == 1
    message = lines[0].getMessage()
    assert "\\x0a" in message
    assert all(c.isprintable() for c in message)
    assert all(c.isprintable() for c in lines[0].http_path)  # type: ignore[attr-defined]
    # A client id with a newline (Basic auth is free text) is escaped too.
    token = await client.request(
        "POST",
        TOKEN_PATH,
        headers={"Authorization": basic("evil\nclient", "x"), "Accept": "application/json"},
        data={"grant_type": "g", "assertion": "a", "scope": "s"},
    )
    assert token.status == 400
    _assert_no_traceback(logs)


async def test_no_bad_input_gets_a_500(client: RawClient, sandbox: SandboxHandle) -> None:
    cases = [
        ("POST", PACS008_PATH, b"\x00\x01\x02"),
        ("POST", "/_sandbox/faults", b'{"error_500": "x"}'),
        ("POST", "/_sandbox/faults", b'{"error_500": 1e400}'),
        # Refused, or every API request after it would fail (asyncio cannot sleep that long).
        ("POST", "/_sandbox/faults", b'{"latency": 1, "latency_seconds": 1' + b"0" * 400 + b"}"),
        ("GET", f"{PACS002_PATH}/x", b""),
        ("POST", "/_sandbox/token-outage", b'{"seconds": -1}'),
        ("POST", "/_sandbox/token-outage", b"\xff"),
        ("POST", "/_sandbox/token-outage", b'{"seconds": 1' + b"0" * 400 + b"}"),
        ("GET", "/_sandbox/messages?client_id=%ff", b""),
        ("POST", TOKEN_PATH, b"\xff" * 100),
        ("POST", "/_sandbox/notifications", b'{"url": "http://127.0.0.1/\xff"}'),
        # JSON nested 1,000 deep (2 KB): refused like malformed JSON, not a RecursionError.
        ("POST", PACS008_PATH, b'{"grpHdr": ' + b"[" * 1000 + b"]" * 1000 + b"}"),
        ("POST", "/_sandbox/faults", b'{"seed": ' + b"[" * 1000 + b"]" * 1000 + b"}"),
        ("POST", "/_sandbox/notifications", b"[" * 1000 + b"]" * 1000),
    ]
    for method, path, body in cases:
        headers = await client.api_headers(body=body) if path == PACS008_PATH else {}
        reply = await client.request(method, path, headers=headers, data=body or None)
        assert reply.status < 500, (path, body, reply.status)
        if reply.status >= 400:
            assert reply.codes, (path, body)


async def test_body_limits_and_read_timeout_are_configurable() -> None:
    with pytest.raises(ValueError, match="body_read_timeout"):
        SandboxConfig(body_read_timeout=0)
    with pytest.raises(ValueError, match="max_body_size"):
        SandboxConfig(max_body_size=0)
    async with sandbox_server(SandboxConfig(max_body_size=10)) as sb:
        reply = await _exchange(
            sb.url, _request("/_sandbox/faults", {"Content-Length": "11"}), [b"{" * 11]
        )
    assert (reply.status, reply.codes) == (413, ["BODY_TOO_LARGE"])


def test_settings_that_are_not_finite_numbers_are_refused() -> None:
    # Each was accepted and then made the sandbox answer 500 (a NaN time or amount),
    # hang (a NaN latency), accept expired JWTs (a NaN leeway) or lose every
    # notification (a delay asyncio cannot add). Infinity is documented nowhere as
    # "never", and an integer beyond a float's range is one too (JSON has no bound).
    nan, inf, huge = float("nan"), float("inf"), 10**400
    cases: list[tuple[object, dict[str, object]]] = [
        (SandboxConfig, {"processing_delay": nan}),
        (SandboxConfig, {"processing_delay": inf}),
        (SandboxConfig, {"settlement_delay": nan}),
        (SandboxConfig, {"settlement_delay": huge}),
        (SandboxConfig, {"amount_limit": Decimal("NaN")}),
        (SandboxConfig, {"amount_limit": Decimal("sNaN")}),
        (SandboxConfig, {"amount_limit": Decimal("Infinity")}),
        (SandboxConfig, {"amount_limit": nan}),
        (SandboxConfig, {"amount_limit": "1000"}),  # text is no amount here
        (SandboxConfig, {"body_read_timeout": inf}),
        (SandboxConfig, {"jwt_leeway": nan}),
        (SandboxConfig, {"jwt_leeway": inf}),
        (FaultConfig, {"latency_seconds": nan}),
        (NotificationFaults, {"delay_seconds": nan}),
        (NotificationFaults, {"reorder_seconds": huge}),
        (NotificationSettings, {"timeout": nan}),
        (NotificationSettings, {"backoff_max": inf}),
    ]
    for make, kwargs in cases:
        [name] = kwargs
        with pytest.raises(ValueError, match=name):
            make(**kwargs)  # type: ignore[operator]
    # A plain number stays a usable limit, as before the check for finite amounts.
    assert SandboxConfig(amount_limit=1000).amount_limit == Decimal("1000")  # type: ignore[arg-type]
    assert SandboxConfig(amount_limit=12.5).amount_limit == Decimal("12.5")  # type: ignore[arg-type]
    for data in ({"latency_seconds": huge}, {"delay_seconds": huge}):
        make = FaultConfig if "latency_seconds" in data else NotificationFaults
        with pytest.raises(ValueError, match=next(iter(data))):
            make.from_dict(data)  # type: ignore[attr-defined]


def test_the_limits_are_command_line_options() -> None:
    from payments_async.sandbox._main import build_parser, config_from_args

    args = build_parser().parse_args(["--body-read-timeout", "2.5", "--max-body-size", "100"])
    config = config_from_args(args)
    assert (config.body_read_timeout, config.max_body_size) == (2.5, 100)
    default = config_from_args(build_parser().parse_args([]))
    assert default.body_read_timeout == SandboxConfig().body_read_timeout


async def test_a_broken_chunked_body_is_400(
    sandbox: SandboxHandle, logs: pytest.LogCaptureFixture
) -> None:
    head = _request("/_sandbox/faults", {"Transfer-Encoding": "chunked"})
    reply = await _exchange(sandbox.url, head, [b"5\r\n{}{}{\r\nzz\r\n"], expect_close=True)
    assert reply.status == 400
    assert reply.codes == ["INVALID_REQUEST"]
    assert reply.closed
    _assert_no_traceback(logs)


async def test_a_broken_or_oversized_compressed_body_is_4xx(
    sandbox: SandboxHandle, logs: pytest.LogCaptureFixture
) -> None:
    for encoding in ("gzip", "deflate"):
        for path in ("/_sandbox/faults", TOKEN_PATH, PACS008_PATH):
            head = _request(path, {"Content-Encoding": encoding, "Content-Length": "9"})
            reply = await _exchange(sandbox.url, head, [b"not-a-zip"], expect_close=True)
            assert (reply.status, reply.codes) == (400, ["INVALID_REQUEST"]), (encoding, path)
            assert reply.closed
    # 40 MiB inflated from 40 KiB: over aiohttp's own inflate limit (32 MiB) in one piece.
    bomb = gzip.compress(b" " * (40 * 1024 * 1024))
    async with sandbox_server(SandboxConfig()) as sb:
        head = _request(
            "/_sandbox/faults", {"Content-Encoding": "gzip", "Content-Length": str(len(bomb))}
        )
        reply = await _exchange(sb.url, head, [bomb])
    assert (reply.status, reply.codes) == (413, ["BODY_TOO_LARGE"])
    _assert_no_traceback(logs)
