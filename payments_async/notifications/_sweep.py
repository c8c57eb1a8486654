"""The inbox's chores on a clock: the sweep that reads tracked ids whose notification never
came, and the pruning of what is past retention."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from .._store import Spell, told
from ._config import Sweep
from ._core import Notification, NotificationKind
from ._defaults import NOTIFY_PRUNE_EVERY
from ._inbox import InboxError, StoredInbox

__all__ = ["prune", "sweep"]

logger = logging.getLogger("payments_async.notifications")


async def sweep(inbox: StoredInbox, policy: Sweep, stored: Callable[[], None]) -> None:
    """Forever: put a short notice in the inbox for every tracked id past its grace, at
    most ``policy.rate`` per second, as if the service had sent it; call ``stored`` after
    each so the workers look at once."""
    pause = 1.0 / policy.rate
    idle = min(policy.grace / 2, 1.0)
    reading = Spell(logger)  # an inbox that cannot be read is said once per outage
    while True:
        try:
            due = await inbox.due_tracked(max(1, int(policy.rate)), recheck=policy.grace)
        except InboxError as exc:
            reading.failed("cannot read the tracked ids: %s", exc, told=told(exc))
            due = []
        else:
            reading.ended("the tracked ids can be read again")
        for kind, psid in due:
            try:
                await inbox.put(Notification(psid, NotificationKind(kind), "short"))
            except InboxError as exc:  # read again after the grace
                logger.warning("sweep of %s not stored: %s", psid, exc)
            stored()
            await asyncio.sleep(pause)
        if not due:
            await asyncio.sleep(idle)


async def prune(inbox: StoredInbox, retention: float) -> None:
    """Forever: delete what is past ``retention`` now, then every ``NOTIFY_PRUNE_EVERY`` s."""
    while True:
        try:
            pruned = await inbox.prune(retention)
        except InboxError as exc:
            logger.warning("cannot prune the inbox: %s", exc)
        else:
            if pruned:
                logger.info("pruned %d done items and delivered marks", pruned)
        await asyncio.sleep(NOTIFY_PRUNE_EVERY)
