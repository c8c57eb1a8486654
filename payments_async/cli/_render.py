"""What each command prints: for people (rich) and, with ``--json``, one JSON object."""

from __future__ import annotations

import datetime as dt
import shlex
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

from rich.table import Table
from rich.text import Text

from payments_async import CancellationOutcome, Outcome, PaymentStatus, Submission, redact_url

from ._exit import bulk_exit_code

if TYPE_CHECKING:
    from payments_async.bulk import (
        BulkReport,
        ChaseReport,
        QueueStatus,
        RunPlan,
        RunTimes,
        RunTotals,
    )

    from ._context import Settings

__all__ = [
    "bulk_summary",
    "chase_dict",
    "chase_line",
    "outcome_dict",
    "plan_table",
    "queue_status_dict",
    "queue_summary",
    "queue_table",
    "resume_command",
    "say_outcome",
    "say_status",
    "say_submission",
    "status_dict",
    "submission_dict",
]


def submission_dict(sub: Submission) -> dict[str, object]:
    return {
        "payments_service_id": sub.payments_service_id,
        "message_id": sub.message_id,
        "status": sub.status,
        "creation_date_time": sub.creation_date_time,
        "created": sub.created,
        "replayed": sub.replayed,
        "http_status": sub.http_status,
        "attempts": sub.attempts,
    }


def say_submission(settings: Settings, what: str, sub: Submission) -> None:
    if sub.replayed:
        how = "200 replayed (the service had it already)"
    elif sub.http_status == 202:
        how = "202 accepted (stored; processing not completed)"
    else:
        how = f"{sub.http_status} created"
    settings.say(f"{what} submitted: {how}")
    settings.say(f"  paymentsServiceId  {sub.payments_service_id}")
    settings.say(f"  message id         {sub.message_id}")
    settings.say(f"  status             {sub.status}  at {sub.creation_date_time}")


def status_dict(st: PaymentStatus, psid: str) -> dict[str, object]:
    return {
        "payments_service_id": psid,
        "outcome": st.outcome.value,
        "status": st.status,
        "final": st.is_final,
        "reason_codes": list(st.reason_codes),
        "tx_statuses": list(st.tx_statuses),
        "reason_texts": list(st.reason_texts),
        "end_to_end_id": st.end_to_end_id,
    }


_UNKNOWN_ADVICE: Final = (
    "these codes cannot be classified, so nothing is assumed: check with the bank, or "
    "read it again later"
)


def _say_unknown(settings: Settings, *codes: str | None) -> None:
    """The raw codes of an outcome nobody can classify, and what to do about it."""
    shown = " ".join(c for c in codes if c)
    settings.say(Text(f"  raw codes  {shown or '(none)'}", style="red"))
    settings.say(Text(f"  {_UNKNOWN_ADVICE}", style="red"))


def say_status(settings: Settings, st: PaymentStatus, psid: str) -> None:
    """A payment's status, for people."""
    state = "final" if st.is_final else "not final yet"
    settings.say(f"payment {psid}: {st.status} ({st.outcome.value}, {state})")
    if st.reason_codes or st.reason_texts:
        reasons = f"{' '.join(st.reason_codes)} {'; '.join(st.reason_texts)}"
        settings.say(f"  reason  {reasons.strip()}")
    if st.outcome is Outcome.UNKNOWN:
        _say_unknown(settings, st.status, *st.tx_statuses, *st.reason_codes)


def outcome_dict(o: CancellationOutcome) -> dict[str, object]:
    return {
        "payments_service_id": o.payments_service_id,
        "outcome": o.outcome.value,
        "status": o.status,
        "tx_statuses": list(o.tx_statuses),
        "reason_codes": list(o.reason_codes),
        "reason_texts": list(o.reason_texts),
        "return_request_needed": o.return_request_needed,
        "message": o.message,
    }


def say_outcome(settings: Settings, o: CancellationOutcome) -> None:
    style = {"accepted": "green", "rejected": "yellow"}.get(o.outcome.value, "red")
    codes = "/".join(c for c in (o.status, *o.tx_statuses) if c)
    settings.say(Text(f"cancellation {o.outcome.value.upper()} ({codes})", style=style))
    if o.reason_codes or o.reason_texts:
        settings.say(f"  reason  {' '.join(o.reason_codes)} {'; '.join(o.reason_texts)}".rstrip())
    settings.say(f"  {o.message}")
    if o.outcome is Outcome.UNKNOWN:
        _say_unknown(settings, o.status, *o.tx_statuses, *o.reason_codes)


