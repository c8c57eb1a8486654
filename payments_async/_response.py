"""An answer's metadata: status, headers (secrets left out), elapsed time and attempts."""

from __future__ import annotations

from collections.abc import Awaitable, Iterator, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final, Generic, NamedTuple, TypeVar

import msgspec

from ._errors import InvalidResponseError

if TYPE_CHECKING:
    from ._client import PaymentsClient
    from ._config import Timeout
    from ._models import Submission
    from ._transport import Response
    from .iso20022 import Camt029, Camt056, Pacs002, Pacs008

__all__ = ["CAPTURE", "Answered", "RawResponse", "ResponseHeaders", "WithResponse"]

T = TypeVar("T")

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

    @classmethod
    def of(cls, response: Response, attempts: int, request_id: str) -> RawResponse:
        """The transport's answer to a call's last attempt (its headers are not copied)."""
        return cls(
            response.status,
            response.headers,
            response.body,
            response.elapsed,
            attempts,
            request_id,
        )

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


# Set by ``with_response`` for the one call it makes; the client's pipeline appends the
# answer of each successful attempt (the last one is the call's).
CAPTURE: ContextVar[list[RawResponse] | None] = ContextVar("payments_capture", default=None)


async def _answered(call: Awaitable[T]) -> Answered[T]:
    slot: list[RawResponse] = []
    token = CAPTURE.set(slot)
    try:
        result = await call
    finally:
        CAPTURE.reset(token)
    return Answered(result, slot[-1])


class WithResponse:
    """The client's four operations, each returning ``Answered(result, response)``.

    Reached as ``client.with_response``; each method takes what the client's method of
    the same name takes, raises what it raises, and costs nothing more than it.

    ```python
    submission, response = await client.with_response.submit_credit_transfer(transfer)
    print(response.status, response.headers.get("Date"), response.attempts)
    ```
    """

    __slots__ = ("_client",)

    def __init__(self, client: PaymentsClient) -> None:
        self._client = client

    async def submit_credit_transfer(
        self, transfer: Pacs008, *, timeout: float | Timeout | None = None
    ) -> Answered[Submission]:
        """``PaymentsClient.submit_credit_transfer`` and its answer."""
        return await _answered(self._client.submit_credit_transfer(transfer, timeout=timeout))

    async def request_cancellation(
        self, cancellation: Camt056, *, timeout: float | Timeout | None = None
    ) -> Answered[Submission]:
        """``PaymentsClient.request_cancellation`` and its answer."""
        return await _answered(self._client.request_cancellation(cancellation, timeout=timeout))

    async def get_credit_transfer_status(
        self, payments_service_id: str, *, timeout: float | Timeout | None = None
    ) -> Answered[Pacs002]:
        """``PaymentsClient.get_credit_transfer_status`` and its answer."""
        return await _answered(
            self._client.get_credit_transfer_status(payments_service_id, timeout=timeout)
        )

    async def get_cancellation_outcome(
        self, payments_service_id: str, *, timeout: float | Timeout | None = None
    ) -> Answered[Camt029]:
        """``PaymentsClient.get_cancellation_outcome`` and its answer."""
        return await _answered(
            self._client.get_cancellation_outcome(payments_service_id, timeout=timeout)
        )
