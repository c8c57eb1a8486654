"""pacs.008 FI-to-FI customer credit transfer (root ``fitoFICstmrCdtTrf``), outbound."""

from __future__ import annotations

from typing import Annotated

import msgspec

from ._common import OutboundStruct, decode_with
from ._types import (
    AddressLines,
    Amount,
    BicFi,
    ChargeBearerCode,
    CountryCode,
    CurrencyCode,
    Iban,
    Max35Id,
    Max35Text,
    Max140Text,
    NbOfTxs,
    SettlementMethodCode,
    Uetr,
    UtcDateTime,
)

__all__ = [
    "AccountIdentification",
    "ActiveCurrencyAndAmount",
    "Agent",
    "CashAccount",
    "ClearingSystemMemberIdentification",
    "CreditTransfer",
    "CreditTransferTransaction",
    "CreditorReferenceInformation",
    "FinancialInstitutionIdentification",
    "GenericAccountIdentification",
    "GroupHeader",
    "LocalInstrument",
    "Pacs008",
    "Party",
    "PaymentIdentification",
    "PaymentTypeInformation",
    "PostalAddress",
    "RemittanceInformation",
    "ServiceLevel",
    "SettlementInstruction",
    "StructuredRemittanceInformation",
    "decode_pacs008",
]


class SettlementInstruction(OutboundStruct, kw_only=True):
    """``grpHdr.sttlmInf``: how the transfer settles (``CLRG`` for SEPA)."""

    sttlm_mtd: SettlementMethodCode


class GroupHeader(OutboundStruct, kw_only=True):
    """``grpHdr``: message id (the idempotency key), creation time, count, settlement.

    ``nb_of_txs`` is sent as a string; a number is accepted on decode and turned into one.
    """

    msg_id: Max35Id
    cre_dt_tm: UtcDateTime
    nb_of_txs: NbOfTxs
    sttlm_inf: SettlementInstruction

    def __post_init__(self) -> None:
        if type(self.nb_of_txs) is int:
            self.nb_of_txs = str(self.nb_of_txs)


class PaymentIdentification(OutboundStruct, kw_only=True):
    """``pmtId``: end-to-end id, transaction id and UETR."""

    end_to_end_id: Max35Id
    tx_id: Max35Id | None = None
    uetr: Uetr | None = msgspec.field(default=None, name="uetr")


class ServiceLevel(OutboundStruct, kw_only=True):
    """One ``svcLvl`` element, e.g. ``{"prtry": "SEPA"}``."""

    prtry: Max35Text


class LocalInstrument(OutboundStruct, kw_only=True):
    """``lclInstrm``: a proprietary local instrument code."""

    prtry: Max35Text


class PaymentTypeInformation(OutboundStruct, kw_only=True):
    """``pmtTpInf``: service level(s) and local instrument."""

    svc_lvl: list[ServiceLevel] | None = None
    lcl_instrm: LocalInstrument | None = None


class ActiveCurrencyAndAmount(OutboundStruct, kw_only=True):
    """``{"value": <number>, "ccy": "EUR"}``; ``value`` is a ``Decimal`` with exact digits."""

    value: Amount
    ccy: CurrencyCode


class PostalAddress(OutboundStruct, kw_only=True):
    """``pstlAdr``: town, country and up to two address lines."""

    twn_nm: Max35Text | None = None
    ctry: CountryCode | None = None
    adr_line: AddressLines | None = None


class Party(OutboundStruct, kw_only=True):
    """``dbtr`` / ``cdtr``: name and postal address."""

    nm: Max140Text
    pstl_adr: PostalAddress | None = None


class GenericAccountIdentification(OutboundStruct, kw_only=True):
    """``othr``: the service carries the IBAN here for pacs.008 (``…Acct.id.othr.id``)."""

    id: Iban


class AccountIdentification(OutboundStruct, kw_only=True):
    """``…Acct.id``: exactly one of ``othr`` (pacs.008) or ``iban`` (camt.056)."""

    othr: GenericAccountIdentification | None = None
    iban: Iban | None = None


