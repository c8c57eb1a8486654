"""Pure classification of pacs.002 and camt.029 status codes into outcomes."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from .camt029 import Camt029
from .pacs002 import Pacs002

__all__ = [
    "CancellationResolution",
    "Outcome",
    "PaymentStatus",
    "classify_cancellation_status",
    "classify_payment_status",
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
        outcome: the classified outcome (see :func:`summarize_status_report`).
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


@dataclass(frozen=True, slots=True)
class CancellationResolution:
    """A camt.029 resolution reduced to what a caller decides on.

    Attributes:
        outcome: the classified outcome (rule in :func:`summarize_resolution`).
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
    def needs_return_request(self) -> bool:
        """True when rejected: the funds must be asked back with a pacs.004 (not this API)."""
        return self.outcome is Outcome.REJECTED


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
    3. ``sts.conf`` absent or not a known code: the ``txCxlSts`` codes decide when they
       all classify to the same outcome; none, a mix or an unknown one gives UNKNOWN.

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
