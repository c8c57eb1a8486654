"""A bulk run's report: its results added up, as data and as one self-contained HTML page.

The page carries everything it shows: its style inline, its charts as inline SVG drawn by
matplotlib (the ``report`` extra) when it is installed, and no script at all, so it opens
without network access. A run of any size gives a page of bounded size: the rows are
added up, and at most `REPORT_ROWS` rows are listed per table, with a pointer to the
attention file (``bulk-results --needs-attention``) for the rest.
"""

from __future__ import annotations

import datetime as dt
import heapq
import html
import io
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ._attention import attention_reason
from ._rows import RowOutcome, RunTotals
from ._times import PERCENTILES, RunTimes, banking_days_left

__all__ = ["NOT_RECORDED", "REPORT_ROWS", "RunReport", "charts_available", "run_report"]

REPORT_ROWS: Final = 200
"""Rows a report lists at most per table (rows needing a pacs.004 request, pending rows)."""

REPORT_REASONS: Final = 20
"""Reasons a report names at most; the rest are counted as ``other``."""

NOT_RECORDED: Final = (
    "The results do not say when each row was sent and when its outcome came: "
    "submissions and outcomes over time, the service's latency (p50/p90/p99) and the age "
    "of pending rows cannot be shown for this run."
)
"""What a report says in place of the figures that need per-row times (a results file
written before the times were recorded)."""


