"""A local emulator of the payments service (aiohttp.web) for demos, tests and benchmarks.

``async with SandboxServer(SandboxConfig()) as sb:`` serves it on a free loopback port;
``python -m payments_async.sandbox`` runs it as a process. See ``docs/sandbox.md``.
"""

from ._app import create_app
from ._config import (
    DEFAULT_AMOUNT_LIMIT,
    DEFAULT_PROCESSING_DELAY,
    DEFAULT_SETTLEMENT_DELAY,
    DEFAULT_TOKEN_LIFETIME,
    REJECT_IBAN_AC04,
    REJECT_IBAN_AC06,
    ClientKey,
    FaultConfig,
    NotificationFaults,
    NotificationSettings,
    NotificationTarget,
    SandboxConfig,
)
from ._main import main, run
from ._responses import ErrorCode
from ._server import SandboxServer
from ._state import STATE_KEY, SandboxState

__all__ = [
    "DEFAULT_AMOUNT_LIMIT",
    "DEFAULT_PROCESSING_DELAY",
    "DEFAULT_SETTLEMENT_DELAY",
    "DEFAULT_TOKEN_LIFETIME",
    "REJECT_IBAN_AC04",
    "REJECT_IBAN_AC06",
    "STATE_KEY",
    "ClientKey",
    "ErrorCode",
    "FaultConfig",
    "NotificationFaults",
    "NotificationSettings",
    "NotificationTarget",
    "SandboxConfig",
    "SandboxServer",
    "SandboxState",
    "create_app",
    "main",
    "run",
]
