"""Header, token and SCA checks of the four API routes over real HTTP."""

from __future__ import annotations

import aiohttp
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

from payments_async._constants import CAMT029_PATH, PACS002_PATH, PACS008_PATH, SANDBOX_SCA_TOKEN
from payments_async._jwt import JwtSigner
from payments_async.iso20022 import encode
from payments_async.testing import ManualClock, SandboxHandle
from tests.factories import credit_transfer
from tests.support.sandbox import RawClient, predefined_client

pytest_plugins = ["tests.support.sandbox_fixtures"]


async def test_each_missing_post_header_is_named(client: RawClient) -> None:
    body = encode(credit_transfer())
    for header in ("X-Service-Client-Id", "Content-Type", "sca-token"):
        reply = await client.post(PACS008_PATH, body, omit=(header,))
        assert (reply.status, reply.codes) == (400, ["HEADER_MISSING"]), header
        assert header in reply.json["errors"][0]["message"]


async def test_missing_or_non_bearer_authorization_is_401(client: RawClient) -> None:
    body = encode(credit_transfer())
    missing = await client.post(PACS008_PATH, body, omit=("Authorization",))
    assert (missing.status, missing.codes) == (401, ["TOKEN_MISSING"])
    basic = await client.post(PACS008_PATH, body, headers={"Authorization": "Basic eDp5"})
    assert (basic.status, basic.codes) == (401, ["TOKEN_MISSING"])


async def test_unknown_token_is_401(client: RawClient) -> None:
    reply = await client.post(
        PACS008_PATH, encode(credit_transfer()), headers={"Authorization": "Bearer not-a-token"}
    )
    assert (reply.status, reply.codes) == (401, ["TOKEN_INVALID"])


async def test_wrong_client_id_header_is_401(client: RawClient) -> None:
    reply = await client.post(
        PACS008_PATH, encode(credit_transfer()), headers={"X-Service-Client-Id": "someone-else"}
    )
    assert (reply.status, reply.codes) == (401, ["CLIENT_ID_MISMATCH"])


async def test_expired_access_token_is_401(
    client: RawClient, clock: ManualClock, sandbox: SandboxHandle
) -> None:
    await client.ensure_token()
    ok = await client.submit_payment(credit_transfer())
    assert ok.status == 201
    clock.advance(sandbox.server.config.token_lifetime + 1)
    reply = await client.submit_payment(credit_transfer())
    assert (reply.status, reply.codes) == (401, ["TOKEN_EXPIRED"])


async def test_revoked_tokens_are_401(client: RawClient, sandbox: SandboxHandle) -> None:
    await client.ensure_token()
    revoked = await client.request("POST", "/_sandbox/revoke-tokens")
    assert revoked.json == {"revoked": 1}
    reply = await client.submit_payment(credit_transfer())
    assert (reply.status, reply.codes) == (401, ["TOKEN_INVALID"])


async def test_content_type_and_accept_values(client: RawClient) -> None:
    body = encode(credit_transfer())
    text = await client.post(PACS008_PATH, body, headers={"Content-Type": "text/plain"})
    assert (text.status, text.codes) == (415, ["UNSUPPORTED_MEDIA_TYPE"])
    xml = await client.post(PACS008_PATH, body, headers={"Accept": "application/xml"})
    assert (xml.status, xml.codes) == (406, ["NOT_ACCEPTABLE"])
    charset = await client.post(
        PACS008_PATH, body, headers={"Content-Type": "application/json; charset=utf-8"}
    )
    assert charset.status == 201


async def test_camt_routes_require_accept(client: RawClient) -> None:
    headers = await client.api_headers()
    del headers["Accept"]
    reply = await client.request(
        "GET", f"{CAMT029_PATH}/cxl-x", headers=headers, skip_auto_headers=("Accept",)
    )
    assert (reply.status, reply.codes) == (400, ["HEADER_MISSING"])
    # pacs.002 lists no Accept in the spec: absent is fine (404 for the unknown id).
    pacs = await client.request(
        "GET", f"{PACS002_PATH}/pmt-x", headers=headers, skip_auto_headers=("Accept",)
    )
    assert pacs.status == 404