@dataclass(slots=True)
class RunReport:
    """A run's results added up (see `run_report`).

    Attributes:
        title: what the report is of (the run, its input).
        totals: rows by outcome, counted as ``bulk-status`` counts them.
        reasons: rows per reason: a rejected row's reason codes, else the kind of error
            a refused, not sent or unknown row met.
        attempts: rows per number of submissions made.
        needs_attention: rows that need a person (see ``attention_reason``).
        return_request_rows: the first `REPORT_ROWS` rejected rows needing a pacs.004.
        pending_rows: the first `REPORT_ROWS` rows not final (in flight or pending), the
            most urgent first: by banking days left to their recall deadline, then line.
        times: the rows' times counted (over time, latency, rows not final by age and by
            banking days left to their recall deadlines).
        today: the UTC day the age of rows not final and their days left are counted to.
        not_recorded: what cannot be shown, and why (None when everything is).
        control: the run's control state and history (``ControlState.as_dict``: confirmed,
            paused, resumed, aborted; who, when, why), or None when not read.
    """

    title: str
    totals: RunTotals = field(default_factory=RunTotals)
    reasons: dict[str, int] = field(default_factory=dict)
    attempts: dict[int, int] = field(default_factory=dict)
    needs_attention: int = 0
    return_request_rows: list[dict[str, Any]] = field(default_factory=list)
    pending_rows: list[dict[str, Any]] = field(default_factory=list)
    times: RunTimes = field(default_factory=RunTimes)
    today: dt.date = field(default_factory=lambda: dt.datetime.now(dt.UTC).date())
    not_recorded: str | None = NOT_RECORDED
    control: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON types (what ``bulk-report --json`` prints)."""
        t = self.totals
        return {
            "title": self.title,
            "rows": t.rows,
            "outcomes": t.as_dict(),
            "return_requests": t.return_requests,
            "needs_attention": self.needs_attention,
            "reasons": self.reasons,
            "attempts": {str(k): v for k, v in sorted(self.attempts.items())},
            "return_request_rows": self.return_request_rows,
            "pending_rows": self.pending_rows,
            "rows_listed_at_most": REPORT_ROWS,
            "over_time": self.times.over_time(),
            "latency": self.times.latency(),
            "pending_by_age": self.times.unfinished_by_age(self.today),
            "chased": self.times.chased(),
            "pending_by_days_left": self.times.unfinished_by_days_left(self.today),
            "not_recorded": self.not_recorded,
            "control": self.control,
        }

    def to_html(self, *, attention_hint: str | None = None) -> str:
        """The report as one HTML page that needs nothing else to be shown.

        Args:
            attention_hint: how to get every row that needs a person (a command line),
                shown where a table is cut at `REPORT_ROWS`.
        """
        return _page(self, attention_hint)


def _reason_key(rec: Mapping[str, Any]) -> str | None:
    outcome = RowOutcome(rec["outcome"])
    if outcome is RowOutcome.REJECTED:
        return "rejected " + (" ".join(rec.get("reason_codes") or ()) or "(no code)")
    if outcome is RowOutcome.ABORTED:
        return "aborted"  # its reason names who aborted the run, when and why
    if outcome in (RowOutcome.REFUSED, RowOutcome.NOT_SENT, RowOutcome.UNKNOWN):
        text = str(rec.get("reason") or "")
        kind = text.split(":", 1)[0].strip() if ":" in text else text[:40]
        return f"{outcome.value}: {kind or 'no reason given'}"
    return None


_LISTED: Final = (
    "line",
    "original_end_to_end_id",
    "payments_service_id",
    "outcome",
    "reason",
    "recall_deadline",
)


def _listed(rec: Mapping[str, Any]) -> dict[str, Any]:
    return {k: rec.get(k) for k in _LISTED}


def _time(rec: Mapping[str, Any], name: str) -> dt.datetime | None:
    value = rec.get(name)
    return None if value is None else dt.datetime.fromisoformat(value)


def _deadline(rec: Mapping[str, Any]) -> dt.date | None:
    value = rec.get("recall_deadline")
    return None if value is None else dt.date.fromisoformat(value)


def _urgency(rec: Mapping[str, Any]) -> tuple[int, int]:
    """A listed row's place among the pending rows: the earliest deadline first (rows
    without one last), then by line."""
    deadline = _deadline(rec)
    return (dt.date.max.toordinal() if deadline is None else deadline.toordinal(), rec["line"])


def run_report(
    records: Iterable[Mapping[str, Any]], title: str, *, today: dt.date | None = None
) -> RunReport:
    """Add up a run's results records (``read_results``), one pass, bounded memory.

    Args:
        records: every row of the run's results file.
        title: what the report is of.
        today: the UTC day the age of rows not final is counted to (default: today).

    Raises:
        ValueError: a record's time (or recall deadline) is not in ISO 8601.
    """
    report = RunReport(title)
    if today is not None:
        report.today = today
    timed = False
    reasons: Counter[str] = Counter()
    attempts: Counter[int] = Counter()
    urgent: list[_Kept] = []
    for rec in records:
        outcome = RowOutcome(rec["outcome"])
        report.totals.add(outcome, return_request_needed=bool(rec.get("return_request_needed")))
        if outcome is not RowOutcome.INVALID:
            attempts[int(rec.get("attempts") or 0)] += 1
        timed = timed or "sent_at" in rec
        report.times.add_row(
            unfinished=outcome in (RowOutcome.PENDING, RowOutcome.IN_FLIGHT),
            sent_at=_time(rec, "sent_at"),
            acknowledged_at=_time(rec, "acknowledged_at"),
            final_at=_time(rec, "final_at"),
            chases=int(rec.get("chases") or 0),
            recall_deadline=_deadline(rec),
        )
        key = _reason_key(rec)
        if key is not None:
            reasons[key] += 1
        if attention_reason(rec) is not None:
            report.needs_attention += 1
        if (
            outcome is RowOutcome.REJECTED
            and rec.get("return_request_needed")
            and len(report.return_request_rows) < REPORT_ROWS
        ):
            report.return_request_rows.append(_listed(rec))
        if outcome in (RowOutcome.PENDING, RowOutcome.IN_FLIGHT):
            _keep_most_urgent(urgent, _listed(rec))
    top = reasons.most_common(REPORT_REASONS)
    rest = sum(reasons.values()) - sum(n for _, n in top)
    report.reasons = dict(top) | ({"other": rest} if rest else {})
    report.attempts = dict(attempts)
    report.not_recorded = None if timed else NOT_RECORDED
    report.pending_rows = [rec for _, rec in sorted(urgent, key=lambda kept: kept[0], reverse=True)]
    for row in report.pending_rows:
        deadline = _deadline(row)
        row["days_left"] = None if deadline is None else banking_days_left(report.today, deadline)
    return report


_Kept = tuple[tuple[int, int], dict[str, Any]]


def _keep_most_urgent(kept: list[_Kept], rec: dict[str, Any]) -> None:
    """Keep ``rec`` among the `REPORT_ROWS` most urgent rows seen (see `_urgency`):
    ``kept`` is a heap whose first item is the least urgent row kept."""
    urgency = _urgency(rec)
    item: _Kept = ((-urgency[0], -urgency[1]), rec)
    if len(kept) < REPORT_ROWS:
        heapq.heappush(kept, item)
    elif item[0] > kept[0][0]:
        heapq.heapreplace(kept, item)


def charts_available() -> bool:
    """True when matplotlib (the ``report`` extra) is installed: reports carry charts."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


