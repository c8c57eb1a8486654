"""A service that stops answering is named within seconds, also while a command waits.

A waiter polls until its own deadline (minutes) and a bulk run rides out short outages;
a person at the terminal wants to know at once when every request fails to connect.
`ConnectWatch` is told about every HTTP attempt (a client hook) and, once every attempt
has failed to connect for the CLI's connect window, stops what is waiting with one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Final

from payments_async import Hooks, PaymentsError, RequestEvent, TransportError

from ._defaults import CLI_RETRY_TIMEOUT
from ._exit import EXIT_SERVICE, CliError

__all__ = ["ConnectWatch"]

_CHECK_EVERY: Final = 0.25
"""Seconds between two looks at the attempts' state."""

Describe = Callable[[PaymentsError], Awaitable[str | None]]
"""Why the service cannot be reached (a fresh probe), or None when it can be now."""


class ConnectWatch:
    """Since when every HTTP attempt of a client has failed to connect.

    Give `hooks` to the client; an attempt that got any answer (or failed after its
    request left) ends the outage.

    Args:
        window: seconds of failing to connect before the wait is stopped.
    """

    def __init__(self, window: float = CLI_RETRY_TIMEOUT) -> None:
        self._window = window
        self._since: float | None = None  # monotonic, first failure of the outage
        self._since_wall = 0.0
        self._last: PaymentsError | None = None
        self.hooks = Hooks(on_request=self._observe)

    def _observe(self, event: RequestEvent) -> None:
        err = event.error
        if event.status is None and isinstance(err, TransportError) and not err.request_sent:
            if self._since is None:
                self._since = time.monotonic()
                self._since_wall = time.time()
            self._last = err
        else:
            self._since = None
            self._last = None

    def _down(self) -> PaymentsError | None:
        """The last error, once every attempt has failed to connect for the window."""
        if self._since is None or time.monotonic() - self._since < self._window:
            return None
        return self._last

    async def _wait_until_down(self, describe: Describe) -> str:
        """Return the line to show once the service has been unreachable for the window."""
        while True:
            await asyncio.sleep(_CHECK_EVERY)
            if self._down() is None:
                continue
            line = await self.outage(describe)
            if line is not None and self._down() is not None:  # else it answered meanwhile
                return line

    async def outage(self, describe: Describe) -> str | None:
        """The line naming an outage under way, however long ("connection refused to URL
        since 12:03:04"), or None when the last attempt did not fail to connect.

        For a command that gave up on its own deadline while every attempt failed to
        connect (the token window at the start): the operator is told the service is
        down, as when the watch stops a wait, whichever request met the outage first.
        """
        last = self._last
        if last is None:
            return None
        why = await describe(last)
        if self._last is None:  # it answered while being probed
            return None
        since = time.strftime("%H:%M:%S", time.localtime(self._since_wall))
        return f"{why or last} since {since}"

    @contextlib.asynccontextmanager
    async def guard(self, describe: Describe) -> AsyncIterator[None]:
        """Run the block; stop it with exit 3 and one line once the service is unreachable.

        Raises:
            CliError: every attempt failed to connect for the window (exit 3); the line
                says why ("connection refused to URL since 12:03:04").
        """
        task = asyncio.current_task()
        assert task is not None
        async with self.stop_when_down(describe, task.cancel) as line:
            try:
                yield
            except asyncio.CancelledError:
                if line and task.uncancel() == 0:
                    raise CliError(line[0], EXIT_SERVICE) from None
                raise

    @contextlib.asynccontextmanager
    async def stop_when_down(
        self, describe: Describe, stop: Callable[[], object]
    ) -> AsyncIterator[list[str]]:
        """Call ``stop`` once the service is unreachable; the list yielded then holds the
        line that says so."""
        line: list[str] = []

        async def watchdog() -> None:
            line.append(await self._wait_until_down(describe))
            stop()

        dog = asyncio.create_task(watchdog())
        try:
            yield line
        finally:
            dog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await dog
