"""A JSON Web Key Set fetched over HTTP: cached, refreshed on an unknown ``kid``, rate-limited.

The keys are fetched the first time a token needs them, again when the cache is older than
``cache_seconds``, and at once when a token names a ``kid`` the set does not hold (a key
rotation at the issuer). Fetches are single-flight and at least ``min_refresh_interval``
apart, so a flood of tokens with unknown kids costs the JWKS endpoint one request per
interval, not one per token. A failed fetch keeps the keys already known.
"""

from __future__ import annotations

import asyncio
import logging
import math
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

import aiohttp
import msgspec

from .._errors import ConfigurationError
from .._urls import is_loopback, redact_url

__all__ = ["JwksCache", "VerifyingKey", "import_public_key"]

logger = logging.getLogger("payments_async.notifications")

VerifyingKey = Any  # a joserfc RSAKey or ECKey holding a public key
"""A public key tokens are verified with (joserfc ``RSAKey`` or ``ECKey``)."""

_ACCEPTED_KTY: Final = frozenset({"RSA", "EC"})  # never "oct" (HMAC) nor "OKP"
_JWKS: Final = msgspec.json.Decoder(dict[str, Any])


def import_public_key(material: str | bytes | Mapping[str, Any]) -> VerifyingKey:
    """An RSA or EC P-256 public key from a PEM or a JWK dict.

    Raises:
        ConfigurationError: not an RSA or EC key, or a key holding private parameters
            given as a JWK (a JWKS publishes public keys only).
    """
    from joserfc.errors import JoseError
    from joserfc.jwk import ECKey, RSAKey

    if isinstance(material, Mapping):
        kty = material.get("kty")
        if kty not in _ACCEPTED_KTY:
            raise ConfigurationError(f"a JWK of type {kty!r} is not an RSA or EC key")
        if "d" in material:
            raise ConfigurationError("a JWK holds a private key; publish public keys only")
        try:
            key = (RSAKey if kty == "RSA" else ECKey).import_key(dict(material))
        except (JoseError, ValueError, TypeError, KeyError) as exc:
            raise ConfigurationError("a JWK is not a valid RSA or EC public key") from exc
        return key
    try:
        return RSAKey.import_key(material)
    except (JoseError, ValueError, TypeError):
        try:
            return ECKey.import_key(material)
        except (JoseError, ValueError, TypeError) as exc:
            raise ConfigurationError("a public key is not an RSA or EC PEM key") from exc


