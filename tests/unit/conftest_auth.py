"""Shared fixtures of the authentication tests: one RSA key per session, mocked HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

from payments_async._keys import generate_private_key

if TYPE_CHECKING:  # imported where used: test_keys and test_jwt run without aioresponses
    from aioresponses import CallbackResult, aioresponses

BASE_URL = "https://payments.example.test"


@pytest.fixture(scope="session")
def rsa_key(rsa_private_key: RSAPrivateKey) -> RSAPrivateKey:
    """The suite's one 2048-bit key (tests/conftest.py): generating RSA keys is slow."""
    return rsa_private_key


@pytest.fixture(scope="session")
def other_rsa_key() -> RSAPrivateKey:
    """A second key, for "signed with the wrong key" cases."""
    return generate_private_key(2048)


@pytest.fixture
def mock_http() -> Iterator[aioresponses]:
    """aioresponses (the test extra pins aiohttp < 3.14, which it supports)."""
    from aioresponses import aioresponses

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

    async def respond(self, url: Any, **kwargs: Any) -> CallbackResult:
        from aioresponses import CallbackResult

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
            return CallbackResult(status=200, payload=payload)
        status, payload = step
        if isinstance(payload, bytes | str):
            return CallbackResult(status=status, body=payload, content_type="text/html")
        return CallbackResult(status=status, payload=payload)


@pytest.fixture
def token_server(mock_http: aioresponses) -> TokenServer:
    """A token endpoint answering 200 with a new token per call, unless scripted."""
    server = TokenServer()
    mock_http.post(TOKEN_URL, callback=server.respond, repeat=True)
    return server
