"""Both JWTs carry exactly the spec's headers and claims; the verifiers refuse bad tokens."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from typing import Any

import jwt as pyjwt
import pytest
from cryptography.hazmat.primitives.asymmetric.padding import PKCS1v15
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from cryptography.hazmat.primitives.hashes import SHA256

from payments_async._errors import ConfigurationError
from payments_async._jwt import (
    JwtSigner,
    JwtVerificationError,
    RegisteredKey,
    body_hash,
    verify_assertion,
    verify_sca_token,
)
from payments_async._keys import public_key_pem

KID = "kid-1"
ISS = "issuer-1"
CLIENT = "client-1"
NOW = 1_800_000_000.0
BODY = b'{"fitoFIPmtCxlReq":{"assgnmt":{"id":"A-1"}},"amount":12.50}'


@pytest.fixture(scope="module")
def signer(rsa_key: RSAPrivateKey) -> JwtSigner:
    return JwtSigner(rsa_key, key_id=KID, issuer=ISS)


@pytest.fixture(scope="module")
def keys(rsa_key: RSAPrivateKey) -> dict[str, RegisteredKey]:
    return {KID: RegisteredKey(KID, ISS, rsa_key.public_key())}


def _b64url_decode(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def _parts(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    header, payload, _sig = token.split(".")
    return json.loads(_b64url_decode(header)), json.loads(_b64url_decode(payload))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _forge(header: dict[str, Any], claims: dict[str, Any], key: RSAPrivateKey | None) -> str:
    """Build a compact JWS by hand: RS256-signed with ``key``, or unsigned when None."""
    signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
    if key is None:
        return signing_input + "."
    sig = key.sign(signing_input.encode(), PKCS1v15(), SHA256())
    return f"{signing_input}.{_b64url(sig)}"


def _sca_claims(**over: Any) -> dict[str, Any]:
    claims: dict[str, Any] = {
        "iss": ISS,
        "iat": int(NOW),
        "exp": int(NOW) + 180,
        "jti": "j-1",
        "alg": "SHA256",
        "hd": body_hash(BODY),
        "nonce": "n-1",
    }
    claims.update(over)
    return {k: v for k, v in claims.items() if v is not None}


HEADER = {"typ": "JWT", "alg": "RS256", "kid": KID}


# --- what the signer produces ------------------------------------------------------------


def test_assertion_header_and_claims_follow_the_spec_table(signer: JwtSigner) -> None:
    token = signer.assertion(CLIENT, now=NOW)
    header, claims = _parts(token)
    assert header == {"typ": "JWT", "alg": "RS256", "kid": KID}
    assert set(claims) == {"sub", "nbf", "iss", "exp", "iat", "jti"}
    assert claims["sub"] == CLIENT
    assert claims["iss"] == ISS
    assert claims["iat"] == claims["nbf"] == int(NOW)
    assert claims["exp"] == int(NOW) + 300
    assert re.fullmatch(r"[0-9a-f]{32}", claims["jti"])


def test_sca_header_and_claims_follow_the_spec_table(signer: JwtSigner) -> None:
    header, claims = _parts(signer.sca_token(BODY, now=NOW))
    assert header == {"typ": "JWT", "alg": "RS256", "kid": KID}
    assert set(claims) == {"iss", "exp", "iat", "jti", "alg", "hd", "nonce", "nbf"}
    assert claims["iss"] == ISS
    assert claims["alg"] == "SHA256"
    assert claims["iat"] == claims["nbf"] == int(NOW)
    assert claims["exp"] == int(NOW) + 180  # SCA lifetime: 180 s
    assert claims["nonce"]
    assert claims["jti"]
    assert claims["nonce"] != claims["jti"]
    _, with_id = _parts(signer.sca_token(BODY, payment_id="PAY-9", now=NOW))
    assert with_id["payment_id"] == "PAY-9"


def test_kid_and_iss_identical_in_both_tokens(signer: JwtSigner) -> None:
    a_header, a_claims = _parts(signer.assertion(CLIENT))
    s_header, s_claims = _parts(signer.sca_token(BODY))
    assert a_header["kid"] == s_header["kid"] == KID
    assert a_claims["iss"] == s_claims["iss"] == ISS


def test_hd_is_standard_base64_of_sha256_of_the_exact_body(signer: JwtSigner) -> None:
    _, claims = _parts(signer.sca_token(BODY))
    assert claims["hd"] == base64.b64encode(hashlib.sha256(BODY).digest()).decode()
    _, other = _parts(signer.sca_token(BODY + b" "))
    assert other["hd"] != claims["hd"]


def test_body_hash_uses_the_standard_alphabet_with_padding() -> None:
    # Find a body whose digest needs '+' or '/', where the two alphabets differ.
    body = next(
        b
        for b in (str(i).encode() for i in range(1000))
        if set(base64.b64encode(hashlib.sha256(b).digest())) & set(b"+/")
    )
    value = body_hash(body)
    assert value == base64.b64encode(hashlib.sha256(body).digest()).decode()
    assert value != base64.urlsafe_b64encode(hashlib.sha256(body).digest()).decode()
    assert len(value) == 44
    assert value.endswith("=")


def test_fresh_jti_and_nonce_on_every_token(signer: JwtSigner) -> None:
    sca = [_parts(signer.sca_token(BODY, now=NOW))[1] for _ in range(20)]
    assertions = [_parts(signer.assertion(CLIENT, now=NOW))[1] for _ in range(20)]
    assert len({c["jti"] for c in sca}) == 20
    assert len({c["nonce"] for c in sca}) == 20
    assert len({c["jti"] for c in assertions}) == 20


def test_signed_token_exposes_its_expiry_and_hides_its_value(signer: JwtSigner) -> None:
    signed = signer.sign_sca_token(BODY, now=NOW, lifetime=60)
    assert signed.expires_at == NOW + 60
    assert signed.remaining(NOW + 10) == 50
    assert signed.value not in repr(signed)
    assert signed.value.split(".")[2] not in repr(signed)


def test_our_tokens_verify_with_pyjwt(signer: JwtSigner, rsa_key: RSAPrivateKey) -> None:
    public = rsa_key.public_key()
    claims = pyjwt.decode(
        signer.assertion(CLIENT),
        public,
        algorithms=["RS256"],
        issuer=ISS,
        options={"require": ["sub", "nbf", "iss", "exp", "iat", "jti"]},
    )
    assert claims["sub"] == CLIENT
    sca = signer.sca_token(BODY)
    assert pyjwt.get_unverified_header(sca) == {"typ": "JWT", "alg": "RS256", "kid": KID}
    sca_claims = pyjwt.decode(sca, public, algorithms=["RS256"], issuer=ISS)
    assert sca_claims["hd"] == body_hash(BODY)


def test_signer_checks_its_inputs(rsa_key: RSAPrivateKey) -> None:
    with pytest.raises(ConfigurationError, match="key_id"):
        JwtSigner(rsa_key, key_id="", issuer=ISS)
    with pytest.raises(ConfigurationError, match="issuer"):
        JwtSigner(rsa_key, key_id=KID, issuer="")
    signer = JwtSigner(rsa_key, key_id=KID, issuer=ISS)
    assert "PRIVATE" not in repr(signer)
    assert str(rsa_key.private_numbers().d) not in repr(signer)


# --- verification -------------------------------------------------------------------------


def test_verifiers_accept_our_tokens(signer: JwtSigner, keys: dict[str, RegisteredKey]) -> None:
    claims = verify_assertion(
        signer.assertion(CLIENT, now=NOW), keys=keys, client_id=CLIENT, now=NOW
    )
    assert claims["sub"] == CLIENT
    sca = signer.sca_token(BODY, payment_id="P1", now=NOW)
    claims = verify_sca_token(sca, BODY, keys=keys, now=NOW + 100)
    assert claims["payment_id"] == "P1"
    assert claims["nonce"]


def _rejected(call: Any, token: str, reason: str) -> JwtVerificationError:
    with pytest.raises(JwtVerificationError, match=reason) as info:
        call()
    message = str(info.value)
    for segment in token.split("."):
        if len(segment) > 8:
            assert segment not in message
    return info.value


def test_tampered_body_is_rejected(signer: JwtSigner, keys: dict[str, RegisteredKey]) -> None:
    token = signer.sca_token(BODY, now=NOW)
    tampered = BODY.replace(b"12.50", b"12.51")
    _rejected(lambda: verify_sca_token(token, tampered, keys=keys, now=NOW), token, "hd does not")


def test_hd_in_the_url_safe_alphabet_is_rejected(
    rsa_key: RSAPrivateKey, keys: dict[str, RegisteredKey]
) -> None:
    body = next(
        b
        for b in (str(i).encode() for i in range(1000))
        if set(base64.b64encode(hashlib.sha256(b).digest())) & set(b"+/")
    )
    url_safe = base64.urlsafe_b64encode(hashlib.sha256(body).digest()).decode()
    token = _forge(HEADER, _sca_claims(hd=url_safe), rsa_key)
    _rejected(lambda: verify_sca_token(token, body, keys=keys, now=NOW), token, "hd does not")
    good = _forge(HEADER, _sca_claims(hd=body_hash(body)), rsa_key)
    assert verify_sca_token(good, body, keys=keys, now=NOW)["hd"] == body_hash(body)


def test_wrong_kid_is_rejected(rsa_key: RSAPrivateKey, keys: dict[str, RegisteredKey]) -> None:
    signer = JwtSigner(rsa_key, key_id="kid-unknown", issuer=ISS)
    token = signer.sca_token(BODY, now=NOW)
    _rejected(lambda: verify_sca_token(token, BODY, keys=keys, now=NOW), token, "unknown kid")


def test_wrong_iss_is_rejected(rsa_key: RSAPrivateKey, keys: dict[str, RegisteredKey]) -> None:
    signer = JwtSigner(rsa_key, key_id=KID, issuer="someone-else")
    token = signer.assertion(CLIENT, now=NOW)
    _rejected(lambda: verify_assertion(token, keys=keys, client_id=CLIENT, now=NOW), token, "iss")
    sca = signer.sca_token(BODY, now=NOW)
    _rejected(lambda: verify_sca_token(sca, BODY, keys=keys, now=NOW), sca, "iss")


def test_wrong_key_is_rejected(
    other_rsa_key: RSAPrivateKey, keys: dict[str, RegisteredKey]
) -> None:
    token = JwtSigner(other_rsa_key, key_id=KID, issuer=ISS).sca_token(BODY, now=NOW)
    _rejected(lambda: verify_sca_token(token, BODY, keys=keys, now=NOW), token, "bad signature")


def test_expired_token_is_rejected_after_the_leeway(
    signer: JwtSigner, keys: dict[str, RegisteredKey]
) -> None:
    token = signer.sca_token(BODY, now=NOW)  # exp = NOW + 180
    assert verify_sca_token(token, BODY, keys=keys, now=NOW + 180 + 29, leeway=30)
    _rejected(
        lambda: verify_sca_token(token, BODY, keys=keys, now=NOW + 180 + 30, leeway=30),
        token,
        "expired",
    )
    assertion = signer.assertion(CLIENT, now=NOW)
    _rejected(
        lambda: verify_assertion(assertion, keys=keys, client_id=CLIENT, now=NOW + 3600),
        assertion,
        "expired",
    )


def test_not_yet_valid_and_future_iat_are_rejected(
    signer: JwtSigner, keys: dict[str, RegisteredKey]
) -> None:
    token = signer.sca_token(BODY, now=NOW + 600)
    _rejected(lambda: verify_sca_token(token, BODY, keys=keys, now=NOW), token, "future|not yet")


def test_alg_none_is_rejected(keys: dict[str, RegisteredKey]) -> None:
    token = _forge({"typ": "JWT", "alg": "none", "kid": KID}, _sca_claims(), None)
    _rejected(lambda: verify_sca_token(token, BODY, keys=keys, now=NOW), token, "alg 'none'")


def test_hs256_signed_with_the_public_key_is_rejected(
    rsa_key: RSAPrivateKey, keys: dict[str, RegisteredKey]
) -> None:
    # The classic key-confusion attack: HMAC keyed with the public PEM the verifier holds.
    secret = public_key_pem(rsa_key)
    header = {"typ": "JWT", "alg": "HS256", "kid": KID}
    signing_input = (
        f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(_sca_claims()).encode())}"
    )
    mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    token = f"{signing_input}.{_b64url(mac)}"
    _rejected(lambda: verify_sca_token(token, BODY, keys=keys, now=NOW), token, "alg 'HS256'")


@pytest.mark.parametrize("alg", ["RS512", "PS256", "ES256", "RS256 "])
def test_other_algorithms_are_rejected(
    alg: str, rsa_key: RSAPrivateKey, keys: dict[str, RegisteredKey]
) -> None:
    token = _forge({"typ": "JWT", "alg": alg, "kid": KID}, _sca_claims(), rsa_key)
    _rejected(lambda: verify_sca_token(token, BODY, keys=keys, now=NOW), token, "not allowed")


@pytest.mark.parametrize(
    ("claims", "reason"),
    [
        (_sca_claims(alg="SHA512"), "claim alg"),
        (_sca_claims(nonce=None), "nonce missing"),
        (_sca_claims(jti=None), "jti missing"),
        (_sca_claims(exp=None), "exp missing"),
        (_sca_claims(iat=None), "iat missing"),
        (_sca_claims(exp="soon"), "NumericDate"),
        (_sca_claims(hd=None), "hd missing"),
    ],
)
def test_sca_claim_rules(
    claims: dict[str, Any], reason: str, rsa_key: RSAPrivateKey, keys: dict[str, RegisteredKey]
) -> None:
    token = _forge(HEADER, claims, rsa_key)
    _rejected(lambda: verify_sca_token(token, BODY, keys=keys, now=NOW), token, reason)


def test_header_typ_must_be_jwt(rsa_key: RSAPrivateKey, keys: dict[str, RegisteredKey]) -> None:
    token = _forge({"typ": "at+jwt", "alg": "RS256", "kid": KID}, _sca_claims(), rsa_key)
    _rejected(lambda: verify_sca_token(token, BODY, keys=keys, now=NOW), token, "typ")


def test_assertion_sub_must_be_the_client(
    signer: JwtSigner, keys: dict[str, RegisteredKey]
) -> None:
    token = signer.assertion(CLIENT, now=NOW)
    _rejected(
        lambda: verify_assertion(token, keys=keys, client_id="client-2", now=NOW), token, "sub"
    )


def test_assertion_requires_nbf(rsa_key: RSAPrivateKey, keys: dict[str, RegisteredKey]) -> None:
    claims = {"iss": ISS, "sub": CLIENT, "iat": int(NOW), "exp": int(NOW) + 60, "jti": "j"}
    token = _forge(HEADER, claims, rsa_key)
    _rejected(lambda: verify_assertion(token, keys=keys, client_id=CLIENT, now=NOW), token, "nbf")


@pytest.mark.parametrize("token", ["", "abc", "a.b", "a.b.c.d", "!!!.???.###", "x" * 20000])
def test_garbage_is_rejected_cleanly(token: str, keys: dict[str, RegisteredKey]) -> None:
    with pytest.raises(JwtVerificationError):
        verify_sca_token(token, BODY, keys=keys, now=NOW)


def test_registered_key_enforces_the_registration_rule() -> None:
    from cryptography.hazmat.primitives.asymmetric import rsa

    small = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    with pytest.raises(ConfigurationError, match="2048"):
        RegisteredKey(KID, ISS, small.public_key())


def test_signer_accepts_only_checked_keys() -> None:
    from cryptography.hazmat.primitives.asymmetric import rsa

    small = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    with pytest.raises(ConfigurationError, match="1024"):
        JwtSigner(small, key_id=KID, issuer=ISS)
