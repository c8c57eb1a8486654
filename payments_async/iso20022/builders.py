"""Builders for the common case: a SEPA credit transfer and a cancellation request."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation

from .._errors import Problem, ValidationError
from ._addresses import Address, to_postal_address
from ._validate import (
    _EUR_MAX,
    _EUR_MIN,
    _FAST,
    RULES,
    fast_fields,
    iban_check_digits_hold,
    mark_valid,
    validate,
)
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
_ZERO = Decimal(0)


def new_id(prefix: str) -> str:
    """A fresh unique identifier: ``prefix`` + 32 random hex digits, cut to 35 characters.

    Lowercase hex and an alphanumeric prefix keep it inside Max35Text and the SEPA
    character set; 128 random bits (124 with a four-character prefix) keep it unique.

    Args:
        prefix: a short alphanumeric prefix saying what the id is for (e.g. ``"MSG"``).

    Returns:
        The identifier.
    """
    return f"{prefix}{os.urandom(16).hex()}"[:35]  # cheaper than uuid4: bench_codec.py


# UUID version 4 (RFC 9562): the 13th hex digit is 4, the 17th one of 8, 9, a, b.
_VARIANT = {c: "89ab"[int(c, 16) & 3] for c in "0123456789abcdef"}


def _new_uetr(h: str | None = None) -> str:
    """A lowercase UUID v4 (122 random bits), as ``str(uuid.uuid4())`` writes it.

    ``h``: 32 random hex digits to use (default: fresh ones).
    """
    if h is None:
        h = os.urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:32]}"


# Timestamps: the text changes once a millisecond and its date and time once a second, so
# each is formatted only then (builders in a loop: bench_codec.py). Each cache is one
# tuple: a thread never sees half of one.
_second: tuple[int, str] = (-1, "")
_milli: tuple[int, str] = (-1, "")


def _now_utc() -> str:
    """Now as ``format_utc()`` writes it: ``time.time_ns()`` is the clock ``datetime.now`` reads."""
    global _second, _milli
    ms = time.time_ns() // 1_000_000
    known_ms, text = _milli
    if ms == known_ms:
        return text
    sec, milli = divmod(ms, 1000)
    known, prefix = _second
    if sec != known:
        prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
        _second = (sec, prefix)
    text = f"{prefix}.{milli:03d}Z"
    _milli = (ms, text)
    return text


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
        return _now_utc()
    if moment.tzinfo is None:
        raise ValueError("a naive datetime has no zone; pass an aware one")
    # "2024-08-01T08:00:00.000+00:00" -> "...000Z"
    return moment.astimezone(UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def _to_decimal(amount: object, path: str) -> tuple[Decimal, int | str]:
    """Turn a Decimal, int or decimal string into a Decimal; refuse floats and junk.

    Returns the value and its exponent (``as_tuple().exponent``: an int when finite), so
    the builders' input check needs no second ``as_tuple()``.
    """
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
    if value.same_quantum(_CENT):
        return value, -2  # the common case, without building as_tuple()'s digits
    exponent = value.as_tuple().exponent
    if not isinstance(exponent, int):
        return value, exponent  # not finite: validate() reports it with its path
    try:
        if exponent > 0:
            value = value.quantize(Decimal(1))  # 1E+2 -> 100: plain digits on the wire
            exponent = 0
        elif exponent < -2 and value == value.quantize(_CENT):
            value = value.quantize(_CENT)  # 10.500 -> 10.50: only zeros are dropped
            exponent = -2
    except ArithmeticError:
        pass  # too many digits to tidy: validate() reports the amount with its path
    return value, exponent


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


# --- checking what the caller gave instead of the whole message -----------------------------
#
# A builder knows the shape it builds: the parts it makes itself (generated ids and UETR,
# creDtTm from format_utc, nbOfTxs "1" beside one transaction, sttlmMtd CLRG, which of
# ``othr``/``iban`` and ``bicfi``/``clrSysMmbId`` is set) are valid by construction. So it
# checks only the values the caller gave, with the same rules (``_FAST`` then ``RULES``) and
# the same cross-field rules, instead of walking the whole message (bench_codec.py).
# The check is *sufficient*: when it passes, ``find_problems`` would find nothing. When it
# fails, or an input is outside what it covers (a caller's address, a datetime subclass,
# rules of another date), the builder runs ``validate`` on the built message, so every
# error lists the problems with their paths. ``tests/unit/test_builder_check.py`` holds it
# to exactly the verdict of ``find_problems`` on arbitrary inputs.


def _accepts(iso_type: str) -> Callable[[object], bool]:
    """True when ``RULES[iso_type]`` accepts the value (its fast test first, as the walk)."""
    fast = _FAST.get(iso_type)
    rule = RULES[iso_type]
    if fast is None:
        return lambda v: rule(v) is None
    return lambda v: (type(v) is str and bool(fast(v))) or rule(v) is None


_ID = _accepts("Max35Id")
_TEXT35 = _accepts("Max35Text")
_TEXT70 = _accepts("Max70Text")
_TEXT140 = _accepts("Max140Text")
_NAME = _accepts("PartyName")
_BIC = _accepts("BicFi")
_IBAN_OK = _accepts("Iban")
_UETR_OK = _accepts("Uetr")
_CURRENCY = _accepts("CurrencyCode")
_CHARGE_BEARER = _accepts("ChargeBearerCode")
_REASON = _accepts("CancellationReasonCode")

# The common inputs of each builder joined by newlines, in one test (``fast_fields``): a
# match means each one passes its rule and is in the form the normalisers would give it
# (upper-case BICs and IBANs without spaces), so it goes into the message as it is and
# only the IBANs' check digits remain to be computed.
_CANCELLATION_FAST = fast_fields(
    "Max35Id", "BicFi", "BicFi", "BicFi", "CancellationReasonCode", "Max35Text", "Iban"
)
_TRANSFER_FAST = fast_fields(
    "PartyName", "PartyName", "Max35Text", "Max35Text", "Max35Text", "Iban", "Iban"
)


def _eur(value: Decimal, exponent: int | str) -> bool:
    """The EUR amount rules: finite, 0.01..999999999.99, at most two decimals."""
    return type(exponent) is int and exponent >= -2 and _EUR_MIN <= value <= _EUR_MAX


def _accept(msg: Pacs008 | Camt056, inputs_ok: bool, rules_on: date | None) -> None:
    """Remember a message whose inputs passed; otherwise check it all (raise if invalid)."""
    if inputs_ok and rules_on is None:
        mark_valid(msg)
    else:
        validate(msg, rules_on=rules_on)


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
        debtor_name: who pays (at most 70 SEPA characters, EPC implementation guidelines).
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
        debtor_account_name: ``dbtrAcct.nm`` (Max70Text).
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
    value, exponent = _to_decimal(amount, _PACS008_AMOUNT)
    created = (
        _now_utc() if created_at is None else _created(created_at, f"{_PACS008}.grpHdr.creDtTm")
    )
    try:  # see _TRANSFER_FAST
        tidy = _TRANSFER_FAST(
            "\n".join(
                (
                    debtor_name,
                    creditor_name,
                    debtor_agent_id,
                    creditor_agent_id,
                    service_level,
                    debtor_iban,
                    creditor_iban,
                )
            )
        )
    except TypeError:  # one is not a str: the checks one by one below say which
        tidy = None
    inputs_ok: bool
    if tidy is not None and type(debtor_iban) is type(creditor_iban) is str:
        dbtr_iban, cdtr_iban = debtor_iban, creditor_iban  # tidy already
        inputs_ok = iban_check_digits_hold(dbtr_iban) and iban_check_digits_hold(cdtr_iban)
    else:
        dbtr_iban, cdtr_iban = _iban(debtor_iban), _iban(creditor_iban)
        inputs_ok = (
            _NAME(debtor_name)
            and _NAME(creditor_name)
            and _TEXT35(debtor_agent_id)
            and _TEXT35(creditor_agent_id)
            and _TEXT35(service_level)
            and _IBAN_OK(dbtr_iban)
            and _IBAN_OK(cdtr_iban)
        )
    inputs_ok = (
        inputs_ok
        and (created_at is None or type(created_at) is datetime)
        and _CURRENCY(currency)
        and (_eur(value, exponent) if currency == "EUR" else (type(exponent) is int and value > 0))
        and (charge_bearer is None or _CHARGE_BEARER(charge_bearer))
        and (not local_instrument or _TEXT35(local_instrument))
        and (remittance is None or _TEXT140(remittance))
        and (creditor_reference is None or _TEXT35(creditor_reference))
        and (message_id is None or _ID(message_id))
        and (end_to_end_id is None or _ID(end_to_end_id))
        and (tx_id is None or _ID(tx_id))
        and (uetr is None or _UETR_OK(uetr))
        and (debtor_account_name is None or _TEXT70(debtor_account_name))
        and (creditor_account_name is None or _TEXT70(creditor_account_name))
        and debtor_address is None
        and creditor_address is None
        and ultimate_debtor_name is None
        and ultimate_creditor_name is None
        and purpose is None
    )
    # One draw for every random id: E2E, TX, UETR, MSG.
    generate = message_id is None or end_to_end_id is None or tx_id is None or uetr is None
    h = os.urandom(64).hex() if generate else ""
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
            end_to_end_id=end_to_end_id if end_to_end_id is not None else "E2E" + h[:32],
            tx_id=tx_id if tx_id is not None else "TX" + h[32:64],
            uetr=uetr if uetr is not None else _new_uetr(h[64:96]),
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
                msg_id=message_id if message_id is not None else "MSG" + h[96:],
                cre_dt_tm=created,
                nb_of_txs="1",  # one transaction, just below
                sttlm_inf=SettlementInstruction(sttlm_mtd="CLRG"),
            ),
            cdt_trf_tx_inf=[tx],
        )
    )
    _accept(msg, inputs_ok, rules_on)
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
    money: ActiveCurrencyAndAmount | None = None
    value: Decimal = _ZERO
    exponent: int | str = 0
    if amount is not None:
        if type(amount) is Decimal and amount.same_quantum(_CENT):
            value, exponent = amount, -2  # _to_decimal's common case, inline
        else:
            value, exponent = _to_decimal(amount, _CAMT056_AMOUNT)
        money = ActiveCurrencyAndAmount(value=value, ccy=currency)
    created = (
        _now_utc() if created_at is None else _created(created_at, f"{_CAMT056}.assgnmt.creDtTm")
    )
    try:  # see _CANCELLATION_FAST
        tidy = _CANCELLATION_FAST(
            "\n".join(
                (
                    original_end_to_end_id,
                    creditor_agent_bic,
                    assigner_bic,
                    assignee_bic,
                    reason,
                    service_level,
                    creditor_iban,
                )
            )
        )
    except TypeError:  # one is not a str: the checks one by one below say which
        tidy = None
    inputs_ok: bool
    if (
        tidy is not None  # and no str subclass, which the normalisers turn into a str
        and type(creditor_agent_bic) is type(assigner_bic) is type(assignee_bic) is str
        and type(creditor_iban) is str
    ):
        agent_bic, iban = creditor_agent_bic, creditor_iban  # tidy already
        assigner, assignee = assigner_bic, assignee_bic
        inputs_ok = iban_check_digits_hold(iban)
    else:
        agent_bic, iban = _bic(creditor_agent_bic), _iban(creditor_iban)
        assigner, assignee = _bic(assigner_bic), _bic(assignee_bic)
        inputs_ok = (
            (original_end_to_end_id is None or _ID(original_end_to_end_id))
            and _BIC(agent_bic)
            and _BIC(assigner)
            and _BIC(assignee)
            and _REASON(reason)
            and _TEXT35(service_level)
            and _IBAN_OK(iban)
        )
    originator = _bic(originator_bic) if originator_bic else assigner
    # the EUR rules of the amount, when there is one (_eur, inline: this is the hot path)
    eur_ok = type(exponent) is int and exponent >= -2 and _EUR_MIN <= value <= _EUR_MAX
    inputs_ok = (
        inputs_ok
        and creditor_agent_address is None
        and (created_at is None or type(created_at) is datetime)
        and (
            # the amount's currency must be EUR; cdtrAcct.ccy must be a currency code
            (type(currency) is str and currency == "EUR" and (money is None or eur_ok))
            or (money is None and (currency is None or _CURRENCY(currency)))
        )
        and (originator is assigner or _BIC(originator))
        and (originator_name is None or _NAME(originator_name))
        and (assignment_id is None or _ID(assignment_id))
        and (cancellation_id is None or _ID(cancellation_id))
    )
    tx = CancellationTransaction(
        cxl_id=cancellation_id if cancellation_id is not None else "CXL" + os.urandom(16).hex(),
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
                id=assignment_id if assignment_id is not None else "ASG" + os.urandom(16).hex(),
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
    _accept(msg, inputs_ok, rules_on)
    return msg
