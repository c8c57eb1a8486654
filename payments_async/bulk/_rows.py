"""A bulk row's states and outcomes, and the pure decisions that move a row between them.

One vocabulary for every place a row is named: the journal (SQLite or PostgreSQL), the
results file, the summary, ``bulk-status`` and the docs. A row moves through the journal
stages ``planned -> sent -> acknowledged -> final`` (or is ``invalid`` from the start), and
what a stage means for its owner is one `RowOutcome`:

```text
planned       -> not_sent    the service does not have it; a rerun sends it
sent          -> in_flight   sent, no answer recorded; a rerun resends the same id
acknowledged  -> pending     stored by the service, outcome not known yet
final         -> accepted | rejected | unknown | refused | not_sent | aborted
                             (final not_sent: the client refuses its message before
                             sending it; aborted: its run was aborted before it was
                             sent; a rerun sends neither)
invalid       -> invalid     a skipped input row
```

The functions here decide, from a row's stage and what one attempt met, the row's next
stage and outcome. They do no I/O: the single-process runner and the queue's workers
both call them and record what they return through the journal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from .. import (
    ApiError,
    AuthenticationError,
    CancellationOutcome,
    PaymentsError,
    PermissionDeniedError,
    RateLimitedError,
    ServerError,
    TransportError,
    ValidationError,
)
from .._constants import TOKEN_PATH

__all__ = [
    "UNFINISHED",
    "RowChange",
    "RowOutcome",
    "RunTotals",
    "Stage",
    "Verdict",
    "after_failure",
    "after_outcome",
    "after_wait_failure",
    "is_final_refusal",
    "never_sent",
    "one_line",
    "outcome_of",
    "stored_outcome",
]


class Stage(StrEnum):
    """Where a row is in the journal; stored as its value."""

    PLANNED = "planned"
    """The ids and body are fixed and committed; nothing sent yet (or not known to be)."""
    SENT = "sent"
    """The request is about to go out or went out; its answer is not recorded."""
    ACKNOWLEDGED = "acknowledged"
    """The service stored it (201) or had it already (200): ``paymentsServiceId`` is known."""
    FINAL = "final"
    """The row's outcome is known; a run leaves it alone."""
    INVALID = "invalid"
    """The input row failed validation and was skipped (``--skip-invalid``)."""


class RowOutcome(StrEnum):
    """What a row's state means for its owner: the results file's ``outcome`` column.

    A final row stores one of ``accepted``, ``rejected``, ``unknown``, ``refused``,
    ``not_sent`` and ``aborted``; the other words name a stage (see the module docstring).
    """

    ACCEPTED = "accepted"
    """The cancellation was accepted."""
    REJECTED = "rejected"
    """The cancellation was rejected (``return_request_needed`` says whether to ask the
    beneficiary for a pacs.004 return)."""
    UNKNOWN = "unknown"
    """Nobody can tell: codes nobody can classify, or a row an earlier attempt sent whose
    recorded message can no longer be sent. Check it with the bank."""
    REFUSED = "refused"
    """The service refused the request for good (a 4xx a rerun cannot change)."""
    NOT_SENT = "not_sent"
    """The service does not have it: its request could not be sent."""
    ABORTED = "aborted"
    """The service does not have it: its run was aborted (``bulk-control abort``) before
    it was sent. A rerun of the same input leaves it alone."""
    INVALID = "invalid"
    """A skipped input row."""
    IN_FLIGHT = "in_flight"
    """Sent, no answer recorded: the service may have it; a rerun resends its id."""
    PENDING = "pending"
    """Acknowledged, outcome not known yet: a rerun waits for it."""


UNFINISHED: Final = frozenset({RowOutcome.NOT_SENT, RowOutcome.IN_FLIGHT, RowOutcome.PENDING})
"""Outcomes a rerun of the same command picks up, but for a final ``not_sent`` row: its
message is refused before sending, so a rerun leaves it alone (`RunTotals.unsendable`)."""

_STAGE_OUTCOME: Final = {
    Stage.PLANNED: RowOutcome.NOT_SENT,
    Stage.SENT: RowOutcome.IN_FLIGHT,
    Stage.ACKNOWLEDGED: RowOutcome.PENDING,
    Stage.INVALID: RowOutcome.INVALID,
}


def stored_outcome(value: str | None) -> RowOutcome | None:
    """A final row's outcome as a journal stores it.

    Raises:
        ValueError: ``value`` is not an outcome.
    """
    return None if value is None else RowOutcome(value)


