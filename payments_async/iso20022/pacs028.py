"""pacs.028 FI-to-FI payment status request (root ``fitoFIPmtStsReq``), outbound.

In SEPA it is the **request for status update** on a recall: when the beneficiary bank
has not answered a camt.056, the originator bank asks again with a pacs.028 whose
``orgnlGrpInf`` names the camt.056 (``orgnlMsgNmId`` ``"camt.056.001.08"``). The fields
are ISO's pacs.028.001.03 (FIToFIPaymentStatusRequestV03), the version of the 2019 ISO
standard that the EPC's SCT implementation guidelines use beside camt.056.001.08.
"""

from __future__ import annotations

import os
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Annotated, Final

import msgspec

from ._common import OutboundStruct, decode_with
from ._types import IsoDate, IsoDateTime, Max35Id, Max35Text, Uetr, UtcDateTime
from .camt056 import Camt056
from .pacs008 import ActiveCurrencyAndAmount, Agent, FinancialInstitutionIdentification

__all__ = [
    "RECALL_MESSAGE_NAME",
    "OriginalGroupReference",
    "Pacs028",
    "StatusRequest",
    "StatusRequestGroupHeader",
    "StatusRequestOriginalReference",
    "StatusRequestTransaction",
    "build_status_request",
    "decode_pacs028",
]

RECALL_MESSAGE_NAME: Final = "camt.056.001.08"
"""``orgnlMsgNmId`` of a status request on a recall: the camt.056 version the service takes."""


class StatusRequestGroupHeader(OutboundStruct, kw_only=True):
    """``grpHdr``: message id (the idempotency key), creation time, the two banks."""

    msg_id: Max35Id
    cre_dt_tm: UtcDateTime
    instg_agt: Agent | None = None
    instd_agt: Agent | None = None


class OriginalGroupReference(OutboundStruct, kw_only=True):
    """``txInf[].orgnlGrpInf``: the message asked about, by its id and message name."""

    orgnl_msg_id: Max35Id
    orgnl_msg_nm_id: Max35Text
    orgnl_cre_dt_tm: IsoDateTime | None = None


class StatusRequestOriginalReference(OutboundStruct, kw_only=True):
    """``txInf[].orgnlTxRef``: the original payment's amount and settlement date."""

    intr_bk_sttlm_amt: ActiveCurrencyAndAmount | None = None
    intr_bk_sttlm_dt: IsoDate | None = None


class StatusRequestTransaction(OutboundStruct, kw_only=True):
    """One ``txInf`` element: what is asked about.

    For a recall: ``orgnlGrpInf`` names the camt.056 (its ``assgnmt.id``), ``orgnlInstrId``
    is the recall's ``cxlId``, ``orgnlEndToEndId`` the original payment's end-to-end id.
    """

    sts_req_id: Max35Id
    orgnl_grp_inf: OriginalGroupReference
    orgnl_instr_id: Max35Id | None = None
    orgnl_end_to_end_id: Max35Id | None = None
    orgnl_tx_id: Max35Id | None = None
    orgnl_uetr: Uetr | None = msgspec.field(default=None, name="orgnlUETR")
    orgnl_tx_ref: StatusRequestOriginalReference | None = None


class StatusRequest(OutboundStruct, kw_only=True):
    """The body under ``fitoFIPmtStsReq``; one transaction per message, as the other POSTs."""

    grp_hdr: StatusRequestGroupHeader
    tx_inf: Annotated[
        list[StatusRequestTransaction],
        msgspec.Meta(description="One transaction", extra={"min_items": 1, "max_items": 1}),
    ]


class Pacs028(OutboundStruct, kw_only=True):
    """A pacs.028 request for status update, root ``fitoFIPmtStsReq``.

    Build one with `build_status_request`; check one with
    `payments_async.iso20022.validate`.
    """

    fito_fi_pmt_sts_req: StatusRequest = msgspec.field(name="fitoFIPmtStsReq")

    @property
    def body(self) -> StatusRequest:
        """The message under the root key."""
        return self.fito_fi_pmt_sts_req

    @property
    def message_id(self) -> str:
        """``grpHdr.msgId``: the idempotency key of the submission."""
        return self.fito_fi_pmt_sts_req.grp_hdr.msg_id

    @property
    def original_message_id(self) -> str:
        """``orgnlGrpInf.orgnlMsgId`` of the first transaction: the message asked about.

        Raises:
            IndexError: the message has no transaction (``validate()`` refuses that).
        """
        return self.fito_fi_pmt_sts_req.tx_inf[0].orgnl_grp_inf.orgnl_msg_id


_DECODER = msgspec.json.Decoder(Pacs028)


def decode_pacs028(data: bytes | str) -> Pacs028:
    """Decode a pacs.028 request (strict: unknown fields are refused).

    Args:
        data: the JSON body.

    Returns:
        The message; call ``validate()`` on it to check the ISO/SEPA rules.

    Raises:
        ValidationError: the body is not JSON or does not have the pacs.028 shape.
    """
    return decode_with(_DECODER, data, "pacs.028 message")


