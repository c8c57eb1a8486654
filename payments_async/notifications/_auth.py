"""The credentials a notification must carry: HTTP Basic pairs, bearer tokens, JWTs.

Each accepts several valid secrets at once, so credentials rotate without downtime: the
new pair (or key) is added, the service switches over, the old one is removed.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Final

import msgspec

from .._constants import JWT_LEEWAY
from .._errors import ConfigurationError
from ._defaults import (
    NOTIFY_JWKS_CACHE_SECONDS,
    NOTIFY_JWKS_MAX_BYTES,
    NOTIFY_JWKS_MIN_REFRESH_INTERVAL,
    NOTIFY_JWKS_TIMEOUT,
    NOTIFY_JWT_ALGORITHMS,
)
from ._jwks import JwksCache, VerifyingKey, import_public_key

__all__ = ["BasicAuth", "BearerAuth", "BearerVerifier", "JwtBearerVerifier"]

_MAX_TOKEN_CHARS: Final = 16 * 1024
_HEADER: Final = msgspec.json.Decoder(dict[str, Any])


def _pair(username: str, password: str) -> bytes:
    if (
        not isinstance(username, str)
        or not isinstance(password, str)
        or not username
        or not password
        or ":" in username
    ):
        raise ConfigurationError("BasicAuth needs a non-empty username without ':' and a password")
    return f"{username}:{password}".encode()


class BasicAuth:
    """HTTP Basic credentials the service must present (compared in constant time).

    Several pairs may be valid at once, for a rotation without downtime: give the new
    pair in ``also`` (or call `replace`), let the service switch over, then drop the old
    one. Every pair is compared on every request, so the time taken does not tell which
    pair was close.

    Args:
        username: the expected user name.
        password: the expected password (never shown in a repr or an error).
        also: further ``(username, password)`` pairs accepted as well.

    Raises:
        ConfigurationError: an empty user name or password, or a user name with ``:``.
    """

    __slots__ = ("_expected",)

    def __init__(
        self, username: str, password: str, *, also: Iterable[tuple[str, str]] = ()
    ) -> None:
        self._expected: tuple[bytes, ...] = ()
        self.replace([(username, password), *also])

    def __repr__(self) -> str:
        return f"BasicAuth(pairs={len(self._expected)}, password=***)"

    def replace(self, pairs: Iterable[tuple[str, str]]) -> None:
        """Accept exactly these ``(username, password)`` pairs from now on.

        Requests being checked keep the pairs they started with; nothing is restarted.

        Raises:
            ConfigurationError: no pair, or one that `BasicAuth` would refuse (the pairs in
                force are then unchanged).
        """
        expected = tuple(dict.fromkeys(_pair(user, password) for user, password in pairs))
        if not expected:
            raise ConfigurationError("BasicAuth needs at least one username/password pair")
        self._expected = expected

    async def check(self, authorization: str | None) -> bool:
        """True when the header is ``Basic base64(username:password)`` of an accepted pair."""
        if authorization is None:
            return False
        scheme, _, value = authorization.strip().partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            presented = base64.b64decode(value.strip(), validate=True)
        except (binascii.Error, ValueError):
            return False
        matched = False
        for expected in self._expected:
            matched |= hmac.compare_digest(presented, expected)
        return matched


BearerVerifier = Callable[[str], Awaitable[bool]]


class BearerAuth:
    """OAuth 2.0 bearer tokens checked by a verifier you supply (an async callable).

    Args:
        verify: ``async (token) -> bool``; an exception it raises counts as a refusal.
    """

    __slots__ = ("_verify",)

    def __init__(self, verify: BearerVerifier) -> None:
        if not callable(verify):
            raise ConfigurationError("BearerAuth needs an async callable verify(token) -> bool")
        self._verify = verify

    def __repr__(self) -> str:
        return f"BearerAuth(verify={self._verify!r})"

    async def check(self, authorization: str | None) -> bool:
        """True when the header is ``Bearer <token>`` and the verifier accepts the token."""
        if authorization is None:
            return False
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return False
        try:
            return (await self._verify(token)) is True
        except Exception:
            return False


class JwtBearerVerifier:
    """A bearer verifier for JWT access tokens (joserfc): algorithms pinned, iss/aud checked.

    Use it as ``BearerAuth(JwtBearerVerifier(pem, issuer=..., audience=...))``. A token
    passes when its ``alg`` is one of ``algorithms`` (RS256 and ES256 by default; ``none``
    and HMAC are never accepted), its signature verifies with one of the keys, its ``iss``
    and ``aud`` match, and ``exp`` (required) and ``nbf`` hold within ``leeway``.

    The keys are PEMs given here, the keys published at ``jwks_url``, or both. A token
    whose header names a ``kid`` is checked against the JWKS key of that kid (and the
    PEMs); one without a kid against every key. The JWKS is fetched when a token first
    needs it, again after ``jwks_cache_seconds``, and at once for a ``kid`` it does not
    hold (the issuer rotated its key), but never twice within
    ``jwks_min_refresh_interval``: tokens with made-up kids cannot flood the issuer. While
    the issuer publishes the old and the new key together, tokens signed with either pass.

    Args:
        public_keys: one PEM public key (RSA or EC P-256) or several; may be empty when
            ``jwks_url`` is given.
        issuer: the required ``iss``.
        audience: the required ``aud`` (a string, or one item of a list ``aud``).
        algorithms: the accepted algorithms.
        leeway: clock skew tolerated on ``exp``/``nbf``, in seconds.
        jwks_url: the issuer's JWKS URL (https, or http to a loopback host).
        jwks_cache_seconds: how long fetched keys are used before they are fetched again.
        jwks_min_refresh_interval: the shortest time between two JWKS fetches.
        jwks_timeout: seconds one JWKS fetch may take.

    Raises:
        ConfigurationError: a key cannot be read, no key and no ``jwks_url``, a
            ``jwks_url`` that is not https (or http to loopback), or an algorithm that
            is not RS256/ES256.
    """

    def __init__(
        self,
        public_keys: str | bytes | Sequence[str | bytes] = (),
        *,
        issuer: str,
        audience: str,
        algorithms: Iterable[str] = NOTIFY_JWT_ALGORITHMS,
        leeway: float = JWT_LEEWAY,
        jwks_url: str | None = None,
        jwks_cache_seconds: float = NOTIFY_JWKS_CACHE_SECONDS,
        jwks_min_refresh_interval: float = NOTIFY_JWKS_MIN_REFRESH_INTERVAL,
        jwks_timeout: float = NOTIFY_JWKS_TIMEOUT,
    ) -> None:
        algs = tuple(algorithms)
        if not algs or not set(algs) <= set(NOTIFY_JWT_ALGORITHMS):
            raise ConfigurationError(f"algorithms must be among {', '.join(NOTIFY_JWT_ALGORITHMS)}")
        if not issuer or not audience:
            raise ConfigurationError("JwtBearerVerifier needs an issuer and an audience")
        pems = [public_keys] if isinstance(public_keys, str | bytes) else list(public_keys)
        self._keys: tuple[VerifyingKey, ...] = tuple(import_public_key(pem) for pem in pems)
        self._jwks: JwksCache | None = None
        if jwks_url is not None:
            self._jwks = JwksCache(
                jwks_url,
                cache_seconds=jwks_cache_seconds,
                min_refresh_interval=jwks_min_refresh_interval,
                timeout=jwks_timeout,
                max_bytes=NOTIFY_JWKS_MAX_BYTES,
            )
        if not self._keys and self._jwks is None:
            raise ConfigurationError("JwtBearerVerifier needs a public key or a jwks_url")
        self._issuer = issuer
        self._audience = audience
        self._algorithms = algs
        self._leeway = int(leeway)

    def __repr__(self) -> str:
        jwks = "" if self._jwks is None else f", jwks={self._jwks!r}"
        return (
            f"JwtBearerVerifier(issuer={self._issuer!r}, audience={self._audience!r}, "
            f"algorithms={self._algorithms!r}{jwks})"
        )

    async def refresh_keys(self) -> bool:
        """Fetch the JWKS now (at startup, say), even within the minimum interval.

        Returns:
            True when the keys were fetched; False without ``jwks_url`` or when the fetch
            failed (logged; the keys already known are kept).
        """
        return False if self._jwks is None else await self._jwks.refresh(force=True)

    async def __call__(self, token: str) -> bool:
        """True when ``token`` passes every check, fetching the JWKS when it must."""
        header = _header(token)
        if header is None:
            return False
        jwks = self._jwks
        if jwks is None:
            return self._check(token, self._keys)
        kid = header.get("kid")
        kid = kid if isinstance(kid, str) else None
        if jwks.stale():
            await jwks.refresh()  # a key withdrawn by the issuer stops passing
        if self._check(token, (*self._keys, *jwks.known(kid))):
            return True
        if kid is None or jwks.known(kid):
            return False
        fetched = await jwks.keys_for(kid)  # a kid it does not hold: the issuer rotated
        return bool(fetched) and self._check(token, fetched)

    def verify(self, token: str) -> bool:
        """The same check, synchronously, with the PEMs and the JWKS keys already fetched."""
        header = _header(token)
        if header is None:
            return False
        kid = header.get("kid")
        jwks = self._jwks
        known = () if jwks is None else jwks.known(kid if isinstance(kid, str) else None)
        return self._check(token, (*self._keys, *known))

    def _check(self, token: str, keys: Iterable[VerifyingKey]) -> bool:
        from joserfc import jwt
        from joserfc.errors import JoseError

        decoded = None
        for key in keys:
            # joserfc refuses an alg that does not fit the key type (no RSA key as HMAC).
            try:
                decoded = jwt.decode(token, key, algorithms=list(self._algorithms))
                break
            except (JoseError, ValueError, TypeError, KeyError):
                continue
        if decoded is None:
            return False
        try:
            registry = jwt.JWTClaimsRegistry(
                leeway=self._leeway,
                iss={"essential": True, "value": self._issuer},
                aud={"essential": True, "value": self._audience},
                exp={"essential": True},
            )
            registry.validate(decoded.claims)
        except (JoseError, ValueError, TypeError, KeyError):
            return False
        return True


def _header(token: str) -> dict[str, Any] | None:
    """The decoded JOSE header of a compact JWT, or None when it is not one."""
    if len(token) > _MAX_TOKEN_CHARS or token.count(".") != 2:
        return None
    first = token.split(".", 1)[0]
    try:
        raw = base64.urlsafe_b64decode(first + "=" * (-len(first) % 4))
        return _HEADER.decode(raw)
    except (binascii.Error, ValueError, msgspec.DecodeError, RecursionError):
        return None
