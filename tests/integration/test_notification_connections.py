"""A refused notification closes its connection properly, so the sender's next notice lands.

A server that answers before it has read a request's body cannot keep the connection: the
rest of that body would be parsed as the next request. RFC 9112 (9.6) asks it to say so
(``Connection: close``) in that answer; a sender that sees it opens a new connection for
its next notice, where one that does not sees a kept-alive answer, reuses the connection
and gets a reset.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
from collections.abc import Callable

import msgspec
import pytest

from payments_async._constants import PACS002_PATH, PACS008_PATH
from payments_async.notifications import ReceiverLimits, ReceiverServer
from tests.factories import credit_transfer
from tests.support.notifications import HOOK_PASSWORD, HOOK_USER, notifying_stack

LIMIT = 4096  # the receiver's max_body_bytes here
GOOD = "Basic " + base64.b64encode(f"{HOOK_USER}:{HOOK_PASSWORD}".encode()).decode()
BAD = "Basic " + base64.b64encode(f"{HOOK_USER}:wrong-password-000".encode()).decode()


def _head(method: str, headers: dict[str, str]) -> bytes:
    lines = [f"{method} /notifications HTTP/1.1", "Host: receiver"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _json(auth: str, length: int) -> dict[str, str]:
    return {
        "Authorization": auth,
        "Content-Type": "application/json",
        "Content-Length": str(length),
    }


# Each refusal: the bytes sent before the answer is read, and the rest of that request,
# which a sender that was not told to close sends on the same connection afterwards.
Refusal = tuple[bytes, bytes]


def _too_large_by_length() -> Refusal:
    body = b"{" + b" " * (LIMIT * 3) + b"}"
    return _head("POST", _json(GOOD, len(body))) + body[:100], body[100:]


def _too_large_chunked() -> Refusal:
    headers = {"Authorization": GOOD, "Content-Type": "application/json"}
    chunk = b"%x\r\n%s\r\n" % (1024, b" " * 1024)
    head = _head("POST", {**headers, "Transfer-Encoding": "chunked"})
    return head + chunk * 5, chunk + b"0\r\n\r\n"


def _wrong_credentials() -> Refusal:
    body = b'{"paymentsServiceId": "' + b"a" * 900 + b'"}'
    return _head("POST", _json(BAD, len(body))) + body[:10], body[10:]


def _wrong_method() -> Refusal:
    body = b"{" + b" " * 1000 + b"}"
    return _head("PUT", _json(GOOD, len(body))) + body[:10], body[10:]


def _too_slow() -> Refusal:
    body = b'{"paymentsServiceId": "abc"}'
    return _head("POST", _json(GOOD, len(body))) + body[:5], body[5:]


def _not_inflatable() -> Refusal:
    body = b"not-a-zip" * 10
    headers = {**_json(GOOD, len(body)), "Content-Encoding": "gzip"}
    return _head("POST", headers) + body, b""


def _inflates_too_large() -> Refusal:
    body = gzip.compress(b"{" + b" " * (LIMIT * 64) + b"}")
    headers = {**_json(GOOD, len(body)), "Content-Encoding": "gzip"}
    return _head("POST", headers) + body, b""


async def _answer(reader: asyncio.StreamReader) -> tuple[int, bool] | None:
    """The next answer's status and whether it says ``Connection: close``; None at EOF."""
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    fields = dict(line.lower().split(": ", 1) for line in lines[1:] if ": " in line)
    await reader.readexactly(int(fields.get("content-length", "0")))
    return int(lines[0].split(" ")[1]), fields.get("connection") == "close"


@pytest.mark.parametrize(
    ("refusal", "status"),
    [
        (_too_large_by_length, 413),
        (_too_large_chunked, 413),
        (_wrong_credentials, 401),
        (_wrong_method, 405),
        (_too_slow, 408),
        (_not_inflatable, 400),
        (_inflates_too_large, 413),
    ],
    ids=["413-length", "413-chunked", "401", "405", "408", "400-gzip", "413-gzip"],
)
async def test_a_refusal_closes_its_connection_so_the_next_notice_on_it_lands(
    refusal: Callable[[], Refusal], status: int
) -> None:
    async with (
        notifying_stack(limits=ReceiverLimits(max_body_bytes=LIMIT)) as st,
        ReceiverServer(st.receiver, body_read_timeout=0.3) as server,
    ):
        psid = (await st.client.submit_credit_transfer(credit_transfer())).payments_service_id
        notice = msgspec.json.encode(
            {
                "paymentsServiceId": psid,
                "originalMessage": f"{st.sandbox.url}{PACS008_PATH}/{psid}",
                "statusReportMessage": f"{st.sandbox.url}{PACS002_PATH}/{psid}",
            }
        )
        host, port = server.url.removeprefix("http://").split("/")[0].rsplit(":", 1)
        sent, rest = refusal()

        # A keep-alive sender: one connection, reused unless an answer says close.
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(sent)
        first = await _answer(reader)
        assert first is not None
        assert first[0] == status
        closing = first[1]
        if closing:
            writer.close()
            reader, writer = await asyncio.open_connection(host, int(port))
        else:
            writer.write(rest)
        writer.write(_head("POST", _json(GOOD, len(notice))) + notice)
        second = await _answer(reader)
        writer.close()

        assert second is not None, "the next notice got no answer (a reset)"
        assert second[0] == 202
        assert st.receiver.stats.accepted == 1
