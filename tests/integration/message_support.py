"""The valid messages the integration tests send: one pacs.008 and its camt.056, fresh ids."""

from __future__ import annotations

from decimal import Decimal

from payments_async import Camt056, Pacs008, build_cancellation, build_credit_transfer

CREDITOR_IBAN = "FR1420041010050500013M02606"


def transfer(amount: str = "10.00") -> Pacs008:
    """A one-transaction credit transfer with fresh ids."""
    return build_credit_transfer(
        debtor_name="Alice Example",
        debtor_iban="DE89370400440532013000",
        debtor_agent_id="37040044",
        creditor_name="Bob Example",
        creditor_iban=CREDITOR_IBAN,
        creditor_agent_id="20041010",
        amount=Decimal(amount),
        remittance="Invoice 42",
    )


def cancellation_for(payment: Pacs008, reason: str = "DUPL") -> Camt056:
    """A camt.056 cancelling ``payment`` (10.00 EUR), with fresh ids."""
    return build_cancellation(
        original_end_to_end_id=payment.end_to_end_id,
        amount=Decimal("10.00"),
        creditor_agent_bic="BNPAFRPPXXX",
        creditor_iban=CREDITOR_IBAN,
        assigner_bic="COBADEFFXXX",
        assignee_bic="BNPAFRPPXXX",
        reason=reason,
    )
