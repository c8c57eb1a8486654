"""``PaymentsClient.request``: any operation of the service through the client's pipeline."""

from __future__ import annotations

import hashlib
import time
from typing import TYPE_CHECKING, Any, Final

import msgspec

from ._config import Timeout, call_timeout
from ._constants import TOKEN_PATH
from ._errors import ConfigurationError, PaymentsError, ValidationError
from ._instrument import Call
from ._operation import Operation
from ._profile import check_request_path
from ._response import RawResponse

if TYPE_CHECKING:
    from ._client import PaymentsClient

__all__ = ["METHODS", "request"]

METHODS: Final = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})
"""The methods ``request()`` sends; only POST, PUT and PATCH carry a body."""
_BODY_METHODS: Final = frozenset({"POST", "PUT", "PATCH"})
# Money as a JSON number, never a string, as the four operations write it.
_ENCODER: Final = msgspec.json.Encoder(decimal_format="number")


async def request(
    self: PaymentsClient,
    method: str,
    path: str,
    *,
    json: Any = None,
    content: bytes | None = None,
    sca: bool = True,
    idempotency_id: str | None = None,
    timeout: float | Timeout | None = None,
) -> RawResponse:
    """Call an operation of the service the client does not wrap (a pacs.004 return...).

    The request goes through the same pipeline as the four operations: the access token,
    the client-id and request-id headers, an SCA token over the exact body bytes, the
    transport, its limits and deadlines, the typed errors, hooks, logging and telemetry
    (the operation is named ``request``). The body is encoded once; every attempt sends
    those bytes.

    A request without a body (GET, DELETE) is retried as the reads are. One with a body
    is retried only when ``idempotency_id`` names the id by which the service recognises
    a resent body (a pacs.004's ``grpHdr.msgId``): the retries resend the same bytes, and
    an answer never seen raises ``OutcomeUnknownError``, as for the four operations.
    Without it the request is sent once (a 401 is answered by one resend with a new
    token: the service refused it before acting); if it may have arrived but no answer
    said so, ``OutcomeUnknownError`` says that.

    ```python
    response = await client.request(
        "POST", "/payments/pacs004/v09", json=pacs004, idempotency_id=msg_id
    )
    print(response.status, response.json()["paymentsServiceId"])
    ```

    Args:
        method: GET, POST, PUT, PATCH or DELETE.
        path: the path under the base URL, ``/payments/...``: letters, digits and
            ``/ _ . ~ -``; no scheme, host, query or ``..``.
        json: the body as an object msgspec encodes (a dict, a ``msgspec.Struct``;
            ``Decimal`` as a JSON number). None: no body, unless ``content`` is given.
        content: the body as bytes, sent exactly (``Content-Type: application/json``).
        sca: sign an SCA token over the body (``sca-token``), as every POST of the
            service needs; requests without a body never carry one.
        idempotency_id: the id the service deduplicates this body by; with it, the
            request is retried and the SCA token's ``payment_id`` claim is this id.
        timeout: this call's ``Timeout``, or a number of seconds for its ``total``.

    Returns:
        The 2xx answer: status, headers, body bytes, ``json()``, elapsed time, attempts.

    Raises:
        ValidationError: a method, path or body this method refuses; nothing was sent.
        ApiError: the service answered with an error (``NotFoundError`` for an operation
            it does not have, with the codes of its error envelope).
        OutcomeUnknownError: a request with a body may have been stored, no answer said so.
        TransportError: no answer (a request without a body, or not sent at all).
        ConfigurationError: ``timeout`` is neither a positive number nor a Timeout.
    """
    if not isinstance(method, str) or method.upper() not in METHODS:
        raise ValidationError.single("method", f"method must be one of {sorted(METHODS)}")
    method = method.upper()
    try:
        check_request_path(path)
    except ConfigurationError as exc:
        raise ValidationError.single("path", exc.message) from None
    if path == TOKEN_PATH:
        raise ValidationError.single("path", "the token endpoint is the client's own business")
    body = _body(method, json, content)
    if idempotency_id is not None and (not isinstance(idempotency_id, str) or not idempotency_id):
        raise ValidationError.single("idempotency_id", "must be a non-empty string")
    if idempotency_id is not None and body is None:
        raise ValidationError.single("idempotency_id", "only a request with a body takes one")
    timeouts = call_timeout(self._timeout, timeout)
    deadline = time.monotonic() + timeouts.total
    op = Operation(
        method,
        path,
        timeouts,
        body,
        payment_id=idempotency_id,
        digest=hashlib.sha256(body).digest() if body is not None else None,
        sca=bool(sca),
    )
    call = None
    if self._instruments.hears_operations:
        attributes = {} if idempotency_id is None else {"payments.message_id": idempotency_id}
        call = Call("request", "read" if body is None else "submit", **attributes)
    with self._instruments.operation(call):
        try:
            if body is None or idempotency_id is not None:
                try:
                    resp = await self._attempt(op, deadline)
                except Exception as exc:
                    resp = await self._retries(op, deadline, exc)
            else:
                resp = await self._attempt(op, deadline)
        except PaymentsError as exc:
            if body is None or not op.maybe_stored:
                raise
            advice = (
                "send the same body with the same idempotency id to learn it"
                if idempotency_id is not None
                else "it was not retried: pass idempotency_id to have it retried safely"
            )
            raise op.outcome_unknown(exc, idempotency_id or "", advice) from exc
        if call is not None:
            call.succeeded(
                str(resp.status),
                **{"payments.attempts": op.attempts, "payments.request_id": op.request_id},
            )
        return RawResponse.of(resp, op.attempts, op.request_id)


def _body(method: str, json: Any, content: bytes | None) -> bytes | None:
    """The exact bytes to send, or None."""
    if json is not None and content is not None:
        raise ValidationError.single("$", "pass json or content, not both")
    if content is not None and not isinstance(content, bytes):
        raise ValidationError.single("$", f"content must be bytes, got {type(content).__name__}")
    if json is not None:
        try:
            content = _ENCODER.encode(json)
        except (TypeError, msgspec.EncodeError) as exc:
            raise ValidationError.single("$", f"json cannot be encoded: {exc}") from None
    if content is not None and method not in _BODY_METHODS:
        raise ValidationError.single("$", f"a {method} request carries no body")
    return content
