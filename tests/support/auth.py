"""Shared pieces of the authentication tests: the service's names and a scripted token endpoint.

Their fixtures (``rsa_key``, ``other_rsa_key``, ``mock_http``, ``token_server``) are in
``tests/unit/conftest.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: test_keys and test_jwt run without aioresponses
    from aioresponses import CallbackResult

BASE_URL = "https://payments.example.test"
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
