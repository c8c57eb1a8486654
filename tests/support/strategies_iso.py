"""Hypothesis strategies for the ISO 20022 messages: arbitrary (round trips) and valid ones."""

from __future__ import annotations

import re
import string
import uuid
from decimal import Decimal

from hypothesis import strategies as st

from payments_async.iso20022 import Address
from payments_async.iso20022 import camt029 as c29
from payments_async.iso20022 import camt056 as c56
from payments_async.iso20022 import pacs002 as p02
from payments_async.iso20022 import pacs008 as p08
from payments_async.iso20022._registry import BIC_COUNTRIES, IBAN_FORMATS

SEPA_CHARS = string.ascii_letters + string.digits + "/-?:().,'+ "

# --- arbitrary values: anything the codec must carry unchanged -----------------------------

any_text = st.text(max_size=40)
opt_text = st.none() | any_text
any_decimal = st.decimals(allow_nan=False, allow_infinity=False, places=None)


def _opt(strategy: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return st.none() | strategy


def _opt_list(strategy: st.SearchStrategy[object], max_size: int = 3) -> st.SearchStrategy[object]:
    return st.none() | st.lists(strategy, max_size=max_size)


any_amount = st.builds(p08.ActiveCurrencyAndAmount, value=any_decimal, ccy=any_text)
any_address = st.builds(
    p08.PostalAddress,
    dept=opt_text,
    sub_dept=opt_text,
    strt_nm=opt_text,
    bldg_nb=opt_text,
    bldg_nm=opt_text,
    flr=opt_text,
    pst_bx=opt_text,
    room=opt_text,
    pst_cd=opt_text,
    twn_nm=opt_text,
    twn_lctn_nm=opt_text,
    dstrct_nm=opt_text,
    ctry_sub_dvsn=opt_text,
    ctry=opt_text,
    adr_line=_opt_list(any_text, max_size=8),
)
any_account = st.builds(
    p08.CashAccount,
    id=st.builds(
        p08.AccountIdentification,
        othr=_opt(st.builds(p08.GenericAccountIdentification, id=any_text)),
        iban=opt_text,
    ),
    nm=opt_text,
    ccy=opt_text,
)
any_agent = st.builds(
    p08.Agent,
    fin_instn_id=st.builds(
        p08.FinancialInstitutionIdentification,
        bicfi=opt_text,
        clr_sys_mmb_id=_opt(st.builds(p08.ClearingSystemMemberIdentification, mmb_id=any_text)),
        pstl_adr=_opt(any_address),
    ),
)
any_pmt_tp_inf = st.builds(
    p08.PaymentTypeInformation,
    svc_lvl=_opt_list(st.builds(p08.ServiceLevel, prtry=any_text)),
    lcl_instrm=_opt(st.builds(p08.LocalInstrument, prtry=any_text)),
)
any_party_id = st.builds(
    p08.PartyIdentification,
    org_id=st.builds(
        p08.PartyOrganisationIdentification,
        any_bic=opt_text,
        lei=opt_text,
        othr=_opt_list(
            st.builds(
                p08.GenericOrganisationIdentification,
                id=any_text,
                schme_nm=_opt(
                    st.builds(p08.OrganisationIdentificationSchemeName, cd=opt_text, prtry=opt_text)
                ),
                issr=opt_text,
            )
        ),
    ),
)
any_party = st.builds(p08.Party, nm=any_text, pstl_adr=_opt(any_address), id=_opt(any_party_id))
any_credit_tx = st.builds(
    p08.CreditTransferTransaction,
    pmt_id=st.builds(
        p08.PaymentIdentification, end_to_end_id=any_text, tx_id=opt_text, uetr=opt_text
    ),
    pmt_tp_inf=_opt(any_pmt_tp_inf),
    intr_bk_sttlm_amt=any_amount,
    intr_bk_sttlm_dt=opt_text,
    chrg_br=opt_text,
    ultmt_dbtr=_opt(any_party),
    dbtr=any_party,
    dbtr_acct=any_account,
    dbtr_agt=any_agent,
    cdtr_agt=any_agent,
    cdtr=any_party,
    cdtr_acct=any_account,
    ultmt_cdtr=_opt(any_party),
    purp=_opt(st.builds(p08.Purpose, cd=opt_text, prtry=opt_text)),
    rmt_inf=_opt(
        st.builds(
            p08.RemittanceInformation,
            ustrd=_opt_list(any_text),
            strd=_opt_list(
                st.builds(
                    p08.StructuredRemittanceInformation,
                    cdtr_ref_inf=_opt(
                        st.builds(
                            p08.CreditorReferenceInformation,
                            tp=_opt(
                                st.builds(
                                    p08.CreditorReferenceType,
                                    cd_or_prtry=st.builds(
                                        p08.CreditorReferenceTypeCode, cd=opt_text, prtry=opt_text
                                    ),
                                    issr=opt_text,
                                )
                            ),
                            ref=any_text,
                        )
                    ),
                    addtl_rmt_inf=_opt_list(any_text),
                )
            ),
        )
    ),
)
any_pacs008 = st.builds(
    p08.Pacs008,
    fito_fi_cstmr_cdt_trf=st.builds(
        p08.CreditTransfer,
        grp_hdr=st.builds(
            p08.GroupHeader,
            msg_id=any_text,
            cre_dt_tm=any_text,
            nb_of_txs=any_text,
            ttl_intr_bk_sttlm_amt=_opt(any_amount),
            intr_bk_sttlm_dt=opt_text,
            sttlm_inf=st.builds(
                p08.SettlementInstruction,
                sttlm_mtd=any_text,
                clr_sys=_opt(st.builds(p08.ClearingSystemIdentification, prtry=any_text)),
            ),
            instg_agt=_opt(any_agent),
            instd_agt=_opt(any_agent),
        ),
        cdt_trf_tx_inf=st.lists(any_credit_tx, max_size=2),
    ),
)

any_party56 = st.builds(c56.AssignmentParty.from_bic, any_text)
any_camt056 = st.builds(
    c56.Camt056,
    fito_fi_pmt_cxl_req=st.builds(
        c56.CancellationRequest,
        assgnmt=st.builds(
            c56.Assignment, id=any_text, assgnr=any_party56, assgne=any_party56, cre_dt_tm=opt_text
        ),
        ctrl_data=_opt(st.builds(c56.ControlData, nb_of_txs=any_text)),
        undrlyg=st.lists(
            st.builds(
                c56.UnderlyingTransaction,
                tx_inf=st.lists(
                    st.builds(
                        c56.CancellationTransaction,
                        cxl_id=any_text,
                        orgnl_end_to_end_id=opt_text,
                        cxl_rsn_inf=st.lists(
                            st.builds(
                                c56.CancellationReasonInformation,
                                orgtr=_opt(
                                    st.builds(
                                        c56.Originator,
                                        nm=opt_text,
                                        id=_opt(
                                            st.builds(
                                                c56.OriginatorIdentification,
                                                org_id=st.builds(
                                                    c56.OrganisationIdentification,
                                                    any_bic=any_text,
                                                ),
                                            )
                                        ),
                                    )
                                ),
                                rsn=st.builds(c56.CancellationReason, cd=any_text),
                            ),
                            max_size=2,
                        ),
                        orgnl_tx_ref=st.builds(
                            c56.OriginalTransactionReference,
                            intr_bk_sttlm_amt=_opt(any_amount),
                            pmt_tp_inf=_opt(any_pmt_tp_inf),
                            cdtr_agt=_opt(any_agent),
                            cdtr_acct=_opt(any_account),
                        ),
                    ),
                    max_size=2,
                ),
            ),
            max_size=2,
        ),
    ),
)

any_addtl_inf = _opt_list(st.none() | any_text)
any_pacs002 = st.builds(
    p02.Pacs002,
    fito_fi_pmt_sts_rpt=st.builds(
        p02.StatusReport,
        grp_hdr=_opt(st.builds(p02.GroupHeader, msg_id=opt_text, cre_dt_tm=opt_text)),
        orgnl_grp_inf_and_sts=_opt(
            st.builds(
                p02.OriginalGroupInformation,
                orgnl_msg_id=opt_text,
                orgnl_msg_nm_id=opt_text,
                grp_sts=opt_text,
            )
        ),
        tx_inf_and_sts=st.lists(
            st.builds(
                p02.PaymentTransactionStatus,
                sts_id=opt_text,
                orgnl_instr_id=opt_text,
                orgnl_end_to_end_id=opt_text,
                orgnl_tx_id=opt_text,
                orgnl_uetr=opt_text,
                tx_sts=opt_text,
                sts_rsn_inf=_opt_list(
                    st.builds(
                        p02.StatusReasonInformation,
                        rsn=_opt(st.builds(p02.StatusReason, cd=opt_text, prtry=opt_text)),
                        addtl_inf=any_addtl_inf,
                    )
                ),
                accptnc_dt_tm=opt_text,
            ),
            max_size=3,
        ),
    ),
)

any_party29 = st.builds(
    c29.AssignmentParty,
    agt=_opt(
        st.builds(
            c29.AssignmentAgent,
            fin_instn_id=_opt(st.builds(c29.AssignmentInstitution, bicfi=opt_text)),
        )
    ),
)
any_camt029 = st.builds(
    c29.Camt029,
    rsltn_of_invstgtn=st.builds(
        c29.Resolution,
        assgnmt=_opt(
            st.builds(
                c29.Assignment,
                id=opt_text,
                assgnr=_opt(any_party29),
                assgne=_opt(any_party29),
                cre_dt_tm=opt_text,
            )
        ),
        sts=_opt(st.builds(c29.InvestigationStatus, conf=opt_text)),
        cxl_dtls=_opt_list(
            st.builds(
                c29.CancellationDetails,
                orgnl_grp_inf_and_sts=_opt(
                    st.builds(
                        c29.OriginalGroupInformation,
                        orgnl_msg_id=opt_text,
                        orgnl_msg_nm_id=opt_text,
                    )
                ),
                orgnl_pmt_inf_and_sts=_opt_list(
                    st.builds(
                        c29.OriginalPaymentInformation,
                        orgnl_pmt_inf_id=opt_text,
                        tx_inf_and_sts=_opt_list(
                            st.builds(
                                c29.OriginalTransaction,
                                orgnl_end_to_end_id=opt_text,
                                orgnl_tx_id=opt_text,
                            )
                        ),
                    )
                ),
                tx_inf_and_sts=_opt_list(
                    st.builds(
                        c29.TransactionCancellationStatus,
                        cxl_sts_id=opt_text,
                        orgnl_end_to_end_id=opt_text,
                        tx_cxl_sts=opt_text,
                        cxl_sts_rsn_inf=_opt_list(
                            st.builds(
                                c29.CancellationStatusReasonInformation,
                                rsn=_opt(
                                    st.builds(
                                        c29.CancellationStatusReason, cd=opt_text, prtry=opt_text
                                    )
                                ),
                                addtl_inf=any_addtl_inf,
                            )
                        ),
                    )
                ),
            )
        ),
    ),
)

# --- valid values: what the ISO/SEPA rules accept ------------------------------------------


def sepa_text(max_size: int) -> st.SearchStrategy[str]:
    """1..max_size characters of the SEPA set."""
    return st.text(alphabet=SEPA_CHARS, min_size=1, max_size=max_size)


sepa_id = sepa_text(35).filter(lambda s: not (s.startswith("/") or s.endswith("/") or "//" in s))
bic = st.builds(
    lambda bank, country, rest: bank + country + rest,
    st.from_regex(r"[A-Z0-9]{4}", fullmatch=True),
    st.sampled_from(sorted(BIC_COUNTRIES)),
    st.from_regex(r"[A-Z0-9]{2}([A-Z0-9]{3})?", fullmatch=True),
)
eur_amount = st.decimals(min_value=Decimal("0.01"), max_value=Decimal("999999999.99"), places=2)
uetr = st.builds(lambda: str(uuid.uuid4()))


def iban_with_check_digits(country: str, bban: str) -> str:
    """An IBAN with correct mod-97 check digits for this country and BBAN."""
    numeric = "".join(str(int(c, 36)) for c in (bban + country + "00").upper())
    return f"{country}{98 - int(numeric) % 97:02d}{bban}"


_BBAN = {"n": "[0-9]", "a": "[A-Z]", "c": "[A-Z0-9]"}


@st.composite
def _registry_iban(draw: st.DrawFn) -> str:
    """An IBAN of a country of the IBAN registry, in its format, with right check digits."""
    country = draw(st.sampled_from(sorted(IBAN_FORMATS)))
    bban = ""
    for count, fixed, kind in re.findall(r"(\d+)(!?)([nac])", IBAN_FORMATS[country][1]):
        size = f"{{{count}}}" if fixed else f"{{1,{count}}}"
        bban += draw(st.from_regex(f"{_BBAN[kind]}{size}", fullmatch=True))
    return iban_with_check_digits(country, bban)


iban = _registry_iban()


# --- valid postal addresses: the two forms the EPC rule accepts ----------------------------

country = st.sampled_from(["DE", "FR", "NL", "BE", "IT", "ES", "AT", "IE", "FI", "PT"])
structured_address = st.builds(
    Address,
    street=st.none() | sepa_text(70),
    building=st.none() | sepa_text(16),
    post_code=st.none() | sepa_text(16),
    town=sepa_text(35),
    country=country,
    building_name=st.none() | sepa_text(35),
    floor=st.none() | sepa_text(70),
    post_box=st.none() | sepa_text(16),
    room=st.none() | sepa_text(70),
    department=st.none() | sepa_text(70),
    sub_department=st.none() | sepa_text(70),
    town_location=st.none() | sepa_text(35),
    district=st.none() | sepa_text(35),
    country_sub_division=st.none() | sepa_text(35),
)
"""Town and country in their own fields, other fields or not, no address lines."""
hybrid_address = st.builds(
    Address,
    post_code=st.none() | sepa_text(16),
    town=sepa_text(35),
    country=country,
    lines=st.lists(sepa_text(70), min_size=1, max_size=2).map(tuple),
)
"""Town and country in their own fields plus one or two address lines."""
valid_address = structured_address | hybrid_address