def check_jwks_url(url: str) -> str:
    """``url`` when it is https, or http on a loopback host (a local issuer or a test).

    Raises:
        ConfigurationError: another scheme, no host, or plain http to a remote host (the
            keys would be open to anyone on the path).
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError as exc:
        raise ConfigurationError("jwks_url is not a valid URL") from exc
    if not host or parts.scheme not in ("https", "http"):
        raise ConfigurationError("jwks_url must be an https:// URL")
    if parts.scheme == "http" and not is_loopback(host):
        raise ConfigurationError("jwks_url must be https:// (plain http only to a loopback host)")
    return url


def _positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not 0 < value <= sys.float_info.max:  # also NaN and inf
        raise ConfigurationError(f"{name} must be a positive, finite number of seconds")
    return float(value)


class JwksCache:
    """The keys of one JWKS URL, by ``kid``.

    Args:
        url: the JWKS URL (https, or http to a loopback host).
        cache_seconds: how long fetched keys are used before they are fetched again.
        min_refresh_interval: the shortest time between two fetches, whatever asks.
        timeout: seconds one fetch may take.
        max_bytes: a larger JWKS document is refused (the keys already known are kept).
        clock: monotonic seconds (tests pass their own).

    Raises:
        ConfigurationError: a URL or a duration that cannot be used.
    """

    def __init__(
        self,
        url: str,
        *,
        cache_seconds: float,
        min_refresh_interval: float,
        timeout: float,
        max_bytes: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = check_jwks_url(url)
        self._cache_seconds = _positive("jwks_cache_seconds", cache_seconds)
        self._min_interval = _positive("jwks_min_refresh_interval", min_refresh_interval)
        self._timeout = _positive("jwks_timeout", timeout)
        self._max_bytes = max_bytes
        self._clock = clock
        self._keys: dict[str, VerifyingKey] = {}
        self._unnamed: tuple[VerifyingKey, ...] = ()
        self._fetched_at = -math.inf  # last successful fetch
        self._tried_at = -math.inf  # last attempt, successful or not
        self._lock = asyncio.Lock()
        self.fetches = 0  # attempts made (a test and an operator can read it)
        self._failing = False

    def __repr__(self) -> str:
        return f"JwksCache(url={redact_url(self.url)!r}, keys={len(self._keys)})"

    def known(self, kid: str | None) -> tuple[VerifyingKey, ...]:
        """The cached keys a token with this ``kid`` may be verified with (no fetch)."""
        if kid is None:
            return (*self._keys.values(), *self._unnamed)
        key = self._keys.get(kid)
        return () if key is None else (key,)

    def stale(self) -> bool:
        """True when the keys were never fetched or are older than ``cache_seconds``."""
        return self._clock() - self._fetched_at >= self._cache_seconds

    async def keys_for(self, kid: str | None) -> tuple[VerifyingKey, ...]:
        """The keys for ``kid``, fetching when the cache is stale or ``kid`` is unknown.

        A fetch happens only if the last one was at least ``min_refresh_interval`` ago.
        """
        if self.stale() or (kid is not None and kid not in self._keys):
            await self.refresh()
        return self.known(kid)

    async def refresh(self, *, force: bool = False) -> bool:
        """Fetch the set now, unless one was tried within ``min_refresh_interval``.

        Concurrent callers share one fetch. A failure (unreachable, not 200, not a JWKS,
        too large) is logged once until a fetch succeeds again and keeps the known keys.

        Args:
            force: fetch even within ``min_refresh_interval`` (still single-flight).

        Returns:
            True when a fetch succeeded in this call or in the one it waited for.
        """
        tried = self._tried_at
        async with self._lock:
            if self._tried_at != tried:
                return self._fetched_at == self._tried_at  # another caller just fetched
            if not force and self._clock() - self._tried_at < self._min_interval:
                return False
            self._tried_at = self._clock()
            self.fetches += 1
            try:
                document = await self._fetch()
                named, unnamed = _parse_key_set(document)
            except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
                if not self._failing:
                    logger.warning(
                        "JWKS %s could not be fetched (keeping %d known keys): %s",
                        redact_url(self.url),
                        len(self._keys) + len(self._unnamed),
                        redact_url(str(exc)) or type(exc).__name__,
                    )
                self._failing = True
                return False
            self._keys, self._unnamed = named, unnamed
            self._fetched_at = self._tried_at
            if self._failing:
                logger.info("JWKS %s fetched again", redact_url(self.url))
            self._failing = False
            return True

    async def _fetch(self) -> bytes:
        timeout = aiohttp.ClientTimeout(total=self._timeout)
        # A short-lived session: fetches are rare, and nothing is left open between them.
        async with (
            aiohttp.ClientSession(timeout=timeout, trust_env=False) as session,
            session.get(self.url, headers={"Accept": "application/json"}) as resp,
        ):
            if resp.status != 200:
                raise ValueError(f"answered {resp.status}")
            body = await resp.content.read(self._max_bytes + 1)
            if len(body) > self._max_bytes:
                raise ValueError(f"larger than {self._max_bytes} bytes")
            return body


def _parse_key_set(
    document: bytes,
) -> tuple[dict[str, VerifyingKey], tuple[VerifyingKey, ...]]:
    """The signing keys of a JWKS document by kid, and those without a kid.

    Keys that are not RSA/EC public signing keys (``use`` other than ``sig``, HMAC keys,
    private keys, malformed ones) are skipped; a document without any usable key is an
    error, so a broken publication never empties the cache.

    Raises:
        ValueError: not a JWKS, or no usable key in it.
    """
    try:
        data = _JWKS.decode(document)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise ValueError("not a JSON object") from exc
    entries = data.get("keys")
    if not isinstance(entries, list):
        raise ValueError('no "keys" list')
    named: dict[str, VerifyingKey] = {}
    unnamed: list[VerifyingKey] = []
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
            continue
        try:
            key = import_public_key(entry)
        except ConfigurationError:
            continue
        kid = entry.get("kid")
        if isinstance(kid, str) and kid:
            named[kid] = key
        else:
            unnamed.append(key)
    if not named and not unnamed:
        raise ValueError("no RSA or EC signing key in it")
    return named, tuple(unnamed)
