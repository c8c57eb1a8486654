"""Bulk cancellation: ``bulk-cancel`` (here, or over workers with ``--queue``), and a
queued run's ``bulk-status`` and ``bulk-results``."""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import NoReturn

import click
from rich.console import Group
from rich.live import Live
from rich.text import Text

from payments_async import (
    POLL_TIMEOUT,
    Limits,
    PaymentsClient,
    RateLimit,
    RateLimiter,
    Timeout,
    bulk,
    limit_rate,
    redact_url,
)
from payments_async.bulk import (
    DEFAULT_CONCURRENCY,
    BulkCounts,
    BulkEvents,
    BulkInputError,
    ChasePolicy,
    InputCheck,
    JournalError,
    QueueStatus,
    ResultsWriteError,
    RunPlan,
    SqliteJournal,
    check_run_input,
    connection_limit_for,
    default_journal_path,
    default_results_path,
    journal_counts,
    plan_summary,
)
from payments_async.bulk._control import Action, ControlState, read_control, record_action
from payments_async.bulk._defaults import STATUS_INTERVAL
from payments_async.bulk._plan import new_run_id, plan_input
from payments_async.bulk._stores import is_postgres_url

from .._context import Settings, pass_settings
from .._exit import EXIT_OK, EXIT_SERVICE, EXIT_USAGE, CliError, journal_failed
from .._files import check_results_path, not_utf8
from .._params import chase_options, chase_policy, run_option, seconds
from .._progress import InputBar, RunBar, input_bar, run_bar, showing
from .._render import (
    bulk_summary,
    chase_line,
    deadline_line,
    pending_lines,
    plan_table,
    queue_status_dict,
    queue_summary,
    queue_table,
)
from .._run import (
    describe_unreachable,
    make_client,
    run_command,
    set_on_signals,
    token_or_outage,
    why_unreachable,
)
from .._watch import ConnectWatch
from .._xml import check_bulk_xml, xsd_option
from .bulk_control import control_table, control_target

__all__ = ["bulk_cancel", "bulk_status", "journal_shown"]


