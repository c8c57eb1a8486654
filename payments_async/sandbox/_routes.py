"""The service routes: POST pacs.008, camt.056 and pacs.028, GET pacs.002 and camt.029."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TypeVar

from aiohttp import web

from .._errors import ValidationError
from ..iso20022 import (
    Camt056,
    Pacs008,
    Pacs028,
    build_cancellation,
    build_credit_transfer,
    build_status_request,
    decode_camt056,
    decode_pacs008,
    decode_pacs028,
    encode,
    find_problems,
    recall_window_problems,
    target2_today,
)
from ._auth import authorize, check_sca
from ._bodies import BODIES_KEY
from ._lifecycle import CancellationRecord, PaymentRecord
from ._messages import cancellation_outcome_body, payment_status_body, submission_body
from ._notify import NOTIFIER_KEY
from ._responses import ErrorCode, error_response, json_response, problems_response
from ._state import SandboxState, state_of
from ._strict import strict_problems

__all__ = [
    "get_camt029",
    "get_pacs002",
    "post_camt056",
    "post_pacs008",
    "post_pacs028",
    "prepare_checks",
]


def prepare_checks() -> None:
    """Read the message types the body checks walk, once per process, before serving.

    The strict reading and ``find_problems`` build their tables from the structs' type
    information on first use; built inside the first request, that work would hold the
    server's loop, and every request arriving meanwhile would then be served at once.
    """
    transfer = build_credit_transfer(
        debtor_name="Prepare",
        debtor_iban="DE89370400440532013000",
        debtor_agent_id="COBADEFFXXX",
        creditor_name="Prepare",
        creditor_iban="FR1420041010050500013M02606",
        creditor_agent_id="BNPAFRPPXXX",
        amount="1.00",
    )
    cancellation = build_cancellation(
        original_end_to_end_id="PREPARE",
        amount="1.00",
        creditor_agent_bic="BNPAFRPPXXX",
        creditor_iban="FR1420041010050500013M02606",
        assigner_bic="COBADEFFXXX",
        assignee_bic="BNPAFRPPXXX",
    )
    status_request = build_status_request(cancellation)
    for msg in (transfer, cancellation, status_request):
        strict_problems(encode(msg), msg)
        find_problems(msg)


def _other_client(state: SandboxState) -> web.Response:
    if state.config.other_client_status == 403:
        return error_response(403, ErrorCode.FORBIDDEN, "This message belongs to another client")
    return _not_found()


def _not_found() -> web.Response:
    return error_response(404, ErrorCode.NOT_FOUND, "No message with this paymentsServiceId")


def _body_hash(msg: object) -> str:
    # Only counted (stats: replays_changed_body), never used to refuse: the canonical
    # re-encoding, so other whitespace or key order is not a change.
    return hashlib.sha256(encode(msg)).hexdigest()


M = TypeVar("M", Pacs008, Camt056, Pacs028)


async def _signed_message(
    request: web.Request,
    state: SandboxState,
    decode: Callable[[bytes], M],
    *,
    accept_required: bool,
) -> tuple[str, M] | web.Response:
    """Check token and SCA over the raw body, then decode and check it.

    The body must pass the sandbox's strict reading (``_strict``) and ``validate()``'s
    rules, and a camt.056 that gives the original settlement date must be within its
    recall window on the sandbox's date (SCT rulebook 2025, Recall); every problem
    is listed. Returns the caller's client id and the message, or the refusal (400/401).
    """
    client_id = authorize(request, state, post=True, accept_required=accept_required)
    if isinstance(client_id, web.Response):
        return client_id
    body = await request.read()  # the raw bytes: hd is checked against exactly these
    refused = check_sca(request, state, client_id, body)
    if refused is not None:
        return refused
    try:
        msg = decode(body)
    except ValidationError as exc:
        return problems_response(exc.problems, summary=exc.message)
    # the rules in force on the sandbox's own date: a clock set before a rule's cut-over
    # (the EPC address rule) is how a test opts out of it
    rules_on = datetime.fromtimestamp(state.now(), UTC).date()
    problems = strict_problems(body, msg) + find_problems(msg, rules_on=rules_on)
    if isinstance(msg, Camt056):
        now = datetime.fromtimestamp(state.now(), UTC)
        problems += recall_window_problems(msg, target2_today(now))
    if problems:
        return problems_response(problems, summary="invalid message")
    return client_id, msg


async def post_pacs008(request: web.Request) -> web.Response:
    state = state_of(request)
    signed = await _signed_message(request, state, decode_pacs008, accept_required=False)
    if isinstance(signed, web.Response):
        return signed
    client_id, msg = signed
    record, created = state.submit_payment(client_id, msg, _body_hash(msg))
    if created:
        request.app[NOTIFIER_KEY].stored(record, str(request.url.origin()))
    out = submission_body(
        record.payments_service_id,
        record.msg_id,
        record.created_at,
        wrap=state.config.wrap_payment_result,
    )
    return json_response(201 if created else 200, out)


async def post_camt056(request: web.Request) -> web.Response:
    state = state_of(request)
    signed = await _signed_message(request, state, decode_camt056, accept_required=True)
    if isinstance(signed, web.Response):
        return signed
    client_id, msg = signed
    record, created = state.submit_cancellation(client_id, msg, _body_hash(msg))
    if created:
        request.app[NOTIFIER_KEY].stored(record, str(request.url.origin()))
    out = submission_body(
        record.payments_service_id, record.assignment_id, record.created_at, wrap=True
    )
    return json_response(201 if created else 200, out)


async def post_pacs028(request: web.Request) -> web.Response:
    state = state_of(request)
    signed = await _signed_message(request, state, decode_pacs028, accept_required=True)
    if isinstance(signed, web.Response):
        return signed
    client_id, msg = signed
    stored = state.submit_status_request(client_id, msg, _body_hash(msg))
    if isinstance(stored, list):
        return problems_response(stored, summary="invalid message")
    record, created, answered = stored
    if answered is not None:  # the recall's outcome is readable now: notified now
        request.app[NOTIFIER_KEY].stored(answered, str(request.url.origin()))
    out = submission_body(record.payments_service_id, record.msg_id, record.created_at, wrap=True)
    return json_response(201 if created else 200, out)


R = TypeVar("R", PaymentRecord, CancellationRecord)


def _own_record(
    request: web.Request, records: Mapping[str, R], *, accept_required: bool
) -> R | web.Response:
    """The caller's record named in the path, or the refusal (401/400, 404, 403/404)."""
    state = state_of(request)
    client_id = authorize(request, state, post=False, accept_required=accept_required)
    if isinstance(client_id, web.Response):
        return client_id
    record = records.get(request.match_info["payments_service_id"])
    if record is None:
        return _not_found()
    if record.client_id != client_id:
        return _other_client(state)
    return record


async def get_pacs002(request: web.Request) -> web.Response:
    state = state_of(request)
    record = _own_record(request, state.payments, accept_required=False)
    if isinstance(record, web.Response):
        return record
    status = record.status_at(state.now())
    if record.cancel_effective_at is not None and status.final:
        at = record.cancel_effective_at
    else:
        at = record.processed_at if status.final else record.created_at
    cache = request.app[BODIES_KEY]
    body = cache.get(record.payments_service_id, status, at)
    if body is None:
        body = payment_status_body(record, status, at)
        cache.put(record.payments_service_id, status, at, body)
    return json_response(200, body)


async def get_camt029(request: web.Request) -> web.Response:
    state = state_of(request)
    record = _own_record(request, state.cancellations, accept_required=True)
    if isinstance(record, web.Response):
        return record
    status = record.status_at(state.now())
    at = record.settles_at if status.final else record.created_at
    cache = request.app[BODIES_KEY]
    body = cache.get(record.payments_service_id, status, at)
    if body is None:
        body = cancellation_outcome_body(record, status, at)
        cache.put(record.payments_service_id, status, at, body)
    return json_response(200, body)
