"""pacs.002 FI-to-FI payment status report (root ``fitoFIPmtStsRpt``), inbound."""

from __future__ import annotations

import msgspec

from .._errors import Problem, ValidationError
from ._common import InboundStruct, decode_with

__all__ = [
    "GroupHeader",
    "OriginalGroupInformation",
    "Pacs002",
    "PaymentTransactionStatus",
    "StatusReason",
    "StatusReasonInformation",
    "StatusReport",
    "decode_pacs002",
]

ROOT = "fitoFIPmtStsRpt"


class GroupHeader(InboundStruct, kw_only=True):
    """``grpHdr`` of the report (often absent)."""

    msg_id: str | None = None
    cre_dt_tm: str | None = None


class OriginalGroupInformation(InboundStruct, kw_only=True):
    """``orgnlGrpInfAndSts``: which message this report is about."""

    orgnl_msg_id: str | None = None
    orgnl_msg_nm_id: str | None = None
    grp_sts: str | None = None


class StatusReason(InboundStruct, kw_only=True):
    """``rsn``: an ISO reason code (e.g. AC01) or a proprietary one."""

    cd: str | None = None
    prtry: str | None = None


class StatusReasonInformation(InboundStruct, kw_only=True):
    """One ``stsRsnInf`` element; ``addtlInf`` items may be null."""

    rsn: StatusReason | None = None
    addtl_inf: list[str | None] | None = None


class PaymentTransactionStatus(InboundStruct, kw_only=True):
    """One ``txInfAndSts`` element: the status of one transaction (``txSts``)."""

    sts_id: str | None = None
    orgnl_instr_id: str | None = None
    orgnl_end_to_end_id: str | None = None
    orgnl_tx_id: str | None = None
    orgnl_uetr: str | None = msgspec.field(default=None, name="orgnlUETR")
    tx_sts: str | None = None
    sts_rsn_inf: list[StatusReasonInformation] | None = None
    accptnc_dt_tm: str | None = None


class StatusReport(InboundStruct, kw_only=True):
    """The body under ``fitoFIPmtStsRpt``; ``tx_inf_and_sts`` is always a list here."""

    grp_hdr: GroupHeader | None = None
    orgnl_grp_inf_and_sts: OriginalGroupInformation | None = None
    tx_inf_and_sts: list[PaymentTransactionStatus] = msgspec.field(default_factory=list)


class Pacs002(InboundStruct, kw_only=True):
    """A pacs.002 status report, root ``fitoFIPmtStsRpt``.

    Decode with `decode_pacs002` (root key matched case-insensitively, single
    ``txInfAndSts`` object accepted); classify with
    `payments_async.iso20022.summarize_status_report`.
    """

    fito_fi_pmt_sts_rpt: StatusReport = msgspec.field(name=ROOT)

    @property
    def body(self) -> StatusReport:
        """The message under the root key."""
        return self.fito_fi_pmt_sts_rpt


class _StatusReportIn(InboundStruct, kw_only=True):
    # What the service sends: txInfAndSts as one object or an array.
    grp_hdr: GroupHeader | None = None
    orgnl_grp_inf_and_sts: OriginalGroupInformation | None = None
    tx_inf_and_sts: list[PaymentTransactionStatus] | PaymentTransactionStatus | None = None


_TOP_DECODER = msgspec.json.Decoder(dict[str, msgspec.Raw])
_BODY_DECODER = msgspec.json.Decoder(_StatusReportIn)
_ROOT_FOLDED = ROOT.casefold()
_CANONICAL_DECODER = msgspec.json.Decoder(Pacs002)


def decode_pacs002(data: bytes | str) -> Pacs002:
    """Decode a pacs.002 status report as the service sends it.

    The root key is matched case-insensitively (``fitoFIPmtStsRpt``,
    ``fIToFIPmtStsRpt``); ``txInfAndSts`` may be one object or an array and is always a
    list in the result. Unknown fields are ignored.

    Args:
        data: the JSON body.

    Returns:
        The report.

    Raises:
        ValidationError: the body is not JSON, has no root object, or has a wrong shape.
    """
    try:
        # The shape the service documents (its own root spelling, txInfAndSts an array),
        # decoded in one pass; anything else takes the tolerant path below, which also
        # words the errors. (A document with the root under two spellings is read by
        # its exact one here.)
        return _CANONICAL_DECODER.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError):
        pass
    return _decode_tolerant(data)


def _decode_tolerant(data: bytes | str) -> Pacs002:
    top = decode_with(_TOP_DECODER, data, "pacs.002 status report")
    for key, raw in top.items():
        if key.casefold() == _ROOT_FOLDED:
            body = decode_with(_BODY_DECODER, raw, "pacs.002 status report", root=key)
            break
    else:
        raise ValidationError(
            [Problem(f"$.{ROOT}", "missing (root object not found)")],
            message="invalid pacs.002 status report",
        )
    txs = body.tx_inf_and_sts
    if txs is None:
        tx_list: list[PaymentTransactionStatus] = []
    elif isinstance(txs, PaymentTransactionStatus):
        tx_list = [txs]
    else:
        tx_list = txs
    return Pacs002(
        fito_fi_pmt_sts_rpt=StatusReport(
            grp_hdr=body.grp_hdr,
            orgnl_grp_inf_and_sts=body.orgnl_grp_inf_and_sts,
            tx_inf_and_sts=tx_list,
        )
    )
