"""Shared fixtures of the authentication tests: one RSA key per session, mocked HTTP."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import aiohttp
import aioresponses.core as aioresponses_core
import pytest
from aioresponses import aioresponses
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

from payments_async._keys import generate_private_key

BASE_URL = "https://payments.example.test"


# aiohttp < 3.14 takes no ``stream_writer``; the shim only fills it in where it is required.
_NEEDS_STREAM_WRITER = (
    "stream_writer" in inspect.signature(aiohttp.ClientResponse.__init__).parameters
)


class _CompatClientResponse(aiohttp.ClientResponse):
    """aioresponses 0.7.9 predates aiohttp 3.14's required ``stream_writer`` argument.

    Known upstream (pnuckowski/aioresponses#289, fix proposed in #288): supply a stand-in
    writer whose upload is already complete, which is what a replayed response is. On
    aiohttp < 3.14 this class changes nothing.
    """

    def __init__(self, method: str, url: Any, **kwargs: Any) -> None:
        if _NEEDS_STREAM_WRITER:
            kwargs.setdefault("stream_writer", SimpleNamespace(output_size=0))
        super().__init__(method, url, **kwargs)


@pytest.fixture(scope="session")
def rsa_key() -> RSAPrivateKey:
    """One 2048-bit key for the whole run: generating RSA keys is slow."""
    return generate_private_key(2048)


@pytest.fixture(scope="session")
def other_rsa_key() -> RSAPrivateKey:
    """A second key, for "signed with the wrong key" cases."""
    return generate_private_key(2048)


@pytest.fixture
def mock_http(monkeypatch: pytest.MonkeyPatch) -> Iterator[aioresponses]:
    """aioresponses, made to work with aiohttp 3.14."""
    monkeypatch.setattr(aioresponses_core, "ClientResponse", _CompatClientResponse)
    with aioresponses() as mocked:
        yield mocked


TOKEN_URL = BASE_URL + "/oauth/token"
CLIENT_ID = "client-1"
CLIENT_SECRET = "s3cret-Client-Secret-Value"
KEY_ID = "kid-1"
ISSUER = "issuer-1"


class TokenServer:
    """A scripted token endpoint behind aioresponses.

    ``script`` holds what the next calls answer: a ``(status, payload)`` pair, an
    exception instance to raise (a transport failure), or ``"token"`` for a fresh
    200 response. When the script is empty, ``default`` answers.
    """

    def __init__(self, *, expires_in: int | str = 3600) -> None:
        self.expires_in = expires_in
        self.script: list[Any] = []
        self.default: Any = "token"
        self.calls: list[dict[str, Any]] = []
        self.issued: list[str] = []
        self.gate: Any = None  # an asyncio.Event the endpoint waits on, when set

    async def respond(self, url: Any, **kwargs: Any) -> aioresponses_core.CallbackResult:
        self.calls.append(kwargs)
        if self.gate is not None:
            await self.gate.wait()
        step = self.script.pop(0) if self.script else self.default
        if isinstance(step, BaseException):
            raise step
        if step == "token":
            value = f"access-token-{len(self.issued) + 1}-Zx9"
            self.issued.append(value)
            payload = {
                "access_token": value,
                "token_type": "bearer",
                "expires_in": self.expires_in,
                "scope": "makePayments",
            }
            return aioresponses_core.CallbackResult(status=200, payload=payload)
        status, payload = step
        if isinstance(payload, bytes | str):
            return aioresponses_core.CallbackResult(
                status=status, body=payload, content_type="text/html"
            )
        return aioresponses_core.CallbackResult(status=status, payload=payload)


@pytest.fixture
def token_server(mock_http: aioresponses) -> TokenServer:
    """A token endpoint answering 200 with a new token per call, unless scripted."""
    server = TokenServer()
    mock_http.post(TOKEN_URL, callback=server.respond, repeat=True)
    return server
