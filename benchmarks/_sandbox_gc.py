"""The sandbox program with its garbage collector's pauses recorded, for bench_notifications.

``python benchmarks/_sandbox_gc.py ARGS`` runs what ``python -m payments_async.sandbox ARGS``
runs, in this process, with a ``gc.callbacks`` entry recording every collection. Before the
sandbox's banner it prints ``gc stats on http://127.0.0.1:PORT/``: a GET there answers the
pauses so far as JSON (per generation ``count``/``total_ms``/``max_ms``; ``long``, the last
100 pauses of 20 ms or more as ``[epoch seconds, generation, ms]``; ``tracked_objects`` and
``frozen_objects``). It is served by a thread on a port of its own, so the sandbox's routes
stay those of the program.
"""

from __future__ import annotations

import gc
import http.server
import json
import sys
import threading
import time
from collections import deque
from typing import Any, Final

from payments_async.sandbox import main

_GC_PAUSE_REPORTED: Final = 0.02  # collector pauses at least this long are listed one by one
_GC_PAUSES_KEPT: Final = 100  # ...the last this many of them


class GcPauses:
    """The garbage collector's pauses in this process, while installed (a ``gc.callbacks`` entry).

    A pause of the sandbox's process delays every notification due meanwhile (the fire lag
    in its stats). It only observes: the collector runs as it would without it.
    """

    def __init__(self) -> None:
        self._start = 0.0
        self.count = [0, 0, 0]
        self.total = [0.0, 0.0, 0.0]
        self.longest = [0.0, 0.0, 0.0]
        # (epoch seconds at the start, generation, seconds) of the long ones
        self.long: deque[tuple[float, int, float]] = deque(maxlen=_GC_PAUSES_KEPT)

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
            return
        took = time.perf_counter() - self._start
        gen = info["generation"]
        self.count[gen] += 1
        self.total[gen] += took
        self.longest[gen] = max(self.longest[gen], took)
        if took >= _GC_PAUSE_REPORTED:
            self.long.append((time.time() - took, gen, took))

    def install(self) -> None:
        """Start recording (idempotent)."""
        if self not in gc.callbacks:
            gc.callbacks.append(self)

    def remove(self) -> None:
        """Stop recording."""
        if self in gc.callbacks:
            gc.callbacks.remove(self)

    def snapshot(self) -> dict[str, Any]:
        """Per generation: pauses, their total and longest (ms); the long ones listed."""
        out: dict[str, Any] = {
            f"gen{g}": {
                "count": self.count[g],
                "total_ms": round(self.total[g] * 1000, 1),
                "max_ms": round(self.longest[g] * 1000, 1),
            }
            for g in range(3)
        }
        out["long"] = [[round(t, 3), g, round(d * 1000, 1)] for t, g, d in list(self.long)]
        out["tracked_objects"] = len(gc.get_objects())  # what a full collection traverses
        out["frozen_objects"] = gc.get_freeze_count()  # what it skips (gc.freeze())
        return out


def _serve_stats(pauses: GcPauses) -> str:
    """Serve ``pauses.snapshot()`` on a free loopback port from a daemon thread; its URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps(pauses.snapshot()).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True, name="gc-stats").start()
    return f"http://127.0.0.1:{server.server_address[1]}/"


if __name__ == "__main__":
    recorder = GcPauses()
    recorder.install()
    print(f"gc stats on {_serve_stats(recorder)}", flush=True)
    sys.exit(main(sys.argv[1:]))
