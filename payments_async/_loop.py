"""The event loop our programs run on: uvloop's when the ``speed`` extra is installed.

Only the programs we ship (the CLI and its bulk runner, the sandbox) use this; the library
never installs an event loop or a loop policy for its callers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

from ._errors import ConfigurationError

__all__ = ["LOOP_CHOICES", "LoopKind", "loop_factory", "run"]

T = TypeVar("T")
LoopKind = Literal["auto", "asyncio", "uvloop"]
LOOP_CHOICES: tuple[LoopKind, ...] = ("auto", "asyncio", "uvloop")


def loop_factory(kind: LoopKind = "auto") -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory of the event loop to run on (None: asyncio's default loop).

    Args:
        kind: ``"auto"`` (uvloop when importable), ``"asyncio"`` or ``"uvloop"``.

    Raises:
        ConfigurationError: ``"uvloop"`` was asked for and is not installed.
    """
    if kind == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if kind == "uvloop":
            raise ConfigurationError(
                "uvloop is not installed: pip install 'payments-async[speed]'"
            ) from None
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def run(coro: Coroutine[Any, Any, T], *, kind: LoopKind = "auto") -> T:
    """``asyncio.run(coro)`` on the loop ``kind`` names, without touching the loop policy."""
    try:
        factory = loop_factory(kind)
    except ConfigurationError:
        coro.close()  # never started: no "coroutine was never awaited" warning
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(coro)