_OUTCOME_COLOURS: Final = {
    RowOutcome.ACCEPTED: "#2e7d32",
    RowOutcome.REJECTED: "#c62828",
    RowOutcome.UNKNOWN: "#6a1b9a",
    RowOutcome.REFUSED: "#ef6c00",
    RowOutcome.NOT_SENT: "#757575",
    RowOutcome.ABORTED: "#455a64",
    RowOutcome.INVALID: "#9e9e9e",
    RowOutcome.IN_FLIGHT: "#0277bd",
    RowOutcome.PENDING: "#f9a825",
}


def _bar_svg(
    labels: list[str], values: list[int], colours: list[str], title: str, *, horizontal: bool
) -> str:
    """A bar chart as an inline ``<svg>`` element (text drawn as paths: no font needed)."""
    height = 3.2 if not horizontal else max(2.4, 0.35 * len(labels) + 1.0)

    def draw(ax: Any) -> None:
        if horizontal:
            bars = ax.barh(labels, values, color=colours)
            ax.invert_yaxis()
        else:
            bars = ax.bar(labels, values, color=colours)
            ax.tick_params(axis="x", labelrotation=20)
        ax.bar_label(bars, labels=[f"{v:,}" for v in values], padding=2, fontsize=8)

    return _figure(draw, title, height=height)


def _charts(report: RunReport) -> list[tuple[str, str]]:
    """``(id, svg)`` of each chart; empty without matplotlib."""
    if not charts_available():
        return []
    counts = [(o, n) for o, n in report.totals.counts.items() if n]
    charts = [
        (
            "outcomes",
            _bar_svg(
                [o.value for o, _ in counts],
                [n for _, n in counts],
                [_OUTCOME_COLOURS[o] for o, _ in counts],
                "Rows by outcome",
                horizontal=False,
            ),
        )
    ]
    if report.reasons:
        charts.append(
            (
                "reasons",
                _bar_svg(
                    list(report.reasons),
                    list(report.reasons.values()),
                    ["#546e7a"] * len(report.reasons),
                    "Rows by reason",
                    horizontal=True,
                ),
            )
        )
    if report.attempts:
        keys = sorted(report.attempts)
        charts.append(
            (
                "attempts",
                _bar_svg(
                    [str(k) for k in keys],
                    [report.attempts[k] for k in keys],
                    ["#0277bd"] * len(keys),
                    "Rows by submissions made",
                    horizontal=False,
                ),
            )
        )
    return charts


def _figure(ax_draw: Callable[[Any], None], title: str, *, height: float = 3.2) -> str:
    """A chart as an inline ``<svg>`` element, drawn by ``ax_draw`` on its one axes (text
    drawn as paths: no font needed)."""
    import matplotlib as mpl
    from matplotlib.figure import Figure

    with mpl.rc_context({"svg.fonttype": "path", "svg.hashsalt": "payments-async"}):
        fig = Figure(figsize=(7.5, height), layout="constrained")
        ax = fig.add_subplot()
        ax_draw(ax)
        ax.set_title(title, fontsize=10)
        ax.spines[["top", "right"]].set_visible(False)
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    svg = buf.getvalue()
    return svg[svg.index("<svg") :]  # the XML prologue and DOCTYPE have no place in HTML


