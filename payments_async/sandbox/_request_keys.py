"""What the sandbox notes on a request while it handles it, under aiohttp's request keys."""

from __future__ import annotations

from typing import Any, Final

from aiohttp import web

__all__ = ["ACCESS_TOKEN", "CLIENT_ID", "STATUS"]


def _key(name: str) -> Any:
    # aiohttp 3.14 has typed request keys and warns about text ones; older versions take
    # the text.
    make = getattr(web, "RequestKey", None)
    return make(name) if make is not None else name


STATUS: Final = _key("payments_sandbox.status")
"""The status the access log shows when no response was sent (a dropped connection)."""
CLIENT_ID: Final = _key("payments_sandbox.client_id")
"""The client the request's token or assertion authenticated."""
ACCESS_TOKEN: Final = _key("payments_sandbox.access_token")
"""The access token the request presented, once checked."""
