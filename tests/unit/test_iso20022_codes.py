"""Status classification: pacs.002 txSts and camt.029 sts.conf / txCxlSts into outcomes."""

from __future__ import annotations

import pytest

from payments_async.iso20022 import (
    Outcome,
    classify_cancellation_status,
    classify_payment_status,
    summarize_resolution,
    summarize_status_report,
)
from payments_async.iso20022 import camt029 as c29
from payments_async.iso20022 import pacs002 as p02


@pytest.mark.parametrize(
    ("code", "outcome"),
    [
        ("ACCC", Outcome.ACCEPTED),
        ("ACSC", Outcome.ACCEPTED),
        ("RJCT", Outcome.REJECTED),
        ("PEND", Outcome.PENDING),
        ("PDNG", Outcome.PENDING),
        ("ACSP", Outcome.PENDING),
        ("ACTC", Outcome.PENDING),
        ("ACCP", Outcome.PENDING),
        ("RCVD", Outcome.PENDING),
        (" accc ", Outcome.ACCEPTED),
        ("CNCL", Outcome.UNKNOWN),  # a cancellation code is not a payment status
        ("XXXX", Outcome.UNKNOWN),
        ("", Outcome.UNKNOWN),
        (None, Outcome.UNKNOWN),
    ],
)
def test_classify_payment_status(code: str | None, outcome: Outcome) -> None:
    assert classify_payment_status(code) is outcome


@pytest.mark.parametrize(
    ("code", "outcome"),
    [
        ("ACCC", Outcome.ACCEPTED),
        ("CNCL", Outcome.ACCEPTED),
        ("ACCR", Outcome.ACCEPTED),
        ("RJTC", Outcome.REJECTED),
        ("RJCR", Outcome.REJECTED),
        ("PDCR", Outcome.PENDING),
        ("PDNG", Outcome.PENDING),
        ("PEND", Outcome.PENDING),
        ("rjcr", Outcome.REJECTED),
        ("RJCT", Outcome.UNKNOWN),  # a payment code is not a cancellation status
        ("ACSC", Outcome.UNKNOWN),
        (None, Outcome.UNKNOWN),
    ],
)
def test_classify_cancellation_status(code: str | None, outcome: Outcome) -> None:
    assert classify_cancellation_status(code) is outcome


def test_outcome_finality() -> None:
    assert [o for o in Outcome if o.is_final] == [Outcome.ACCEPTED, Outcome.REJECTED]


def resolution(conf: str | None, *tx_statuses: str | None) -> c29.Camt029:
    return c29.Camt029(
        rsltn_of_invstgtn=c29.Resolution(
            assgnmt=c29.Assignment(id="ASG1"),
            sts=c29.InvestigationStatus(conf=conf),
            cxl_dtls=[
                c29.CancellationDetails(
                    tx_inf_and_sts=[
                        c29.TransactionCancellationStatus(
                            tx_cxl_sts=s,
                            cxl_sts_rsn_inf=[
                                c29.CancellationStatusReasonInformation(
                                    rsn=c29.CancellationStatusReason(cd="NOOR" if i else "ARDT"),
                                    addtl_inf=[f"text {i}", None],
                                )
                            ],
                        )
                        for i, s in enumerate(tx_statuses)
                    ]
                )
            ],
        )
    )


