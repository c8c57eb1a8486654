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
from ._items import INBOX_BACK

__all__ = ["prune", "sweep"]

logger = logging.getLogger("payments_async.notifications")


async def sweep(
    inbox: StoredInbox, policy: Sweep, stored: Callable[[], None], failing: Spell
) -> None:
    """Forever: put a short notice in the inbox for every tracked id past its grace, at
    most ``policy.rate`` per second, as if the service had sent it; call ``stored`` after
    each so the workers look at once. An inbox that cannot be used is noted in
    ``failing``, the receiver's one spell of inbox failures (said once per outage)."""
    pause = 1.0 / policy.rate
    idle = min(policy.grace / 2, 1.0)
    while True:
        try:
            due = await inbox.due_tracked(max(1, int(policy.rate)), recheck=policy.grace)
        except InboxError as exc:
            failing.failed("cannot read the tracked ids: %s", exc, told=told(exc))
            due = []
        else:
            failing.ended(INBOX_BACK)
        for kind, psid in due:
            try:
                await inbox.put(Notification(psid, NotificationKind(kind), "short"))
            except InboxError as exc:  # read again after the grace
                failing.failed("sweep of %s not stored: %s", psid, exc, told=told(exc))
            else:
                failing.ended(INBOX_BACK)
            stored()
            await asyncio.sleep(pause)
        if not due:
            await asyncio.sleep(idle)


async def prune(inbox: StoredInbox, retention: float, failing: Spell) -> None:
    """Forever: delete what is past ``retention`` now, then every ``NOTIFY_PRUNE_EVERY`` s;
    a failure is noted in ``failing`` (see `sweep`)."""
    while True:
        try:
            pruned = await inbox.prune(retention)
        except InboxError as exc:
            failing.failed("cannot prune the inbox: %s", exc, told=told(exc))
        else:
            failing.ended(INBOX_BACK)
            if pruned:
                logger.info("pruned %d done items and delivered marks", pruned)
        await asyncio.sleep(NOTIFY_PRUNE_EVERY)