def _per_second(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """Refuse a ``--rate`` that is not a positive, finite number of requests per second."""
    if value is not None and (not math.isfinite(value) or value <= 0):
        raise click.BadParameter(f"{value:g} is not a positive, finite number per second")
    return value


@click.command("bulk-cancel")
@click.argument(
    "input_path", metavar="INPUT", type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1, max=1000),
    default=DEFAULT_CONCURRENCY,
    show_default=True,
    help="HTTP requests (submissions and outcome reads) in flight at once.",
)
@click.option(
    "--results",
    "results_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Results file, .csv or .jsonl [default: INPUT's stem + .results.csv/.jsonl, in the "
    "working directory].",
)
@click.option(
    "--journal",
    "journal_path",
    metavar="FILE|URL",
    help="Journal file, or a postgresql:// database (the scale extra) "
    "[default: beside the results, <results stem>.journal.sqlite].",
)
@click.option(
    "--queue",
    "queue_url",
    metavar="URL",
    help="Distribute the rows over workers: plan them in this postgresql:// database and "
    "queue the rows in jobs of 25 (the scale extra; run `payments-async worker --queue URL`).",
)
@click.option("--no-wait", is_flag=True, help="With --queue: return once the rows are queued.")
@click.option(
    "--no-journal",
    is_flag=True,
    help="Keep no journal: faster, but a crashed run cannot be resumed safely.",
)
@click.option(
    "--new-run",
    is_flag=True,
    help="When the journal belongs to another input (the file was edited after a stop), "
    "or another run in a PostgreSQL journal holds some of its payments: start a new run "
    "in it. Rows whose payment already has a cancellation recorded in "
    "the journal are refused (or, with --skip-invalid, reported invalid): never sent again.",
)
@click.option("--skip-invalid", is_flag=True, help="Send the valid rows; report invalid ones.")
@click.option(
    "--timeout",
    type=float,
    callback=seconds,
    default=POLL_TIMEOUT,
    show_default=True,
    metavar="S",
    help="Seconds to wait for each row's outcome.",
)
@click.option(
    "--rate",
    type=float,
    callback=_per_second,
    metavar="N",
    help="Send at most N requests per second (sends, resends and outcome reads); with "
    "--queue, N for every worker of the run together.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Check and add up the input, then stop: rows, amounts, reasons, rows refused and "
    "why, the least time at --rate. Nothing is sent and no journal is made.",
)
@click.option(
    "--transliterate",
    is_flag=True,
    help="Convert names and addresses to the SEPA character set (Müller -> Muller, "
    "Łódź -> Lodz, & -> +); every change is in the results' transliterated column. "
    "Identifiers (IBAN, BIC, ids) are never changed.",
)
@click.option(
    "--if-late",
    type=click.Choice(["warn", "refuse"]),
    default="warn",
    show_default=True,
    help="When the rows cannot all be sent by the earliest recall deadline at --rate "
    "(rows x 2 requests / rate against the time left): warn, or refuse to start (exit 2).",
)
@click.option(
    "--yes",
    is_flag=True,
    help="Do not ask for confirmation on a terminal (a run whose stdin is not a terminal "
    "never asks).",
)
@chase_options
@xsd_option
@pass_settings
def bulk_cancel(
    settings: Settings,
    input_path: Path,
    concurrency: int,
    results_path: Path | None,
    journal_path: str | None,
    queue_url: str | None,
    no_wait: bool,
    no_journal: bool,
    new_run: bool,
    skip_invalid: bool,
    timeout: float,
    rate: float | None,
    dry_run: bool,
    transliterate: bool,
    if_late: str,
    yes: bool,
    chase_after: int | None,
    chase_limit: int | None,
    xsd: Path | None,
) -> None:
    """Cancel every payment listed in INPUT (CSV or JSONL, one payment per row; or an
    ISO 20022 camt.056.001.08 XML document, one row per transaction, with the xml extra).

    \b
    Columns: original_end_to_end_id, amount, creditor_agent_bic, creditor_iban,
    reason (DUPL TECH FRAD AC03 AM09 CUST), assigner_bic, assignee_bic; optional:
    currency (EUR), originator_name, assignment_id, the creditor agent's address
    (creditor_agent_street, _building, _post_code, _town, _country, _lines; in JSONL a
    creditor_agent_address object), original_settlement_date (YYYY-MM-DD; in XML
    orgnlTxRef.intrBkSttlmDt). In XML, a row's "line" is its transaction's position
    (1, 2, ...) and its problems are named by their path in the document. See
    examples/README.md and docs/xml.md.

    A row whose original_settlement_date puts it past its reason's recall window (10
    TARGET2 banking days for DUPL/TECH, 13 months for the others) is refused with its
    deadline, and never sent. Before sending, the run says its earliest recall deadline
    and whether it finishes in time at --rate (--if-late).

    Every row is checked first; any problem is listed with its line number and nothing
    is sent (exit 2), unless --skip-invalid. Each row's ids are fixed in the journal
    before anything is sent, so running the same command again after a crash or Ctrl-C
    resumes: final rows are left alone, rows in flight are resent with their recorded id
    (the service answers 200) and waited on. One run at a time uses a journal: a second
    one says which process holds it and exits 2. An input edited since its journal was
    made is refused; --new-run starts a new run in that journal without ever sending a
    payment's cancellation twice.

    --dry-run shows what a run would send, and sends nothing. On a terminal a run shows
    the same figures and asks before sending (--yes does not ask).

    --chase-after N: a rerun first chases each row whose recall the service acknowledged
    N TARGET2 banking days ago (or chased N days ago) and has not answered: one pacs.028
    request for status update per row and period, up to --chase-limit per row; no
    camt.056 is sent again.

    \b
    Exit: 0 all cancellations accepted; 1 every row done, some rejected (see
    return_request_needed in the results) or refused by the service (a rerun cannot
    change that: see the reason); 2 bad input; 3 some rows not completed (rerun the same
    command), rows whose message cannot be sent (a rerun will not send them: see the
    reason), or outcomes nobody can tell (codes nobody can classify, or a row sent before
    whose message can no longer be sent: check with the bank); 130 interrupted (rerun to
    resume); --dry-run: 0, or 2 for bad input; a run not confirmed: 2, nothing sent.
    """
    if queue_url is not None and (
        journal_path is not None or no_journal or new_run or results_path is not None
    ):
        raise click.UsageError(
            "--queue keeps the journal in its database and writes no results file: "
            "drop --journal/--no-journal/--new-run/--results (export with bulk-results)"
        )
    if no_wait and queue_url is None:
        raise click.UsageError("--no-wait goes with --queue")
    chase = chase_policy(chase_after, chase_limit)
    shown_journal = journal_shown(journal_path)
    local_journal = (
        None
        if queue_url is not None or no_journal
        else _journal_file(input_path, journal_path, results_path)
    )
    rules = _Rules(transliterate=transliterate, rate=rate, if_late=if_late)
    if dry_run:
        _dry_run(settings, input_path, skip_invalid, rules, xsd, local_journal, new_run)
    confirm = (
        _Confirm(settings, rate, local_journal, ask=not yes) if yes or sys.stdin.isatty() else None
    )
    if queue_url is not None:
        _bulk_cancel_queued(
            settings, input_path, queue_url, no_wait, skip_invalid, rules, xsd, confirm, chase
        )
    results = results_path if results_path is not None else default_results_path(input_path)

    limiter = None if rate is None else RateLimiter.of(RateLimit(per_second=rate))

    async def go() -> int:
        check_bulk_xml(input_path, xsd)
        stop = asyncio.Event()
        bar = run_bar(settings)
        reading = input_bar(settings)
        try:
            limit = connection_limit_for(concurrency)
            # The library's retry window, not the CLI's: a long unattended run rides out
            # a short outage; the service is checked within seconds once, below.
            limits = Limits(connections=limit)
            # ... but once every request has failed to connect for the CLI's window (the
            # service died), the run stops, says so, and a rerun resumes it.
            watch = ConnectWatch()
            async with (
                make_client(
                    settings, limits=limits, timeout=Timeout(), hooks=watch.hooks
                ) as client,
                watch.stop_when_down(lambda exc: why_unreachable(settings, exc), stop.set) as down,
            ):
                if not settings.json:
                    settings.err.print(f"checking {input_path} ...")
                events = _LocalRunEvents(
                    settings, client, watch, results, bar, reading, confirm, rules
                )
                if not no_journal:
                    events.journal = journal_path or str(default_journal_path(results))
                with set_on_signals(stop), showing(bar), limit_rate(limiter):
                    report = await bulk.bulk_cancel(
                        client,
                        input_path,
                        results_path=results_path,
                        journal_path=journal_path,
                        use_journal=not no_journal,
                        skip_invalid=skip_invalid,
                        concurrency=concurrency,
                        timeout=timeout,
                        events=events,
                        stop=stop,
                        new_run=new_run,
                        transliterate=transliterate,
                        chase=chase,
                    )
        except BulkInputError as exc:
            raise _input_refused(settings, input_path, exc) from None
        except UnicodeDecodeError as exc:
            raise _input_not_utf8(input_path, exc) from None
        except JournalError as exc:  # a database gone for good is exit 3: rerun later
            raise journal_failed(exc) from None
        except ResultsWriteError as exc:  # checked before sending: a disk full at the end, say
            kept = (
                "the outcomes were not kept (--no-journal)"
                if no_journal
                else "the journal keeps every outcome: run the same command again to write "
                "the file (nothing is sent again)"
            )
            raise CliError(
                f"cannot write {str(results)!r}: {exc.strerror or exc}; {kept}", EXIT_SERVICE
            ) from None
        finally:
            if reading is not None:
                reading.close()
        halted = None
        if down:  # stopped by the watch, not by a signal
            report.interrupted = False
            halted = down[0]
        elif report.halted is not None:
            halted = await describe_unreachable(settings, report.halted)
        plan = events.plan
        deadlines = None if plan is None else rules.deadlines(plan)
        code = bulk_summary(settings, report, input_path, halted, shown_journal, deadlines)
        if plan is not None:
            rules.say_deadline(settings, plan)
        return code

    run_command(settings, go)


