"""Shared pieces of the sandbox integration tests: a raw-HTTP client acting as a user.

These tests talk to the sandbox with ``aiohttp.ClientSession`` directly (never the client
library), sign with ``JwtSigner`` as a client would, and move a ``ManualClock``.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import msgspec

from payments_async._constants import (
    CAMT029_PATH,
    CAMT056_PATH,
    JWT_BEARER_GRANT,
    PACS002_PATH,
    PACS008_PATH,
    SANDBOX_ASSERTION,
    SANDBOX_CLIENT_ID,
    SANDBOX_CLIENT_SECRET,
    SANDBOX_SCA_TOKEN,
    TOKEN_PATH,
    TOKEN_SCOPE,
)
from payments_async._jwt import JwtSigner
from payments_async.iso20022 import (
    Camt056,
    Pacs008,
    encode,
)
from payments_async.testing import SandboxHandle

PROCESSING_DELAY = 10.0
SETTLEMENT_DELAY = 5.0


def basic(client_id: str, secret: str) -> str:
    return "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()


def form(assertion: str, **override: str) -> dict[str, str]:
    data = {"grant_type": JWT_BEARER_GRANT, "assertion": assertion, "scope": TOKEN_SCOPE}
    data.update(override)
    return data


@dataclass
class Reply:
    """What came back: status, headers and the decoded JSON body (or None)."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    json: Any = field(default=None)

    @property
    def codes(self) -> list[str]:
        """The error codes of an error envelope."""
        return [e["code"] for e in (self.json or {}).get("errors", [])]

    @property
    def data(self) -> dict[str, Any]:
        """The submission result, wrapped or bare."""
        assert isinstance(self.json, dict)
        return self.json.get("data", self.json)  # type: ignore[no-any-return]


@dataclass
class RawClient:
    """A client written with raw aiohttp, to test the sandbox from the outside."""

    http: aiohttp.ClientSession
    url: str
    client_id: str
    secret: str
    signer: JwtSigner | None  # None: predefined tokens
    token: str | None = None

    async def request(
        self,
        method: str,
        path: str,
        *,
        headers: Mapping[str, str] | None = None,
        data: Any = None,
        skip_auto_headers: tuple[str, ...] = (),
    ) -> Reply:
        async with self.http.request(
            method,
            self.url + path,
            headers=headers,
            data=data,
            skip_auto_headers=skip_auto_headers,
        ) as r:
            body = await r.read()
            try:
                decoded = msgspec.json.decode(body) if body else None
            except msgspec.DecodeError:
                decoded = None
            return Reply(r.status, dict(r.headers), body, decoded)

    def assertion(self) -> str:
        return SANDBOX_ASSERTION if self.signer is None else self.signer.assertion(self.client_id)

    async def fetch_token(self, assertion: str | None = None) -> Reply:
        reply = await self.request(
            "POST",
            TOKEN_PATH,
            headers={
                "Authorization": basic(self.client_id, self.secret),
                "Accept": "application/json",
            },
            data=form(assertion or self.assertion()),
        )
        if reply.status == 200:
            self.token = reply.json["access_token"]
        return reply

    async def ensure_token(self) -> str:
        if self.token is None:
            reply = await self.fetch_token()
            assert reply.status == 200, reply.json
        assert self.token is not None
        return self.token

    def sca(self, body: bytes) -> str:
        return SANDBOX_SCA_TOKEN if self.signer is None else self.signer.sca_token(body)

    async def api_headers(self, *, body: bytes | None = None) -> dict[str, str]:
        headers = {
            "Authorization": f"Bearer {await self.ensure_token()}",
            "X-Service-Client-Id": self.client_id,
            "Accept": "application/json",
        }
        if body is not None:
            headers["Content-Type"] = "application/json"
            headers["sca-token"] = self.sca(body)
        return headers

    async def post(
        self,
        path: str,
        body: bytes,
        *,
        headers: Mapping[str, str] | None = None,
        omit: tuple[str, ...] = (),
    ) -> Reply:
        h = await self.api_headers(body=body)
        if headers:
            h.update(headers)
        for name in omit:
            del h[name]
        return await self.request("POST", path, headers=h, data=body, skip_auto_headers=omit)

    async def submit_payment(self, msg: Pacs008 | bytes, **kw: Any) -> Reply:
        body = msg if isinstance(msg, bytes) else encode(msg)
        return await self.post(PACS008_PATH, body, **kw)

    async def submit_cancellation(self, msg: Camt056 | bytes, **kw: Any) -> Reply:
        body = msg if isinstance(msg, bytes) else encode(msg)
        return await self.post(CAMT056_PATH, body, **kw)

    async def payment_status(self, psid: str) -> Reply:
        return await self.request("GET", f"{PACS002_PATH}/{psid}", headers=await self.api_headers())

    async def cancellation_outcome(self, psid: str) -> Reply:
        return await self.request("GET", f"{CAMT029_PATH}/{psid}", headers=await self.api_headers())


def tx_status(reply: Reply) -> str:
    """``txSts`` of a pacs.002 reply."""
    return reply.json["fitoFIPmtStsRpt"]["txInfAndSts"][0]["txSts"]  # type: ignore[no-any-return]


def cancellation_status(reply: Reply) -> tuple[str, str]:
    """``(sts.conf, txCxlSts)`` of a camt.029 reply."""
    body = reply.json["rsltnOfInvstgtn"]
    return body["sts"]["conf"], body["cxlDtls"][0]["txInfAndSts"][0]["txCxlSts"]


def client_for(http: aiohttp.ClientSession, sb: SandboxHandle) -> RawClient:
    """A raw client signing with the handle's registered key."""
    creds = sb.credentials
    assert creds is not None
    assert sb.private_key is not None
    signer = JwtSigner(sb.private_key, key_id=creds.key_id, issuer=creds.issuer)
    return RawClient(http, sb.url, creds.client_id, creds.client_secret, signer)


def predefined_client(http: aiohttp.ClientSession, sb: SandboxHandle) -> RawClient:
    """A raw client of the predefined sandbox client, sending the predefined tokens."""
    return RawClient(http, sb.url, SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET, None)


def new_id(prefix: str = "T") -> str:
    return f"{prefix}{uuid.uuid4().hex[:20]}"