def outcome_of(stage: str, outcome: str | None) -> RowOutcome:
    """What a row in ``stage`` (with its stored ``outcome`` when final) means for its owner."""
    if stage == Stage.FINAL:
        return stored_outcome(outcome) or RowOutcome.UNKNOWN
    return _STAGE_OUTCOME[Stage(stage)]


@dataclass(frozen=True, slots=True)
class RowChange:
    """What to record for a row after one step: its next stage and why.

    Attributes:
        stage: the row's next stage.
        outcome: the outcome when ``stage`` is final, else None.
        error: the error met (kept with the row), or None.
        reason_text: for a final outcome, the sentence for people.
        status: the final ``sts.conf`` (or ``txCxlSts``) the service gave.
        reason_codes: the rejection reason codes.
        return_request_needed: True when the beneficiary must be asked for a pacs.004.
        left: False when the attempt's request cannot have reached the service.
        retry: True when trying the same row again may change the result.
        conditional: True when the change applies only to a row still as the attempt
            left it (``sent``, with that attempt's count): another execution of the same
            row may have moved it on meanwhile.
        unreachable: True when the service (or its token endpoint) cannot be reached:
            every other row would meet the same. Never for a call whose time ran out
            while it waited for one of the client's own connections: the service was
            not tried.
    """

    stage: Stage
    outcome: RowOutcome | None = None
    error: str | None = None
    reason_text: str | None = None
    status: str | None = None
    reason_codes: tuple[str, ...] = ()
    return_request_needed: bool = False
    left: bool = True
    retry: bool = False
    conditional: bool = False
    unreachable: bool = False


# 4xx statuses a rerun may overcome: credentials or permissions fixed, load gone down.
_RETRYABLE_4XX: Final = frozenset({401, 403, 408, 409, 425, 429})


def is_final_refusal(exc: PaymentsError) -> bool:
    """True when resending the same row cannot help: the service refused the message."""
    if isinstance(exc, ValidationError):
        return True
    if isinstance(exc, AuthenticationError | PermissionDeniedError | RateLimitedError):
        return False  # a setup or load problem: a rerun may well succeed
    if isinstance(exc, ServerError) or not isinstance(exc, ApiError) or exc.path == TOKEN_PATH:
        return False
    return exc.status is not None and 400 <= exc.status < 500 and exc.status not in _RETRYABLE_4XX


def never_sent(exc: PaymentsError) -> bool:
    """True when the attempt failed before its POST could reach the service.

    A token-endpoint failure of any kind (its path is the token path: a refusal, a
    timeout or a dropped connection there, even once its own request was sent), a
    transport failure that says no byte of the POST was sent (connection refused), or a
    message refused before any I/O. An error that escapes the client after an attempt
    that may have been stored is an ``OutcomeUnknownError`` with the POST's path, never
    one of these.
    """
    if isinstance(exc, ValidationError) or exc.path == TOKEN_PATH:
        return True
    if isinstance(exc, TransportError):
        return not exc.request_sent
    return False


def one_line(exc: BaseException) -> str:
    """An error as one line of a journal or results file: its type, then its message."""
    text = str(exc).replace("\n", " ")
    return f"{type(exc).__name__}: {text}"


def _not_resent(exc: ValidationError) -> str:
    """Why a row an earlier attempt sent ends ``unknown``: its recorded message is refused.

    The body was checked when the run was planned; a later version of the library may
    check more. It cannot be sent again, and the earlier attempt may have reached the
    service: nobody can say which, so the row is not reported refused.
    """
    return (
        f"not sent again: {one_line(exc)}; an earlier attempt sent this message, so the "
        "service may have it: check with the bank"
    )


def after_failure(stage: str, exc: PaymentsError) -> RowChange:
    """A row's next state when its submission failed.

    Args:
        stage: the row's stage before this attempt (``planned``: no earlier attempt).
        exc: what the attempt met.

    Returns:
        ``planned`` again (or final ``not_sent`` when the message itself is refused) if
        this attempt never left and no earlier one was made; final ``unknown`` if the
        recorded message is refused but an earlier attempt sent it; final ``refused`` if
        the service refused it for good; otherwise the row stays ``sent`` with the error,
        to be tried again.
    """
    error = one_line(exc)
    final = is_final_refusal(exc)
    unreachable = (
        never_sent(exc)
        and not isinstance(exc, ValidationError)
        and not (isinstance(exc, TransportError) and exc.queued)
    )
    if never_sent(exc) and stage == Stage.PLANNED:
        if final:
            return RowChange(
                Stage.FINAL, RowOutcome.NOT_SENT, error=error, left=False, conditional=True
            )
        return RowChange(
            Stage.PLANNED,
            error=error,
            left=False,
            retry=True,
            conditional=True,
            unreachable=unreachable,
        )
    if isinstance(exc, ValidationError):
        return RowChange(
            Stage.FINAL,
            RowOutcome.UNKNOWN,
            reason_text=_not_resent(exc),
            left=False,
            conditional=True,
        )
    if final:
        return RowChange(Stage.FINAL, RowOutcome.REFUSED, error=error, conditional=True)
    return RowChange(Stage.SENT, error=error, retry=True, unreachable=unreachable)


