"""The event loop our programs run on: uvloop's when the ``speed`` extra is installed.

```python
from payments_async.loop import run

run(main(), kind="auto")  # asyncio.run(main()), on uvloop when it is installed
```

The programs we ship (the command line, the sandbox) run on it, and so may yours. The
library itself never installs an event loop or a loop policy for its callers: nothing
changes unless a program calls ``run``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Final, Literal, TypeVar

from ._errors import ConfigurationError

__all__ = ["LOOP_CHOICES", "LoopKind", "loop_factory", "run"]

T = TypeVar("T")

LoopKind = Literal["auto", "asyncio", "uvloop"]
"""Which event loop to run on: ``"auto"`` (uvloop when importable, else asyncio's own),
``"asyncio"`` (asyncio's own, always) or ``"uvloop"`` (uvloop, or an error)."""

LOOP_CHOICES: Final[tuple[LoopKind, ...]] = ("auto", "asyncio", "uvloop")
"""Every ``LoopKind``, in the order a ``--loop`` option lists them."""


def loop_factory(kind: LoopKind = "auto") -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory of the event loop to run on, for ``asyncio.Runner(loop_factory=...)``.

    Args:
        kind: ``"auto"`` (uvloop when importable), ``"asyncio"`` or ``"uvloop"``.

    Returns:
        uvloop's ``new_event_loop``, or None for asyncio's default loop.

    Raises:
        ConfigurationError: ``kind`` is none of those, or ``"uvloop"`` was asked for and
            is not installed.
    """
    if kind not in LOOP_CHOICES:
        raise ConfigurationError(f"unknown event loop {kind!r}: one of {', '.join(LOOP_CHOICES)}")
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
    """``asyncio.run(coro)`` on the loop ``kind`` names, without touching the loop policy.

    Args:
        coro: the coroutine to run to completion.
        kind: the event loop to run it on (see ``LoopKind``).

    Returns:
        What ``coro`` returns.

    Raises:
        ConfigurationError: ``kind`` is ``"uvloop"`` and uvloop is not installed; ``coro``
            is then closed without being started.
    """
    try:
        factory = loop_factory(kind)
    except ConfigurationError:
        coro.close()  # never started: no "coroutine was never awaited" warning
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(coro)
