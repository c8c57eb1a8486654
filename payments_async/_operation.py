"""One call's state across its attempts, shared by the operations and ``request()``."""

from __future__ import annotations

import uuid
from typing import Any

import msgspec

from ._config import Timeout
from ._errors import OutcomeUnknownError, PaymentsError
from ._transport import Response

__all__ = ["Operation", "new_request_id"]


def new_request_id() -> str:
    """A fresh ``X-Request-ID``: a random UUID in 32 hex digits (unique, not a secret)."""
    return uuid.uuid4().hex


class Operation(msgspec.Struct):
    """One call's state across its attempts: the same request id and body bytes."""

    method: str
    path: str
    timeouts: Timeout
    body: bytes | None = None
    payment_id: str | None = None
    # X-Request-ID: names the call in logs and errors (unique, not a secret).
    request_id: str = msgspec.field(default_factory=new_request_id)
    attempts: int = 0
    sends: int = 0  # HTTP requests sent so far, resends after a 401 included
    maybe_stored: bool = False  # True once an attempt may have reached the service
    elapsed: float = 0.0  # how long the last attempt took, for the retry hook
    sca: bool = True  # sign an SCA token over the body (every body of the four operations)
    capture: bool = False  # keep the 2xx answer in ``response`` (``with_response``)
    response: Response | None = None

    def context(self) -> dict[str, Any]:
        """The fields every error of this call carries."""
        return {
            "method": self.method,
            "path": self.path,
            "request_id": self.request_id,
            "attempt": self.attempts,
        }

    def outcome_unknown(
        self, exc: PaymentsError, message_id: str, advice: str
    ) -> OutcomeUnknownError:
        """The error for ``exc`` ending a call an earlier attempt of which may be stored."""
        return OutcomeUnknownError(
            f"outcome unknown after {self.attempts} HTTP attempt(s): {exc.message}; {advice}",
            message_id=message_id,
            status=exc.status,
            **self.context(),
        )
