"""Whether a camt.056 is sent within its recall window: a pure check over the message."""

from __future__ import annotations

import datetime as dt

from .._errors import Problem
from ._calendar import RECALL_WINDOWS
from .camt056 import Camt056

__all__ = ["recall_window_problems"]


def recall_window_problems(msg: Camt056, sent_on: dt.date) -> list[Problem]:
    """The transactions of a camt.056 whose recall window has closed by ``sent_on``.

    A transaction is checked when its ``orgnlTxRef.intrBkSttlmDt`` (the original
    payment's settlement date, day 0) is a date and its reason is a SEPA recall reason;
    with several reasons, the earliest deadline counts. One that says neither is not
    judged here (`validate` says what is wrong with its fields).

    Args:
        msg: the cancellation request.
        sent_on: the day it would be sent.

    Returns:
        One problem per late transaction, at the path of its settlement date, naming the
        reason, the deadline and where the window comes from; empty when all are in time.
    """
    out: list[Problem] = []
    for i, underlying in enumerate(msg.fito_fi_pmt_cxl_req.undrlyg):
        for j, tx in enumerate(underlying.tx_inf):
            settled = _date(tx.orgnl_tx_ref.intr_bk_sttlm_dt)
            if settled is None:
                continue
            windows = [
                (RECALL_WINDOWS[info.rsn.cd].deadline(settled), info.rsn.cd)
                for info in tx.cxl_rsn_inf
                if info.rsn.cd in RECALL_WINDOWS
            ]
            if not windows:
                continue
            deadline, reason = min(windows)
            if sent_on > deadline:
                path = f"$.fitoFIPmtCxlReq.undrlyg[{i}].txInf[{j}].orgnlTxRef.intrBkSttlmDt"
                out.append(
                    Problem(
                        path,
                        f"a {reason} recall of a payment settled on {settled.isoformat()} "
                        f"had to be sent by {deadline.isoformat()} "
                        f"({RECALL_WINDOWS[reason].describe()}); it is {sent_on.isoformat()}",
                    )
                )
    return out


def _date(value: str | None) -> dt.date | None:
    if value is None:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        return None