def _over_time_svg(series: Mapping[str, Any]) -> str:
    start = dt.datetime.fromisoformat(series["start"])
    step = dt.timedelta(minutes=series["bucket_minutes"])
    x = [start + i * step for i in range(len(series["sent"]))]

    def draw(ax: Any) -> None:
        ax.plot(x, series["sent"], drawstyle="steps-post", color="#0277bd", label="sent")
        ax.plot(x, series["final"], drawstyle="steps-post", color="#2e7d32", label="final")
        ax.set_ylabel(f"rows per {series['bucket_minutes']} min", fontsize=8)
        ax.legend(fontsize=8)
        ax.tick_params(axis="x", labelrotation=20, labelsize=8)

    return _figure(draw, "Rows sent and made final over time (UTC)")


def _time_charts(report: RunReport) -> list[tuple[str, str]]:
    """``(id, svg)`` of the charts of the rows' times; empty without matplotlib."""
    if not charts_available():
        return []
    charts = []
    series = report.times.over_time()
    if series is not None:
        charts.append(("over-time", _over_time_svg(series)))
    latency = report.times.latency()
    if latency is not None:
        names = [f"p{p}" for p in PERCENTILES]
        charts.append(
            (
                "latency",
                _bar_svg(
                    names,
                    [latency[f"{n}_ms"] for n in names],
                    ["#546e7a"] * len(names),
                    "Service latency, sent to acknowledged (ms)",
                    horizontal=False,
                ),
            )
        )
    aged = report.times.unfinished_by_age(report.today)
    if aged:
        charts.append(
            (
                "pending-age",
                _bar_svg(
                    list(aged),
                    list(aged.values()),
                    [_OUTCOME_COLOURS[RowOutcome.PENDING]] * len(aged),
                    "Rows not final, by banking days since sent",
                    horizontal=False,
                ),
            )
        )
    left = report.times.unfinished_by_days_left(report.today)
    if left:
        charts.append(
            (
                "pending-deadline",
                _bar_svg(
                    list(left),
                    list(left.values()),
                    [_deadline_colour(days) for days in left],
                    "Rows not final, by banking days left to their recall deadline",
                    horizontal=False,
                ),
            )
        )
    return charts


def _deadline_colour(days_left: str) -> str:
    """Past the deadline red, its last day orange, later ones the pending colour."""
    if not days_left.lstrip("-").isdigit():
        return _OUTCOME_COLOURS[RowOutcome.NOT_SENT]  # no deadline known
    days = int(days_left)
    return "#c62828" if days < 0 else "#ef6c00" if days == 0 else "#f9a825"


def _times_section(report: RunReport) -> str:
    """The page's section on the rows' times: its charts, or the same figures as text."""
    if report.not_recorded:
        return f"<p class='note'>{html.escape(report.not_recorded)}</p>"
    latency = report.times.latency()
    aged = report.times.unfinished_by_age(report.today)
    left = report.times.unfinished_by_days_left(report.today)
    parts = [
        "<p>Latency: "
        + (
            ", ".join(f"p{p} {latency[f'p{p}_ms']:,} ms" for p in PERCENTILES)
            + f" over {latency['rows']:,} answers"
            if latency
            else "no answer recorded"
        )
        + ".</p>",
        _counts_table(aged, "banking days since sent")
        if aged
        else "<p>No row is in flight or pending.</p>",
        _counts_table(left, "banking days left to the recall deadline") if left else "",
    ]
    parts += [f"<figure id='chart-{cid}'>{svg}</figure>" for cid, svg in _time_charts(report)]
    return "".join(parts)


