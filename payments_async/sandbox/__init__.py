"""A local emulator of the payments service (aiohttp.web) for demos, tests and benchmarks.

``async with SandboxServer(SandboxConfig()) as sb:`` serves it on a free loopback port;
``python -m payments_async.sandbox`` runs it as a process. See ``docs/sandbox.md``.
"""

from .._serving import ServerLimits
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
from ._main import main, run, run_from_options
from ._options import SANDBOX_OPTIONS, SandboxOption
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
    "SANDBOX_OPTIONS",
    "STATE_KEY",
    "ClientKey",
    "ErrorCode",
    "FaultConfig",
    "NotificationFaults",
    "NotificationSettings",
    "NotificationTarget",
    "SandboxConfig",
    "SandboxOption",
    "SandboxServer",
    "SandboxState",
    "ServerLimits",
    "create_app",
    "main",
    "run",
    "run_from_options",
]
