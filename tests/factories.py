"""The valid messages the tests send: one pacs.008 and its camt.056, with fresh ids.

Every suite builds its messages here, from one set of defaults; a test that depends on a
value (an amount, an IBAN, a reason) passes it, so the defaults can be read as "any valid
value". Keyword arguments override the defaults and reach the library's builders as given.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path
from typing import Any

from payments_async import Camt056, Pacs008, build_cancellation, build_credit_transfer
from payments_async.bulk import PlannedRow, RowOutcome, SqliteJournal

CREDITOR_IBAN = "DE89370400440532013000"
DEBTOR_IBAN = "FR1420041010050500013M02606"
CREDITOR_AGENT_BIC = "COBADEFFXXX"
ASSIGNER_BIC = "BANKDEFFXXX"
ASSIGNEE_BIC = "BANKFRPPXXX"
AMOUNT = Decimal("12.34")


def credit_transfer(**overrides: Any) -> Pacs008:
    """A valid one-transaction pacs.008 (``AMOUNT`` EUR to ``CREDITOR_IBAN``), fresh ids."""
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
    """A valid camt.056 cancelling the payment with this end-to-end id (``AMOUNT`` EUR)."""
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


def cancellation_for(payment: Pacs008, **overrides: Any) -> Camt056:
    """A valid camt.056 cancelling ``payment`` (built by :func:`credit_transfer`)."""
    return cancellation(payment.end_to_end_id, **overrides)


def planned_journal(path: Path, rows: int = 3, run_id: str = "RUN1") -> SqliteJournal:
    """A SQLite journal at ``path`` holding a planned run of ``rows`` rows (lines 2...),
    open: the caller closes it."""
    journal = SqliteJournal.open(path, input_sha256="a" * 64, new_run_id=run_id)
    journal.plan([PlannedRow(i, f"E2E-{i}", f"A-{i}", f"C-{i}", b"{}") for i in range(2, rows + 2)])
    return journal


def accept_row(journal: SqliteJournal, line: int) -> None:
    """Commit ``line`` of ``journal`` as final, accepted (from outside an event loop)."""

    async def final() -> None:
        await journal.mark_final(
            line,
            outcome=RowOutcome.ACCEPTED,
            status="CNCL",
            reason_codes=(),
            reason_text=None,
            return_request_needed=False,
        )

    asyncio.run(final())
