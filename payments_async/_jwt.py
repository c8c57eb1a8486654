"""Pure: sign and verify the authentication JWT (the assertion) and the SCA JWT (RS256)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import inspect
import secrets
import time
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias, TypeVar

import msgspec
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey, RSAPublicKey
from joserfc import jws
from joserfc.errors import JoseError
from joserfc.jwk import RSAKey

from ._constants import ASSERTION_LIFETIME, JWT_LEEWAY, SCA_TOKEN_LIFETIME
from ._errors import ConfigurationError, PaymentsError, SigningError
from ._keys import load_public_key
from .signing import KeySigner, Signer
from .signing._key import check_key_id

__all__ = [
    "JwtSigner",
    "JwtVerificationError",
    "MaybeAwaitable",
    "RegisteredKey",
    "SignedToken",
    "body_hash",
    "verify_assertion",
    "verify_sca_token",
]

JWT_ALG: Final = "RS256"
JWT_TYP: Final = "JWT"
SCA_HASH_ALG: Final = "SHA256"  # the SCA token's own "alg" claim: how ``hd`` was computed

_T = TypeVar("_T")
MaybeAwaitable: TypeAlias = _T | Awaitable[_T]
"""A value now (sync signer) or an awaitable of it (async signer)."""

_ENCODER = msgspec.json.Encoder()
_CLAIMS_DECODER = msgspec.json.Decoder(dict[str, Any])
# The sandbox is the only verifier; it accepts RS256 and nothing else (no "none", no HMAC).
_VERIFY_REGISTRY = jws.JWSRegistry(algorithms=[JWT_ALG], strict_check_header=False)
_MAX_TOKEN_CHARS = 16 * 1024  # a token larger than this is not ours


class JwtVerificationError(Exception):
    """A JWT failed verification. Internal: the sandbox answers 401 with ``reason``.

    The message never contains the token (only which check failed).

    Attributes:
        reason: a short, stable, human-readable cause ("token expired", "unknown kid").
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class SignedToken(msgspec.Struct, frozen=True):
    """A signed JWT and its wall-clock expiry.

    Immutable, compared and hashed by value; a frozen ``msgspec.Struct`` (one is made per
    POST, for its SCA token).

    Attributes:
        value: the compact JWS. A secret: it is kept out of ``repr`` (and rich's).
        expires_at: the ``exp`` claim, seconds since the epoch (``time.time()`` scale);
            ``math.inf`` for the sandbox's predefined tokens.
    """

    value: str
    expires_at: float

    def __repr__(self) -> str:
        return f"SignedToken(expires_at={self.expires_at!r})"

    def __rich_repr__(self) -> list[tuple[str, Any]]:
        return [("expires_at", self.expires_at)]

    def remaining(self, now: float | None = None) -> float:
        """Seconds left until ``exp`` (negative once expired).

        Args:
            now: the current time in seconds since the epoch; ``time.time()`` if None.
        """
        return self.expires_at - (time.time() if now is None else now)


@dataclass(frozen=True, slots=True)
class RegisteredKey:
    """A public key the service (sandbox) knows, with the kid and iss registered with it.

    Args:
        kid: the key id tokens must carry in their header.
        iss: the issuer tokens must carry in their ``iss`` claim.
        public_key: the RSA public key (checked: RSA, >= 2048 bits).

    Raises:
        ConfigurationError: the key breaks the registration rule.
    """

    kid: str
    iss: str
    public_key: RSAPublicKey = field(repr=False)
    _jose_key: RSAKey = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        key = load_public_key(self.public_key)
        # Converted once at registration, not per verification.
        object.__setattr__(self, "_jose_key", RSAKey.import_key(key))


class _AssertionClaims(msgspec.Struct):
    iss: str
    sub: str
    iat: int
    nbf: int
    exp: int
    jti: str


class _ScaClaims(msgspec.Struct, omit_defaults=True):
    iss: str
    iat: int
    nbf: int
    exp: int
    jti: str
    alg: str
    hd: str
    nonce: str
    payment_id: str | None = None


