"""Response bodies the sandbox sends: submission results, pacs.002 and camt.029.

Built with the package's own structs (``iso20022``) and encoded once per status change:
pollers reading an unchanged status get cached bytes.
"""

from __future__ import annotations

from typing import Final

import msgspec

from ..iso20022 import SubmissionResult, encode
from ..iso20022 import camt029 as c29
from ..iso20022 import pacs002 as p02
from ._lifecycle import (
    CancellationRecord,
    CancellationStatus,
    PaymentRecord,
    PaymentStatus,
    format_creation_date_time,
    format_iso_utc,
)

__all__ = [
    "CAMT056_MESSAGE_NAME",
    "PACS008_MESSAGE_NAME",
    "cancellation_outcome_body",
    "payment_status_body",
    "submission_body",
]

PACS008_MESSAGE_NAME: Final = "pacs.008.001.10"
CAMT056_MESSAGE_NAME: Final = "camt.056.001.08"  # the spec: "references ... camt.056.001.08"
SUBMISSION_STATUS: Final = "PENDING"
_ACCEPTED_INFO: Final = "0000"  # service-notes 6: ACCC carries addtlInf ["0000", text]


class _Wrapped(msgspec.Struct):
    data: SubmissionResult


def submission_body(
    payments_service_id: str, message_id: str, created_at: float, *, wrap: bool
) -> bytes:
    """The submission result of a POST (201 or 200), wrapped in ``data`` or bare.

    Args:
        payments_service_id: the id the sandbox assigned.
        message_id: ``grpHdr.msgId`` or ``assgnmt.id``, echoed as ``paymentId``.
        created_at: when it was first stored (``creationDateTime``, no zone designator).
        wrap: put it under ``{"data": ...}`` as the spec's camt.056 sample does.
    """
    result = SubmissionResult(
        payments_service_id=payments_service_id,
        payment_id=message_id,
        status=SUBMISSION_STATUS,
        creation_date_time=format_creation_date_time(created_at),
    )
    return encode(_Wrapped(result) if wrap else result)


def payment_status_body(p: PaymentRecord, status: PaymentStatus, at: float) -> bytes:
    """The pacs.002 status report of a payment (``fitoFIPmtStsRpt``)."""
    if status.reason is None:
        info = p02.StatusReasonInformation(
            addtl_inf=[_ACCEPTED_INFO, status.text] if status.code == "ACCC" else [status.text]
        )
    else:
        info = p02.StatusReasonInformation(
            rsn=p02.StatusReason(cd=status.reason), addtl_inf=[status.reason, status.text]
        )
    tx = p02.PaymentTransactionStatus(
        orgnl_end_to_end_id=p.end_to_end_id,
        orgnl_tx_id=p.tx_id,
        orgnl_uetr=p.uetr,
        tx_sts=status.code,
        sts_rsn_inf=[info],
        accptnc_dt_tm=format_iso_utc(p.processed_at) if status.code == "ACCC" else None,
    )
    report = p02.StatusReport(
        grp_hdr=p02.GroupHeader(
            msg_id=f"STS{p.payments_service_id[-32:]}", cre_dt_tm=format_iso_utc(at)
        ),
        orgnl_grp_inf_and_sts=p02.OriginalGroupInformation(
            orgnl_msg_id=p.msg_id, orgnl_msg_nm_id=PACS008_MESSAGE_NAME
        ),
        tx_inf_and_sts=[tx],
    )
    return encode(p02.Pacs002(fito_fi_pmt_sts_rpt=report))


def cancellation_outcome_body(
    c: CancellationRecord, status: CancellationStatus, at: float
) -> bytes:
    """The camt.029 resolution of a cancellation (``rsltnOfInvstgtn``).

    The resolution's assigner is the original assignee (who answers) and vice versa, as
    in ISO camt.029; ``assgnmt.id`` is derived from the ``paymentsServiceId``.
    """
    reasons = None
    if status.reason is not None:
        reasons = [
            c29.CancellationStatusReasonInformation(
                rsn=c29.CancellationStatusReason(cd=status.reason),
                addtl_inf=[status.text] if status.text else None,
            )
        ]
    tx = c29.TransactionCancellationStatus(
        cxl_sts_id=c.cancellation_id,
        orgnl_end_to_end_id=c.original_end_to_end_id,
        tx_cxl_sts=status.tx_status,
        cxl_sts_rsn_inf=reasons,
    )
    details = c29.CancellationDetails(
        orgnl_grp_inf_and_sts=c29.OriginalGroupInformation(
            orgnl_msg_id=c.assignment_id, orgnl_msg_nm_id=CAMT056_MESSAGE_NAME
        ),
        orgnl_pmt_inf_and_sts=[
            c29.OriginalPaymentInformation(
                orgnl_pmt_inf_id=c.original_payment_id,
                tx_inf_and_sts=[
                    c29.OriginalTransaction(orgnl_end_to_end_id=c.original_end_to_end_id)
                ],
            )
        ],
        tx_inf_and_sts=[tx],
    )
    resolution = c29.Resolution(
        assgnmt=c29.Assignment(
            id=f"RES{c.payments_service_id[-32:]}",
            assgnr=c29.AssignmentParty.from_bic(c.assignee_bic) if c.assignee_bic else None,
            assgne=c29.AssignmentParty.from_bic(c.assigner_bic) if c.assigner_bic else None,
            cre_dt_tm=format_iso_utc(at),
        ),
        sts=c29.InvestigationStatus(conf=status.conf),
        cxl_dtls=[details],
    )
    return encode(c29.Camt029(rsltn_of_invstgtn=resolution))
