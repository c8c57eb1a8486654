"""The sandbox's notification sender (our extension: the real sandbox sends none).

On every change to a final status (a payment processed or stopped, a cancellation
settled) the sandbox POSTs a short notice or the full status report to the URL its client
subscribed, with the credentials the client gave, at least once: non-2xx answers and
connection errors are retried with backoff. Faults (loss, duplicates, reordering, delay,
wrong credentials) are drawn from a seeded ``random.Random`` and counted, like the API
faults. Bodies are built from the message structs (``_messages``), never the client.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import random
from collections import Counter, deque
from typing import TYPE_CHECKING, Any, Final, Literal

import aiohttp
import msgspec
from aiohttp import web

from .._constants import JSON_CONTENT_TYPE
from .._urls import redact_url
from ._config import (
    NOTIFICATION_FAULT_KINDS,
    NotificationFaults,
    NotificationSettings,
    NotificationTarget,
)
from ._lifecycle import CancellationRecord, PaymentRecord
from ._messages import cancellation_outcome_body, payment_status_body

if TYPE_CHECKING:
    from ._state import SandboxState

__all__ = [
    "NOTIFIER_KEY",
    "NotificationFaults",
    "NotificationSettings",
    "NotificationTarget",
    "Notifier",
    "install",
]

logger = logging.getLogger("payments_async.sandbox.notify")

_TICK: Final = 0.5  # the scheduler looks at the clock at least this often (manual clocks)
_TIMINGS_KEPT: Final = 10_000  # recent notifications whose timings the stats summarize

_Kind = Literal["payment", "cancellation"]


class Notifier:
    """Schedules and delivers the notifications of one sandbox.

    Statuses in the sandbox are computed from timestamps, so the notifier keeps a heap of
    the instants at which a subscribed client's record becomes final, and one task that
    wakes at each of them. Nothing is scheduled for clients without a target.

    Args:
        state: the sandbox state (records, clock).
        settings: targets, faults and delivery limits.
    """

    def __init__(self, state: SandboxState, settings: NotificationSettings) -> None:
        self._state = state
        self._settings = settings
        self._targets: dict[str, NotificationTarget] = dict(settings.targets)
        self._faults = settings.faults
        self._rng = random.Random(settings.faults.seed)
        self._jitter = random.Random(settings.faults.seed + 1)
        self._heap: list[tuple[float, int, _Kind, str]] = []
        self._seq = 0
        self._notified: set[tuple[_Kind, str]] = set()
        self._drops: Counter[str] = Counter()  # ids whose next notifications are dropped
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._deliveries: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(settings.concurrency)
        self._session: aiohttp.ClientSession | None = None
        self.base_url: str | None = None
        self.counts: Counter[str] = Counter()
        self.fault_counts: Counter[str] = Counter()
        # seconds from a status becoming final to the scheduler firing its notification,
        # and to the first 2xx answer (the last _TIMINGS_KEPT of each)
        self._fire_lags: deque[float] = deque(maxlen=_TIMINGS_KEPT)
        self._delivery_lags: deque[float] = deque(maxlen=_TIMINGS_KEPT)

    # --- configuration -------------------------------------------------------------------

    def subscribe(self, client_id: str, target: NotificationTarget) -> None:
        """Notify ``client_id`` at ``target`` from now on (its pending records included)."""
        self._targets[client_id] = target
        now = self._state.now()
        for p in self._state.payments.values():
            if p.client_id == client_id and not p.status_at(now).final:
                self._schedule_payment(p)
        for c in self._state.cancellations.values():
            if c.client_id == client_id and not c.status_at(now).final:
                self._schedule("cancellation", c.settles_at, c.payments_service_id)

    def unsubscribe(self, client_id: str) -> bool:
        """Stop notifying ``client_id``; True when it had a target."""
        return self._targets.pop(client_id, None) is not None

    def set_faults(self, faults: NotificationFaults) -> None:
        """Replace the delivery faults (and reseed)."""
        self._faults = faults
        self._rng = random.Random(faults.seed)
        self._jitter = random.Random(faults.seed + 1)

    @property
    def faults(self) -> NotificationFaults:
        """The delivery faults in force."""
        return self._faults

    def snapshot(self) -> dict[str, Any]:
        """Counters and targets (secrets left out) for ``GET /_sandbox/stats``."""
        return {
            "targets": {cid: t.describe() for cid, t in self._targets.items()},
            "scheduled": self.counts["scheduled"],
            "notifications": self.counts["notifications"],
            "attempts": self.counts["attempts"],
            "delivered": self.counts["delivered"],
            "retries": self.counts["retries"],
            "failed": self.counts["failed"],
            "dropped": self.counts["dropped"],
            "pending": len(self._heap),
            "in_flight": len(self._deliveries),
            "faults": {kind: self.fault_counts.get(kind, 0) for kind in NOTIFICATION_FAULT_KINDS},
            "fire_lag_ms": _quantiles_ms(self._fire_lags),
            "delivery_lag_ms": _quantiles_ms(self._delivery_lags),
        }

    # --- scheduling ----------------------------------------------------------------------

    def stored(self, record: PaymentRecord | CancellationRecord, base_url: str) -> None:
        """A record was stored (or a payment was stopped by a cancellation just stored)."""
        self.base_url = base_url
        if isinstance(record, PaymentRecord):
            if record.client_id in self._targets:
                self._schedule_payment(record)
            return
        if record.client_id not in self._targets:
            return
        self._schedule("cancellation", record.settles_at, record.payments_service_id)
        if record.accepted and record.original_payment_id is not None:
            original = self._state.payments.get(record.original_payment_id)
            if original is not None:
                self._schedule_payment(original)

    def _schedule_payment(self, p: PaymentRecord) -> None:
        at = p.cancel_effective_at if p.cancelled_by is not None else p.processed_at
        self._schedule("payment", at if at is not None else p.processed_at, p.payments_service_id)

    def _schedule(self, kind: _Kind, at: float, psid: str) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (at, self._seq, kind, psid))
        self.counts["scheduled"] += 1
        self._wakeup.set()

    # --- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Start the scheduler task."""
        if self._task is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._settings.concurrency),
                timeout=aiohttp.ClientTimeout(total=self._settings.timeout),
            )
            self._task = asyncio.create_task(self._run(), name="sandbox-notifier")

    async def stop(self) -> None:
        """Stop scheduling and delivering; close the HTTP session."""
        task, self._task = self._task, None
        pending = [t for t in (task, *self._deliveries) if t is not None]
        for t in pending:
            t.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _run(self) -> None:
        while True:
            now = self._state.now()
            while self._heap and self._heap[0][0] <= now:
                due, _, kind, psid = heapq.heappop(self._heap)
                self._fire(kind, psid, now, due)
            wait = _TICK if not self._heap else min(_TICK, max(0.0, self._heap[0][0] - now))
            self._wakeup.clear()
            try:
                async with asyncio.timeout(wait):
                    await self._wakeup.wait()
            except TimeoutError:
                pass

    def _fire(self, kind: _Kind, psid: str, now: float, due: float) -> None:
        key = (kind, psid)
        if key in self._notified:
            return
        prepared = self._prepare(kind, psid, now, final_only=True)
        if prepared is None:
            return  # a payment stopped by a cancellation meanwhile: rescheduled by it
        target, body, _ = prepared
        self._notified.add(key)
        self._start_delivery(target, body, psid, now, due, draw_faults=True)

    def _prepare(
        self, kind: _Kind, psid: str, now: float, *, final_only: bool
    ) -> tuple[NotificationTarget, bytes, str] | None:
        """Target, body and status code of an id's notification now (None: nothing to send)."""
        body: bytes
        profile = self._state.config.profile  # short notices name the edition's paths
        if kind == "payment":
            p = self._state.payments.get(psid)
            if p is None:
                return None
            target = self._targets.get(p.client_id)
            status = p.status_at(now)
            if target is None or (final_only and not status.final):
                return None
            code = status.code
            if target.payload == "full":
                if not status.final:
                    at = p.created_at
                elif p.cancel_effective_at is not None:
                    at = p.cancel_effective_at
                else:
                    at = p.processed_at
                body = _with_id(payment_status_body(p, status, at), psid)
            else:
                body = self._short(psid, profile.pacs008_path, profile.pacs002_path)
        else:
            c = self._state.cancellations.get(psid)
            if c is None:
                return None
            target = self._targets.get(c.client_id)
            cstatus = c.status_at(now)
            if target is None or (final_only and not cstatus.final):
                return None
            code = cstatus.conf
            if target.payload == "full":
                at = c.settles_at if cstatus.final else c.created_at
                body = _with_id(cancellation_outcome_body(c, cstatus, at), psid)
            else:
                body = self._short(psid, profile.camt056_path, profile.camt029_path)
        return target, body, code

    def _start_delivery(
        self,
        target: NotificationTarget,
        body: bytes,
        psid: str,
        now: float,
        due: float,
        *,
        draw_faults: bool,
    ) -> None:
        self.counts["notifications"] += 1
        self._fire_lags.append(now - due)
        task = asyncio.create_task(self._deliver(target, body, psid, due, draw_faults=draw_faults))
        self._deliveries.add(task)
        task.add_done_callback(self._deliveries.discard)

    def send_now(self, psid: str) -> dict[str, Any] | None:
        """Send the notification of ``psid``'s current status now, final or not.

        Sent even if it was sent before (a redelivery); the random faults are not drawn
        (a drop asked for with `drop_next` still applies). A final status sent this way is
        not sent again by the scheduler.

        Returns:
            ``{"paymentsServiceId", "kind", "status"}``, or None when the id is unknown or
            its client has no target.
        """
        kind: _Kind = "payment" if psid in self._state.payments else "cancellation"
        now = self._state.now()
        prepared = self._prepare(kind, psid, now, final_only=False)
        if prepared is None:
            return None
        target, body, code = prepared
        record = self._state.payments.get(psid) or self._state.cancellations.get(psid)
        if record is not None and record.status_at(now).final:
            self._notified.add((kind, psid))
        self._start_delivery(target, body, psid, now, now, draw_faults=False)
        return {"paymentsServiceId": psid, "kind": kind, "status": code}

    def drop_next(self, psid: str) -> int:
        """Drop the next notification of ``psid`` (counted as ``dropped``); returns how
        many of its next notifications will be dropped."""
        self._drops[psid] += 1
        return self._drops[psid]

    def _short(self, psid: str, original: str, report: str) -> bytes:
        base = (self.base_url or "").rstrip("/")
        return msgspec.json.encode(
            {
                "paymentsServiceId": psid,
                "originalMessage": f"{base}{original}/{psid}",
                "statusReportMessage": f"{base}{report}/{psid}",
            }
        )

    # --- delivery ------------------------------------------------------------------------

    def _draw(self) -> set[str]:
        """The faults of the next notification; a lost one counts only as lost."""
        faults = self._faults
        if not faults.enabled:
            return set()
        # One draw per kind, always all of them in this order: a seed gives one sequence.
        hits = {k for k in NOTIFICATION_FAULT_KINDS if self._rng.random() < getattr(faults, k)}
        if "loss" in hits:
            hits = {"loss"}
        self.fault_counts.update(hits)
        return hits

    async def _deliver(
        self, target: NotificationTarget, body: bytes, psid: str, due: float, *, draw_faults: bool
    ) -> None:
        if self._drops[psid] > 0:
            self._drops[psid] -= 1
            if not self._drops[psid]:
                del self._drops[psid]
            self.counts["dropped"] += 1
            logger.info("notification for %s dropped (asked for)", psid)
            return
        faults = self._faults
        hits = self._draw() if draw_faults else set()
        if "loss" in hits:
            logger.info("notification for %s lost (injected)", psid)
            return
        hold = (faults.reorder_seconds if "reorder" in hits else 0.0) + (
            faults.delay_seconds if "delay" in hits else 0.0
        )
        if hold:
            await asyncio.sleep(hold)
        for copy in range(2 if "duplicate" in hits else 1):
            spoil = "wrong_credentials" in hits and copy == 0
            delivered = await self._send(target, body, psid, spoil_first=spoil)
            if delivered and copy == 0:
                self._delivery_lags.append(self._state.now() - due)

    async def _send(
        self, target: NotificationTarget, body: bytes, psid: str, *, spoil_first: bool
    ) -> bool:
        """Deliver one copy with retries; True when an attempt was answered 2xx."""
        settings = self._settings
        session = self._session
        if session is None:
            return False
        for attempt in range(1, settings.max_attempts + 1):
            headers = {
                "Content-Type": JSON_CONTENT_TYPE,
                "Authorization": target.authorization(wrong=spoil_first and attempt == 1),
            }
            self.counts["attempts"] += 1
            status: int | None = None
            try:
                async with (
                    self._slots,
                    session.post(target.url, data=body, headers=headers) as resp,
                ):
                    status = resp.status
                    await resp.read()
            except (aiohttp.ClientError, TimeoutError) as exc:
                logger.debug(
                    "notification for %s: attempt %d failed: %s",
                    psid,
                    attempt,
                    redact_url(str(exc)),
                )
            if status is not None and 200 <= status < 300:
                self.counts["delivered"] += 1
                return True
            if attempt == settings.max_attempts:
                break
            self.counts["retries"] += 1
            backoff = min(settings.backoff_max, settings.backoff_initial * 2 ** (attempt - 1))
            await asyncio.sleep(backoff * self._jitter.uniform(0.5, 1.0))
        self.counts["failed"] += 1
        logger.warning("notification for %s not delivered after %d attempts", psid, attempt)
        return False