def resume_command(settings: Settings, input_path: Path) -> str:
    if settings.argv is not None:
        # An address given with a password (--journal, --proxy) is shown without it.
        shown = [redact_url(arg) if "://" in arg else arg for arg in settings.argv]
        command = shlex.join(["payments-async", *shown])
        if shown != settings.argv:
            command += "   (*** : the user and password you gave)"
        return command
    return f"payments-async ... bulk-cancel {shlex.quote(str(input_path))} ... (the same command)"


_SUMMARY_ROWS: Final = (
    ("accepted", "accepted"),
    ("rejected", "rejected"),
    ("unknown", "outcome unknown (check with the bank)"),
    ("refused", "refused by the service (see the reason)"),
    ("not_sent", "not sent (rerun to send)"),
    ("aborted", "not sent, the run was aborted"),
    ("in_flight", "sent, no answer (rerun to resend with the same id)"),
    ("pending", "acknowledged, outcome not known yet (rerun to wait)"),
    ("invalid", "invalid input, skipped"),
)


def bulk_summary(
    settings: Settings,
    report: BulkReport,
    input_path: Path,
    halted: str | None = None,
    database: str | None = None,
    deadlines: dict[str, object] | None = None,
) -> int:
    """Print a finished (or interrupted) run; ``database``: a PostgreSQL journal, as shown;
    ``deadlines``: the run's recall deadlines, for ``--json`` (people get `deadline_line`)."""
    journal = str(report.journal_path) if report.journal_path is not None else database
    t = report.totals
    run = report.counts
    rate = report.rows_per_second
    code = bulk_exit_code(t, interrupted=report.interrupted)
    unfinished = t.unfinished
    if settings.json:
        settings.emit(
            {
                "rows": report.row_count,
                **_totals_dict(t),
                "this_run": {
                    "sent": run.sent,
                    "submitted": run.submitted,
                    "replayed": run.replayed,
                    "finished": report.finished,
                },
                "already_final": report.already_final,
                "resumed": report.resumed,
                "interrupted": report.interrupted,
                "halted": halted,
                "elapsed_s": round(report.elapsed, 3),
                "sending_s": round(report.sending, 3),
                "rows_per_s": round(rate, 1),
                "results": str(report.results_path),
                "journal": journal,
                "recall_deadlines": deadlines,
                "chase": chase_dict(report.chases),
                "exit_code": code,
            }
        )
        return code
    settings.out.print(_totals_table("bulk cancellation", t))
    # The rows' outcomes are the table's alone (``finished`` is read from it): they agree.
    settings.say(
        f"this run: {run.sent} request(s) sent, {run.submitted} row(s) acknowledged "
        f"({run.replayed} already known to the service); {report.finished} row(s) "
        f"finished in {report.sending:.1f} s of sending ({rate:,.0f} rows/s); "
        f"{report.already_final} were final before it"
    )
    settings.say(f"results: {report.results_path}")
    if journal is not None:
        settings.say(f"journal: {journal}")
    say = settings.err.print
    if report.chases is not None:
        say(chase_line(report.chases))
    if halted is not None:
        say(f"stopped sending: {halted}")
    _say_advice(say, t)
    if unfinished or report.interrupted:
        verb = "interrupted" if report.interrupted else f"{unfinished} row(s) not completed"
        if journal is not None:
            say(f"{verb}; to resume, run the same command again:")
            say(Text(f"  {resume_command(settings, input_path)}"))
        else:
            say(f"{verb}; without a journal a rerun starts over (see the results)")
    return code


def chase_dict(chase: ChaseReport | None) -> dict[str, object] | None:
    """A chase pass for ``--json``: None when the run chased nothing."""
    if chase is None:
        return None
    return {
        "due": chase.due,
        "chased": chase.chased,
        "settled": chase.settled,
        "failed": chase.failed,
        "error": chase.error,
    }


def chase_line(chase: ChaseReport) -> str:
    """A chase pass for people: rows chased, found answered, and not chased (why)."""
    line = (
        f"chase: {chase.chased:,} unanswered recall(s) chased with a request for status "
        f"update (pacs.028), {chase.settled:,} found answered (recorded)"
    )
    if chase.failed:
        line += f"; {chase.failed:,} not chased this time (a later pass tries again): {chase.error}"
    return line


