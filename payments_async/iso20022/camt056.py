"""camt.056 FI-to-FI payment cancellation request (root ``fitoFIPmtCxlReq``), outbound."""

from __future__ import annotations

from typing import Annotated

import msgspec

from ._common import OutboundStruct, decode_with
from ._types import (
    BicFi,
    CancellationReasonCode,
    IsoDateTime,
    Max35Id,
    Max140Text,
    NbOfTxs,
)
from .pacs008 import ActiveCurrencyAndAmount, Agent, CashAccount, PaymentTypeInformation

__all__ = [
    "Assignment",
    "AssignmentAgent",
    "AssignmentInstitution",
    "AssignmentParty",
    "Camt056",
    "CancellationReason",
    "CancellationReasonInformation",
    "CancellationRequest",
    "CancellationTransaction",
    "ControlData",
    "OrganisationIdentification",
    "OriginalTransactionReference",
    "Originator",
    "OriginatorIdentification",
    "UnderlyingTransaction",
    "decode_camt056",
]


class AssignmentInstitution(OutboundStruct, kw_only=True):
    """``finInstnId`` of an assignment party: the BIC."""

    bicfi: BicFi = msgspec.field(name="bicfi")


class AssignmentAgent(OutboundStruct, kw_only=True):
    """``agt`` of an assignment party."""

    fin_instn_id: AssignmentInstitution


class AssignmentParty(OutboundStruct, kw_only=True):
    """``assgnr`` / ``assgne``: ``{"agt": {"finInstnId": {"bicfi": ...}}}``."""

    agt: AssignmentAgent

    @classmethod
    def from_bic(cls, bic: str) -> AssignmentParty:
        """The party whose agent has this BIC.

        Args:
            bic: the agent's BICFI.

        Returns:
            ``{"agt": {"finInstnId": {"bicfi": bic}}}`` as a struct.
        """
        return cls(agt=AssignmentAgent(fin_instn_id=AssignmentInstitution(bicfi=bic)))


class Assignment(OutboundStruct, kw_only=True):
    """``assgnmt``: the assignment id (idempotency key), assigner, assignee, time."""

    id: Max35Id
    assgnr: AssignmentParty
    assgne: AssignmentParty
    cre_dt_tm: IsoDateTime | None = None


class ControlData(OutboundStruct, kw_only=True):
    """``ctrlData``: the number of transactions (sent as a string)."""

    nb_of_txs: NbOfTxs

    def __post_init__(self) -> None:
        if type(self.nb_of_txs) is int:
            self.nb_of_txs = str(self.nb_of_txs)


class OrganisationIdentification(OutboundStruct, kw_only=True):
    """``orgId``: the originator's BIC (``anyBIC``)."""

    any_bic: BicFi = msgspec.field(name="anyBIC")


class OriginatorIdentification(OutboundStruct, kw_only=True):
    """``orgtr.id``."""

    org_id: OrganisationIdentification


class Originator(OutboundStruct, kw_only=True):
    """``orgtr``: who asks for the cancellation (name and/or BIC)."""

    nm: Max140Text | None = None
    id: OriginatorIdentification | None = None


class CancellationReason(OutboundStruct, kw_only=True):
    """``rsn``: a SEPA recall reason code (DUPL, TECH, FRAD, AC03, AM09, CUST)."""

    cd: CancellationReasonCode


class CancellationReasonInformation(OutboundStruct, kw_only=True):
    """One ``cxlRsnInf`` element."""

    orgtr: Originator | None = None
    rsn: CancellationReason


class OriginalTransactionReference(OutboundStruct, kw_only=True):
    """``orgnlTxRef``: what the original payment looked like.

    The service's field list spells the amount ``intrBkSttlAmt`` and its sample body
    ``intrBkSttlmAmt``. Both decode; ``intr_bk_sttl_amt`` exists only to receive the first
    spelling and is moved into ``intr_bk_sttlm_amt`` at once, so encoding always writes
    ``intrBkSttlmAmt``.
    """

    intr_bk_sttlm_amt: ActiveCurrencyAndAmount | None = None
    intr_bk_sttl_amt: ActiveCurrencyAndAmount | None = msgspec.field(
        default=None, name="intrBkSttlAmt"
    )
    pmt_tp_inf: PaymentTypeInformation | None = None
    cdtr_agt: Agent | None = None
    cdtr_acct: CashAccount | None = None

    def __post_init__(self) -> None:
        if self.intr_bk_sttl_amt is not None:
            if self.intr_bk_sttlm_amt is None:
                self.intr_bk_sttlm_amt = self.intr_bk_sttl_amt
            self.intr_bk_sttl_amt = None


class CancellationTransaction(OutboundStruct, kw_only=True):
    """One ``undrlyg[].txInf[]`` element: the payment to cancel and why."""

    cxl_id: Max35Id
    orgnl_end_to_end_id: Max35Id | None = None
    cxl_rsn_inf: Annotated[
        list[CancellationReasonInformation],
        msgspec.Meta(description="At least one reason", extra={"min_items": 1}),
    ]
    orgnl_tx_ref: OriginalTransactionReference


class UnderlyingTransaction(OutboundStruct, kw_only=True):
    """One ``undrlyg`` element."""

    tx_inf: Annotated[
        list[CancellationTransaction],
        msgspec.Meta(description="At least one transaction", extra={"min_items": 1}),
    ]


class CancellationRequest(OutboundStruct, kw_only=True):
    """The body under ``fitoFIPmtCxlReq``."""

    assgnmt: Assignment
    ctrl_data: ControlData | None = None
    undrlyg: Annotated[
        list[UnderlyingTransaction],
        msgspec.Meta(description="At least one underlying", extra={"min_items": 1}),
    ]


class Camt056(OutboundStruct, kw_only=True):
    """A camt.056 cancellation request, root ``fitoFIPmtCxlReq``.

    Build one with `payments_async.iso20022.build_cancellation`; check one with
    `payments_async.iso20022.validate`.
    """

    fito_fi_pmt_cxl_req: CancellationRequest = msgspec.field(name="fitoFIPmtCxlReq")

    @property
    def body(self) -> CancellationRequest:
        """The message under the root key."""
        return self.fito_fi_pmt_cxl_req

    @property
    def message_id(self) -> str:
        """``assgnmt.id``: the idempotency key of the submission."""
        return self.fito_fi_pmt_cxl_req.assgnmt.id

    @property
    def original_end_to_end_id(self) -> str | None:
        """``orgnlEndToEndId`` of the first transaction, or None when absent."""
        for und in self.fito_fi_pmt_cxl_req.undrlyg:
            for tx in und.tx_inf:
                return tx.orgnl_end_to_end_id
        return None


_DECODER = msgspec.json.Decoder(Camt056)


def decode_camt056(data: bytes | str) -> Camt056:
    """Decode a camt.056 request (strict; ``intrBkSttlAmt`` accepted for the amount).

    Args:
        data: the JSON body.

    Returns:
        The message; call ``validate()`` on it to check the ISO/SEPA rules.

    Raises:
        ValidationError: the body is not JSON or does not have the camt.056 shape.
    """
    return decode_with(_DECODER, data, "camt.056 message")