@pytest.mark.parametrize(
    ("conf", "txs", "outcome"),
    [
        # 1. a final sts.conf decides ...
        ("CNCL", ("ACCR",), Outcome.ACCEPTED),
        ("ACCC", (), Outcome.ACCEPTED),
        ("RJCR", ("RJCR",), Outcome.REJECTED),
        ("RJTC", ("PDCR",), Outcome.REJECTED),
        ("CNCL", ("ZZZZ",), Outcome.ACCEPTED),
        # ... unless a transaction is final the other way
        ("CNCL", ("RJCR",), Outcome.UNKNOWN),
        ("RJTC", ("ACCR",), Outcome.UNKNOWN),
        ("CNCL", ("ACCR", "RJCR"), Outcome.UNKNOWN),
        # 2. a pending sts.conf stays pending
        ("PDCR", ("ACCR",), Outcome.PENDING),
        ("PDCR", (), Outcome.PENDING),
        # 3. no or unknown sts.conf: the transactions decide when they agree
        (None, ("ACCR",), Outcome.ACCEPTED),
        (None, ("ACCR", "ACCC"), Outcome.ACCEPTED),
        ("WHAT", ("RJCR",), Outcome.UNKNOWN),  # an unknown sts.conf is surfaced
        (None, ("PDCR", "PEND"), Outcome.PENDING),
        (None, ("ACCR", "RJCR"), Outcome.UNKNOWN),
        (None, ("ACCR", "ZZZZ"), Outcome.UNKNOWN),
        (None, (), Outcome.UNKNOWN),
        ("WHAT", (), Outcome.UNKNOWN),
    ],
)
def test_summarize_resolution_rule(
    conf: str | None, txs: tuple[str, ...], outcome: Outcome
) -> None:
    summary = summarize_resolution(resolution(conf, *txs))
    assert summary.outcome is outcome
    assert summary.status == conf
    assert summary.tx_statuses == txs
    assert summary.is_final is outcome.is_final


def test_summarize_resolution_keeps_reasons_and_skips_nulls() -> None:
    summary = summarize_resolution(resolution("RJCR", "RJCR", "RJCR"))
    assert summary.reason_codes == ("ARDT", "NOOR")
    assert summary.reason_texts == ("text 0", "text 1")
    assert summary.assignment_id == "ASG1"
    assert not summary.needs_return_request  # already returned / never received


def test_summarize_empty_resolution() -> None:
    summary = summarize_resolution(c29.Camt029(rsltn_of_invstgtn=c29.Resolution()))
    assert summary.outcome is Outcome.UNKNOWN
    assert summary.status is None
    assert summary.tx_statuses == ()
    assert not summary.is_final


def report(*statuses: str | None, grp_sts: str | None = None) -> p02.Pacs002:
    return p02.Pacs002(
        fito_fi_pmt_sts_rpt=p02.StatusReport(
            orgnl_grp_inf_and_sts=p02.OriginalGroupInformation(grp_sts=grp_sts),
            tx_inf_and_sts=[
                p02.PaymentTransactionStatus(
                    orgnl_end_to_end_id=f"E2E{i}",
                    tx_sts=s,
                    sts_rsn_inf=[
                        p02.StatusReasonInformation(
                            rsn=p02.StatusReason(prtry="P1") if i else p02.StatusReason(cd="AC01"),
                            addtl_inf=[None, f"why {i}"],
                        )
                    ],
                )
                for i, s in enumerate(statuses)
            ],
        )
    )


@pytest.mark.parametrize(
    ("statuses", "grp_sts", "outcome", "status"),
    [
        (("ACCC",), None, Outcome.ACCEPTED, "ACCC"),
        (("RJCT",), None, Outcome.REJECTED, "RJCT"),
        (("PEND",), None, Outcome.PENDING, "PEND"),
        (("ACSC", "ACCC"), None, Outcome.ACCEPTED, "ACSC"),
        (("ACCC", "RJCT"), None, Outcome.UNKNOWN, "ACCC"),
        (("NEWC",), None, Outcome.UNKNOWN, "NEWC"),
        ((), "RJCT", Outcome.REJECTED, "RJCT"),
        ((None,), "ACSP", Outcome.PENDING, "ACSP"),
        ((), None, Outcome.UNKNOWN, None),
    ],
)
def test_summarize_status_report(
    statuses: tuple[str | None, ...], grp_sts: str | None, outcome: Outcome, status: str | None
) -> None:
    summary = summarize_status_report(report(*statuses, grp_sts=grp_sts))
    assert summary.outcome is outcome
    assert summary.status == status
    assert summary.is_final is outcome.is_final


def test_summarize_status_report_reasons_and_ids() -> None:
    summary = summarize_status_report(report("RJCT", "RJCT"))
    assert summary.reason_codes == ("AC01", "P1")
    assert summary.reason_texts == ("why 0", "why 1")
    assert summary.end_to_end_id == "E2E0"
    assert summary.tx_statuses == ("RJCT", "RJCT")


def test_summaries_are_frozen() -> None:
    summary = summarize_status_report(report("ACCC"))
    with pytest.raises(AttributeError):
        summary.outcome = Outcome.REJECTED  # type: ignore[misc]
