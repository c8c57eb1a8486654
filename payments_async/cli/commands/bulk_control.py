"""Steering a bulk run from another terminal: ``bulk-control pause|resume|abort``."""

from __future__ import annotations

import asyncio

import click
from rich.table import Table

from payments_async.bulk import JournalError
from payments_async.bulk._control import CONTROL_INTERVAL, Action, ControlState, record_action
from payments_async.bulk._stores import is_postgres_url

from .._context import Settings, pass_settings
from .._exit import EXIT_OK, journal_failed
from .._params import run_option
from .._run import run_command

__all__ = ["bulk_control", "control_table", "control_target"]

_ACTIONS = {"pause": Action.PAUSED, "resume": Action.RESUMED, "abort": Action.ABORTED}

_DONE = {
    Action.PAUSED: "no new request of the run starts from within {s:g} s (outcomes of rows "
    "already sent are still read); `bulk-control resume` sends again",
    Action.RESUMED: "sending goes on within {s:g} s",
    Action.ABORTED: "rows not sent yet end 'not sent (aborted)' (each as a runner or worker "
    "takes it); rows in flight finish",
}


def control_target(journal: str | None, queue_url: str | None, run_id: str | None) -> str:
    """The journal file or database a command about one run was given.

    Raises:
        click.UsageError: none or both of ``--journal`` and ``--queue``, ``--run`` with a
            journal file, or a ``--journal`` address of another scheme than PostgreSQL's
            (named by its scheme only: the rest may hold a password).
    """
    if (journal is None) == (queue_url is None):
        raise click.UsageError("give the run: --journal FILE|URL, or --queue URL (with --run)")
    if journal is not None and "://" in journal and not is_postgres_url(journal):
        scheme = journal.partition("://")[0][:20]
        raise click.UsageError(
            f"--journal {scheme}://... is not a journal: give a file, or a postgresql:// database"
        )
    target = journal if journal is not None else queue_url
    assert target is not None
    if run_id is not None and not is_postgres_url(target):
        raise click.UsageError("--run goes with a postgresql:// journal or queue")
    return target


@click.command("bulk-control")
@click.argument("action", type=click.Choice(sorted(_ACTIONS)))
@click.option(
    "--journal",
    "journal",
    metavar="FILE|URL",
    help="The run's journal: a local run's file, or its postgresql:// database.",
)
@click.option("--queue", "queue_url", metavar="URL", help="The postgresql:// queue of the run.")
@run_option
@click.option("--reason", metavar="TEXT", help="Why: kept in the run's control history.")
@click.option("--by", metavar="NAME", help="Who, as the history names them [default: user@host].")
@pass_settings
def bulk_control(
    settings: Settings,
    action: str,
    journal: str | None,
    queue_url: str | None,
    run_id: str | None,
    reason: str | None,
    by: str | None,
) -> None:
    """Pause, resume or abort a bulk run (local or queued) from another terminal.

    \b
    pause   no new request of the run is sent (the local runner and every worker check
            within a second); outcomes of rows already sent are still read
    resume  sending goes on
    abort   rows not sent yet end "not sent (aborted)"; rows in flight finish; for good

    The event is kept in the run's control history (who, when, why): bulk-status and
    bulk-report show it. Pausing a paused run or resuming a running one changes nothing.

    \b
    Exit: 0 done (or nothing to change); 2 no such run, the run is finished, or it was
    aborted (nothing recorded); 3 the database cannot be reached.
    """
    target = control_target(journal, queue_url, run_id)
    if queue_url is not None and not is_postgres_url(queue_url):
        scheme = queue_url.partition("://")[0][:20]
        raise click.UsageError(f"--queue takes a postgresql:// address, not {scheme}://...")
    what = _ACTIONS[action]

    async def go() -> int:
        try:
            state = await asyncio.to_thread(
                record_action, target, what, run=run_id, by=by, reason=reason
            )
        except JournalError as exc:
            raise journal_failed(exc) from None
        _said(settings, what, state)
        return EXIT_OK

    run_command(settings, go)


def _said(settings: Settings, action: Action, state: ControlState) -> None:
    if settings.json:
        settings.emit(
            {
                "run_id": state.run_id,
                "action": action.value,
                "changed": state.changed,
                "control": state.as_dict(),
            }
        )
        return
    if not state.changed:
        settings.out.print(f"run {state.run_id} is already {state.describe()}: nothing recorded")
        return
    settings.out.print(f"run {state.run_id}: {state.describe()}")
    settings.err.print(_DONE[action].format(s=CONTROL_INTERVAL))


def control_table(state: ControlState) -> Table:
    """A run's control history, oldest first, titled with its current state."""
    table = Table(title=f"control: {state.describe()}", show_edge=False)
    table.add_column("when (UTC)")
    table.add_column("action")
    table.add_column("by")
    table.add_column("why, counts")
    for event in state.history:
        said = [event.reason or ""]
        if event.counts:
            said.append(", ".join(f"{k} {v}" for k, v in event.counts.items()))
        table.add_row(
            event.at.strftime("%Y-%m-%d %H:%M:%S"),
            event.action.value,
            event.by,
            "; ".join(s for s in said if s),
        )
    if state.aborted_rows:
        table.caption = f"{state.aborted_rows} row(s) not sent (aborted)"
    return table
