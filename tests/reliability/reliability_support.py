"""Shared pieces of the reliability suite: valid messages, fast policies, a figures ledger.

The figures each test measures (operations, faults, example counts, ...) are recorded
here and printed at the end of the run (``pytest -s`` also shows each test's own lines);
set ``RELIABILITY_FIGURES=/path/file.json`` to keep them as JSON for docs/reliability.md.
"""

from __future__ import annotations

import json
import os
from decimal import Decimal
from typing import Any

from payments_async import (
    Camt056,
    Pacs008,
    PollPolicy,
    RetryPolicy,
    Timeout,
    build_cancellation,
    build_credit_transfer,
)

CREDITOR_IBAN = "DE89370400440532013000"
DEBTOR_IBAN = "FR1420041010050500013M02606"
CREDITOR_AGENT_BIC = "COBADEFFXXX"
ASSIGNER_BIC = "BANKDEFFXXX"
ASSIGNEE_BIC = "BANKFRPPXXX"
AMOUNT = Decimal("12.34")

FIGURES: dict[str, dict[str, Any]] = {}


def record(section: str, **figures: Any) -> None:
    """Keep the figures a test measured; printed in the terminal summary."""
    FIGURES.setdefault(section, {}).update(figures)
    line = ", ".join(f"{k}={v}" for k, v in figures.items())
    print(f"[reliability] {section}: {line}")
    path = os.environ.get("RELIABILITY_FIGURES")
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(FIGURES, fh, indent=2, sort_keys=True, default=str)


def payment(**overrides: Any) -> Pacs008:
    """A valid one-transaction pacs.008 with fresh ids."""
    kwargs: dict[str, Any] = {
        "debtor_name": "Alice Debtor",
        "debtor_iban": DEBTOR_IBAN,
        "debtor_agent_id": "10010010",
        "creditor_name": "Bob Creditor",
        "creditor_iban": CREDITOR_IBAN,
        "creditor_agent_id": "37040044",
        "amount": AMOUNT,
    }
    kwargs.update(overrides)
    return build_credit_transfer(**kwargs)


def cancellation(original_end_to_end_id: str, **overrides: Any) -> Camt056:
    """A valid camt.056 cancelling the payment with this end-to-end id."""
    kwargs: dict[str, Any] = {
        "original_end_to_end_id": original_end_to_end_id,
        "amount": AMOUNT,
        "creditor_agent_bic": CREDITOR_AGENT_BIC,
        "creditor_iban": CREDITOR_IBAN,
        "assigner_bic": ASSIGNER_BIC,
        "assignee_bic": ASSIGNEE_BIC,
    }
    kwargs.update(overrides)
    return build_cancellation(**kwargs)


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
