"""Receive the service's status notifications, confirm them, and wake the waiters.

```python
async with NotificationReceiver(
    client, auth=BasicAuth("service", secret), on_cancellation_outcome=handle
) as receiver, ReceiverServer(receiver, port=8080):
    outcome = await client.wait_for_cancellation_outcome(psid)  # woken by a notification
```

A notification is only a hint: the receiver confirms every status with the client's own
signed GET before a callback or a waiter sees it, never follows a URI outside the client's
``base_url``, answers 202 only once the notification is committed to its inbox (a SQLite
file or PostgreSQL; in memory by default, which is not durable) and processes it
afterwards, and hands each final status of an id to the callbacks exactly once. ``parse`` and
``authenticate`` are pure, so the receiver can be mounted in any framework
(``NotificationReceiver.handle``). See ``docs/notifications.md``.
"""

from .._constants import NOTIFY_PATH
from .._serving import ServerLimits
from ._app import ReceiverServer, create_app
from ._config import ReceiverLimits, Retries, Sweep
from ._core import (
    Authenticator,
    BasicAuth,
    BearerAuth,
    JwtBearerVerifier,
    Notification,
    NotificationKind,
    NotificationRejected,
    authenticate,
    parse,
)
from ._events import NotificationEvent, ReceiverStats
from ._inbox import (
    Inbox,
    InboxBusyError,
    InboxError,
    InboxFull,
    InboxItem,
    InboxStatus,
    InboxUnavailableError,
    MemoryInbox,
    open_inbox,
)
from ._postgres import PostgresInbox
from ._receiver import NotificationReceiver
from ._sqlite import SqliteInbox

__all__ = [
    "NOTIFY_PATH",
    "Authenticator",
    "BasicAuth",
    "BearerAuth",
    "Inbox",
    "InboxBusyError",
    "InboxError",
    "InboxFull",
    "InboxItem",
    "InboxStatus",
    "InboxUnavailableError",
    "JwtBearerVerifier",
    "MemoryInbox",
    "Notification",
    "NotificationEvent",
    "NotificationKind",
    "NotificationReceiver",
    "NotificationRejected",
    "PostgresInbox",
    "ReceiverLimits",
    "ReceiverServer",
    "ReceiverStats",
    "Retries",
    "ServerLimits",
    "SqliteInbox",
    "Sweep",
    "authenticate",
    "create_app",
    "open_inbox",
    "parse",
]