class _Rules:
    """The run's options that judge its rows and its deadlines."""

    def __init__(self, *, transliterate: bool, rate: float | None, if_late: str) -> None:
        self.transliterate = transliterate
        self.rate = rate
        self.if_late = if_late

    async def check(
        self, input_path: Path, skip_invalid: bool, events: BulkEvents | None = None
    ) -> InputCheck:
        return await check_run_input(
            input_path,
            skip_invalid=skip_invalid,
            events=events,
            transliterate=self.transliterate,
        )

    def say_deadline(self, settings: Settings, plan: RunPlan) -> bool | None:
        """Say the run's recall deadlines (stderr); return whether it finishes in time."""
        now = dt.datetime.now(dt.UTC)
        line = deadline_line(plan, self.rate, now)
        in_time = plan.in_time(self.rate, now)
        if line is not None and not settings.json:
            settings.err.print(Text(line, style="yellow" if in_time is False else ""))
        return in_time

    def deadlines(self, plan: RunPlan) -> dict[str, object] | None:
        """The run's recall deadlines for ``--json``: None when no row gives a date."""
        if plan.earliest_recall_deadline is None and not plan.past_deadline:
            return None
        data = plan.as_dict(self.rate, problems=0, now=dt.datetime.now(dt.UTC))
        keys = ("earliest_recall_deadline", "today", "past_deadline_rows", "seconds_left")
        return {key: data[key] for key in keys}

    def feasible(self, settings: Settings, checked: InputCheck) -> RunPlan:
        """Before anything is sent: the deadlines said, and a run that cannot finish in
        time at its rate refused under ``--if-late refuse``.

        Raises:
            CliError: refused (exit 2), nothing sent.
        """
        plan = RunPlan.of_check(checked)
        if self.say_deadline(settings, plan) is False and self.if_late == "refuse":
            deadline = plan.earliest_recall_deadline
            assert deadline is not None
            raise CliError(
                f"the run cannot send its {plan.to_send:,} rows by the earliest recall "
                f"deadline ({deadline.isoformat()}) at {self.rate:g} requests/s "
                "(--if-late refuse): nothing was sent. Raise --rate if the bank allows, "
                "or split the input by deadline"
            )
        return plan