def _say_advice(say: Callable[[str], None], t: RunTotals) -> None:
    """What to do about the refused, unknown and unsendable rows, for a local and a queued
    run alike."""
    if t.get("refused", 0):
        say(
            f"{t['refused']} row(s) refused by the service: the results give each reason; "
            "running the command again will not change that"
        )
    if t.get("unknown", 0):
        say(
            f"{t['unknown']} row(s) ended with an outcome nobody can tell (the results give "
            "each reason): check them with the bank, or read one that has an ID again later "
            "with: payments-async outcome ID"
        )
    if t.get("aborted", 0):
        say(
            f"{t['aborted']} row(s) not sent: the run was aborted (the results give who "
            "aborted it and why); a rerun leaves them alone, and bulk-results "
            "--needs-attention writes them to a file to send again"
        )
    if t.unsendable:
        say(
            f"{t.unsendable} row(s) cannot be sent (the reason is in the results file): a "
            "rerun will not send them"
        )


def _totals_dict(t: RunTotals) -> dict[str, int]:
    """The rows by outcome, as ``--json`` gives them for a local and a queued run alike:
    ``not_sent`` counts every row the results file calls so, ``unsendable`` those of them
    a rerun will not send."""
    return {
        **{name: t.get(name) for name, _ in _SUMMARY_ROWS},
        "return_requests": t.return_requests,
        "unsendable": t.unsendable,
    }


def _totals_table(title: str, t: RunTotals) -> Table:
    """The rows by outcome, as a local and a queued run show them; the ``not_sent`` rows
    a rerun sends and those it will not send (`RunTotals.unsendable`) on lines of their own."""
    table = Table(title=title, show_edge=False)
    table.add_column("outcome")
    table.add_column("rows", justify="right")
    for name, label in _SUMMARY_ROWS:
        shown = t.get(name) - (t.unsendable if name == "not_sent" else 0)
        if shown or name in ("accepted", "rejected"):
            table.add_row(label, str(shown))
        if name == "not_sent" and t.unsendable:
            table.add_row("not sent, cannot be sent (see the reason)", str(t.unsendable))
        if name == "rejected" and t.return_requests:
            table.add_row("  of which: ask for a pacs.004 return", str(t.return_requests))
    return table


def queue_status_dict(st: QueueStatus) -> dict[str, object]:
    return {
        **_totals_dict(st.totals),
        "run_id": st.run_id,
        "input": st.input_name,
        "rows": st.rows,
        "states": dict(sorted(st.states.items())),
        "outcomes": dict(sorted(st.outcomes.items())),
        "queued": st.queued,
        "errors": st.errors,
        "done": st.done,
        "latency": st.times.latency(),
        "pending_by_age": st.times.unfinished_by_age(_today_utc()),
        "chased": st.times.chased(),
        "pending_by_days_left": st.times.unfinished_by_days_left(_today_utc()),
    }


def _today_utc() -> dt.date:
    """Today's date in UTC: the day the age of rows not final is counted to."""
    return dt.datetime.now(dt.UTC).date()


def pending_lines(times: RunTimes) -> list[str]:
    """Rows not final by age and by days left to their recall deadline, a line each
    (``in flight or pending, by banking days since sent: 0: 12, 3: 1``), counted to
    today (UTC), then the rows chased with a request for status update; none when every
    row is final and none was chased."""
    today = _today_utc()
    lines = []
    by_age = times.unfinished_by_age(today)
    if by_age:
        ages = ", ".join(f"{age}: {n:,}" for age, n in by_age.items())
        left = ", ".join(f"{d}: {n:,}" for d, n in times.unfinished_by_days_left(today).items())
        lines += [
            f"in flight or pending, by banking days since sent: {ages}",
            f"in flight or pending, by banking days left to the recall deadline: {left}",
        ]
    if times.chased_rows:
        lines.append(
            f"chased (pacs.028): {times.chased_rows:,} row(s), {times.chases:,} "
            "request(s) for status update"
        )
    return lines