class CashAccount(OutboundStruct, kw_only=True):
    """``dbtrAcct`` / ``cdtrAcct``: identification, optional name and currency."""

    id: AccountIdentification
    ccy: CurrencyCode | None = None
    nm: Max140Text | None = None


class ClearingSystemMemberIdentification(OutboundStruct, kw_only=True):
    """``clrSysMmbId``: the clearing-system member id."""

    mmb_id: Max35Text


class FinancialInstitutionIdentification(OutboundStruct, kw_only=True):
    """``finInstnId``: a BIC, a clearing-system member id, or both; optional address."""

    bicfi: BicFi | None = msgspec.field(default=None, name="bicfi")
    clr_sys_mmb_id: ClearingSystemMemberIdentification | None = None
    pstl_adr: PostalAddress | None = None


class Agent(OutboundStruct, kw_only=True):
    """``dbtrAgt`` / ``cdtrAgt``: the bank of a party."""

    fin_instn_id: FinancialInstitutionIdentification


class CreditorReferenceInformation(OutboundStruct, kw_only=True):
    """``cdtrRefInf``: the creditor's structured reference."""

    ref: Max35Text


class StructuredRemittanceInformation(OutboundStruct, kw_only=True):
    """One ``rmtInf.strd`` element."""

    cdtr_ref_inf: CreditorReferenceInformation | None = None
    addtl_rmt_inf: list[Max140Text] | None = None


class RemittanceInformation(OutboundStruct, kw_only=True):
    """``rmtInf``: unstructured lines and/or structured references."""

    ustrd: list[Max140Text] | None = None
    strd: list[StructuredRemittanceInformation] | None = None


class CreditTransferTransaction(OutboundStruct, kw_only=True):
    """One ``cdtTrfTxInf`` element: who pays whom how much."""

    pmt_id: PaymentIdentification
    pmt_tp_inf: PaymentTypeInformation | None = None
    intr_bk_sttlm_amt: ActiveCurrencyAndAmount
    chrg_br: ChargeBearerCode | None = None
    dbtr: Party
    dbtr_acct: CashAccount
    dbtr_agt: Agent
    cdtr_agt: Agent
    cdtr: Party
    cdtr_acct: CashAccount
    rmt_inf: RemittanceInformation | None = None


class CreditTransfer(OutboundStruct, kw_only=True):
    """The body under ``fitoFICstmrCdtTrf``; the service takes one transaction per message."""

    grp_hdr: GroupHeader
    cdt_trf_tx_inf: Annotated[
        list[CreditTransferTransaction],
        msgspec.Meta(description="One transaction", extra={"min_items": 1, "max_items": 1}),
    ]


# dict=True: validation keeps the encoding that passed on the instance.
class Pacs008(OutboundStruct, kw_only=True, dict=True):
    """A pacs.008 credit transfer request, root ``fitoFICstmrCdtTrf``.

    Build one with `payments_async.iso20022.build_credit_transfer`; check one with
    `payments_async.iso20022.validate`.
    """

    fito_fi_cstmr_cdt_trf: CreditTransfer = msgspec.field(name="fitoFICstmrCdtTrf")

    @property
    def body(self) -> CreditTransfer:
        """The message under the root key."""
        return self.fito_fi_cstmr_cdt_trf

    @property
    def message_id(self) -> str:
        """``grpHdr.msgId``: the idempotency key of the submission."""
        return self.fito_fi_cstmr_cdt_trf.grp_hdr.msg_id

    @property
    def end_to_end_id(self) -> str:
        """``pmtId.endToEndId`` of the first transaction.

        Raises:
            IndexError: the message has no transaction (``validate()`` refuses that).
        """
        return self.fito_fi_cstmr_cdt_trf.cdt_trf_tx_inf[0].pmt_id.end_to_end_id


_DECODER = msgspec.json.Decoder(Pacs008)


def decode_pacs008(data: bytes | str) -> Pacs008:
    """Decode a pacs.008 request (strict: unknown fields are refused).

    Args:
        data: the JSON body.

    Returns:
        The message; call ``validate()`` on it to check the ISO/SEPA rules.

    Raises:
        ValidationError: the body is not JSON or does not have the pacs.008 shape.
    """
    return decode_with(_DECODER, data, "pacs.008 message")