async def test_sca_signed_by_another_key_is_401(
    client: RawClient, rsa_private_key: RSAPrivateKey
) -> None:
    body = encode(credit_transfer())
    assert client.signer is not None
    forged = JwtSigner(rsa_private_key, key_id=client.signer.key_id, issuer=client.signer.issuer)
    reply = await client.post(PACS008_PATH, body, headers={"sca-token": forged.sca_token(body)})
    assert (reply.status, reply.codes) == (401, ["SCA_TOKEN_INVALID"])
    assert "signature" in reply.json["errors"][0]["message"]


async def test_sca_with_wrong_kid_or_iss_is_401(client: RawClient, sandbox: SandboxHandle) -> None:
    assert sandbox.private_key is not None
    assert client.signer is not None
    body = encode(credit_transfer())
    for signer in (
        JwtSigner(sandbox.private_key, key_id="other-kid", issuer=client.signer.issuer),
        JwtSigner(sandbox.private_key, key_id=client.signer.key_id, issuer="other-iss"),
    ):
        reply = await client.post(PACS008_PATH, body, headers={"sca-token": signer.sca_token(body)})
        assert (reply.status, reply.codes) == (401, ["SCA_TOKEN_INVALID"])


async def test_expired_sca_token_is_401(client: RawClient, clock: ManualClock) -> None:
    body = encode(credit_transfer())
    assert client.signer is not None
    old = client.signer.sca_token(body, now=clock() - 600, lifetime=180)
    reply = await client.post(PACS008_PATH, body, headers={"sca-token": old})
    assert (reply.status, reply.codes) == (401, ["SCA_TOKEN_EXPIRED"])


async def test_one_changed_byte_breaks_hd(client: RawClient, sandbox: SandboxHandle) -> None:
    body = encode(credit_transfer(amount="12.34"))
    token = client.sca(body)
    changed = body.replace(b"12.34", b"12.35")
    assert len(changed) == len(body)
    assert sum(a != b for a, b in zip(body, changed, strict=True)) == 1
    reply = await client.post(PACS008_PATH, changed, headers={"sca-token": token})
    assert (reply.status, reply.codes) == (401, ["SCA_BODY_HASH_MISMATCH"])
    assert sandbox.server.stats()["payments_stored"] == 0


async def test_reserialised_body_breaks_hd(client: RawClient) -> None:
    # Same content, other whitespace: the hash is of the raw bytes, so it fails.
    body = encode(credit_transfer())
    token = client.sca(body)
    pretty = body.replace(b'","', b'", "')
    assert pretty != body
    reply = await client.post(PACS008_PATH, pretty, headers={"sca-token": token})
    assert reply.codes == ["SCA_BODY_HASH_MISMATCH"]


async def test_replayed_nonce_in_a_new_token_is_401(client: RawClient) -> None:
    first = encode(credit_transfer())
    token = client.sca(first)
    assert (await client.post(PACS008_PATH, first, headers={"sca-token": token})).status == 201
    # Another message carrying the same nonce (and jti): a replay, refused.
    import base64
    import json

    _, claims_b64, _ = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(claims_b64 + "=="))
    second = encode(credit_transfer())
    assert client.signer is not None
    fresh = client.signer.sca_token(second)
    _, fresh_claims_b64, _ = fresh.split(".")
    fresh_claims = json.loads(base64.urlsafe_b64decode(fresh_claims_b64 + "=="))
    assert fresh_claims["nonce"] != claims["nonce"]
    reused = _resign(client.signer, {**fresh_claims, "nonce": claims["nonce"]})
    reply = await client.post(PACS008_PATH, second, headers={"sca-token": reused})
    assert (reply.status, reply.codes) == (401, ["SCA_TOKEN_REPLAYED"])
    assert "nonce" in reply.json["errors"][0]["message"]


