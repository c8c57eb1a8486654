"""What a bulk run tells its caller as it goes: its counters, and the events that carry them."""

from __future__ import annotations

from dataclasses import dataclass

from ._input import InputCheck

__all__ = ["BulkCounts", "BulkEvents"]


@dataclass(slots=True)
class BulkCounts:
    """Counters of a run, as the progress bar and the summary show them.

    Attributes:
        total: rows this run has to finish (not final before it started).
        sent: requests this run sent that may have reached the service (an attempt that
            failed before its request could leave is not counted).
        submitted: rows the service acknowledged during this run (201 or 200).
        replayed: of those, rows it already had (200): resent with their recorded id.
        accepted: rows whose cancellation was accepted during this run.
        rejected: rows whose cancellation was rejected during this run.
        unknown: rows whose outcome nobody can tell: codes nobody can classify, or a row
            an earlier run sent whose recorded message can no longer be sent. Check
            them with the bank.
        refused: rows the service refused for good (a 4xx a rerun cannot change).
        not_sent: rows whose request could not be sent (token endpoint down, no
            connection, invalid message): the service does not have them.
        aborted: rows never sent because the run was aborted: the service does not
            have them.
        failed: rows that met an error a rerun may overcome (see the results file).
    """

    total: int = 0
    sent: int = 0
    submitted: int = 0
    replayed: int = 0
    accepted: int = 0
    rejected: int = 0
    unknown: int = 0
    refused: int = 0
    not_sent: int = 0
    aborted: int = 0
    failed: int = 0

    @property
    def done(self) -> int:
        """Rows that need nothing more from this run (final, refused, not sent, aborted or
        failed)."""
        return (
            self.accepted
            + self.rejected
            + self.unknown
            + self.refused
            + self.not_sent
            + self.aborted
            + self.failed
        )


class BulkEvents:
    """What a run tells its caller as it goes (the CLI's bars and messages).

    Every method does nothing here: subclass and override the ones you need.
    """

    def reading(self, phase: str, done: int, size: int) -> None:
        """The input is being read: ``phase`` is ``"check"``, then ``"plan"`` for a new
        run (the file is read as a stream twice), with bytes read and the file's size."""

    async def checked(self, checked: InputCheck) -> None:
        """The input is good; nothing is written yet. What this raises stops the run."""

    def planned(self, checked: InputCheck, resumed: bool) -> None:
        """The run is planned (``resumed``: an earlier run's plan was found); sending starts."""

    def update(self, counts: BulkCounts) -> None:
        """The run's counters changed."""
