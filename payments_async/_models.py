"""What the client's operations return: a submission, a cancellation's outcome, and the
answer a call came from (status, headers, body, elapsed time, attempts)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, NamedTuple, TypeVar

import msgspec

from ._errors import InvalidResponseError, OutcomeUnknownError, ValidationError
from .iso20022 import (
    Camt029,
    CancellationResolution,
    Outcome,
    SubmissionResult,
    decode_submission,
)

__all__ = [
    "Answered",
    "CancellationOutcome",
    "RawResponse",
    "ResponseHeaders",
    "Submission",
    "submission_result",
]

T = TypeVar("T")

_RETURN_ADVICE = (
    "the cancellation was rejected: ask the beneficiary of the original payment to return "
    "the funds with a pacs.004 return request"
)


class Submission(msgspec.Struct, frozen=True):
    """The result of submitting a pacs.008, camt.056 or pacs.028.

    Immutable, compared and hashed by value (a frozen ``msgspec.Struct``);
    ``msgspec.structs.asdict(submission)`` gives its fields as a dict.

    Attributes:
        payments_service_id: the service's id of the stored message; read its status with it.
        message_id: the id we sent (``grpHdr.msgId`` or ``assgnmt.id``).
        echoed_id: the id the service echoed (``paymentId``), if it did.
        status: the service's status at submission (``PENDING``).
        creation_date_time: when the service stored it (no zone designator, as sent).
        created: True for 201 (stored now) or 202 with a submission result (accepted
            now, processing not completed); False for 200 (an earlier attempt or an
            earlier call had stored it: the message exists exactly once).
        attempts: how many HTTP attempts this call took.
        request_id: the ``X-Request-ID`` of the call.
        http_status: the status of the answer that named the id: 201, 202 or 200.
    """

    payments_service_id: str
    message_id: str
    echoed_id: str | None
    status: str | None
    creation_date_time: str | None
    created: bool
    attempts: int
    request_id: str
    http_status: int

    @property
    def replayed(self) -> bool:
        """True when the service answered 200: the message had been stored before."""
        return not self.created


@dataclass(frozen=True, slots=True)
class CancellationOutcome:
    """The final answer to a cancellation request (from camt.029).

    Attributes:
        payments_service_id: the cancellation's id.
        outcome: ``Outcome.ACCEPTED`` or ``Outcome.REJECTED`` (or ``UNKNOWN`` for a final
            code we cannot classify, surfaced rather than guessed).
        status: raw ``sts.conf``.
        tx_statuses: raw ``txCxlSts`` codes.
        reason_codes: ``cxlStsRsnInf[].rsn.cd`` codes.
        reason_texts: ``addtlInf`` texts (nulls dropped).
        return_request_needed: True when rejected and the funds may sit with the
            beneficiary (the reason codes decide; see ``docs/outcomes.md``): they can only
            come back through a pacs.004 return requested from the beneficiary.
        message: a sentence for people.
        resolution: the decoded camt.029.
    """

    payments_service_id: str
    outcome: Outcome
    status: str | None
    tx_statuses: tuple[str, ...]
    reason_codes: tuple[str, ...]
    reason_texts: tuple[str, ...]
    return_request_needed: bool
    message: str
    resolution: Camt029

    @property
    def accepted(self) -> bool:
        """True when the payment was cancelled."""
        return self.outcome is Outcome.ACCEPTED

    @property
    def rejected(self) -> bool:
        """True when the cancellation was refused (see ``return_request_needed``)."""
        return self.outcome is Outcome.REJECTED

    @classmethod
    def from_resolution(
        cls, payments_service_id: str, resolution: Camt029, summary: CancellationResolution
    ) -> CancellationOutcome:
        """Build the outcome from a camt.029 and its classification."""
        needed = summary.needs_return_request
        reasons = ", ".join(summary.reason_codes) or "no reason code"
        if summary.outcome is Outcome.ACCEPTED:
            message = "the cancellation was accepted: the payment will not be executed"
        elif needed:
            message = f"{_RETURN_ADVICE} (reason: {reasons})"
        elif summary.outcome is Outcome.REJECTED:
            message = (
                f"the cancellation was rejected (reason: {reasons}); the funds are not with "
                "the beneficiary, so no return request is needed"
            )
        else:
            codes = ", ".join(summary.codes) or "none"
            message = (
                f"the outcome is unknown: the codes ({codes}) cannot be classified or "
                "contradict each other; ask the service before acting on this payment"
            )
        return cls(
            payments_service_id=payments_service_id,
            outcome=summary.outcome,
            status=summary.status,
            tx_statuses=summary.tx_statuses,
            reason_codes=summary.reason_codes,
            reason_texts=summary.reason_texts,
            return_request_needed=needed,
            message=message,
            resolution=resolution,
        )


def submission_result(
    status: int,
    content_type: str,
    body: bytes,
    message_id: str,
    context: Callable[[], dict[str, Any]],
) -> SubmissionResult:
    """The decoded answer to a POST, or OutcomeUnknownError if it is not one the spec allows.

    The POST was received (a 2xx came back), so whatever is wrong with the answer, the
    message may be stored: the error is "unknown", chained from the InvalidResponseError
    that says what was wrong. ``context()``: the fields every error of the call carries
    (asked for only when there is an error).
    """
    problem: str | None = None
    result: SubmissionResult | None = None
    if status not in (200, 201, 202):
        problem = (
            f"status {status} is neither 201 (stored), 200 (already stored) nor 202 "
            "(accepted, processing)"
        )
    elif "json" not in content_type.lower():
        problem = f"expected a JSON body, got content type {content_type.split(';')[0] or 'none'!r}"
    else:
        try:
            result = decode_submission(body)
        except ValidationError as exc:
            problem = f"unreadable body: {exc.message}"
        else:
            echoed = result.payment_id
            if echoed is not None and echoed != message_id:
                problem = f"the echoed paymentId {echoed[:40]!r} is not the id sent"
    if problem is None and result is not None:
        return result
    fields = context()
    invalid = InvalidResponseError(problem or "invalid answer", status=status, **fields)
    raise OutcomeUnknownError(
        f"the service answered {status} but not as the spec describes ({problem}); "
        "resubmit the same message to learn its outcome",
        message_id=message_id,
        status=status,
        **fields,
    ) from invalid


# Response headers that can hold a secret: a session cookie of the service or a gateway.
HIDDEN_HEADERS: Final = frozenset({"set-cookie", "set-cookie2"})


class ResponseHeaders(Mapping[str, str]):
    """An answer's headers, read-only and case-insensitive, without ``Set-Cookie``.

    A view of the headers the transport received (nothing is copied); ``getall`` gives
    every value of a header that came more than once.
    """

    __slots__ = ("_raw",)

    def __init__(self, raw: Mapping[str, str]) -> None:
        self._raw = raw

    def __getitem__(self, name: str) -> str:
        if name.lower() in HIDDEN_HEADERS:
            raise KeyError(name)
        return self._raw[name]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() not in HIDDEN_HEADERS and name in self._raw

    def __iter__(self) -> Iterator[str]:
        return (name for name in self._raw if name.lower() not in HIDDEN_HEADERS)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def getall(self, name: str) -> list[str]:
        """Every value of ``name``, in the order received (empty if it is absent)."""
        if name.lower() in HIDDEN_HEADERS:
            return []
        getall = getattr(self._raw, "getall", None)
        if getall is not None:
            return list(getall(name, []))
        value = self._raw.get(name)
        return [] if value is None else [value]

    def __repr__(self) -> str:
        return f"ResponseHeaders({dict(self.items())!r})"


class RawResponse:
    """One call's answer as it came: status, headers, body bytes, time and attempts.

    ``client.request()`` returns one; ``client.with_response`` gives one beside each
    result. Nothing in it is a secret: the request's ``Authorization`` and ``sca-token``
    headers are never kept, and the answer's ``Set-Cookie`` is left out of ``headers``.

    Attributes:
        status: the HTTP status of the answer (a 2xx: others raise typed errors).
        headers: the answer's headers (``Date``, ``Retry-After``, rate-limit headers, the
            service's correlation id...), case-insensitive.
        body: the body exactly as received.
        elapsed: seconds the last attempt took, from sending to the whole answer.
        attempts: HTTP attempts the call took (retries counted, a resend after a 401 not).
        request_id: the call's ``X-Request-ID``.
    """

    __slots__ = ("_headers", "attempts", "body", "elapsed", "request_id", "status")

    def __init__(
        self,
        status: int,
        headers: Mapping[str, str],
        body: bytes,
        elapsed: float,
        attempts: int,
        request_id: str,
    ) -> None:
        self.status = status
        self._headers = headers
        self.body = body
        self.elapsed = elapsed
        self.attempts = attempts
        self.request_id = request_id

    @property
    def headers(self) -> ResponseHeaders:
        """The answer's headers, without ``Set-Cookie``."""
        return ResponseHeaders(self._headers)

    def json(self) -> Any:
        """The body decoded from JSON (objects as dicts, numbers as int or float).

        Raises:
            InvalidResponseError: the body is not JSON.
        """
        try:
            return msgspec.json.decode(self.body)
        except msgspec.DecodeError as exc:
            raise InvalidResponseError(
                f"the body is not JSON ({len(self.body)} bytes)",
                status=self.status,
                request_id=self.request_id,
            ) from exc

    def __repr__(self) -> str:
        return (
            f"RawResponse(status={self.status}, body={len(self.body)} bytes, "
            f"elapsed={self.elapsed:.3f}, attempts={self.attempts}, "
            f"request_id={self.request_id!r})"
        )


class Answered(NamedTuple, Generic[T]):
    """A result and the answer it came from: ``result, response = await ...``."""

    result: T
    response: RawResponse
