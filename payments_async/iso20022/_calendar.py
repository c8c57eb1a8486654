"""TARGET2 banking days and the SEPA recall windows counted on them.

The TARGET2 (T2) calendar of the Eurosystem closes on Saturdays, Sundays, 1 January,
Good Friday, Easter Monday, 1 May, 25 December and 26 December; every other day is a
banking day. Easter is computed by the Gregorian computus, so the calendar holds for any
year the ``datetime`` module can represent.

The recall windows are those of the EPC SEPA Credit Transfer Scheme Rulebook, 2025
version (EPC125-05, in force from 5 October 2025), its procedures "Recall" and "Request for
Recall by the Originator" (cited by name: the section numbers could not be checked against
the text):

- a **Recall** for a duplicate sending (``DUPL``) or a technical problem (``TECH``) is
  sent by the Originator PSP within 10 Banking Days after the execution date of the
  original credit transfer;
- a **Recall** for a fraudulently originated credit transfer (``FRAD``) within 13 months
  after that date;
- a **Request for Recall by the Originator** (``AC03`` wrong beneficiary account,
  ``AM09`` wrong amount, ``CUST`` the originator's own request) within 13 months after it.

The original payment's interbank settlement date is day 0: an SCT settles on its
execution date. A window counted in months ends on the same day of the month 13 months
later (the month's last day when that month is shorter); a recall can only travel between
banks on a banking day, so the deadline is the last banking day on or before that day.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = [
    "RECALL_WINDOWS",
    "RecallWindow",
    "add_banking_days",
    "easter_sunday",
    "is_banking_day",
    "recall_deadline",
    "target2_day_end",
    "target2_today",
]


def easter_sunday(year: int) -> dt.date:
    """Easter Sunday of a Gregorian year (the anonymous Gregorian algorithm, Meeus/Butcher).

    Args:
        year: a year of the Gregorian calendar (1583 onwards gives the ecclesiastical date).

    Returns:
        The date of Easter Sunday, e.g. 5 April 2026, 28 March 2027.
    """
    a = year % 19
    b, c = divmod(year, 100)
    d, e = divmod(b, 4)
    f = (b + 8) // 25
    g = (b - f + 1) // 3
    h = (19 * a + b - d - g + 15) % 30
    i, k = divmod(c, 4)
    leap = (32 + 2 * e + 2 * i - h - k) % 7
    m = (a + 11 * h + 22 * leap) // 451
    month, day = divmod(h + leap - 7 * m + 114, 31)
    return dt.date(year, month, day + 1)


@cache
def _closing_days(year: int) -> frozenset[dt.date]:
    easter = easter_sunday(year)
    return frozenset(
        {
            dt.date(year, 1, 1),
            easter - dt.timedelta(days=2),  # Good Friday
            easter + dt.timedelta(days=1),  # Easter Monday
            dt.date(year, 5, 1),
            dt.date(year, 12, 25),
            dt.date(year, 12, 26),
        }
    )


def is_banking_day(day: dt.date) -> bool:
    """Whether TARGET2 is open on this day (a SEPA interbank banking day).

    Closed: Saturdays, Sundays, 1 January, Good Friday, Easter Monday, 1 May, 25 and
    26 December (the ECB's T2 closing days).

    Args:
        day: a calendar date; a ``datetime`` counts by its date.

    Returns:
        True on a banking day.

    Raises:
        TypeError: ``day`` is not a date.
    """
    if not isinstance(day, dt.date):
        raise TypeError(f"expected a date, got {type(day).__name__}")
    if isinstance(day, dt.datetime):
        day = day.date()
    return day.weekday() < 5 and day not in _closing_days(day.year)


def add_banking_days(day: dt.date, count: int) -> dt.date:
    """The ``count``-th banking day after ``day`` (before it when ``count`` is negative).

    ``day`` itself is day 0 and need not be a banking day; ``count == 0`` returns it as is.

    Args:
        day: the day counted from.
        count: how many banking days to move.

    Returns:
        The banking day reached.
    """
    step = dt.timedelta(days=1 if count >= 0 else -1)
    remaining = abs(count)
    while remaining:
        day += step
        if is_banking_day(day):
            remaining -= 1
    return day


def _add_months(day: dt.date, months: int) -> dt.date:
    month_index = day.month - 1 + months
    year, month = day.year + month_index // 12, month_index % 12 + 1
    for last in (31, 30, 29, 28):
        try:
            return dt.date(year, month, min(day.day, last))
        except ValueError:
            continue
    raise AssertionError("unreachable: every month has at least 28 days")


@dataclass(frozen=True, slots=True)
class RecallWindow:
    """How long after the original payment's settlement a recall for a reason may be sent.

    Exactly one of ``banking_days`` and ``months`` is set.

    Attributes:
        procedure: the rulebook's name for it ("Recall" or "Request for Recall by the
            Originator").
        banking_days: the window in TARGET2 banking days after the settlement date.
        months: the window in calendar months after the settlement date.
        clause: where the rulebook sets it.
    """

    procedure: str
    banking_days: int | None = None
    months: int | None = None
    clause: str = ""

    def deadline(self, settlement_date: dt.date) -> dt.date:
        """The last day on which a recall within this window may be sent.

        Args:
            settlement_date: the original payment's interbank settlement date (day 0).

        Returns:
            A banking day.
        """
        if self.banking_days is not None:
            return add_banking_days(settlement_date, self.banking_days)
        assert self.months is not None
        last = _add_months(settlement_date, self.months)
        while not is_banking_day(last):
            last -= dt.timedelta(days=1)
        return last

    def describe(self) -> str:
        """The window in words: ``"10 banking days after settlement (EPC125-05 ...: Recall)"``."""
        span = (
            f"{self.banking_days} banking days"
            if self.banking_days is not None
            else f"{self.months} months"
        )
        return f"{span} after settlement ({self.clause}: {self.procedure})"


_RULEBOOK: Final = "EPC125-05 SCT rulebook 2025"
_RECALL: Final = "Recall"
_RFRO: Final = "Request for Recall by the Originator"

RECALL_WINDOWS: Final[Mapping[str, RecallWindow]] = MappingProxyType(
    {
        "DUPL": RecallWindow(_RECALL, banking_days=10, clause=_RULEBOOK),
        "TECH": RecallWindow(_RECALL, banking_days=10, clause=_RULEBOOK),
        "FRAD": RecallWindow(_RECALL, months=13, clause=_RULEBOOK),
        "AC03": RecallWindow(_RFRO, months=13, clause=_RULEBOOK),
        "AM09": RecallWindow(_RFRO, months=13, clause=_RULEBOOK),
        "CUST": RecallWindow(_RFRO, months=13, clause=_RULEBOOK),
    }
)
"""The window of each SEPA recall reason code (``cxlRsnInf[].rsn.cd``)."""


def recall_deadline(reason: str, settlement_date: dt.date) -> dt.date:
    """The last date on which a recall for this reason may be sent.

    The windows (EPC125-05 SCT rulebook 2025: Recall; Request for Recall by the
    Originator), counted from the original
    payment's interbank settlement date as day 0:

    - ``DUPL``, ``TECH`` (Recall): 10 TARGET2 banking days;
    - ``FRAD`` (Recall): 13 months;
    - ``AC03``, ``AM09``, ``CUST`` (Request for Recall by the Originator): 13 months.

    A window of months ends on the same day of the month 13 months later (the month's
    last day when it is shorter), moved back to a banking day when it falls on a closing
    day. A recall sent on the deadline is in time; one sent the day after is not.

    Args:
        reason: a SEPA recall reason code.
        settlement_date: the original payment's interbank settlement date
            (``intrBkSttlmDt``); a ``datetime`` counts by its date.

    Returns:
        The deadline, a banking day.

    Raises:
        ValueError: ``reason`` is not a SEPA recall reason code.
        TypeError: ``settlement_date`` is not a date.
    """
    window = RECALL_WINDOWS.get(reason)
    if window is None:
        listed = ", ".join(RECALL_WINDOWS)
        raise ValueError(f"{reason!r} is not a SEPA recall reason ({listed})")
    if not isinstance(settlement_date, dt.date):
        raise TypeError(f"expected a date, got {type(settlement_date).__name__}")
    if isinstance(settlement_date, dt.datetime):
        settlement_date = settlement_date.date()
    return window.deadline(settlement_date)


# TARGET2's business day follows Central European Time. Without the time zone database,
# UTC+2 (summer time, the larger offset) is used: a day then ends an hour early in winter,
# never late.
try:
    _CET: dt.tzinfo = ZoneInfo("Europe/Brussels")
except ZoneInfoNotFoundError:  # pragma: no cover - a system without tzdata
    _CET = dt.timezone(dt.timedelta(hours=2))


def target2_today(now: dt.datetime | None = None) -> dt.date:
    """The calendar day in TARGET2's time zone (Central European Time) at ``now``.

    Args:
        now: an aware datetime; None: the current time.

    Returns:
        The date in Brussels at that moment.

    Raises:
        ValueError: ``now`` is naive.
    """
    if now is None:
        now = dt.datetime.now(dt.UTC)
    elif now.tzinfo is None:
        raise ValueError("a naive datetime has no time zone: give an aware one")
    return now.astimezone(_CET).date()


def target2_day_end(day: dt.date) -> dt.datetime:
    """The moment ``day`` ends in TARGET2's time zone (midnight after it, Central European
    Time): the latest a recall due on ``day`` can be sent.

    Args:
        day: a calendar date.

    Returns:
        An aware datetime.
    """
    return dt.datetime.combine(day + dt.timedelta(days=1), dt.time(0), tzinfo=_CET)
