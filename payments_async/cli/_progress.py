"""Progress bars on stderr: reading a bulk input, and a bulk run's rows."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from ._render import duration_text

if TYPE_CHECKING:
    from payments_async.bulk import BulkCounts

    from ._context import Settings

__all__ = ["InputBar", "RunBar", "input_bar", "run_bar", "showing", "shows_bars"]


def shows_bars(settings: Settings) -> bool:
    """Whether to draw progress bars: for a person at a terminal, never with ``--json``."""
    return not settings.json and settings.err.is_terminal


class RateColumn(ProgressColumn):
    """Rows per second."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.0f}/s" if speed else "-/s", style="cyan")


class RunBar:
    """The live bar: submitted / accepted / rejected / failed, rate and ETA (on stderr)."""

    def __init__(self, console: Console) -> None:
        # Fits 80 columns: a narrow bar, percent, the four counters, rate and ETA.
        self._progress = Progress(
            BarColumn(bar_width=12),
            TaskProgressColumn(),
            TextColumn(
                "sub {task.fields[submitted]} [green]acc {task.fields[accepted]}[/] "
                "[yellow]rej {task.fields[rejected]}[/] [red]fail {task.fields[failed]}[/]"
            ),
            RateColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[due]}"),
            console=console,
            transient=False,
        )
        self._task = self._progress.add_task(
            "bulk", total=None, submitted=0, accepted=0, rejected=0, failed=0, due=""
        )
        self._due: float | None = None  # time.monotonic() at the earliest recall deadline

        self._started = False

    @contextlib.contextmanager
    def running(self) -> Iterator[RunBar]:
        # Shown from the first update on: the input's own bar comes first (one live
        # display per console).
        try:
            yield self
        finally:
            if self._started:
                self._progress.stop()

    def deadline_in(self, seconds: float | None) -> None:
        """Show the time left to the run's earliest recall deadline, ``seconds`` from now."""
        self._due = None if seconds is None else time.monotonic() + seconds

    def _due_text(self) -> str:
        if self._due is None:
            return ""
        left = self._due - time.monotonic()
        return f"deadline in {duration_text(left)}" if left > 0 else "[red]deadline passed[/]"

    def update(self, counts: BulkCounts) -> None:
        if not self._started:
            self._started = True
            self._progress.start()
        self._progress.update(
            self._task,
            total=counts.total,
            completed=counts.done,
            submitted=counts.submitted,
            accepted=counts.accepted,
            rejected=counts.rejected,
            failed=counts.failed,
            due=self._due_text(),
        )


class InputBar:
    """The bar shown while the input is read: checked, then planned (MB of the file)."""

    _LABELS: Final = {"check": "checking", "plan": "planning"}

    def __init__(self, console: Console) -> None:
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(bar_width=24),
            TaskProgressColumn(),
            TextColumn("{task.fields[mb]}"),
            TimeRemainingColumn(),
            console=console,
            transient=True,
        )
        self._tasks: dict[str, TaskID] = {}
        self._started = False

    def __call__(self, phase: str, done: int, size: int) -> None:
        if not self._started:
            self._started = True
            self._progress.start()
        task = self._tasks.get(phase)
        if task is None:
            for other in self._tasks.values():
                self._progress.update(other, visible=False)
            task = self._tasks[phase] = self._progress.add_task(
                self._LABELS.get(phase, phase), total=max(size, 1), mb=""
            )
        mb = f"{done / 1e6:,.0f}/{size / 1e6:,.0f} MB"
        self._progress.update(task, completed=done, mb=mb)

    def close(self) -> None:
        if self._started:
            self._started = False
            self._progress.stop()


def run_bar(settings: Settings) -> RunBar | None:
    """The bar of a run's rows, or None when no bar is shown (see `shows_bars`)."""
    return RunBar(settings.err) if shows_bars(settings) else None


def input_bar(settings: Settings) -> InputBar | None:
    """The bar of reading the input, or None when no bar is shown."""
    return InputBar(settings.err) if shows_bars(settings) else None


def showing(bar: RunBar | None) -> contextlib.AbstractContextManager[object]:
    """The block during which ``bar`` (if any) is shown."""
    return bar.running() if bar is not None else contextlib.nullcontext()