def _b64url(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def _compact(signing_input: bytes, signature: bytes) -> str:
    return (signing_input + b"." + _b64url(signature)).decode("ascii")


def body_hash(body: bytes) -> str:
    """The SCA token's ``hd`` claim: SHA-256 of the exact body bytes, Base64-encoded.

    The alphabet is **standard Base64 with padding** (RFC 4648 section 4: ``+``, ``/``,
    ``=``), as the spec says "Base64", not the base64url alphabet of the JWS segments. A
    SHA-256 digest always encodes to 44 characters ending in one ``=``.

    Args:
        body: the request body exactly as it is sent on the wire.

    Returns:
        The 44-character Base64 text.
    """
    return base64.b64encode(hashlib.sha256(body).digest()).decode("ascii")


class JwtSigner:
    """Builds both JWTs for one kid and issuer and has a `Signer` sign them.

    Build one per client (``Credentials`` does); the header segment is encoded once. Every
    token gets a fresh ``jti`` (and the SCA token a fresh ``nonce``): 128 random bits from
    ``secrets.token_hex``.

    The ``sign_*`` methods return a `SignedToken` directly when the signer is sync
    (`payments_async.signing.KeySigner`: no await, no thread hop) and an awaitable
    of one when it is async (a thread pool, an HSM).

    Args:
        signer: a `payments_async.signing.Signer`, or an ``RSAPrivateKey`` (then
            ``key_id`` is required and a ``KeySigner`` is built).
        key_id: the registered key id, sent as header ``kid``; with a ``Signer`` it may be
            omitted and must otherwise equal ``signer.key_id``.
        issuer: the registered issuer, sent as claim ``iss``.

    Raises:
        ConfigurationError: a bad key, an empty or mismatched key id, an empty issuer, or
            a signer that does not implement the protocol.
    """

    __slots__ = ("_header_segment", "_issuer", "_key_id", "_signer")

    def __init__(
        self, signer: Signer | RSAPrivateKey, *, key_id: str | None = None, issuer: str
    ) -> None:
        if not issuer or not isinstance(issuer, str):
            raise ConfigurationError("issuer (the JWT claim iss) must not be empty")
        if isinstance(signer, RSAPrivateKey):
            if key_id is None:
                raise ConfigurationError("key_id (the JWT header kid) must not be empty")
            signer = KeySigner(signer, key_id=key_id)
        elif not isinstance(signer, Signer):
            raise ConfigurationError(
                f"signer must implement payments_async.signing.Signer (key_id and sign), "
                f"not {type(signer).__name__}"
            )
        kid = check_key_id(signer.key_id)
        if key_id is not None and key_id != kid:
            raise ConfigurationError(
                f"key_id {key_id!r} does not match the signer's key_id {kid!r}"
            )
        self._signer = signer
        self._key_id = kid
        self._issuer = issuer
        header = {"typ": JWT_TYP, "alg": JWT_ALG, "kid": kid}
        self._header_segment = _b64url(_ENCODER.encode(header)) + b"."

    @property
    def key_id(self) -> str:
        """The header ``kid`` of every token signed here."""
        return self._key_id

    @property
    def issuer(self) -> str:
        """The ``iss`` claim of every token signed here."""
        return self._issuer

    @property
    def signer(self) -> Signer:
        """The signer that makes the signatures."""
        return self._signer

    def __repr__(self) -> str:
        return f"JwtSigner(key_id={self._key_id!r}, issuer={self._issuer!r})"

    # Hot path: every POST signs one SCA token. The compact JWS is built here rather than
    # with joserfc: the header segment is encoded once, the claims are a msgspec Struct,
    # and the only per-call cryptography is the signer's one RSA signature. A sync
    # signature is finished at once; only an awaitable one goes through a coroutine.
    def _sign(
        self, claims: msgspec.Struct, exp: int, *, sync_only: bool = False
    ) -> MaybeAwaitable[SignedToken]:
        signing_input = self._header_segment + _b64url(_ENCODER.encode(claims))
        try:
            signature = self._signer.sign(signing_input)
        except PaymentsError:
            raise
        except Exception as exc:
            raise self._failure(exc) from exc
        if type(signature) is bytes:
            return SignedToken(_compact(signing_input, signature), float(exp))
        return self._pending(signing_input, signature, exp, sync_only)

    def _pending(
        self, signing_input: bytes, signature: object, exp: int, sync_only: bool
    ) -> MaybeAwaitable[SignedToken]:
        """What a signer returned other than bytes: an awaitable, or a broken signer."""
        if isinstance(signature, Awaitable):
            if not sync_only:
                return self._finish(signing_input, signature, exp)
            if inspect.iscoroutine(signature):
                signature.close()
            elif isinstance(signature, asyncio.Future):
                signature.cancel()
            raise SigningError(
                f"the signer for kid {self._key_id!r} is async: await sign_assertion() / "
                "sign_sca_token() instead"
            )
        raise SigningError(
            f"the signer for kid {self._key_id!r} returned {type(signature).__name__}, "
            "not signature bytes"
        )

    async def _finish(
        self, signing_input: bytes, pending: Awaitable[bytes], exp: int
    ) -> SignedToken:
        try:
            signature = await pending
        except PaymentsError:
            raise
        except Exception as exc:
            raise self._failure(exc) from exc
        if not isinstance(signature, bytes | bytearray | memoryview) or not signature:
            raise SigningError(
                f"the signer for kid {self._key_id!r} returned {type(signature).__name__}, "
                "not signature bytes"
            )
        return SignedToken(_compact(signing_input, bytes(signature)), float(exp))

    def _failure(self, exc: Exception) -> SigningError:
        return SigningError(
            f"the signer for kid {self._key_id!r} failed: {type(exc).__name__}: {exc}"
        )

    def sign_assertion(
        self, client_id: str, *, now: float | None = None, lifetime: float = ASSERTION_LIFETIME
    ) -> MaybeAwaitable[SignedToken]:
        """Sign the authentication JWT (the token request's ``assertion``).

        Claims: ``iss``, ``sub`` (= ``client_id``), ``iat`` and ``nbf`` (= now), ``exp``
        (= now + ``lifetime``), ``jti`` (fresh). All NumericDates are whole seconds.

        Args:
            client_id: the client id, sent as ``sub``.
            now: seconds since the epoch; ``time.time()`` if None.
            lifetime: seconds until ``exp``.

        Returns:
            The token and its expiry; an awaitable of them when the signer is async.
        """
        return self._sign(*self._assertion_claims(client_id, now, lifetime))

    def _assertion_claims(
        self, client_id: str, now: float | None, lifetime: float
    ) -> tuple[_AssertionClaims, int]:
        iat = int(time.time() if now is None else now)
        exp = iat + int(lifetime)
        claims = _AssertionClaims(
            iss=self._issuer, sub=client_id, iat=iat, nbf=iat, exp=exp, jti=secrets.token_hex(16)
        )
        return claims, exp

    def assertion(
        self, client_id: str, *, now: float | None = None, lifetime: float = ASSERTION_LIFETIME
    ) -> str:
        """Like `sign_assertion` with a sync signer, returning only the compact token.

        Raises:
            SigningError: the signer is async (await `sign_assertion` instead).
        """
        return self._sign_now(*self._assertion_claims(client_id, now, lifetime))

    def sign_sca_token(
        self,
        body: bytes,
        *,
        payment_id: str | None = None,
        now: float | None = None,
        lifetime: float = SCA_TOKEN_LIFETIME,
        digest: bytes | None = None,
    ) -> MaybeAwaitable[SignedToken]:
        """Sign the SCA JWT for these exact body bytes (the ``sca-token`` header).

        Claims: ``iss``, ``iat`` and ``nbf`` (= now), ``exp`` (= now + ``lifetime``),
        ``jti`` and ``nonce`` (fresh), ``alg`` = ``"SHA256"``, ``hd`` = `body_hash`
        of ``body``, and ``payment_id`` when given.

        Args:
            body: the request body exactly as it will be sent; re-encoding it afterwards
                breaks ``hd``.
            payment_id: optional payment id claim.
            now: seconds since the epoch; ``time.time()`` if None.
            lifetime: seconds until ``exp`` (default 180 s, as the provider's client).
            digest: ``hashlib.sha256(body).digest()`` when the caller has it already (the
                client does: the validate-once check hashed these bytes), so that the
                body is not hashed twice.

        Returns:
            The token and its expiry (an awaitable of them when the signer is async).
        """
        return self._sign(*self._sca_claims(body, payment_id, now, lifetime, digest))

    def _sca_claims(
        self,
        body: bytes,
        payment_id: str | None,
        now: float | None,
        lifetime: float,
        digest: bytes | None = None,
    ) -> tuple[_ScaClaims, int]:
        iat = int(time.time() if now is None else now)
        exp = iat + int(lifetime)
        claims = _ScaClaims(
            iss=self._issuer,
            iat=iat,
            nbf=iat,
            exp=exp,
            jti=secrets.token_hex(16),
            alg=SCA_HASH_ALG,
            hd=body_hash(body) if digest is None else base64.b64encode(digest).decode("ascii"),
            nonce=secrets.token_hex(16),
            payment_id=payment_id,
        )
        return claims, exp

    def sca_token(
        self,
        body: bytes,
        *,
        payment_id: str | None = None,
        now: float | None = None,
        lifetime: float = SCA_TOKEN_LIFETIME,
    ) -> str:
        """Like `sign_sca_token` with a sync signer, returning only the compact token.

        Raises:
            SigningError: the signer is async (await `sign_sca_token` instead).
        """
        return self._sign_now(*self._sca_claims(body, payment_id, now, lifetime))

    def _sign_now(self, claims: msgspec.Struct, exp: int) -> str:
        """Sign with a sync signer; an async one's pending signature is discarded."""
        token = self._sign(claims, exp, sync_only=True)
        assert isinstance(token, SignedToken)
        return token.value


# --- verification (the sandbox) ---------------------------------------------------------


def _numeric_date(claims: Mapping[str, Any], name: str) -> float | None:
    """The claim as a number, None when absent; refuses non-numbers (and booleans).

    JSON integers are unbounded: one beyond a float's range is refused too.
    """
    if name not in claims:
        return None
    value = claims[name]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise JwtVerificationError(f"{name} is not a NumericDate")
    try:
        return float(value)
    except OverflowError:
        raise JwtVerificationError(f"{name} is out of range") from None


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _verify(
    token: str | bytes, keys: Mapping[str, RegisteredKey], now: float | None, leeway: float
) -> dict[str, Any]:
    """Check the signature, header, iss and times; return the claims."""
    raw = token.encode("ascii", errors="replace") if isinstance(token, str) else token
    if len(raw) > _MAX_TOKEN_CHARS:
        raise JwtVerificationError("token too large")
    if raw.count(b".") != 2:
        raise JwtVerificationError("malformed token: not a compact JWS")
    try:
        obj = jws.extract_compact(raw, registry=_VERIFY_REGISTRY)
        header = obj.headers()
    except (JoseError, ValueError, TypeError):
        raise JwtVerificationError("malformed token header") from None
    alg = header.get("alg")
    if alg != JWT_ALG:
        raise JwtVerificationError(f"alg {_short(alg)} is not allowed (only RS256)")
    if header.get("typ") != JWT_TYP:
        raise JwtVerificationError(f"header typ must be 'JWT', got {_short(header.get('typ'))}")
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid:
        raise JwtVerificationError("header kid missing")
    registered = keys.get(kid)
    if registered is None:
        raise JwtVerificationError(f"unknown kid {_short(kid)}")
    try:
        valid = jws.validate_compact(obj, registered._jose_key, registry=_VERIFY_REGISTRY)
    except JoseError:
        valid = False
    if not valid:
        raise JwtVerificationError("bad signature")
    try:
        claims = _CLAIMS_DECODER.decode(obj.payload or b"")
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        raise JwtVerificationError("malformed token payload") from None

    if claims.get("iss") != registered.iss:
        raise JwtVerificationError("iss does not match the registered issuer")
    current = time.time() if now is None else now
    exp = _numeric_date(claims, "exp")
    if exp is None:
        raise JwtVerificationError("exp missing")
    if current >= exp + leeway:
        raise JwtVerificationError("token expired")
    iat = _numeric_date(claims, "iat")
    if iat is None:
        raise JwtVerificationError("iat missing")
    if iat > current + leeway:
        raise JwtVerificationError("token issued in the future (iat)")
    nbf = _numeric_date(claims, "nbf")
    if nbf is not None and nbf > current + leeway:
        raise JwtVerificationError("token not yet valid (nbf)")
    jti = claims.get("jti")
    if not isinstance(jti, str) or not jti:
        raise JwtVerificationError("jti missing")
    return claims


def verify_assertion(
    token: str | bytes,
    *,
    keys: Mapping[str, RegisteredKey],
    client_id: str,
    now: float | None = None,
    leeway: float = JWT_LEEWAY,
) -> dict[str, Any]:
    """Verify an authentication JWT the way the service does.

    Checks: RS256 only (``none``, HMAC and everything else refused before any key is
    used), header ``typ`` JWT, ``kid`` registered, signature, ``iss`` equal to the kid's
    registered issuer, ``sub`` equal to ``client_id``, ``exp``/``iat``/``nbf`` (all
    required here) within ``leeway``, and a non-empty ``jti``. Replay detection (a seen
    ``jti``) is the caller's job: the claims are returned for it.

    Args:
        token: the compact JWS from the token request's ``assertion`` form key.
        keys: the registered keys of this client, by kid.
        client_id: the client id authenticated by HTTP Basic.
        now: seconds since the epoch; ``time.time()`` if None.
        leeway: clock skew tolerated on the time claims, in seconds.

    Returns:
        The verified claims.

    Raises:
        JwtVerificationError: any check failed (the message names which).
    """
    claims = _verify(token, keys, now, leeway)
    if claims.get("sub") != client_id:
        raise JwtVerificationError("sub does not match the client id")
    if "nbf" not in claims:
        raise JwtVerificationError("nbf missing")
    return claims


def verify_sca_token(
    token: str | bytes,
    body: bytes,
    *,
    keys: Mapping[str, RegisteredKey],
    now: float | None = None,
    leeway: float = JWT_LEEWAY,
) -> dict[str, Any]:
    """Verify an SCA JWT against the exact body bytes received.

    Checks everything `verify_assertion` checks except ``sub``, plus: claim ``alg``
    is ``"SHA256"``, ``hd`` equals `body_hash` of ``body`` exactly (standard Base64
    with padding; compared in constant time), ``nonce`` present. ``nbf`` and
    ``payment_id`` are optional. Replay detection (seen ``jti``/``nonce``) is the
    caller's job.

    Args:
        token: the ``sca-token`` header value.
        body: the request body bytes as received.
        keys: the registered keys of this client, by kid.
        now: seconds since the epoch; ``time.time()`` if None.
        leeway: clock skew tolerated on the time claims, in seconds.

    Returns:
        The verified claims.

    Raises:
        JwtVerificationError: any check failed (the message names which).
    """
    claims = _verify(token, keys, now, leeway)
    if claims.get("alg") != SCA_HASH_ALG:
        raise JwtVerificationError("claim alg must be 'SHA256'")
    hd = claims.get("hd")
    if not isinstance(hd, str):
        raise JwtVerificationError("hd missing")
    if not hmac.compare_digest(hd.encode("ascii", errors="replace"), body_hash(body).encode()):
        raise JwtVerificationError("hd does not match the request body")
    nonce = claims.get("nonce")
    if not isinstance(nonce, str) or not nonce:
        raise JwtVerificationError("nonce missing")
    if "payment_id" in claims and not isinstance(claims["payment_id"], str):
        raise JwtVerificationError("payment_id is not a string")
    return claims