def _agent(bic: str | None) -> Agent | None:
    if bic is None:
        return None
    return Agent(fin_instn_id=FinancialInstitutionIdentification(bicfi=bic))


def build_status_request(
    cancellation: Camt056 | None = None,
    *,
    assignment_id: str | None = None,
    cancellation_id: str | None = None,
    original_end_to_end_id: str | None = None,
    message_id: str | None = None,
    status_request_id: str | None = None,
    created_at: datetime | None = None,
    instructing_agent_bic: str | None = None,
    instructed_agent_bic: str | None = None,
    original_amount: Decimal | None = None,
    original_settlement_date: date | None = None,
) -> Pacs028:
    """Build the request for status update on a recall (a camt.056 already submitted).

    Give the camt.056 itself (as built or decoded): its ``assgnmt.id``, creation time,
    first ``cxlId`` and ``orgnlEndToEndId``, the assigner and assignee BICs and the
    original amount are taken from it. Or give its ids: ``assignment_id`` (the camt.056's
    ``assgnmt.id``, which a `Submission` of it carries as its message id) and, where
    known, ``cancellation_id`` and ``original_end_to_end_id``. A keyword given beside the
    message wins over what the message says.

    The result is not validated here: ``validate()`` it, or let the client do it when it
    is sent.

    Args:
        cancellation: the camt.056 the status is asked about.
        assignment_id: its ``assgnmt.id`` (``orgnlGrpInf.orgnlMsgId``).
        cancellation_id: its ``cxlId`` (``orgnlInstrId``).
        original_end_to_end_id: the original payment's end-to-end id.
        message_id: ``grpHdr.msgId`` (the idempotency key); None: a new random id.
        status_request_id: ``txInf[0].stsReqId``; None: a new random id.
        created_at: ``grpHdr.creDtTm``; None: now. A naive datetime is taken as UTC.
        instructing_agent_bic: the asking bank (``grpHdr.instgAgt``); default the
            camt.056's assigner.
        instructed_agent_bic: the bank asked (``grpHdr.instdAgt``); default the
            camt.056's assignee.
        original_amount: the original payment's EUR amount (``orgnlTxRef``); default the
            camt.056's.
        original_settlement_date: the original payment's interbank settlement date.

    Returns:
        The pacs.028 message.

    Raises:
        ValueError: neither ``cancellation`` nor ``assignment_id`` is given.
    """
    created: str | None = None
    if cancellation is not None:
        body = cancellation.fito_fi_pmt_cxl_req
        tx = body.undrlyg[0].tx_inf[0] if body.undrlyg and body.undrlyg[0].tx_inf else None
        assignment_id = assignment_id if assignment_id is not None else body.assgnmt.id
        created = body.assgnmt.cre_dt_tm
        if tx is not None:
            cancellation_id = cancellation_id if cancellation_id is not None else tx.cxl_id
            if original_end_to_end_id is None:
                original_end_to_end_id = tx.orgnl_end_to_end_id
            amount = tx.orgnl_tx_ref.intr_bk_sttlm_amt
            if original_amount is None and amount is not None:
                original_amount = amount.value
        if instructing_agent_bic is None:
            instructing_agent_bic = body.assgnmt.assgnr.agt.fin_instn_id.bicfi
        if instructed_agent_bic is None:
            instructed_agent_bic = body.assgnmt.assgne.agt.fin_instn_id.bicfi
    if assignment_id is None:
        raise ValueError("give the camt.056 or its assignment id (assgnmt.id)")
    when = created_at if created_at is not None else datetime.now(UTC)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    stamp = when.astimezone(UTC).isoformat(timespec="milliseconds")[:-6] + "Z"
    reference: StatusRequestOriginalReference | None = None
    if original_amount is not None or original_settlement_date is not None:
        reference = StatusRequestOriginalReference(
            intr_bk_sttlm_amt=(
                ActiveCurrencyAndAmount(value=original_amount, ccy="EUR")
                if original_amount is not None
                else None
            ),
            intr_bk_sttlm_dt=(
                original_settlement_date.isoformat()
                if original_settlement_date is not None
                else None
            ),
        )
    random = os.urandom(32).hex()
    return Pacs028(
        fito_fi_pmt_sts_req=StatusRequest(
            grp_hdr=StatusRequestGroupHeader(
                msg_id=message_id if message_id is not None else "SRQ" + random[:32],
                cre_dt_tm=stamp,
                instg_agt=_agent(instructing_agent_bic),
                instd_agt=_agent(instructed_agent_bic),
            ),
            tx_inf=[
                StatusRequestTransaction(
                    sts_req_id=(
                        status_request_id if status_request_id is not None else "SRI" + random[32:]
                    ),
                    orgnl_grp_inf=OriginalGroupReference(
                        orgnl_msg_id=assignment_id,
                        orgnl_msg_nm_id=RECALL_MESSAGE_NAME,
                        orgnl_cre_dt_tm=created,
                    ),
                    orgnl_instr_id=cancellation_id,
                    orgnl_end_to_end_id=original_end_to_end_id,
                    orgnl_tx_ref=reference,
                )
            ],
        )
    )