def _dry_run(
    settings: Settings,
    input_path: Path,
    skip_invalid: bool,
    rules: _Rules,
    xsd: Path | None,
    journal: Path | None,
    new_run: bool,
) -> NoReturn:
    """``bulk-cancel --dry-run``: check and add up the input; no client, nothing sent.

    An existing ``journal`` file is opened as the run would open it (and refused as the
    run would refuse it), and left unchanged: a run that resumes it is said so, and a new
    run in it (``new_run``) refuses the rows whose payment it records a cancellation for.
    """

    async def go() -> int:
        check_bulk_xml(input_path, xsd)
        try:
            checked = await rules.check(input_path, skip_invalid)
            recorded = None if journal is None else _recorded(journal, checked, new_run)
            plan = await asyncio.to_thread(plan_summary, checked, recorded)
        except BulkInputError as exc:
            raise _input_refused(settings, input_path, exc) from None
        except UnicodeDecodeError as exc:
            raise _input_not_utf8(input_path, exc) from None
        except JournalError as exc:
            raise journal_failed(exc) from None
        except OSError as exc:
            raise CliError(f"cannot read {str(input_path)!r}: {exc}") from None
        if plan.refused_rows and not skip_invalid:  # rows the journal records: as the run
            raise _input_refused(settings, input_path, BulkInputError(plan.refused))
        states = None if journal is None or recorded is not None else journal_counts(journal)
        rate = rules.rate
        now = dt.datetime.now(dt.UTC)
        if settings.json:
            settings.emit(
                {
                    **plan.as_dict(rate, now=now),
                    "if_late": rules.if_late,
                    "dry_run": True,
                    "journal_states": states,
                }
            )
        else:
            settings.out.print(plan_table(plan, rate))
            rules.say_deadline(settings, plan)
            _say_resumed(settings, states)
            settings.err.print("dry run: nothing was sent")
        return EXIT_OK

    run_command(settings, go)


