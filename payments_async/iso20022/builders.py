"""Builders for the common case: a SEPA credit transfer and a cancellation request."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation

from .._errors import Problem, ValidationError
from ._addresses import Address, to_postal_address
from ._validate import validate
from .camt056 import (
    Assignment,
    AssignmentAgent,
    AssignmentInstitution,
    AssignmentParty,
    Camt056,
    CancellationReason,
    CancellationReasonInformation,
    CancellationRequest,
    CancellationTransaction,
    ControlData,
    OrganisationIdentification,
    OriginalTransactionReference,
    Originator,
    OriginatorIdentification,
    UnderlyingTransaction,
)
from .pacs008 import (
    AccountIdentification,
    ActiveCurrencyAndAmount,
    Agent,
    CashAccount,
    ClearingSystemMemberIdentification,
    CreditorReferenceInformation,
    CreditTransfer,
    CreditTransferTransaction,
    FinancialInstitutionIdentification,
    GenericAccountIdentification,
    GroupHeader,
    LocalInstrument,
    Pacs008,
    Party,
    PaymentIdentification,
    PaymentTypeInformation,
    PostalAddress,
    Purpose,
    RemittanceInformation,
    ServiceLevel,
    SettlementInstruction,
    StructuredRemittanceInformation,
)

__all__ = ["build_cancellation", "build_credit_transfer", "format_utc", "new_id"]

_PACS008 = "$.fitoFICstmrCdtTrf"
_CAMT056 = "$.fitoFIPmtCxlReq"
_PACS008_AMOUNT = f"{_PACS008}.cdtTrfTxInf[0].intrBkSttlmAmt.value"
_CAMT056_AMOUNT = f"{_CAMT056}.undrlyg[0].txInf[0].orgnlTxRef.intrBkSttlmAmt.value"
_CENT = Decimal("0.01")


def new_id(prefix: str) -> str:
    """A fresh unique identifier: ``prefix`` + 32 random hex digits, cut to 35 characters.

    Lowercase hex and an alphanumeric prefix keep it inside Max35Text and the SEPA
    character set; a random UUID's 122 bits (fewer with a prefix over three characters)
    keep it unique.

    Args:
        prefix: a short alphanumeric prefix saying what the id is for (e.g. ``"MSG"``).

    Returns:
        The identifier.
    """
    return f"{prefix}{uuid.uuid4().hex}"[:35]


def format_utc(moment: datetime | None = None) -> str:
    """An ISO 8601 date-time in UTC with the ``Z`` designator, in milliseconds.

    Args:
        moment: an aware datetime; None for now. A naive one is refused.

    Returns:
        For example ``"2024-08-01T08:00:00.000Z"``.

    Raises:
        ValueError: ``moment`` is naive (its zone would be a guess).
    """
    if moment is None:
        moment = datetime.now(UTC)
    elif moment.tzinfo is None:
        raise ValueError("a naive datetime has no zone; pass an aware one")
    # "2024-08-01T08:00:00.000+00:00" -> "...000Z"
    return moment.astimezone(UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def _to_decimal(amount: object, path: str) -> Decimal:
    """Turn a Decimal, int or decimal string into a Decimal; refuse floats and junk."""
    if type(amount) is Decimal:
        value = amount
    elif isinstance(amount, bool | float):
        raise ValidationError(
            [Problem(path, f"give the amount as Decimal or str, not {type(amount).__name__}")]
        )
    elif isinstance(amount, Decimal):
        value = amount
    elif isinstance(amount, int):
        value = Decimal(amount)
    elif isinstance(amount, str):
        try:
            value = Decimal(amount.strip())
        except InvalidOperation:
            raise ValidationError(
                [Problem(path, f"not a decimal number: {amount[:40]!r}")]
            ) from None
    else:
        raise ValidationError(
            [Problem(path, f"expected Decimal or str, got {type(amount).__name__}")]
        )
    exponent = value.as_tuple().exponent
    if not isinstance(exponent, int):
        return value  # not finite: validate() reports it with its path
    try:
        if exponent > 0:
            value = value.quantize(Decimal(1))  # 1E+2 -> 100: plain digits on the wire
        elif exponent < -2 and value == value.quantize(_CENT):
            value = value.quantize(_CENT)  # 10.500 -> 10.50: only zeros are dropped
    except ArithmeticError:
        pass  # too many digits to tidy: validate() reports the amount with its path
    return value


def _created(moment: datetime, path: str) -> str:
    if not isinstance(moment, datetime):
        raise ValidationError([Problem(path, f"expected a datetime, got {type(moment).__name__}")])
    try:
        return format_utc(moment)
    except ValueError as exc:
        raise ValidationError([Problem(path, str(exc))]) from None


# The normalisers tidy strings only: a value of the wrong type goes into the message as it
# is, and validate() names it with its path (a builder never raises anything else).


def _iban(value: str) -> str:
    return value.replace(" ", "").upper() if isinstance(value, str) else value


def _bic(value: str) -> str:
    return value.strip().upper() if isinstance(value, str) else value


def build_credit_transfer(
    *,
    debtor_name: str,
    debtor_iban: str,
    debtor_agent_id: str,
    creditor_name: str,
    creditor_iban: str,
    creditor_agent_id: str,
    amount: Decimal | str,
    currency: str = "EUR",
    remittance: str | None = None,
    message_id: str | None = None,
    end_to_end_id: str | None = None,
    tx_id: str | None = None,
    uetr: str | None = None,
    debtor_address: Address | PostalAddress | None = None,
    creditor_address: Address | PostalAddress | None = None,
    ultimate_debtor_name: str | None = None,
    ultimate_creditor_name: str | None = None,
    purpose: str | None = None,
    debtor_account_name: str | None = None,
    creditor_account_name: str | None = None,
    creditor_reference: str | None = None,
    charge_bearer: str = "SLEV",
    service_level: str = "SEPA",
    local_instrument: str | None = None,
    created_at: datetime | None = None,
    rules_on: date | None = None,
) -> Pacs008:
    """Build and validate a one-transaction SEPA credit transfer (pacs.008).

    Generated unless given: ``grpHdr.msgId`` (keep it: resubmitting the same message is
    how a retry stays idempotent), ``endToEndId``, ``txId`` and a UETR. ``creDtTm`` is now
    in UTC, ``nbOfTxs`` is counted, ``sttlmMtd`` is CLRG and the service level SEPA.
    IBANs lose their spaces and are upper-cased.

    Args:
        debtor_name: who pays (Max140Text, SEPA characters).
        debtor_iban: the debtor's IBAN, sent as ``dbtrAcct.id.othr.id``.
        debtor_agent_id: the debtor's bank, sent as ``clrSysMmbId.mmbId``.
        creditor_name: who is paid.
        creditor_iban: the creditor's IBAN, sent as ``cdtrAcct.id.othr.id``.
        creditor_agent_id: the creditor's bank, sent as ``clrSysMmbId.mmbId``.
        amount: a ``Decimal`` or a decimal string; floats are refused (they lose digits).
        currency: ISO 4217 code; SEPA is EUR.
        remittance: one unstructured remittance line (Max140Text).
        message_id: ``grpHdr.msgId``; generated when None.
        end_to_end_id: ``pmtId.endToEndId``; generated when None.
        tx_id: ``pmtId.txId``; generated when None.
        uetr: lowercase UUID v4; generated when None.
        debtor_address: the debtor's postal address (``dbtr.pstlAdr``): an `Address`,
            structured or hybrid (see `EPC_ADDRESS_CUTOVER`).
        creditor_address: the creditor's postal address (``cdtr.pstlAdr``).
        ultimate_debtor_name: ``ultmtDbtr.nm``: on whose behalf the debtor pays.
        ultimate_creditor_name: ``ultmtCdtr.nm``: for whom the creditor is paid.
        purpose: ``purp.cd``: an ISO external purpose code (``SALA``, ``SUPP``...).
        debtor_account_name: ``dbtrAcct.nm``.
        creditor_account_name: ``cdtrAcct.nm``.
        creditor_reference: a structured creditor reference (``rmtInf.strd``).
        charge_bearer: ``chrgBr``; SEPA uses SLEV.
        service_level: ``pmtTpInf.svcLvl[0].prtry``.
        local_instrument: ``pmtTpInf.lclInstrm.prtry``, if any.
        created_at: aware datetime for ``creDtTm``; now when None; a naive one is refused.
        rules_on: validate with the rules in force on this date (see ``validate()``); a
            date before `EPC_ADDRESS_CUTOVER` accepts an address of lines alone.

    Returns:
        A valid message, ready for ``encode()``.

    Raises:
        ValidationError: any input breaks a rule; every problem is listed with its path.
    """
    value = _to_decimal(amount, _PACS008_AMOUNT)
    created = (
        format_utc() if created_at is None else _created(created_at, f"{_PACS008}.grpHdr.creDtTm")
    )
    dbtr_iban, cdtr_iban = _iban(debtor_iban), _iban(creditor_iban)
    rmt: RemittanceInformation | None = None
    if remittance is not None or creditor_reference is not None:
        rmt = RemittanceInformation(
            ustrd=[remittance] if remittance is not None else None,
            strd=(
                [
                    StructuredRemittanceInformation(
                        cdtr_ref_inf=CreditorReferenceInformation(ref=creditor_reference)
                    )
                ]
                if creditor_reference is not None
                else None
            ),
        )
    tx = CreditTransferTransaction(
        pmt_id=PaymentIdentification(
            end_to_end_id=end_to_end_id if end_to_end_id is not None else new_id("E2E"),
            tx_id=tx_id if tx_id is not None else new_id("TX"),
            uetr=uetr if uetr is not None else str(uuid.uuid4()),
        ),
        pmt_tp_inf=PaymentTypeInformation(
            svc_lvl=[ServiceLevel(prtry=service_level)],
            lcl_instrm=LocalInstrument(prtry=local_instrument) if local_instrument else None,
        ),
        intr_bk_sttlm_amt=ActiveCurrencyAndAmount(value=value, ccy=currency),
        chrg_br=charge_bearer,
        ultmt_dbtr=Party(nm=ultimate_debtor_name) if ultimate_debtor_name is not None else None,
        dbtr=Party(nm=debtor_name, pstl_adr=to_postal_address(debtor_address)),
        dbtr_acct=CashAccount(
            id=AccountIdentification(othr=GenericAccountIdentification(id=dbtr_iban)),
            nm=debtor_account_name,
        ),
        dbtr_agt=Agent(
            fin_instn_id=FinancialInstitutionIdentification(
                clr_sys_mmb_id=ClearingSystemMemberIdentification(mmb_id=debtor_agent_id)
            )
        ),
        cdtr_agt=Agent(
            fin_instn_id=FinancialInstitutionIdentification(
                clr_sys_mmb_id=ClearingSystemMemberIdentification(mmb_id=creditor_agent_id)
            )
        ),
        cdtr=Party(nm=creditor_name, pstl_adr=to_postal_address(creditor_address)),
        cdtr_acct=CashAccount(
            id=AccountIdentification(othr=GenericAccountIdentification(id=cdtr_iban)),
            nm=creditor_account_name,
        ),
        ultmt_cdtr=(
            Party(nm=ultimate_creditor_name) if ultimate_creditor_name is not None else None
        ),
        purp=Purpose(cd=purpose) if purpose is not None else None,
        rmt_inf=rmt,
    )
    msg = Pacs008(
        fito_fi_cstmr_cdt_trf=CreditTransfer(
            grp_hdr=GroupHeader(
                msg_id=message_id if message_id is not None else new_id("MSG"),
                cre_dt_tm=created,
                nb_of_txs="1",  # one transaction, just below
                sttlm_inf=SettlementInstruction(sttlm_mtd="CLRG"),
            ),
            cdt_trf_tx_inf=[tx],
        )
    )
    validate(msg, rules_on=rules_on)
    return msg


def build_cancellation(
    *,
    original_end_to_end_id: str,
    amount: Decimal | str | None,
    creditor_agent_bic: str,
    creditor_iban: str,
    assigner_bic: str,
    assignee_bic: str,
    reason: str = "CUST",
    originator_name: str | None = None,
    originator_bic: str | None = None,
    assignment_id: str | None = None,
    cancellation_id: str | None = None,
    currency: str = "EUR",
    service_level: str = "SEPA",
    creditor_agent_address: Address | PostalAddress | None = None,
    created_at: datetime | None = None,
    rules_on: date | None = None,
) -> Camt056:
    """Build and validate a camt.056 request to cancel one SEPA credit transfer.

    Generated unless given: ``assgnmt.id`` (keep it: resubmitting the same id is how a
    retry stays idempotent) and ``cxlId``. ``assgnmt.creDtTm`` is now in UTC and
    ``ctrlData.nbOfTxs`` is ``"1"``. The originator is named by ``originator_name`` and
    identified by ``originator_bic``, which defaults to the assigner's BIC.

    Args:
        original_end_to_end_id: ``endToEndId`` of the payment to cancel.
        amount: its amount (``Decimal`` or decimal string; floats are refused), or None
            to leave ``orgnlTxRef.intrBkSttlmAmt`` out.
        creditor_agent_bic: BIC of the creditor's bank in the original payment.
        creditor_iban: the creditor's IBAN in the original payment.
        assigner_bic: BIC of the assigner (the customer's agent).
        assignee_bic: BIC of the assignee (the merchant's agent).
        reason: SEPA recall reason: DUPL, TECH, FRAD, AC03, AM09 or CUST.
        originator_name: ``cxlRsnInf[0].orgtr.nm``.
        originator_bic: ``cxlRsnInf[0].orgtr.id.orgId.anyBIC``; the assigner's BIC if None.
        assignment_id: ``assgnmt.id``; generated when None.
        cancellation_id: ``cxlId``; generated when None.
        currency: must be EUR (the service's rule); another value fails validation.
        service_level: ``orgnlTxRef.pmtTpInf.svcLvl[0].prtry``.
        creditor_agent_address: postal address of the creditor's bank, if wanted: an
            `Address`, structured or hybrid.
        created_at: aware datetime for ``assgnmt.creDtTm``; now when None; naive is refused.
        rules_on: validate with the rules in force on this date (see ``validate()``).

    Returns:
        A valid message, ready for ``encode()``.

    Raises:
        ValidationError: any input breaks a rule; every problem is listed with its path.
    """
    money = None
    if amount is not None:
        money = ActiveCurrencyAndAmount(value=_to_decimal(amount, _CAMT056_AMOUNT), ccy=currency)
    created = (
        format_utc() if created_at is None else _created(created_at, f"{_CAMT056}.assgnmt.creDtTm")
    )
    agent_bic, iban = _bic(creditor_agent_bic), _iban(creditor_iban)
    assigner, assignee = _bic(assigner_bic), _bic(assignee_bic)
    originator = _bic(originator_bic) if originator_bic else assigner
    tx = CancellationTransaction(
        cxl_id=cancellation_id if cancellation_id is not None else new_id("CXL"),
        orgnl_end_to_end_id=original_end_to_end_id,
        cxl_rsn_inf=[
            CancellationReasonInformation(
                orgtr=Originator(
                    nm=originator_name,
                    id=OriginatorIdentification(
                        org_id=OrganisationIdentification(any_bic=originator)
                    ),
                ),
                rsn=CancellationReason(cd=reason),
            )
        ],
        orgnl_tx_ref=OriginalTransactionReference(
            intr_bk_sttlm_amt=money,
            pmt_tp_inf=PaymentTypeInformation(svc_lvl=[ServiceLevel(prtry=service_level)]),
            cdtr_agt=Agent(
                fin_instn_id=FinancialInstitutionIdentification(
                    bicfi=agent_bic, pstl_adr=to_postal_address(creditor_agent_address)
                )
            ),
            cdtr_acct=CashAccount(id=AccountIdentification(iban=iban), ccy=currency),
        ),
    )
    msg = Camt056(
        fito_fi_pmt_cxl_req=CancellationRequest(
            assgnmt=Assignment(
                id=assignment_id if assignment_id is not None else new_id("ASG"),
                assgnr=AssignmentParty(
                    agt=AssignmentAgent(fin_instn_id=AssignmentInstitution(bicfi=assigner))
                ),
                assgne=AssignmentParty(
                    agt=AssignmentAgent(fin_instn_id=AssignmentInstitution(bicfi=assignee))
                ),
                cre_dt_tm=created,
            ),
            ctrl_data=ControlData(nb_of_txs="1"),  # one transaction, just below
            undrlyg=[UnderlyingTransaction(tx_inf=[tx])],
        )
    )
    validate(msg, rules_on=rules_on)
    return msg
