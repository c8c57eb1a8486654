"""The sandbox as an ``aiohttp.web`` application: its routes and middleware wired together.

The concerns live beside it: ``_hygiene`` and ``_middleware`` (what every request goes
through), ``_auth`` (the token endpoint and the checks of every API call), ``_routes`` (the
service routes), ``_bodies`` (their cached GET bodies), ``_control`` (the ``/_sandbox``
routes), ``_notify`` (notifications) and ``_server`` (the socket).
"""

from __future__ import annotations

import email.utils

from aiohttp import web

from .._constants import TOKEN_PATH
from ._auth import token
from ._bodies import BODIES_KEY, BodyCache
from ._config import SandboxConfig
from ._control import add_control_routes
from ._middleware import middleware
from ._notify import install
from ._routes import (
    get_camt029,
    get_pacs002,
    post_camt056,
    post_pacs008,
    post_pacs028,
    prepare_checks,
)
from ._state import STATE_KEY, SandboxState, state_of

__all__ = ["STATE_KEY", "create_app"]


def create_app(config: SandboxConfig | None = None) -> web.Application:
    """Build the sandbox application.

    Args:
        config: the configuration; defaults to ``SandboxConfig()``.

    Returns:
        An ``aiohttp.web.Application``; its state is ``app[STATE_KEY]``. Its SQLite file
        (if any) is closed when the application is cleaned up.
    """
    config = config or SandboxConfig()
    state = SandboxState(config)
    app = web.Application(middlewares=[middleware], client_max_size=config.max_body_size)
    app[STATE_KEY] = state
    app[BODIES_KEY] = BodyCache()
    r = app.router
    profile = config.profile  # the edition it emulates: where each operation lives
    r.add_post(TOKEN_PATH, token, name="token")
    r.add_post(profile.pacs008_path, post_pacs008, name="pacs008")
    r.add_get(profile.pacs002_path + "/{payments_service_id}", get_pacs002, name="pacs002")
    r.add_post(profile.camt056_path, post_camt056, name="camt056")
    r.add_get(profile.camt029_path + "/{payments_service_id}", get_camt029, name="camt029")
    r.add_post(profile.pacs028_path, post_pacs028, name="pacs028")
    install(app, state, config.notifications)  # our extension: see sandbox/_notify.py
    add_control_routes(app)

    async def _prepare(_: web.Application) -> None:
        prepare_checks()  # not inside the first request, where it would hold the loop

    async def _close(_: web.Application) -> None:
        state.close()

    app.on_startup.append(_prepare)

    app.on_cleanup.append(_close)
    app.on_response_prepare.append(_date_header)
    return app


async def _date_header(request: web.Request, response: web.StreamResponse) -> None:
    """``Date`` on the sandbox's own clock (skewed or manual), as a real service's would be."""
    response.headers["Date"] = email.utils.formatdate(state_of(request).now(), usegmt=True)
