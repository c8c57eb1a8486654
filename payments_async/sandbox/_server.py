"""The sandbox on a real socket: ``SandboxServer``."""

from __future__ import annotations

import logging
from typing import Any

from .._errors import ConfigurationError
from .._serving import AppServer
from .._urls import is_loopback
from ._app import create_app
from ._config import SHUTDOWN_TIMEOUT, FaultConfig, SandboxConfig
from ._hygiene import protocol_answer
from ._notify import NOTIFIER_KEY, Notifier
from ._state import STATE_KEY, SandboxState
from ._triggers import (
    TriggerRefused,
    drop_next_notification,
    resolve_cancellation,
    send_notification,
    settle_payment,
)

__all__ = ["SandboxServer"]

logger = logging.getLogger("payments_async.sandbox")


class SandboxServer:
    """The sandbox on a real socket, as an async context manager.

    ``async with SandboxServer(SandboxConfig()) as sb:`` binds ``config.host`` (loopback)
    on ``config.port`` (0: a free port) and stops it on exit.

    Args:
        config: the configuration; defaults to ``SandboxConfig()``.

    Raises:
        ConfigurationError: a non-loopback host without ``allow_non_loopback``.
    """

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        if not self.config.allow_non_loopback and not is_loopback(self.config.host):
            raise ConfigurationError(
                f"refusing to bind {self.config.host!r}: the sandbox's control routes have "
                "no authentication; bind a loopback address or set allow_non_loopback"
            )
        self.app = create_app(self.config)
        self.state: SandboxState = self.app[STATE_KEY]
        self.notifier: Notifier = self.app[NOTIFIER_KEY]
        self._server = AppServer(
            self.app,
            host=self.config.host,
            port=self.config.port,
            answer=protocol_answer,
            log=logger,
            backlog=self.config.backlog,
            shutdown_timeout=SHUTDOWN_TIMEOUT,
            max_line_size=self.config.max_header_size,
            max_field_size=self.config.max_header_size,
            limits=self.config.connection_limits,
        )

    @property
    def port(self) -> int:
        """The bound port.

        Raises:
            RuntimeError: the server is not started.
        """
        if not self._server.started:
            raise RuntimeError("the sandbox server is not started")
        return self._server.port

    @property
    def url(self) -> str:
        """``http://<host>:<port>``, the base URL clients use."""
        host = self.config.host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        """Bind and start serving."""
        await self._server.start()

    async def stop(self) -> None:
        """Stop serving and close the state (and its SQLite file)."""
        await self._server.stop()

    async def __aenter__(self) -> SandboxServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def register_client(
        self, client_id: str, secret: str, public_key_pem: str | bytes, *, kid: str, iss: str
    ) -> None:
        """Register a client and its public key (see ``SandboxState.register_client``).

        Called again with the same client id and secret and another kid, it adds a second
        key (a key rotation): an access token is then bound to the kid of the assertion it
        was issued for, and SCA tokens sent with it must carry that kid.

        Raises:
            ConfigurationError: the key is under 2048 bits, malformed or not RSA.
        """
        self.state.register_client(client_id, secret, public_key_pem, kid=kid, iss=iss)

    def stats(self) -> dict[str, Any]:
        """The counters, as ``GET /_sandbox/stats`` returns them."""
        out = self.state.snapshot()
        out["notifications"] = self.notifier.snapshot()
        return out

    def set_faults(self, faults: FaultConfig) -> None:
        """Replace the fault settings (and reseed)."""
        self.state.set_faults(faults)

    # --- per-id triggers (``POST /_sandbox/...``; see docs/sandbox.md) --------------------

    def settle_payment(
        self, payments_service_id: str, status: str, reason: str | None = None
    ) -> None:
        """Settle a pending payment now: ``"ACCC"``, or ``"RJCT"`` with an ISO reason code.

        Raises:
            LookupError: no payment with this id.
            ValueError: bad input, or the payment is no longer pending.
        """
        _applied(settle_payment, self, payments_service_id, status, reason)

    def resolve_cancellation(
        self,
        payments_service_id: str,
        outcome: str,
        reason: str | None = None,
        text: str | None = None,
    ) -> None:
        """Resolve a pending cancellation now: ``"accepted"``, or ``"rejected"`` with a reason.

        Raises:
            LookupError: no cancellation with this id.
            ValueError: bad input, the cancellation is final, or it has no payment it can
                still stop (for ``"accepted"``).
        """
        _applied(resolve_cancellation, self, payments_service_id, outcome, reason, text)

    def send_notification(self, payments_service_id: str) -> None:
        """Send the notification of the id's current status now (again, if it was sent).

        Raises:
            LookupError: no payment or cancellation with this id.
            ValueError: its client has no notification target.
        """
        _applied(send_notification, self, payments_service_id)

    def drop_next_notification(self, payments_service_id: str) -> None:
        """Drop the next notification of this id, as if it were lost.

        Raises:
            LookupError: no payment or cancellation with this id.
        """
        try:
            drop_next_notification(self.state, self.notifier, payments_service_id)
        except TriggerRefused as exc:
            raise LookupError(exc.message) from None


def _applied(trigger: Any, server: SandboxServer, psid: str, *args: object) -> None:
    """Apply a trigger in process; its refusal as LookupError (404) or ValueError."""
    base_url = server.url if server._server.started else None
    try:
        trigger(server.state, server.notifier, psid, *args, base_url=base_url)
    except TriggerRefused as exc:
        if exc.status == 404:
            raise LookupError(exc.message) from None
        raise ValueError(exc.message) from None