_STYLE: Final = """
body{font-family:system-ui,sans-serif;margin:2rem;color:#212121;max-width:60rem}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem}
table{border-collapse:collapse;font-size:.85rem}td,th{border:1px solid #ccc;padding:.2rem .5rem}
th{background:#f5f5f5;text-align:left}td.n{text-align:right}
figure{margin:1rem 0}.note{color:#555;font-size:.9rem}
"""


def _table(rows: list[dict[str, Any]], columns: Iterable[str]) -> str:
    cols = list(columns)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(r.get(c)))}</td>" for c in cols) + "</tr>"
        for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def _counts_table(counts: Mapping[str, int], what: str) -> str:
    body = "".join(
        f"<tr><td>{html.escape(k)}</td><td class='n'>{n:,}</td></tr>" for k, n in counts.items()
    )
    return f"<table><tr><th>{html.escape(what)}</th><th>rows</th></tr>{body}</table>"


def _cut(shown: int, total: int, where: str) -> str:
    if shown >= total:
        return ""
    return f"<p class='note'>The first {shown:,} of {total:,} rows: {where}.</p>"


def _page(report: RunReport, hint: str | None) -> str:
    t = report.totals
    charts = _charts(report)
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{html.escape(report.title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(report.title)}</h1>",
        f"<p>{t.rows:,} rows; {report.needs_attention:,} need a person; "
        f"{t.return_requests:,} need a pacs.004 return request.</p>",
        "<h2>Outcomes</h2>",
        _counts_table({o.value: n for o, n in t.counts.items()}, "outcome"),
    ]
    if not charts:
        parts.append(
            "<p class='note'>Charts need matplotlib: <code>pip install "
            "'payments-async[report]'</code>.</p>"
        )
    for chart_id, svg in charts:
        parts.append(f"<figure id='chart-{chart_id}'>{svg}</figure>")
    parts += ["<h2>Reasons</h2>", _counts_table(report.reasons, "reason")]
    parts += ["<h2>Over time and latency</h2>", _times_section(report)]
    parts += [
        "<h2>Rows needing a pacs.004 return request</h2>",
        _table(report.return_request_rows, ("line", "original_end_to_end_id", "reason")),
        _cut(
            len(report.return_request_rows),
            t.return_requests,
            f"every one is in the attention file, <code>{html.escape(hint)}</code>"
            if hint
            else "every one is in the attention file (bulk-results --needs-attention)",
        ),
        "<h2>Rows not final (pending, in flight), the nearest recall deadline first</h2>",
        _table(
            report.pending_rows,
            ("line", "original_end_to_end_id", "outcome", "recall_deadline", "days_left", "reason"),
        ),
        _cut(
            len(report.pending_rows),
            t.counts[RowOutcome.PENDING] + t.counts[RowOutcome.IN_FLIGHT],
            "the results file lists every row",
        ),
        f"<p id='chased'>{report.times.chased_rows:,} rows chased with a request for status "
        f"update (pacs.028), {report.times.chases:,} requests in all.</p>",
        *_control_section(report.control),
        "</body></html>\n",
    ]
    return "".join(parts)


def _control_section(control: Mapping[str, Any] | None) -> list[str]:
    """The run's control history: its state now, then every event, oldest first."""
    parts = ["<h2 id='control'>Control history</h2>"]
    if control is None:
        return [*parts, "<p class='note'>Not read: give the run's journal or queue.</p>"]
    state = str(control.get("state") or "running")
    if control.get("since"):
        state += f" since {control['since']} by {control.get('by')}"
    parts.append(f"<p>Now: {html.escape(state)}.</p>")
    if control.get("aborted_rows"):
        parts.append(f"<p>{int(control['aborted_rows']):,} rows not sent (aborted).</p>")
    events = [
        {
            **e,
            "counts": ", ".join(f"{k} {v}" for k, v in (e.get("counts") or {}).items()),
        }
        for e in control.get("history") or ()
    ]
    if not events:
        return [*parts, "<p class='note'>No control event recorded.</p>"]
    return [*parts, _table(events, ("at", "action", "by", "reason", "counts"))]