def _resign(signer: JwtSigner, claims: dict[str, object]) -> str:
    """Sign arbitrary claims with the signer's key, kid and header (to forge a replay)."""
    import base64
    import json

    def b64(data: bytes) -> bytes:
        return base64.urlsafe_b64encode(data).rstrip(b"=")

    header = b64(json.dumps({"typ": "JWT", "alg": "RS256", "kid": signer.key_id}).encode())
    payload = b64(json.dumps(claims).encode())
    signing_input = header + b"." + payload
    signature = signer.signer.sign(signing_input)
    assert isinstance(signature, bytes)
    return (signing_input + b"." + b64(signature)).decode()


async def test_identical_retransmission_is_refused_as_a_replay(
    client: RawClient, sandbox: SandboxHandle
) -> None:
    # SCA tokens are single use (spec: jti "unique id", nonce "unique message id"): the
    # very same token again is a replay, even with the very same bytes.
    body = encode(credit_transfer())
    headers = await client.api_headers(body=body)
    first = await client.request("POST", PACS008_PATH, headers=headers, data=body)
    again = await client.request("POST", PACS008_PATH, headers=headers, data=body)
    assert first.status == 201
    assert (again.status, again.codes) == (401, ["SCA_TOKEN_REPLAYED"])
    # The same bytes with a fresh token are the idempotent resend: 200, same id.
    fresh = await client.post(PACS008_PATH, body)
    assert fresh.status == 200
    assert fresh.data["paymentsServiceId"] == first.data["paymentsServiceId"]
    assert sandbox.server.stats()["payments_stored"] == 1


async def test_predefined_sca_token_only_for_the_predefined_client(
    client: RawClient, http: aiohttp.ClientSession, sandbox: SandboxHandle
) -> None:
    predefined = predefined_client(http, sandbox)
    ok = await predefined.submit_payment(credit_transfer())
    assert ok.status == 201
    # The predefined SCA token skips the hd check: same token for another body works.
    ok2 = await predefined.submit_payment(credit_transfer())
    assert ok2.status == 201
    refused = await client.post(
        PACS008_PATH, encode(credit_transfer()), headers={"sca-token": SANDBOX_SCA_TOKEN}
    )
    assert (refused.status, refused.codes) == (401, ["SCA_TOKEN_INVALID"])


async def test_invalid_body_lists_every_problem_with_its_path(client: RawClient) -> None:
    import json

    doc = json.loads(encode(credit_transfer()))
    tx = doc["fitoFICstmrCdtTrf"]["cdtTrfTxInf"][0]
    tx["cdtrAcct"]["id"]["othr"]["id"] = "DE00370400440532013000"  # bad mod-97
    tx["pmtId"]["endToEndId"] = "E" * 36  # Max35Text
    body = json.dumps(doc).encode()
    reply = await client.post(PACS008_PATH, body)
    assert reply.status == 400
    assert set(reply.codes) == {"BODY_INVALID"}
    paths = [e["description"] for e in reply.json["errors"]]
    assert len(paths) >= 2
    assert any("cdtrAcct" in p for p in paths)
    assert any("endToEndId" in p for p in paths)


async def test_malformed_json_is_400(client: RawClient) -> None:
    reply = await client.post(PACS008_PATH, b'{"fitoFICstmrCdtTrf": ')
    assert (reply.status, reply.codes) == (400, ["BODY_INVALID"])


async def test_unknown_route_gets_the_error_envelope(client: RawClient) -> None:
    reply = await client.request("GET", "/payments/pacs009/v1")
    assert (reply.status, reply.codes) == (404, ["NOT_FOUND"])
    wrong_method = await client.request("GET", PACS008_PATH)
    assert (wrong_method.status, wrong_method.codes) == (405, ["METHOD_NOT_ALLOWED"])
    assert wrong_method.headers["Allow"] == "POST"  # RFC 9110, 15.5.6
