"""Shared pieces of the reliability suite: fast policies and a figures ledger.

The figures each test measures (operations, faults, example counts, ...) are recorded
here and printed at the end of the run (``pytest -s`` also shows each test's own lines);
set ``RELIABILITY_FIGURES=/path/file.json`` to keep them as JSON for docs/reliability.md.
"""

from __future__ import annotations

import json
import os
from typing import Any

from payments_async import (
    PollPolicy,
    RetryPolicy,
    Timeout,
)

FIGURES: dict[str, dict[str, Any]] = {}


def record(section: str, **figures: Any) -> None:
    """Keep the figures a test measured; printed in the terminal summary."""
    FIGURES.setdefault(section, {}).update(figures)
    line = ", ".join(f"{k}={v}" for k, v in figures.items())
    print(f"[reliability] {section}: {line}")
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # a worker's figures are merged at the end
        write_figures()


def merge_figures(figures: dict[str, dict[str, Any]]) -> None:
    """Add the figures another process recorded (a pytest-xdist worker's), and write them."""
    for section, values in figures.items():
        FIGURES.setdefault(section, {}).update(values)
    write_figures()


def write_figures() -> None:
    """Write every figure so far to ``RELIABILITY_FIGURES``, when it names a file."""
    path = os.environ.get("RELIABILITY_FIGURES")
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(FIGURES, fh, indent=2, sort_keys=True, default=str)


def fast_retry(attempts: int = 4, timeout: float = 8.0) -> dict[str, Any]:
    """Client options: the real retry policy with waits of milliseconds and no shared
    budget, and ``timeout`` seconds per call."""
    policy = RetryPolicy(
        attempts=attempts,
        wait_initial=0.005,
        wait_max=0.05,
        retry_after_cap=0.02,
        budget=None,
    )
    return {"retry": policy, "timeout": Timeout(total=timeout)}


FAST_POLL = PollPolicy(initial=0.05, maximum=0.2, not_found_grace=2.0)