def _recorded(journal: Path, checked: InputCheck, new_run: bool) -> dict[str, str] | None:
    """The cancellations ``journal`` records, when a run of ``checked`` starts a new run
    in it (None when the run resumes it). Opened as the run opens it, and left unchanged.

    Raises:
        JournalError: as the run would: the journal is busy, or holds an unfinished run
            of another input and ``new_run`` is off.
    """
    opened = SqliteJournal.open(
        journal, input_sha256=checked.sha256, new_run_id=new_run_id(), new_run=new_run
    )
    try:
        return None if opened.is_planned() else opened.recorded_cancellations()
    finally:
        opened.close()


def _journal_file(
    input_path: Path, journal_path: str | None, results_path: Path | None
) -> Path | None:
    """The journal file a local run of ``input_path`` would use, when it exists."""
    if is_postgres_url(journal_path or ""):
        return None
    results = results_path or default_results_path(input_path)
    journal = Path(journal_path) if journal_path else default_journal_path(results)
    return journal if journal.is_file() else None


def _say_resumed(settings: Settings, states: dict[str, int] | None) -> None:
    """Say that a journal already holds a run (``states``: its rows per state)."""
    if states:
        settings.err.print(
            f"its journal already holds a run of {sum(states.values())} rows "
            f"({', '.join(f'{k} {v}' for k, v in sorted(states.items()))}): a run of the "
            "same input resumes it, and sends only the rows not final"
        )


class _Confirm:
    """Before a run on a terminal sends anything: show what it would send, and ask (or,
    with ``--yes``, do not ask); then keep the confirmation in the run's control history
    (`record`).

    Args:
        ask: False with ``--yes``: the counts are the input's, nothing is asked.
    """

    def __init__(
        self, settings: Settings, rate: float | None, journal: Path | None, *, ask: bool = True
    ) -> None:
        self._settings = settings
        self._rate = rate
        self._journal = journal
        self.ask = ask
        self.counts: dict[str, object] = {}

    def record(self, target: str, run_id: str | None = None) -> None:
        """Keep the confirmation (who, when, the counts shown) in the run's control history.

        Raises:
            JournalError: the journal or database cannot be written.
        """
        record_action(target, Action.CONFIRMED, run=run_id, counts=self.counts)

    async def __call__(self, checked: InputCheck) -> None:
        """Raises `CliError` (exit 2, nothing sent) unless the person says yes."""
        if not self.ask:
            self.counts = {"rows": checked.total, "to_send": checked.valid, "asked": "no (--yes)"}
            return
        plan: RunPlan = await asyncio.to_thread(plan_summary, checked)
        self.counts = {
            "rows": plan.rows,
            "to_send": plan.to_send,
            "refused": plan.refused_rows,
            **{f"amount_{c}": str(a) for c, a in sorted(plan.amounts.items())},
        }
        self._settings.err.print(plan_table(plan, self._rate))
        if self._journal is not None:
            _say_resumed(self._settings, journal_counts(self._journal))
        question = f"send {plan.to_send} cancellation request(s)?"
        if not await asyncio.to_thread(click.confirm, question, err=True):
            raise CliError("not confirmed: nothing was sent")


class _LocalRunEvents(BulkEvents):
    """What ``bulk-cancel`` shows as its run goes: the input's bar, messages, the run's bar."""

    def __init__(
        self,
        settings: Settings,
        client: PaymentsClient,
        watch: ConnectWatch,
        results: Path,
        bar: RunBar | None,
        reading: InputBar | None,
        confirm: _Confirm | None,
        rules: _Rules,
    ) -> None:
        self._rules = rules
        self.plan: RunPlan | None = None
        """What the check found (deadlines), once the input is checked."""
        self._settings = settings
        self._client = client
        self._watch = watch
        self._results = results
        self._bar = bar
        self._reading = reading
        self._confirm = confirm
        self.journal: str | None = None  # where the confirmation is kept (None: nowhere)

    def reading(self, phase: str, done: int, size: int) -> None:
        if self._reading is not None:
            self._reading(phase, done, size)

    async def checked(self, checked: InputCheck) -> None:
        # The service is checked once the input is: bad input is exit 2 whatever the
        # service's state, and no journal is made for a run that cannot start.
        if self._reading is not None:
            self._reading.close()  # the deadlines are said on a clean line
        self.plan = self._rules.feasible(self._settings, checked)
        if self._bar is not None:
            self._bar.deadline_in(self.plan.seconds_left(dt.datetime.now(dt.UTC)))
        if self._confirm is not None:
            if self._reading is not None and self._confirm.ask:
                self._reading.close()  # the question is asked on a clean line
            await self._confirm(checked)
        check_results_path(self._results)
        await token_or_outage(self._settings, self._client, self._watch)

    def planned(self, checked: InputCheck, resumed: bool) -> None:
        if self._reading is not None:
            self._reading.close()
        if self._confirm is not None and self.journal is not None:
            self._confirm.record(self.journal)
        settings = self._settings
        if settings.json:
            return
        if resumed:
            settings.err.print(f"resuming the run recorded in its journal ({checked.total} rows)")
        else:
            settings.err.print(f"{checked.valid} rows planned")

    def update(self, counts: BulkCounts) -> None:
        if self._bar is not None:
            self._bar.update(counts)


