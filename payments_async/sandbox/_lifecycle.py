"""Stored payments and cancellations, and their statuses computed lazily from timestamps.

Nothing here runs on a timer: a status is a pure function of the record and "now", so
10,000 pending cancellations cost 10,000 small records and no tasks.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

__all__ = [
    "CANCELLED_PAYMENT_REASON",
    "REASON_ALREADY_CANCELLED",
    "REASON_NOT_RECEIVED",
    "REASON_PROCESSED",
    "CancellationRecord",
    "CancellationStatus",
    "PaymentRecord",
    "PaymentStatus",
    "StatusRequestRecord",
    "format_creation_date_time",
    "format_iso_utc",
]

# pacs.002 of a payment stopped by an accepted cancellation: RJCT (final, classified as
# rejected by clients) with ISO status reason DS02 "order cancelled". Our choice: the spec
# says only that an accepted cancellation stops the payment.
CANCELLED_PAYMENT_REASON: Final = "DS02"

# Why a cancellation is rejected (camt.029 ``cxlStsRsnInf[].rsn.cd``), one ISO 20022
# ExternalPaymentCancellationRejection code per situation the sandbox emulates; the EPC
# SEPA recall negative answers use the same codes. docs/sandbox.md gives each source.
# The original was processed (ACCC): the funds are with the beneficiary, and the sandbox
# emulates a beneficiary who does not agree to give them back (CUST, "customer
# decision"); the caller must request a return (pacs.004).
REASON_PROCESSED: Final = "CUST"
# No payment with that end-to-end id was ever received from this client.
REASON_NOT_RECEIVED: Final = "NOOR"
# The original was already stopped by an accepted cancellation, or was itself rejected:
# the funds are back with (or never left) the debtor.
REASON_ALREADY_CANCELLED: Final = "ARDT"

PEND: Final = "PEND"
ACCC: Final = "ACCC"
RJCT: Final = "RJCT"
PDCR: Final = "PDCR"
ACCR: Final = "ACCR"
RJTC: Final = "RJTC"
RJCR: Final = "RJCR"


def format_creation_date_time(epoch: float) -> str:
    """``2024-08-01T08:00:00.000``: UTC, milliseconds, no zone designator (spec)."""
    dt = datetime.fromtimestamp(epoch, UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}"


def format_iso_utc(epoch: float) -> str:
    """``2024-08-01T08:00:00.000Z``: the ISO 8601 UTC form used inside ISO messages."""
    return format_creation_date_time(epoch) + "Z"


@dataclass(frozen=True, slots=True)
class PaymentStatus:
    """A payment's status at one instant: ``txSts`` and, when rejected, a reason."""

    code: str
    reason: str | None
    text: str
    final: bool


@dataclass(frozen=True, slots=True)
class CancellationStatus:
    """A cancellation's outcome at one instant: ``sts.conf``, ``txCxlSts`` and a reason."""

    conf: str
    tx_status: str
    reason: str | None
    text: str | None
    final: bool


_PENDING_PAYMENT: Final = PaymentStatus(PEND, None, "Pending", False)
_ACCEPTED_PAYMENT: Final = PaymentStatus(ACCC, None, "Accepted without qualification", True)
_PENDING_CANCELLATION: Final = CancellationStatus(PDCR, PDCR, None, None, False)


@dataclass(slots=True)
class PaymentRecord:
    """One stored pacs.008 (one transaction) and what the sandbox decided for it.

    Attributes:
        processed_at: when it leaves PEND (submission + processing delay).
        final_code / final_reason: its status after processing (ACCC, or RJCT + reason).
        cancelled_by: ``paymentsServiceId`` of the accepted cancellation that stopped it.
        cancel_effective_at: when that cancellation settles; from then on the payment
            reports RJCT with reason DS02.
    """

    payments_service_id: str
    client_id: str
    msg_id: str
    end_to_end_id: str
    tx_id: str | None
    uetr: str | None
    body_hash: str
    created_at: float
    processed_at: float
    final_code: str
    final_reason: str | None
    cancelled_by: str | None = None
    cancel_effective_at: float | None = None

    def is_processed(self, now: float) -> bool:
        """True once the payment left PEND by processing (not by cancellation)."""
        return self.cancelled_by is None and now >= self.processed_at

    def status_at(self, now: float) -> PaymentStatus:
        """The pacs.002 status at ``now``."""
        if self.cancelled_by is not None:
            if self.cancel_effective_at is not None and now >= self.cancel_effective_at:
                return PaymentStatus(
                    RJCT,
                    CANCELLED_PAYMENT_REASON,
                    f"Order cancelled by cancellation request {self.cancelled_by}",
                    True,
                )
            return _PENDING_PAYMENT
        if now < self.processed_at:
            return _PENDING_PAYMENT
        if self.final_code == ACCC:
            return _ACCEPTED_PAYMENT
        return PaymentStatus(
            self.final_code, self.final_reason, _reject_text(self.final_reason), True
        )


_REJECT_TEXTS: Final = {
    "AC01": "Incorrect account number",
    "AC04": "Closed account number",
    "AC06": "Blocked account",
    "AG01": "Transaction forbidden",
    "AM01": "Zero amount",
    "AM02": "Amount above the allowed maximum",
    "AM03": "Currency not allowed",
}


def _reject_text(reason: str | None) -> str:
    return _REJECT_TEXTS.get(reason or "", "Rejected")


@dataclass(slots=True)
class CancellationRecord:
    """One stored camt.056 and the decision taken when it arrived.

    The decision (accept or reject, and why) is fixed at arrival, from whether the
    original payment was still unprocessed then; it becomes visible at ``settles_at``.
    """

    payments_service_id: str
    client_id: str
    assignment_id: str
    body_hash: str
    created_at: float
    settles_at: float
    assigner_bic: str | None
    assignee_bic: str | None
    cancellation_id: str | None
    original_end_to_end_id: str | None
    original_payment_id: str | None
    accepted: bool
    reason_code: str | None
    reason_text: str | None

    def status_at(self, now: float) -> CancellationStatus:
        """The camt.029 outcome at ``now``: PDCR until settlement, then ACCC or RJTC."""
        if now < self.settles_at:
            return _PENDING_CANCELLATION
        if self.accepted:
            return CancellationStatus(ACCC, ACCR, None, None, True)
        return CancellationStatus(RJTC, RJCR, self.reason_code, self.reason_text, True)


@dataclass(slots=True)
class StatusRequestRecord:
    """One stored pacs.028 (a request for status update on a recall).

    Attributes:
        recall_id: ``paymentsServiceId`` of the camt.056 it asks about.
        chased: True when that recall was still pending when it arrived (and was
            answered because of it).
    """

    payments_service_id: str
    client_id: str
    msg_id: str
    body_hash: str
    created_at: float
    recall_id: str
    chased: bool
