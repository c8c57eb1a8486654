"""Pure classification of pacs.002 and camt.029 status codes into outcomes."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from .camt029 import Camt029
from .pacs002 import Pacs002

__all__ = [
    "REJECTION_REASONS",
    "CancellationResolution",
    "Outcome",
    "PaymentStatus",
    "RejectionReason",
    "classify_cancellation_status",
    "classify_payment_status",
    "return_request_needed",
    "summarize_resolution",
    "summarize_status_report",
]


class Outcome(enum.Enum):
    """What a status code means for the caller."""

    PENDING = "pending"
    """Not decided yet: poll again."""
    ACCEPTED = "accepted"
    """Final: the payment settled / the cancellation was accepted."""
    REJECTED = "rejected"
    """Final: the payment / the cancellation was refused."""
    UNKNOWN = "unknown"
    """A code we do not know or statuses that contradict each other: surface, do not guess."""

    @property
    def is_final(self) -> bool:
        """True for ACCEPTED and REJECTED."""
        return self is Outcome.ACCEPTED or self is Outcome.REJECTED


_PAYMENT_CODES: dict[str, Outcome] = {
    "ACCC": Outcome.ACCEPTED,
    "ACSC": Outcome.ACCEPTED,
    "RJCT": Outcome.REJECTED,
    "PEND": Outcome.PENDING,
    "PDNG": Outcome.PENDING,
    "ACSP": Outcome.PENDING,
    "ACTC": Outcome.PENDING,
    "ACCP": Outcome.PENDING,
    "RCVD": Outcome.PENDING,
}

_CANCELLATION_CODES: dict[str, Outcome] = {
    "ACCC": Outcome.ACCEPTED,
    "CNCL": Outcome.ACCEPTED,
    "ACCR": Outcome.ACCEPTED,
    "RJTC": Outcome.REJECTED,
    "RJCR": Outcome.REJECTED,
    "PDCR": Outcome.PENDING,
    "PDNG": Outcome.PENDING,
    "PEND": Outcome.PENDING,
}


@dataclass(frozen=True, slots=True)
class RejectionReason:
    """What a camt.029 rejection reason (``cxlStsRsnInf[].rsn.cd``) means for the funds.

    Attributes:
        code: the ISO 20022 code.
        name: its ISO name.
        funds_may_be_with_beneficiary: True when the payment was executed and the money
            may sit with the beneficiary (a pacs.004 return must be requested); False
            when no money moved or it already came back.
        source: where the meaning comes from.
    """

    code: str
    name: str
    funds_may_be_with_beneficiary: bool
    source: str


_ISO = "ISO 20022 ExternalPaymentCancellationRejection1Code"
_EPC = "EPC SCT rulebook, negative answer to a recall (DS-06)"

# The one table behind ``return_request_needed`` (docs/outcomes.md renders it).
REJECTION_REASONS: dict[str, RejectionReason] = {
    r.code: r
    for r in (
        RejectionReason("AC04", "ClosedAccountNumber", True, f"{_ISO}; {_EPC}"),
        RejectionReason("AM04", "InsufficientFunds", True, f"{_ISO}; {_EPC}"),
        RejectionReason("NOAS", "NoAnswerFromCustomer", True, f"{_ISO}; {_EPC}"),
        RejectionReason("CUST", "CustomerDecision", True, f"{_ISO}; {_EPC}"),
        RejectionReason("LEGL", "LegalDecision", True, f"{_ISO}; {_EPC}"),
        RejectionReason("AGNT", "AgentDecision", True, _ISO),
        RejectionReason("PTNA", "PassedToTheNextAgent", True, _ISO),
        RejectionReason("NOOR", "NoOriginalTransactionReceived", False, f"{_ISO}; {_EPC}"),
        RejectionReason("ARDT", "AlreadyReturned", False, f"{_ISO}; {_EPC}"),
        RejectionReason("ACLR", "AlreadyCancelled", False, _ISO),
    )
}
"""Rejection reasons by code. A code not listed counts as True (the funds may be with the
beneficiary): advising a return request that proves unneeded costs a message, missing
one costs the money."""


def return_request_needed(reason_codes: Iterable[str]) -> bool:
    """Whether a rejected cancellation leaves the funds possibly with the beneficiary.

    The spec's rule (rejected because the original was processed: ask the beneficiary
    for a pacs.004 return) applies unless every reason code given says that no money
    moved or that it already came back (NOOR, ARDT, ACLR). No reason code at all, or a
    code not in `REJECTION_REASONS`, gives True.

    Args:
        reason_codes: the ``cxlStsRsnInf[].rsn.cd`` codes of the rejection.

    Returns:
        True when a return request is needed.
    """
    verdicts = [
        reason.funds_may_be_with_beneficiary if reason is not None else True
        for reason in (REJECTION_REASONS.get(c.strip().upper()) for c in reason_codes)
    ]
    return any(verdicts) if verdicts else True


def _lookup(table: dict[str, Outcome], code: str | None) -> Outcome:
    if not code:
        return Outcome.UNKNOWN
    return table.get(code.strip().upper(), Outcome.UNKNOWN)


def classify_payment_status(code: str | None) -> Outcome:
    """Classify a pacs.002 ``txSts`` (service-notes section 6).

    ACCC, ACSC -> ACCEPTED; RJCT -> REJECTED; PEND, PDNG, ACSP, ACTC, ACCP, RCVD ->
    PENDING; anything else (or nothing) -> UNKNOWN.

    Args:
        code: the raw status code; surrounding spaces and case are ignored.

    Returns:
        The outcome.
    """
    return _lookup(_PAYMENT_CODES, code)


def classify_cancellation_status(code: str | None) -> Outcome:
    """Classify a camt.029 ``sts.conf`` or ``txCxlSts`` (service-notes section 7).

    ACCC, CNCL, ACCR -> ACCEPTED; RJTC, RJCR -> REJECTED; PDCR, PDNG, PEND -> PENDING;
    anything else (or nothing) -> UNKNOWN.

    Args:
        code: the raw status code; surrounding spaces and case are ignored.

    Returns:
        The outcome.
    """
    return _lookup(_CANCELLATION_CODES, code)


@dataclass(frozen=True, slots=True)
class PaymentStatus:
    """A pacs.002 report reduced to what a caller decides on.

    Attributes:
        outcome: the classified outcome (see `summarize_status_report`).
        status: the raw ``txSts`` of the first transaction (or ``grpSts``), if any.
        tx_statuses: every raw ``txSts``, in order.
        reason_codes: every ``stsRsnInf[].rsn.cd`` (or ``prtry``), in order.
        reason_texts: every non-null ``stsRsnInf[].addtlInf`` item, in order.
        end_to_end_id: ``orgnlEndToEndId`` of the first transaction, if given.
    """

    outcome: Outcome
    status: str | None
    tx_statuses: tuple[str, ...] = ()
    reason_codes: tuple[str, ...] = ()
    reason_texts: tuple[str, ...] = ()
    end_to_end_id: str | None = None

    @property
    def is_final(self) -> bool:
        """True when the outcome is ACCEPTED or REJECTED: polling can stop."""
        return self.outcome.is_final

    @property
    def codes(self) -> tuple[str, ...]:
        """Every raw status code: the ``txSts`` codes, or ``grpSts`` when there are none."""
        if self.tx_statuses:
            return self.tx_statuses
        return (self.status,) if self.status else ()


@dataclass(frozen=True, slots=True)
class CancellationResolution:
    """A camt.029 resolution reduced to what a caller decides on.

    Attributes:
        outcome: the classified outcome (rule in `summarize_resolution`).
        status: the raw ``sts.conf``, if any.
        tx_statuses: every raw ``cxlDtls[].txInfAndSts[].txCxlSts``, in order.
        reason_codes: every ``cxlStsRsnInf[].rsn.cd`` (or ``prtry``), in order.
        reason_texts: every non-null ``cxlStsRsnInf[].addtlInf`` item, in order.
        assignment_id: ``assgnmt.id`` of the resolution, if given.
    """

    outcome: Outcome
    status: str | None
    tx_statuses: tuple[str, ...] = ()
    reason_codes: tuple[str, ...] = ()
    reason_texts: tuple[str, ...] = ()
    assignment_id: str | None = None

    @property
    def is_final(self) -> bool:
        """True when the outcome is ACCEPTED or REJECTED: polling can stop."""
        return self.outcome.is_final

    @property
    def codes(self) -> tuple[str, ...]:
        """Every raw status code: ``sts.conf`` (if any), then the ``txCxlSts`` codes."""
        return ((self.status,) if self.status else ()) + self.tx_statuses

    @property
    def needs_return_request(self) -> bool:
        """True when rejected and the funds may sit with the beneficiary.

        Then they must be asked back with a pacs.004 (not this API); the reason codes
        decide (see `return_request_needed`).
        """
        return self.outcome is Outcome.REJECTED and return_request_needed(self.reason_codes)


def _agreed(outcomes: Iterable[Outcome]) -> Outcome:
    # The one outcome all codes share; UNKNOWN if none, if they differ, or if one is unknown.
    seen = set(outcomes)
    if len(seen) == 1:
        return seen.pop()
    return Outcome.UNKNOWN


def summarize_status_report(report: Pacs002) -> PaymentStatus:
    """Reduce a pacs.002 to its outcome, raw codes and reasons.

    Rule: every transaction's ``txSts`` is classified; when they all agree that is the
    outcome, when they disagree (or one is unknown) it is UNKNOWN. With no ``txSts`` at
    all, ``orgnlGrpInfAndSts.grpSts`` is classified instead; with neither, UNKNOWN.

    Args:
        report: the decoded status report.

    Returns:
        The summary.
    """
    body = report.fito_fi_pmt_sts_rpt
    statuses: list[str] = []
    codes: list[str] = []
    texts: list[str] = []
    for tx in body.tx_inf_and_sts:
        if tx.tx_sts:
            statuses.append(tx.tx_sts)
        for info in tx.sts_rsn_inf or ():
            code = info.rsn and (info.rsn.cd or info.rsn.prtry)
            if code:
                codes.append(code)
            texts.extend(t for t in info.addtl_inf or () if t is not None)
    if statuses:
        outcome = _agreed(classify_payment_status(s) for s in statuses)
        status: str | None = statuses[0]
    else:
        grp = body.orgnl_grp_inf_and_sts
        status = grp.grp_sts if grp is not None else None
        outcome = classify_payment_status(status)
    first = body.tx_inf_and_sts[0] if body.tx_inf_and_sts else None
    return PaymentStatus(
        outcome=outcome,
        status=status,
        tx_statuses=tuple(statuses),
        reason_codes=tuple(codes),
        reason_texts=tuple(texts),
        end_to_end_id=first.orgnl_end_to_end_id if first is not None else None,
    )


def summarize_resolution(resolution: Camt029) -> CancellationResolution:
    """Reduce a camt.029 to its outcome, raw codes and reasons.

    Rule, when ``sts.conf`` and the ``txCxlSts`` codes are combined:

    1. ``sts.conf`` final (ACCEPTED or REJECTED) decides, unless a ``txCxlSts`` is final
       the other way: that contradiction gives UNKNOWN (never guess which one is right).
    2. ``sts.conf`` PENDING gives PENDING, whatever the transactions say.
    3. ``sts.conf`` present but not a known code gives UNKNOWN: surfaced, never guessed
       from the transactions.
    4. ``sts.conf`` absent: the ``txCxlSts`` codes decide when they all classify to the
       same outcome; none, a mix or an unknown one gives UNKNOWN.

    Args:
        resolution: the decoded camt.029.

    Returns:
        The summary.
    """
    body = resolution.rsltn_of_invstgtn
    conf = body.sts.conf if body.sts is not None else None
    statuses: list[str] = []
    codes: list[str] = []
    texts: list[str] = []
    for details in body.cxl_dtls or ():
        for tx in details.tx_inf_and_sts or ():
            if tx.tx_cxl_sts:
                statuses.append(tx.tx_cxl_sts)
            for info in tx.cxl_sts_rsn_inf or ():
                code = info.rsn and (info.rsn.cd or info.rsn.prtry)
                if code:
                    codes.append(code)
                texts.extend(t for t in info.addtl_inf or () if t is not None)
    tx_outcomes = [classify_cancellation_status(s) for s in statuses]
    group = classify_cancellation_status(conf)
    if group.is_final:
        opposite = Outcome.REJECTED if group is Outcome.ACCEPTED else Outcome.ACCEPTED
        outcome = Outcome.UNKNOWN if opposite in tx_outcomes else group
    elif group is Outcome.PENDING:
        outcome = Outcome.PENDING
    elif conf and conf.strip():
        outcome = Outcome.UNKNOWN
    else:
        outcome = _agreed(tx_outcomes)
    return CancellationResolution(
        outcome=outcome,
        status=conf,
        tx_statuses=tuple(statuses),
        reason_codes=tuple(codes),
        reason_texts=tuple(texts),
        assignment_id=body.assgnmt.id if body.assgnmt is not None else None,
    )