def journal_shown(journal: str | None) -> str | None:
    """How messages name a ``--journal`` database (its password left out); None for a file.

    Raises:
        click.BadParameter: an address of another scheme (it would be taken for a file
            name, and shown with its password).
    """
    if journal is None or "://" not in journal:
        return None
    if not is_postgres_url(journal):
        scheme = journal.partition("://")[0][:20]
        raise click.BadParameter(
            f"{scheme}:// is not a journal: give a file, or a postgresql:// database",
            param_hint="'--journal'",
        )
    return f"PostgreSQL {redact_url(journal)}"


def _input_refused(settings: Settings, input_path: Path, exc: BulkInputError) -> CliError:
    """The error of a bulk input with problems (a ``BulkInputError``): each one on stderr,
    and all of them in the ``--json`` error object."""
    if not settings.json:
        for err in exc.row_errors:
            settings.err.print(Text(f"{input_path}: {err}", style="red"))
    problems = [{"line": e.line, "column": e.column, "message": e.message} for e in exc.row_errors]
    return CliError(str(exc), EXIT_USAGE, details={"problems": problems})


def _input_not_utf8(input_path: Path, exc: UnicodeDecodeError) -> CliError:
    line = bytes(exc.object[: exc.start]).count(b"\n") + 1
    return CliError(f"{str(input_path)!r}, line {line}, {not_utf8(exc)}")


def _bulk_cancel_queued(
    settings: Settings,
    input_path: Path,
    queue_url: str,
    no_wait: bool,
    skip_invalid: bool,
    rules: _Rules,
    xsd: Path | None,
    confirm: _Confirm | None,
    chase: ChasePolicy | None,
) -> NoReturn:
    """``bulk-cancel INPUT --queue URL``: check, plan in PostgreSQL, queue, then watch
    (a rerun with a chase policy first settles and chases the run's pending rows)."""
    rate = rules.rate
    reading = input_bar(settings)
    events = _QueuedRunEvents(reading)

    async def go() -> int:
        check_bulk_xml(input_path, xsd)
        if not settings.json:
            settings.err.print(f"checking {input_path} ...")
        try:
            checked = await rules.check(input_path, skip_invalid, events)
        except BulkInputError as exc:
            raise _input_refused(settings, input_path, exc) from None
        except UnicodeDecodeError as exc:
            raise _input_not_utf8(input_path, exc) from None
        except OSError as exc:
            raise CliError(f"cannot read {str(input_path)!r}: {exc}") from None
        finally:
            if reading is not None:
                reading.close()
        plan = rules.feasible(settings, checked)
        if confirm is not None:
            await confirm(checked)
        try:
            report = await bulk.enqueue_run(
                queue_url,
                input_sha256=checked.sha256,
                input_name=input_path.name,
                new_run_id=new_run_id(),
                plan=lambda run_id: plan_input(checked, run_id, progress=events.plan_progress),
                rate=None if rate is None else RateLimit(per_second=rate),
            )
            if confirm is not None:
                await asyncio.to_thread(confirm.record, queue_url, report.run_id)
        except JournalError as exc:
            raise journal_failed(exc) from None
        finally:
            if reading is not None:
                reading.close()
        if not settings.json:
            what = "planned" if report.planned else "already planned (same input)"
            settings.err.print(
                f"run {report.run_id}: {report.rows} rows {what}; {report.enqueued} rows queued"
            )
        if chase is not None and not report.planned:
            try:
                await _refresh(settings, queue_url, report.run_id, chase)
            except JournalError as exc:
                raise journal_failed(exc) from None
        if no_wait:
            if settings.json:
                settings.emit(
                    {
                        "run_id": report.run_id,
                        "rows": report.rows,
                        "planned": report.planned,
                        "enqueued": report.enqueued,
                    }
                )
            return EXIT_OK
        bar = run_bar(settings)
        if bar is not None:
            bar.deadline_in(plan.seconds_left(dt.datetime.now(dt.UTC)))
        with showing(bar):
            while True:
                try:
                    st = await asyncio.to_thread(bulk.queue_status, queue_url, report.run_id)
                except JournalError as exc:
                    # The rows are queued: the workers go on without this watcher.
                    if not settings.json:
                        settings.err.print(
                            "the run is queued and the workers go on; watch it again with: "
                            f"payments-async bulk-status --queue URL --run {report.run_id}"
                        )
                    raise CliError(str(exc), EXIT_SERVICE) from None
                if bar is not None:
                    bar.update(_queue_counts(st))
                if st.settled:
                    break
                await asyncio.sleep(STATUS_INTERVAL)
        return queue_summary(settings, st)

    run_command(settings, go)


