"""What is read of a finished (or running) bulk run: ``bulk-results`` (its results, or the
rows that need a person) and ``bulk-report`` (one HTML page)."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import click

from payments_async import bulk
from payments_async.bulk import JournalError, read_results, run_report, write_attention
from payments_async.bulk._control import read_control

from .._context import Settings, pass_settings
from .._exit import EXIT_OK, CliError, journal_failed
from .._files import check_results_path
from .._params import run_option
from .._run import run_command

__all__ = ["bulk_report", "bulk_results"]

_queue_source = click.option(
    "--queue", "queue_url", metavar="URL", help="The postgresql:// queue or journal of the run."
)
_results_source = click.option(
    "--results",
    "results_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Or the results file of a local run (.csv or .jsonl).",
)


def _one_source(queue_url: str | None, results_path: Path | None) -> None:
    if (queue_url is None) == (results_path is None):
        raise click.UsageError("give the run: --queue URL (with --run), or --results FILE")


async def _run_results(
    queue_url: str | None, run_id: str | None, results_path: Path | None, folder: Path
) -> tuple[str, Path]:
    """``(what the run is called, its results file)``: a local run's, or a queued run's
    exported to a file in ``folder``."""
    if results_path is not None:
        return results_path.name, results_path
    assert queue_url is not None
    path = folder / "results.jsonl"
    try:
        run, _ = await asyncio.to_thread(bulk.write_queue_results, queue_url, path, run_id)
    except JournalError as exc:
        raise journal_failed(exc) from None
    return f"run {run}", path


@click.command("bulk-results")
@_queue_source
@run_option
@_results_source
@click.option(
    "--output",
    "output",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Results file, .csv or .jsonl (the columns of bulk-cancel's results); with "
    "--needs-attention, the rows in INPUT's format.",
)
@click.option(
    "--needs-attention",
    "input_path",
    metavar="INPUT",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Write only the rows that need a person (refused, rejected with a pacs.004 to "
    "request, unknown, not sent, invalid), taken from the run's INPUT in its own format "
    "with an 'attention' column: fix them and run again.",
)
@pass_settings
def bulk_results(
    settings: Settings,
    queue_url: str | None,
    run_id: str | None,
    results_path: Path | None,
    output: Path,
    input_path: Path | None,
) -> None:
    """Export the results of a distributed bulk run, one line per input row; or, with
    --needs-attention, the rows of any run that need a person.

    \b
    Feed an attention file back with the run's journal, so that no payment is recalled
    twice (a row whose cancellation the journal records is refused, not sent):
      payments-async bulk-cancel FIXED.csv --journal THE.journal.sqlite --new-run --skip-invalid
    """
    if input_path is None:
        if queue_url is None:
            raise click.UsageError("--queue is required (--results goes with --needs-attention)")
        if results_path is not None:
            raise click.UsageError("--results goes with --needs-attention")
    else:
        _one_source(queue_url, results_path)

    async def go() -> int:
        check_results_path(output, "--output")
        if input_path is None:
            assert queue_url is not None
            try:
                run, path = await asyncio.to_thread(
                    bulk.write_queue_results, queue_url, output, run_id
                )
            except JournalError as exc:
                raise journal_failed(exc) from None
            except OSError as exc:
                raise CliError(f"cannot write {str(output)!r}: {exc.strerror}") from None
            if settings.json:
                settings.emit({"run_id": run, "results": str(path)})
            else:
                settings.say(f"results of run {run}: {path}")
            return EXIT_OK
        with tempfile.TemporaryDirectory(prefix="payments-async-") as folder:
            name, source = await _run_results(queue_url, run_id, results_path, Path(folder))
            try:
                written = await asyncio.to_thread(write_attention, input_path, source, output)
            except (OSError, ValueError) as exc:
                raise CliError(f"cannot write the attention file: {exc}") from None
        if settings.json:
            settings.emit(
                {
                    "run": name,
                    "needs_attention": written.rows,
                    "by_outcome": written.by_outcome,
                    "output": str(written.path) if written.rows else None,
                }
            )
        elif written.rows:
            settings.say(f"{written.rows} row(s) of {name} need a person: {written.path}")
        else:
            settings.say(f"no row of {name} needs a person; nothing written")
        return EXIT_OK

    run_command(settings, go)


@click.command("bulk-report")
@_queue_source
@run_option
@_results_source
@click.option(
    "--output",
    "output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The HTML file to write (one self-contained page) [required without --json].",
)
@click.option(
    "--journal",
    "journal",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="With --results: the local run's journal file, for its control history.",
)
@pass_settings
def bulk_report(
    settings: Settings,
    queue_url: str | None,
    run_id: str | None,
    results_path: Path | None,
    output: Path | None,
    journal: Path | None,
) -> None:
    """Write a run's report: one HTML page with its outcomes and reasons as charts (the
    report extra), the rows needing a pacs.004 return request, the rows not final, and
    the run's control history (confirmed, paused, resumed, aborted: with --queue, or a
    local run's --journal). With --json, print the same figures as JSON.

    The page needs no network access to be viewed: its style and charts are inside it,
    and it runs no script.
    """
    _one_source(queue_url, results_path)
    if journal is not None and results_path is None:
        raise click.UsageError("--journal goes with --results (a queued run's is its --queue)")
    if output is None and not settings.json:
        raise click.UsageError("--output FILE is required (or --json for the figures)")

    async def go() -> int:
        if output is not None:
            check_results_path(output, "--output")
        with tempfile.TemporaryDirectory(prefix="payments-async-") as folder:
            name, source = await _run_results(queue_url, run_id, results_path, Path(folder))
            try:
                report = await asyncio.to_thread(
                    lambda: run_report(read_results(source), f"Bulk run: {name}")
                )
            except (OSError, ValueError) as exc:
                raise CliError(f"cannot read the results of {name}: {exc}") from None
        control_of = queue_url if queue_url is not None else journal
        if control_of is not None:
            try:
                control = await asyncio.to_thread(read_control, control_of, run_id)
            except JournalError as exc:
                raise journal_failed(exc) from None
            report.control = control.as_dict()
        hint = "payments-async bulk-results --needs-attention INPUT " + (
            f"--results {results_path}" if results_path is not None else "--queue URL"
        )
        if output is not None:
            page = report.to_html(attention_hint=f"{hint} --output FILE")
            try:
                await asyncio.to_thread(_write_text, output, page)
            except OSError as exc:
                raise CliError(f"cannot write {str(output)!r}: {exc.strerror}") from None
        if settings.json:
            settings.emit({**report.as_dict(), "output": None if output is None else str(output)})
        else:
            settings.say(f"report of {name}: {output}")
        return EXIT_OK

    run_command(settings, go)


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
