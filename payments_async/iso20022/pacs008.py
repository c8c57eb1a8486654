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
    IsoDate,
    Max4Text,
    Max16Text,
    Max35Id,
    Max35Text,
    Max70Text,
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
    "ClearingSystemIdentification",
    "ClearingSystemMemberIdentification",
    "CreditTransfer",
    "CreditTransferTransaction",
    "CreditorReferenceInformation",
    "CreditorReferenceType",
    "CreditorReferenceTypeCode",
    "FinancialInstitutionIdentification",
    "GenericAccountIdentification",
    "GroupHeader",
    "LocalInstrument",
    "Pacs008",
    "Party",
    "PaymentIdentification",
    "PaymentTypeInformation",
    "PostalAddress",
    "Purpose",
    "RemittanceInformation",
    "ServiceLevel",
    "SettlementInstruction",
    "StructuredRemittanceInformation",
    "decode_pacs008",
]


class ClearingSystemIdentification(OutboundStruct, kw_only=True):
    """``sttlmInf.clrSys``: the clearing system, by proprietary name (``ST2`` ...)."""

    prtry: Max35Text


class SettlementInstruction(OutboundStruct, kw_only=True):
    """``grpHdr.sttlmInf``: how the transfer settles (``CLRG`` for SEPA) and where."""

    sttlm_mtd: SettlementMethodCode
    clr_sys: ClearingSystemIdentification | None = None


class GroupHeader(OutboundStruct, kw_only=True):
    """``grpHdr``: message id (the idempotency key), creation time, count, settlement.

    The EPC inter-PSP fields are optional here: the total and date of interbank
    settlement and the instructing and instructed agents.

    ``nb_of_txs`` is sent as a string; a number is accepted on decode and turned into one.
    """

    msg_id: Max35Id
    cre_dt_tm: UtcDateTime
    nb_of_txs: NbOfTxs
    ttl_intr_bk_sttlm_amt: ActiveCurrencyAndAmount | None = None
    intr_bk_sttlm_dt: IsoDate | None = None
    sttlm_inf: SettlementInstruction
    instg_agt: Agent | None = None
    instd_agt: Agent | None = None

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
    """``pstlAdr``: ISO's PostalAddress24, each field with ISO's length.

    Build one from `payments_async.iso20022.Address`. ``validate()`` applies the EPC
    address rule: town name and country in their own fields, at most two address lines.
    """

    dept: Max70Text | None = None
    sub_dept: Max70Text | None = None
    strt_nm: Max70Text | None = None
    bldg_nb: Max16Text | None = None
    bldg_nm: Max35Text | None = None
    flr: Max70Text | None = None
    pst_bx: Max16Text | None = None
    room: Max70Text | None = None
    pst_cd: Max16Text | None = None
    twn_nm: Max35Text | None = None
    twn_lctn_nm: Max35Text | None = None
    dstrct_nm: Max35Text | None = None
    ctry_sub_dvsn: Max35Text | None = None
    ctry: CountryCode | None = None
    adr_line: AddressLines | None = None


class Party(OutboundStruct, kw_only=True):
    """``dbtr`` / ``cdtr`` / ``ultmtDbtr`` / ``ultmtCdtr``: name and postal address."""

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
    """``dbtrAgt`` / ``cdtrAgt`` / ``instgAgt`` / ``instdAgt``: a bank."""

    fin_instn_id: FinancialInstitutionIdentification


class CreditorReferenceTypeCode(OutboundStruct, kw_only=True):
    """``cdtrRefInf.tp.cdOrPrtry``: ``{"cd": "SCOR"}`` for an ISO 11649 reference."""

    cd: Max4Text | None = None
    prtry: Max35Text | None = None


class CreditorReferenceType(OutboundStruct, kw_only=True):
    """``cdtrRefInf.tp``: the kind of reference and who issued it."""

    cd_or_prtry: CreditorReferenceTypeCode
    issr: Max35Text | None = None


class CreditorReferenceInformation(OutboundStruct, kw_only=True):
    """``cdtrRefInf``: the creditor's structured reference and its type."""

    tp: CreditorReferenceType | None = None
    ref: Max35Text


class StructuredRemittanceInformation(OutboundStruct, kw_only=True):
    """One ``rmtInf.strd`` element."""

    cdtr_ref_inf: CreditorReferenceInformation | None = None
    addtl_rmt_inf: list[Max140Text] | None = None


class RemittanceInformation(OutboundStruct, kw_only=True):
    """``rmtInf``: one unstructured line (SEPA) and/or structured references."""

    ustrd: (
        Annotated[
            list[Max140Text],
            msgspec.Meta(description="One line (SEPA)", extra={"max_items": 1}),
        ]
        | None
    ) = None
    strd: list[StructuredRemittanceInformation] | None = None


class Purpose(OutboundStruct, kw_only=True):
    """``purp``: why the payment is made, an ISO external purpose code or a proprietary one."""

    cd: Max4Text | None = None
    prtry: Max35Text | None = None


class CreditTransferTransaction(OutboundStruct, kw_only=True):
    """One ``cdtTrfTxInf`` element: who pays whom how much, for whom and why."""

    pmt_id: PaymentIdentification
    pmt_tp_inf: PaymentTypeInformation | None = None
    intr_bk_sttlm_amt: ActiveCurrencyAndAmount
    intr_bk_sttlm_dt: IsoDate | None = None
    chrg_br: ChargeBearerCode | None = None
    ultmt_dbtr: Party | None = None
    dbtr: Party
    dbtr_acct: CashAccount
    dbtr_agt: Agent
    cdtr_agt: Agent
    cdtr: Party
    cdtr_acct: CashAccount
    ultmt_cdtr: Party | None = None
    purp: Purpose | None = None
    rmt_inf: RemittanceInformation | None = None


class CreditTransfer(OutboundStruct, kw_only=True):
    """The body under ``fitoFICstmrCdtTrf``; the service takes one transaction per message."""

    grp_hdr: GroupHeader
    cdt_trf_tx_inf: Annotated[
        list[CreditTransferTransaction],
        msgspec.Meta(description="One transaction", extra={"min_items": 1, "max_items": 1}),
    ]


class Pacs008(OutboundStruct, kw_only=True):
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