def after_wait_failure(stage: str, exc: PaymentsError) -> RowChange:
    """A row's next state when waiting for its outcome failed: as it was, with the error."""
    return RowChange(Stage(stage), error=one_line(exc), retry=True)


def after_outcome(outcome: CancellationOutcome) -> RowChange:
    """A row's final state from the outcome the service gave."""
    return RowChange(
        Stage.FINAL,
        RowOutcome(outcome.outcome.value),
        status=outcome.status or next(iter(outcome.tx_statuses), None),
        reason_codes=tuple(outcome.reason_codes),
        reason_text="; ".join(outcome.reason_texts) or None,
        return_request_needed=outcome.return_request_needed,
    )


class Verdict(StrEnum):
    """What a run's rows add up to, for its exit code (one mapping for every kind of run)."""

    DONE = "done"
    """Every valid row was accepted."""
    SAID_NO = "said_no"
    """Every valid row is final and the service said no to some: rejected or refused."""
    UNSETTLED = "unsettled"
    """Some rows are not final (not sent, in flight, pending: rerun the same command),
    ended ``unknown`` (check them with the bank), cannot be sent (see the reason), or
    were never sent because the run was aborted."""


@dataclass(slots=True)
class RunTotals:
    """Rows of a run by outcome, over every run of the same input.

    Attributes:
        counts: rows per outcome; every outcome is present (zero when none).
        return_requests: rejected rows whose ``return_request_needed`` is true (ask the
            beneficiary for a pacs.004 return); the other rejected rows need nothing more.
        unsendable: ``not_sent`` rows that are final: the client refused their message
            before sending it (the results give the reason), so a rerun will not send
            them. They are counted in ``counts`` as ``not_sent`` too.
    """

    counts: dict[RowOutcome, int] = field(default_factory=lambda: dict.fromkeys(RowOutcome, 0))
    return_requests: int = 0
    unsendable: int = 0

    @classmethod
    def of(
        cls, counts: Mapping[str, int], return_requests: int = 0, unsendable: int = 0
    ) -> RunTotals:
        """Totals from ``{outcome: rows}`` (missing outcomes count zero)."""
        totals = cls(return_requests=return_requests, unsendable=unsendable)
        for name, n in counts.items():
            totals.counts[RowOutcome(name)] += n
        return totals

    def add(
        self,
        outcome: RowOutcome,
        *,
        return_request_needed: bool = False,
        final: bool = False,
        rows: int = 1,
    ) -> None:
        """Count ``rows`` more rows with this outcome (``final``: their stage is final)."""
        self.counts[outcome] += rows
        if outcome is RowOutcome.REJECTED and return_request_needed:
            self.return_requests += rows
        if outcome is RowOutcome.NOT_SENT and final:
            self.unsendable += rows

    def __getitem__(self, outcome: str) -> int:
        return self.counts[RowOutcome(outcome)]

    def get(self, outcome: str, default: int = 0) -> int:
        """Rows with this outcome (``default`` for a word that is not an outcome)."""
        try:
            return self.counts[RowOutcome(outcome)]
        except ValueError:
            return default

    @property
    def rows(self) -> int:
        """Every row counted."""
        return sum(self.counts.values())

    @property
    def unfinished(self) -> int:
        """Rows a rerun of the same command picks up (not the `unsendable` ones)."""
        return sum(self.counts[o] for o in UNFINISHED) - self.unsendable

    @property
    def complete(self) -> bool:
        """True when every valid row has a final outcome."""
        return self.unfinished == 0

    def as_dict(self) -> dict[str, int]:
        """``{outcome: rows}`` for every outcome, in the order of `RowOutcome`."""
        return {str(o): n for o, n in self.counts.items()}

    @property
    def verdict(self) -> Verdict:
        """What the rows add up to (``docs/cli.md``, exit codes)."""
        c = self.counts
        if self.unfinished or self.unsendable or c[RowOutcome.UNKNOWN] or c[RowOutcome.ABORTED]:
            return Verdict.UNSETTLED
        if c[RowOutcome.REJECTED] or c[RowOutcome.REFUSED]:
            return Verdict.SAID_NO
        return Verdict.DONE
