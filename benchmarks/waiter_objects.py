"""What one waiting ``wait_for_cancellation_outcome`` holds: garbage-collected objects per waiter.

Issue 12. A full collection traverses every tracked object, so with 10,000 waiters alive
the size of one waiter sets the length of the collector's pauses. This counts, against a
sandbox process (settlement delay 1 h: every waiter stays pending), the objects the
collector tracks per sleeping waiter, by type, in both modes:

* ``polling``: after its first GET (PDCR), the waiter sleeps until its next poll;
* ``notifications``: a ``NotificationReceiver`` attached, the waiter sleeps on the
  safety-net interval until a notification wakes it (none comes here).

The count includes the ``asyncio.Task`` each waiter runs in (an application's, not the
library's); ``--waiters`` sets how many (2,000 by default). No timing is measured.
"""

from __future__ import annotations

import asyncio
import gc
import sys
from collections import Counter
from decimal import Decimal
from typing import Any

from _harness import (
    ASSIGNEE_BIC,
    ASSIGNER_BIC,
    CREDITOR_AGENT_BIC,
    CREDITOR_IBAN,
    format_table,
    machine_info,
    parse_args,
    sandbox_process,
    write_result,
)

from payments_async import Credentials, Hooks, PaymentsClient, RequestEvent
from payments_async.iso20022 import build_cancellation
from payments_async.notifications import BasicAuth, NotificationReceiver

NAME = "waiter-objects"


def _census() -> Counter[str]:
    return Counter(type(o).__qualname__ for o in gc.get_objects())


async def measure(url: str, mode: str, waiters: int, first_index: int) -> dict[str, Any]:
    gets = 0
    all_read = asyncio.Event()  # every polling waiter has made its first GET

    def on_request(ev: RequestEvent) -> None:
        nonlocal gets
        if ev.method == "GET":
            gets += 1
            if gets == waiters:
                all_read.set()

    async with PaymentsClient(
        Credentials.sandbox(), base_url=url, hooks=Hooks(on_request=on_request)
    ) as client:
        ids = []
        for i in range(first_index, first_index + waiters):
            msg = build_cancellation(
                original_end_to_end_id=f"E2E{i:08d}",
                amount=Decimal("10.00"),
                creditor_agent_bic=CREDITOR_AGENT_BIC,
                creditor_iban=CREDITOR_IBAN,
                assigner_bic=ASSIGNER_BIC,
                assignee_bic=ASSIGNEE_BIC,
            )
            ids.append((await client.request_cancellation(msg)).payments_service_id)
        receiver = None
        if mode == "notifications":
            receiver = NotificationReceiver(client, auth=BasicAuth("u", "a-long-password"))
            await receiver.start()
        try:
            for _ in range(3):
                await asyncio.sleep(0.05)
            gc.collect()
            before = _census()
            tasks = [
                asyncio.create_task(client.wait_for_cancellation_outcome(psid, timeout=3600))
                for psid in ids
            ]
            # every waiter asleep: polling after its first GET, notifications at once
            if mode == "polling":
                await asyncio.wait_for(all_read.wait(), 120)
            for _ in range(3):
                await asyncio.sleep(0.05)
            gc.collect()
            after = _census()
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            left = len(receiver.waiters) if receiver is not None else 0
        finally:
            if receiver is not None:
                await receiver.aclose()
    delta = after - before
    total = sum(after.values()) - sum(before.values())
    return {
        "mode": mode,
        "waiters": waiters,
        "tracked_per_waiter": round(total / waiters, 2),
        "by_type_per_waiter": {
            k: round(v / waiters, 2) for k, v in delta.most_common() if v >= waiters // 2
        },
        "watchers_left_after_cancel": left,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__.splitlines()[0], argv, extra=_extra)
    waiters = 200 if args.quick else args.waiters
    rows = []
    with sandbox_process("--settlement-delay", "3600") as sb:
        for i, mode in enumerate(("polling", "notifications")):
            row = asyncio.run(measure(sb.url, mode, waiters, i * waiters))
            print(f"  {mode}: {row['tracked_per_waiter']} per waiter {row['by_type_per_waiter']}")
            rows.append(row)
    print(format_table(rows, ["mode", "waiters", "tracked_per_waiter"], title=NAME))
    result = {"benchmark": NAME, "quick": args.quick, "machine": machine_info(), "rows": rows}
    print(f"wrote {write_result(args.out, NAME, result)}")
    return 0


def _extra(p: Any) -> None:
    p.add_argument("--waiters", type=int, default=2000, help="waiters per mode")


if __name__ == "__main__":
    sys.exit(main())