def _quantiles_ms(values: deque[float]) -> dict[str, float | None]:
    """p50/p99/max in milliseconds of recent timings (None when there are none)."""
    if not values:
        return {"n": 0, "p50": None, "p99": None, "max": None}
    ordered = sorted(values)
    last = len(ordered) - 1
    return {
        "n": len(ordered),
        "p50": round(ordered[round(0.50 * last)] * 1000, 1),
        "p99": round(ordered[round(0.99 * last)] * 1000, 1),
        "max": round(ordered[-1] * 1000, 1),
    }


def _with_id(report: bytes, psid: str) -> bytes:
    # Our choice (the live body is not shown): the id beside the report's root object, so
    # a receiver can confirm it with a GET. ``report`` is a JSON object; psid is [a-z0-9-].
    return b'{"paymentsServiceId":' + msgspec.json.encode(psid) + b"," + report[1:]


NOTIFIER_KEY: Final = web.AppKey("payments_async.sandbox.notifier", Notifier)


def install(app: web.Application, state: SandboxState, settings: NotificationSettings) -> Notifier:
    """Create the notifier and run it with the app (its control routes: ``_control``)."""
    notifier = Notifier(state, settings)
    app[NOTIFIER_KEY] = notifier

    async def _start(_: web.Application) -> None:
        await notifier.start()
        for client_id, target in settings.targets.items():
            notifier.subscribe(client_id, target)

    async def _stop(_: web.Application) -> None:
        await notifier.stop()

    app.on_startup.append(_start)
    app.on_shutdown.append(_stop)
    return notifier
