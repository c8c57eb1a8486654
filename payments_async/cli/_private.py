"""The library's private names the command line still uses, each in this one place.

Everything else the commands need comes from the library's public modules. Each name
here waits for a public one: the sandbox's runner, option table and notification target,
a key generator for the demo, and the defaults and event-loop runner of ``_constants`` and
``_loop``.

The light names (defaults, the loop runner) are imported at once; the others when they
are asked for, so that ``payments-async --help`` loads no HTTP client, codec or database
driver.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .._constants import (
    DEFAULT_KEYGEN_BITS,
    MIN_RSA_BITS,
    NOTIFY_PATH,
    POLL_TIMEOUT,
    SANDBOX_CLIENT_ID,
    TOKEN_PATH,
)
from .._loop import LOOP_CHOICES, LoopKind
from .._loop import run as run_loop

if TYPE_CHECKING:
    from .._keys import generate_private_key, load_public_key, public_key_pem
    from ..sandbox._config import NotificationTarget
    from ..sandbox._main import run_from_args as run_sandbox
    from ..sandbox._options import SANDBOX_OPTIONS, SandboxOption, sandbox_namespace

__all__ = [
    "DEFAULT_KEYGEN_BITS",
    "LOOP_CHOICES",
    "MIN_RSA_BITS",
    "NOTIFY_PATH",
    "POLL_TIMEOUT",
    "SANDBOX_CLIENT_ID",
    "SANDBOX_OPTIONS",
    "TOKEN_PATH",
    "LoopKind",
    "NotificationTarget",
    "SandboxOption",
    "generate_private_key",
    "load_public_key",
    "public_key_pem",
    "run_loop",
    "run_sandbox",
    "sandbox_namespace",
]

_LAZY: dict[str, tuple[str, str]] = {
    "generate_private_key": ("payments_async._keys", "generate_private_key"),
    "load_public_key": ("payments_async._keys", "load_public_key"),
    "public_key_pem": ("payments_async._keys", "public_key_pem"),
    "run_sandbox": ("payments_async.sandbox._main", "run_from_args"),
    "NotificationTarget": ("payments_async.sandbox._config", "NotificationTarget"),
    "SANDBOX_OPTIONS": ("payments_async.sandbox._options", "SANDBOX_OPTIONS"),
    "SandboxOption": ("payments_async.sandbox._options", "SandboxOption"),
    "sandbox_namespace": ("payments_async.sandbox._options", "sandbox_namespace"),
}


def __getattr__(name: str) -> object:
    try:
        module, attribute = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    return getattr(importlib.import_module(module), attribute)
