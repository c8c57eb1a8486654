"""A minimal HTTP/1.1 server that answers like the service, for measuring clients.

The sandbox checks everything the spec asks for and so costs more CPU per request than the
clients it serves; measured against it, a client benchmark measures the sandbox. This
server does only what keeps a client honest, on a raw ``asyncio.Protocol``:

* ``POST /oauth/token`` (Basic auth required) answers an access token;
* ``POST`` of a camt.056 / pacs.008 needs that token, ``X-Service-Client-Id``, a JSON
  ``Content-Type`` and an ``sca-token`` whose ``hd`` claim is the SHA-256 of the exact body
  bytes; an SCA token seen before is refused (401), as the service refuses a reused one, so
  every client must sign a fresh token per request. The RSA signature itself is not
  verified (the sandbox and the tests do that): this server must stay cheaper than the
  clients it measures. Answers 201 with a submission result echoing the message id;
* ``GET`` of a camt.029 / pacs.002 by id answers a final message (fixtures of the tests);
* ``GET /_stats`` answers the counters.

Run it as ``python benchmarks/_rawserver.py --port 0 --cpu 0``; it prints
``listening on http://127.0.0.1:PORT`` and serves until killed. Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import os
import sys
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
ACCESS_TOKEN = "raw-server-access-token"
TOKEN_BODY = msgspec.json.encode(
    {"access_token": ACCESS_TOKEN, "token_type": "bearer", "expires_in": 3600}
)
SUBMITTED = (
    b'{"data":{"paymentsServiceId":"PS-%d","paymentId":%s,"status":"PENDING",'
    b'"creationDateTime":"2026-11-23T00:00:00.000"}}'
)


class _Id(msgspec.Struct):
    id: str | None = None
    msgId: str | None = None


class _Header(msgspec.Struct):
    assgnmt: _Id | None = None
    grpHdr: _Id | None = None


class _Posted(msgspec.Struct):
    fitoFIPmtCxlReq: _Header | None = None
    fitoFICstmrCdtTrf: _Header | None = None


_POSTED = msgspec.json.Decoder(_Posted)


def _message_id(body: bytes) -> str | None:
    """``assgnmt.id`` of a camt.056 or ``grpHdr.msgId`` of a pacs.008: echoed as paymentId."""
    try:
        posted = _POSTED.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if posted.fitoFIPmtCxlReq is not None and posted.fitoFIPmtCxlReq.assgnmt is not None:
        return posted.fitoFIPmtCxlReq.assgnmt.id
    if posted.fitoFICstmrCdtTrf is not None and posted.fitoFICstmrCdtTrf.grpHdr is not None:
        return posted.fitoFICstmrCdtTrf.grpHdr.msgId
    return None


POST_PATHS = (b"/payments/camt056/v08", b"/payments/pacs008/v10")
GET_PREFIXES = {
    b"/payments/camt029/v09/": (FIXTURES / "camt029_resolution.json").read_bytes(),
    b"/payments/pacs002/v12/": (FIXTURES / "pacs002_accc.json").read_bytes(),
}
_REASONS = {
    200: b"OK",
    201: b"Created",
    400: b"Bad Request",
    401: b"Unauthorized",
    404: b"Not Found",
}
_CLAIMS = msgspec.json.Decoder(dict[str, Any])


def _error(code: str) -> bytes:
    return b'{"errors":[{"code":"' + code.encode() + b'","level":"ERROR"}]}'


class Stats:
    """What the server has answered."""

    def __init__(self) -> None:
        self.requests = 0
        self.refused = 0
        self.posts = 0
        self.gets = 0
        self.seen_sca: set[bytes] = set()


class HttpProtocol(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection; Content-Length bodies only."""

    def __init__(self, stats: Stats) -> None:
        self.stats = stats
        self.buf = bytearray()
        self.transport: Any = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # uvloop's transports are not asyncio.Transport subclasses

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            lines = bytes(self.buf[:end]).split(b"\r\n")
            method, target, _ = lines[0].split(b" ", 2)
            headers: dict[bytes, bytes] = {}
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                headers[name.strip().lower()] = value.strip()
            if b"transfer-encoding" in headers:
                self._answer(400, _error("CHUNKED_NOT_SUPPORTED"), close=True)
                return
            length = int(headers.get(b"content-length", b"0"))
            if len(self.buf) < end + 4 + length:
                return
            body = bytes(self.buf[end + 4 : end + 4 + length])
            del self.buf[: end + 4 + length]
            status, payload = self.handle(method, target, headers, body)
            self._answer(status, payload)

    def _answer(self, status: int, payload: bytes, close: bool = False) -> None:
        if status >= 400:
            self.stats.refused += 1
        self.transport.write(
            b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s"
            % (
                status,
                _REASONS[status],
                len(payload),
                b"Connection: close\r\n" if close else b"",
                payload,
            )
        )
        if close:
            self.transport.close()

    def handle(
        self, method: bytes, target: bytes, headers: dict[bytes, bytes], body: bytes
    ) -> tuple[int, bytes]:
        st = self.stats
        st.requests += 1
        if method == b"POST" and target == b"/oauth/token":
            if not headers.get(b"authorization", b"").startswith(b"Basic "):
                return 401, _error("UNAUTHORIZED")
            return 200, TOKEN_BODY
        if target == b"/_stats":
            return 200, msgspec.json.encode(
                {"requests": st.requests, "refused": st.refused, "posts": st.posts, "gets": st.gets}
            )
        if headers.get(b"authorization") != b"Bearer " + ACCESS_TOKEN.encode():
            return 401, _error("UNAUTHORIZED")
        if not headers.get(b"x-service-client-id"):
            return 400, _error("CLIENT_ID_MISSING")
        if method == b"POST" and target in POST_PATHS:
            if not headers.get(b"content-type", b"").startswith(b"application/json"):
                return 400, _error("CONTENT_TYPE")
            refused = self._check_sca(headers.get(b"sca-token"), body)
            if refused is not None:
                return 401, _error(refused)
            message_id = _message_id(body)
            if message_id is None:
                return 400, _error("INVALID_MESSAGE")
            st.posts += 1
            return 201, SUBMITTED % (st.posts, msgspec.json.encode(message_id))
        if method == b"GET":
            for prefix, answer in GET_PREFIXES.items():
                if target.startswith(prefix) and len(target) > len(prefix):
                    st.gets += 1
                    return 200, answer
        return 404, _error("NOT_FOUND")

    def _check_sca(self, token: bytes | None, body: bytes) -> str | None:
        if not token or token.count(b".") != 2:
            return "SCA_TOKEN_MISSING"
        _, claims_b64, signature = token.split(b".")
        if signature in self.stats.seen_sca:
            return "SCA_TOKEN_REPLAYED"
        try:
            claims = _CLAIMS.decode(
                base64.urlsafe_b64decode(claims_b64 + b"=" * (-len(claims_b64) % 4))
            )
        except (ValueError, msgspec.DecodeError):
            return "SCA_TOKEN_INVALID"
        if claims.get("hd") != base64.b64encode(hashlib.sha256(body).digest()).decode():
            return "SCA_HD_MISMATCH"
        self.stats.seen_sca.add(signature)
        return None


async def serve(host: str, port: int) -> None:
    loop = asyncio.get_running_loop()
    stats = Stats()
    server = await loop.create_server(lambda: HttpProtocol(stats), host, port, backlog=1024)
    bound = server.sockets[0].getsockname()[1]
    print(f"listening on http://{host}:{bound}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--cpu", type=int, help="pin this process to this core")
    p.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    args = p.parse_args(argv)
    if args.host not in ("127.0.0.1", "::1", "localhost"):
        p.error("loopback only")
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    factory = None
    if args.loop == "uvloop":
        import uvloop

        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(serve(args.host, args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
