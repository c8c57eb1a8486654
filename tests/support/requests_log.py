"""The sandbox's request log as times: its access log, recorded as each answer leaves."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from payments_async import TOKEN_PATH

__all__ = ["RequestLog", "max_in_window", "recording_requests"]


class RequestLog(logging.Handler):
    """Every request the sandbox logs in this process: (start time, method, path, status).

    The start is the record's wall-clock time less the duration the sandbox measured.
    """

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.entries: list[tuple[float, str, str, object]] = []

    def emit(self, record: logging.LogRecord) -> None:
        path = getattr(record, "http_path", None)
        if path is None:
            return
        start = record.created - getattr(record, "duration_ms", 0.0) / 1000
        self.entries.append((start, getattr(record, "http_method", ""), path, record.http_status))  # type: ignore[attr-defined]

    def times(self, *, prefix: str = "/payments/") -> list[float]:
        """Sorted start times of the requests to paths under ``prefix`` (no token requests)."""
        return sorted(
            t for t, _, path, _ in self.entries if path.startswith(prefix) and path != TOKEN_PATH
        )


@contextmanager
def recording_requests() -> Iterator[RequestLog]:
    """Record the sandbox's access log (``payments_async.sandbox`` at INFO) in this block."""
    logger = logging.getLogger("payments_async.sandbox")
    handler = RequestLog()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def max_in_window(times: list[float], window: float) -> int:
    """The most requests that started within any ``window`` seconds."""
    best = 0
    j = 0
    for i, t in enumerate(times):
        while times[j] <= t - window:
            j += 1
        best = max(best, i - j + 1)
    return best
