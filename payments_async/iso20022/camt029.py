"""camt.029 resolution of investigation (root ``rsltnOfInvstgtn``), inbound."""

from __future__ import annotations

import msgspec

from ._common import InboundStruct, decode_with

__all__ = [
    "Assignment",
    "AssignmentAgent",
    "AssignmentInstitution",
    "AssignmentParty",
    "Camt029",
    "CancellationDetails",
    "CancellationStatusReason",
    "CancellationStatusReasonInformation",
    "InvestigationStatus",
    "OriginalGroupInformation",
    "OriginalPaymentInformation",
    "OriginalTransaction",
    "Resolution",
    "TransactionCancellationStatus",
    "decode_camt029",
]


class AssignmentInstitution(InboundStruct, kw_only=True):
    """``finInstnId`` of an assignment party."""

    bicfi: str | None = msgspec.field(default=None, name="bicfi")


class AssignmentAgent(InboundStruct, kw_only=True):
    """``agt`` of an assignment party."""

    fin_instn_id: AssignmentInstitution | None = None


class AssignmentParty(InboundStruct, kw_only=True):
    """``assgnr`` / ``assgne``."""

    agt: AssignmentAgent | None = None

    @classmethod
    def from_bic(cls, bic: str) -> AssignmentParty:
        """The party whose agent has this BIC.

        Args:
            bic: the agent's BICFI.

        Returns:
            ``{"agt": {"finInstnId": {"bicfi": bic}}}`` as a struct.
        """
        return cls(agt=AssignmentAgent(fin_instn_id=AssignmentInstitution(bicfi=bic)))


class Assignment(InboundStruct, kw_only=True):
    """``assgnmt`` of the resolution (the spec's row "the service")."""

    id: str | None = None
    assgnr: AssignmentParty | None = None
    assgne: AssignmentParty | None = None
    cre_dt_tm: str | None = None


class InvestigationStatus(InboundStruct, kw_only=True):
    """``sts``: ``conf`` is the cancellation status (CNCL, RJCR, PDCR, ACCC, RJTC...)."""

    conf: str | None = None


class OriginalGroupInformation(InboundStruct, kw_only=True):
    """``orgnlGrpInfAndSts``: the original message (``camt.056.001.08``)."""

    orgnl_msg_id: str | None = None
    orgnl_msg_nm_id: str | None = None


class OriginalTransaction(InboundStruct, kw_only=True):
    """One ``orgnlPmtInfAndSts[].txInfAndSts`` element."""

    orgnl_end_to_end_id: str | None = None
    orgnl_tx_id: str | None = None


class OriginalPaymentInformation(InboundStruct, kw_only=True):
    """One ``orgnlPmtInfAndSts`` element."""

    orgnl_pmt_inf_id: str | None = None
    tx_inf_and_sts: list[OriginalTransaction] | None = None


class CancellationStatusReason(InboundStruct, kw_only=True):
    """``rsn``: why (e.g. NOOR, ARDT, AC04, AM04, NOAS, CUST, LEGL, AGNT)."""

    cd: str | None = None
    prtry: str | None = None


class CancellationStatusReasonInformation(InboundStruct, kw_only=True):
    """One ``cxlStsRsnInf`` element; ``addtlInf`` items may be null."""

    rsn: CancellationStatusReason | None = None
    addtl_inf: list[str | None] | None = None


class TransactionCancellationStatus(InboundStruct, kw_only=True):
    """One ``cxlDtls[].txInfAndSts`` element: ``txCxlSts`` (ACCR, RJCR, PDCR...)."""

    cxl_sts_id: str | None = None
    orgnl_end_to_end_id: str | None = None
    tx_cxl_sts: str | None = None
    cxl_sts_rsn_inf: list[CancellationStatusReasonInformation] | None = None


class CancellationDetails(InboundStruct, kw_only=True):
    """One ``cxlDtls`` element."""

    orgnl_grp_inf_and_sts: OriginalGroupInformation | None = None
    orgnl_pmt_inf_and_sts: list[OriginalPaymentInformation] | None = None
    tx_inf_and_sts: list[TransactionCancellationStatus] | None = None


class Resolution(InboundStruct, kw_only=True):
    """The body under ``rsltnOfInvstgtn``."""

    assgnmt: Assignment | None = None
    sts: InvestigationStatus | None = None
    cxl_dtls: list[CancellationDetails] | None = None


class Camt029(InboundStruct, kw_only=True):
    """A camt.029 resolution of investigation, root ``rsltnOfInvstgtn``.

    Classify with `payments_async.iso20022.summarize_resolution`.
    """

    rsltn_of_invstgtn: Resolution = msgspec.field(name="rsltnOfInvstgtn")

    @property
    def body(self) -> Resolution:
        """The message under the root key."""
        return self.rsltn_of_invstgtn


_DECODER = msgspec.json.Decoder(Camt029)


def decode_camt029(data: bytes | str) -> Camt029:
    """Decode a camt.029 resolution (tolerant: unknown fields are ignored).

    Args:
        data: the JSON body.

    Returns:
        The resolution.

    Raises:
        ValidationError: the body is not JSON or does not have the camt.029 shape.
    """
    return decode_with(_DECODER, data, "camt.029 resolution")
