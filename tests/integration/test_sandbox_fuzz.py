"""A sandbox as strict as the spec is also one that never answers 500 to bad input.

Hypothesis mutates valid messages (a leaf replaced by any JSON value, a key dropped, a
byte that is not UTF-8 inside a string, an integer beyond a float) and sends each with a
valid access token and an SCA token over those exact bytes, so the body gets past
authentication to the decoder and the checks behind it; token requests and status reads
get arbitrary forms and ids. Every answer must be below 500 and, when it is an error, the
JSON envelope. The control routes are left out: they can ask for 5xx answers on purpose.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from payments_async._constants import (
    CAMT029_PATH,
    CAMT056_PATH,
    PACS002_PATH,
    PACS008_PATH,
    TOKEN_PATH,
)
from payments_async.iso20022 import encode
from tests.factories import cancellation, credit_transfer
from tests.support.sandbox import RawClient, basic

pytest_plugins = ["tests.support.sandbox_fixtures"]

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=8,
)
_DOCS = {
    PACS008_PATH: msgspec.json.decode(encode(credit_transfer())),
    CAMT056_PATH: msgspec.json.decode(encode(cancellation("E2E-FUZZ-1"))),
}


def _paths(node: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in a decoded document (objects' keys and lists' indexes), leaves last."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*at, key)
            yield from _paths(value, (*at, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield (*at, i)
            yield from _paths(value, (*at, i))


def _mutated(data: st.DataObject, doc: Any) -> bytes:
    doc = msgspec.json.decode(msgspec.json.encode(doc))  # a copy
    places = list(_paths(doc))
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        place = data.draw(st.sampled_from(places), label="place")
        parent = doc
        try:
            for step in place[:-1]:
                parent = parent[step]
            kind = data.draw(st.sampled_from(["alike", "replace", "drop"]), label="kind")
            old = parent[place[-1]]
            if kind == "drop" and isinstance(parent, dict):
                parent.pop(place[-1], None)
            elif kind == "alike" and isinstance(old, str):  # past the decoder, into the rules
                parent[place[-1]] = data.draw(st.text(max_size=40), label="text")
            elif kind == "alike" and isinstance(old, int | float) and not isinstance(old, bool):
                parent[place[-1]] = data.draw(st.integers() | st.floats(), label="number")
            else:
                parent[place[-1]] = data.draw(_json, label="value")
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed or replaced this place
    body = msgspec.json.encode(doc)
    tweak = data.draw(st.sampled_from(["none", "not-utf8", "huge-int", "bytes"]), label="tweak")
    if tweak == "not-utf8":
        parts = body.split(b'"')
        if len(parts) > 1:  # a string to put it in
            k = data.draw(st.integers(1, len(parts) - 1), label="quote")
            parts[k] = b"\xff" + parts[k]
        body = b'"'.join(parts) if len(parts) > 1 else b"\xff" + body
    elif tweak == "huge-int":
        body = body.replace(b"{", b'{"n": 1' + b"0" * 400 + b", ", 1)
    elif tweak == "bytes":
        body = data.draw(st.binary(max_size=200), label="bytes")
    return body


def _check(reply: Any, what: object) -> None:
    assert reply.status < 500, (what, reply.status, reply.body[:300])
    if reply.status >= 400:
        assert isinstance(reply.json, dict), (what, reply.body[:300])
        assert reply.json.get("errors"), (what, reply.body[:300])


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
async def test_a_mutated_message_is_refused_or_stored_never_a_500(
    data: st.DataObject, client: RawClient
) -> None:
    path = data.draw(st.sampled_from(sorted(_DOCS)), label="path")
    body = _mutated(data, _DOCS[path])
    reply = await client.post(path, body)
    _check(reply, body)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    form=st.dictionaries(
        st.sampled_from(["grant_type", "assertion", "scope", "client_id", "x"]),
        st.text(max_size=60),
        max_size=4,
    )
    | st.binary(max_size=200),
    psid=st.text(min_size=1, max_size=60),
)
async def test_token_forms_and_status_ids_are_refused_never_a_500(
    client: RawClient, form: dict[str, str] | bytes, psid: str
) -> None:
    reply = await client.request(
        "POST",
        TOKEN_PATH,
        headers={
            "Authorization": basic(client.client_id, client.secret),
            "Content-Type": "application/x-www-form-urlencoded",
        },
        data=form,
    )
    _check(reply, form)
    headers = await client.api_headers()
    for path in (PACS002_PATH, CAMT029_PATH):
        reply = await client.request("GET", f"{path}/{quote(psid, safe='')}", headers=headers)
        _check(reply, psid)
