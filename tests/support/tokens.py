"""A client's token fetch given a generous deadline of its own, for tests whose client
timeout is short on purpose and about something else (a read's or a call's bound)."""

from __future__ import annotations

from typing import Any

import pytest

from payments_async import _client
from payments_async._tokens import TokenSession

UNHURRIED = 30.0  # seconds: a loaded machine's token fetch finishes well within it


def unhurried_token_fetch(monkeypatch: pytest.MonkeyPatch, seconds: float = UNHURRIED) -> None:
    """Clients built after this call fetch their tokens within ``seconds``, whatever their
    ``Timeout.token``; each token request is still bounded by the client's connect and read
    timeouts, and retried within ``seconds``. A call waiting for a token stays bounded by
    its own total: fetch the token first (``access_token_lifetime()``)."""

    def session(*args: Any, **kwargs: Any) -> TokenSession:
        kwargs["fetch_deadline"] = seconds
        return TokenSession(*args, **kwargs)

    monkeypatch.setattr(_client, "TokenSession", session)