def queue_table(st: QueueStatus, *, queued: bool = True) -> Table:
    """A run's rows by outcome, and (``queued``: a run in a database) its rows queued or
    running."""
    named = f" ({st.input_name})" if st.input_name else ""
    table = _totals_table(f"bulk run {st.run_id}{named}", st.totals)
    if queued:
        table.add_row("queued or running", str(st.queued))
    return table


def queue_summary(
    settings: Settings,
    st: QueueStatus,
    extra: Mapping[str, object] | None = None,
    *,
    queued: bool = True,
) -> int:
    """Show a run's status (``extra``: more fields of its ``--json`` object; ``queued``: a
    run in a database, whose jobs are told, else a local run's journal file)."""
    code = bulk_exit_code(st.totals)
    if settings.json:
        settings.emit({**queue_status_dict(st), **(extra or {}), "exit_code": code})
        return code
    settings.out.print(queue_table(st, queued=queued))
    for line in pending_lines(st.times):
        settings.out.print(line)
    _say_advice(settings.err.print, st.totals)
    if queued and st.totals.unfinished and st.settled:
        settings.err.print(
            "some rows are not final and no job is left for them: run the same bulk-cancel "
            "command again to queue them"
        )
    return code


_PLAN_PROBLEMS: Final = 20  # refused rows named on a terminal; --json lists more


def duration_text(seconds: float) -> str:
    """``2 d 3 h``, ``3 h 20 min``, ``12 min``, ``40 s``: a span as a person reads it."""
    s = int(max(seconds, 0))
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    minutes, s = divmod(s, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min" if minutes else f"{s} s"


def deadline_line(plan: RunPlan, rate: float | None, now: dt.datetime) -> str | None:
    """One line on a run's recall deadlines, or None when its rows give no settlement date:
    the earliest deadline and the time left to it, the rows past their window, and whether
    the run finishes in time at ``rate``."""
    deadline = plan.earliest_recall_deadline
    late = len(plan.past_deadline)
    if deadline is None and not late:
        return None
    parts = []
    if deadline is not None:
        left = plan.seconds_left(now)
        assert left is not None
        parts.append(
            f"earliest recall deadline {deadline.isoformat()} "
            + (f"({duration_text(left)} left)" if left > 0 else "(passed)")
        )
    if late:
        parts.append(f"{late:,} row(s) past their recall window, refused (never sent)")
    needed = plan.estimated_seconds(rate)
    in_time = plan.in_time(rate, now)
    if needed is not None and in_time is not None:
        verdict = "in time" if in_time else "NOT in time for the earliest deadline"
        parts.append(
            f"{plan.to_send:,} rows take at least {duration_text(needed)} at {rate:g} requests/s: "
            f"{verdict}"
        )
    elif deadline is not None and rate is None:
        parts.append("no --rate set: whether the run finishes in time is not estimated")
    return "; ".join(parts)


def plan_table(plan: RunPlan, rate: float | None) -> Table:
    """What a run of an input would send (``bulk-cancel --dry-run``, the confirmation)."""
    table = Table(title=f"{plan.input_name}: what a run sends", show_edge=False)
    table.add_column("")
    table.add_column("", justify="right")
    table.add_row("rows in the input", f"{plan.rows:,}")
    table.add_row("cancellation requests to send", f"{plan.to_send:,}")
    for currency, total in sorted(plan.amounts.items()):
        table.add_row(f"total amount, {currency}", f"{total:,}")
    for reason, n in sorted(plan.reasons.items()):
        table.add_row(f"reason {reason}", f"{n:,}")
    table.add_row("rows refused", f"{plan.refused_rows:,}")
    for err in plan.refused[:_PLAN_PROBLEMS]:
        table.add_row(Text(f"  {err}", style="red"), "")
    if len(plan.refused) > _PLAN_PROBLEMS:
        table.add_row(f"  ... {len(plan.refused) - _PLAN_PROBLEMS} more (--json lists them)", "")
    deadline = plan.earliest_recall_deadline
    table.add_row(
        "earliest recall deadline", "unknown" if deadline is None else deadline.isoformat()
    )
    if plan.past_deadline:
        table.add_row("rows past their recall window", f"{len(plan.past_deadline):,}")
    seconds = plan.estimated_seconds(rate)
    table.add_row(
        "least time",
        "no --rate set" if seconds is None else f"{seconds:,.0f} s at {rate:g} requests/s",
    )
    return table