class _QueuedRunEvents(BulkEvents):
    """The input's bar while ``bulk-cancel --queue`` checks and plans the file."""

    def __init__(self, reading: InputBar | None) -> None:
        self._reading = reading

    def reading(self, phase: str, done: int, size: int) -> None:
        if self._reading is not None:
            self._reading(phase, done, size)

    def plan_progress(self, done: int, size: int) -> None:
        self.reading("plan", done, size)


def _queue_counts(st: QueueStatus) -> BulkCounts:
    """The progress bar's counters from a `QueueStatus`."""
    t = st.totals
    return BulkCounts(
        total=st.rows - st.states.get("invalid", 0),
        submitted=st.states.get("acknowledged", 0) + st.states.get("final", 0),
        accepted=t.get("accepted"),
        rejected=t.get("rejected"),
        unknown=t.get("unknown"),
        refused=t.get("refused"),
        not_sent=t.unsendable,
        aborted=t.get("aborted"),
    )


@click.command("bulk-status")
@click.option(
    "--queue", "queue_url", metavar="URL", help="The postgresql:// queue (or journal) of the run."
)
@click.option(
    "--journal",
    "journal",
    metavar="FILE|URL",
    help="Or a local run's journal: its file, or its postgresql:// database.",
)
@run_option
@click.option(
    "--refresh",
    is_flag=True,
    help="First read once the outcome of each pending row (GET only: nothing is sent) "
    "and record the final ones (a queued run, or a local run's journal).",
)
@chase_options
@click.option(
    "--watch",
    is_flag=True,
    help="Refresh until the run ends (Ctrl-C stops watching, not the run). Not on a "
    "terminal: one line per interval (a JSON object with --json).",
)
@click.option(
    "--interval",
    type=float,
    callback=seconds,
    default=STATUS_INTERVAL,
    show_default=True,
    metavar="S",
    help="With --watch: seconds between reads.",
)
@pass_settings
def bulk_status(
    settings: Settings,
    queue_url: str | None,
    journal: str | None,
    run_id: str | None,
    watch: bool,
    interval: float,
    refresh: bool,
    chase_after: int | None,
    chase_limit: int | None,
) -> None:
    """Show a bulk run's progress (across all its workers) and its control history:
    paused, resumed, aborted, confirmed, by whom and when. With --refresh, first settle
    the pending rows the service has decided (reads only); with --chase-after too, then
    chase the rows still unanswered (a pacs.028 each when due; no camt.056 is resent).

    \b
    Exit: 0 all rows accepted; 1 all final, some rejected or refused by the service; 3 rows
    not final yet, rows whose message cannot be sent (see the reason), rows aborted, or
    outcomes nobody can tell (check them with the bank). With --watch: the same, once the
    run has ended; 130 when Ctrl-C stops the watching.
    """
    chase = chase_policy(chase_after, chase_limit)
    if chase is not None and not refresh:
        raise click.UsageError("--chase-after goes with --refresh")
    target = control_target(journal, queue_url, run_id)
    # A --queue is a database whatever it says: its errors are PostgreSQL's (without a
    # password), as for every command that takes one.
    database = queue_url is not None or is_postgres_url(target)

    async def go() -> int:
        if refresh:
            try:
                await _refresh(settings, target, run_id, chase)
            except JournalError as exc:
                raise journal_failed(exc) from None
        status = await _read_status(target, run_id, database)
        if not watch:
            return status.show(settings)
        if not settings.json and settings.out.is_terminal:
            with Live(console=settings.out, auto_refresh=False, transient=True) as live:
                while not status.ended:
                    live.update(status.view(), refresh=True)
                    await asyncio.sleep(interval)
                    status = await _read_status(target, run_id, database)
            return status.show(settings)
        while True:  # not a terminal: one line (or JSON object) per interval
            if status.ended:
                return status.show(settings)
            status.line(settings)
            await asyncio.sleep(interval)
            status = await _read_status(target, run_id, database)

    run_command(settings, go)


async def _refresh(
    settings: Settings, target: str, run_id: str | None, chase: ChasePolicy | None = None
) -> None:
    """``bulk-status --refresh``: settle the pending rows the service has decided (then
    chase the unanswered ones, with a chase policy)."""
    async with make_client(settings) as client:
        done = await bulk.refresh_pending(client, target, run_id, chase=chase)
    settings.err.print(
        f"refreshed {done.read:,} pending rows: {done.settled:,} final now"
        + (f", {done.not_found:,} unknown to the service" if done.not_found else "")
    )
    if done.chase is not None:
        settings.err.print(chase_line(done.chase))


@dataclass(frozen=True, slots=True)
class _RunStatus:
    """What ``bulk-status`` read of a run: its rows added up (from a database or a
    journal file) and its control history.

    Attributes:
        control: the control state and history.
        rows: the run's rows added up.
        queued: True for a run in a database (it ends once no job is waiting or
            running), False for a journal file (it ends once every row is final).
    """

    control: ControlState
    rows: QueueStatus
    queued: bool

    @property
    def ended(self) -> bool:
        """True once the run has gone as far as it can."""
        return self.rows.settled if self.queued else self.rows.totals.unfinished == 0

    def view(self) -> Group:
        """The terminal's view: rows by outcome, the rows not final by age and by days
        left to their deadlines, then the control history."""
        pending = map(Text, pending_lines(self.rows.times))
        return Group(
            queue_table(self.rows, queued=self.queued), *pending, control_table(self.control)
        )

    def show(self, settings: Settings) -> int:
        """Print the status once; return the exit code (see ``bulk-status --help``)."""
        control = {"control": self.control.as_dict()}
        code = queue_summary(settings, self.rows, control, queued=self.queued)
        if not settings.json:
            settings.out.print(control_table(self.control))
        return code

    def line(self, settings: Settings) -> None:
        """One line of a watch that is not on a terminal."""
        if settings.json:
            settings.emit({**queue_status_dict(self.rows), "control": self.control.as_dict()})
            return
        shown = ", ".join(f"{k} {v}" for k, v in sorted(self.rows.states.items()))
        shown += "".join(f"; {line}" for line in pending_lines(self.rows.times))
        stamp = datetime.now(UTC).strftime("%H:%M:%S")
        settings.out.print(
            f"{stamp} run {self.control.run_id}: {self.control.describe()}; {shown}",
            soft_wrap=True,
        )


async def _read_status(target: str, run_id: str | None, database: bool) -> _RunStatus:
    """Read a run's status and control (``database``: ``target`` is a database's address,
    else a journal file).

    Raises:
        CliError: the journal or database cannot be used, or has no such run.
    """
    try:
        if database:
            st = await asyncio.to_thread(bulk.queue_status, target, run_id)
            control = await asyncio.to_thread(read_control, target, st.run_id)
            return _RunStatus(control, st, queued=True)
        control = await asyncio.to_thread(read_control, target)
        st = await asyncio.to_thread(bulk.journal_status, target)
        return _RunStatus(control, st, queued=False)
    except JournalError as exc:
        raise journal_failed(exc) from None
