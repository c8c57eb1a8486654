"""The Signer protocol: a kid and RS256 signatures over bytes, sync or async."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol, runtime_checkable

__all__ = ["Signer"]


@runtime_checkable
class Signer(Protocol):
    """Signs JWTs for one registered key: what the client needs from a private key.

    The client encodes the JWT header and claims itself and calls `sign` with the
    JWS signing input (``base64url(header) + "." + base64url(claims)``); the signer returns
    the RS256 signature. Nothing else of the key is ever asked for, so the key can stay
    in a hardware security module.

    Implement it with any object that has these two members; no base class is needed.
    Built-ins: `payments_async.signing.KeySigner`,
    `payments_async.signing.ThreadPoolSigner`,
    `payments_async.signing.Pkcs11Signer`.
    """

    @property
    def key_id(self) -> str:
        """The kid registered with the service for this key (the JWT header ``kid``)."""
        ...

    def sign(self, data: bytes) -> bytes | Awaitable[bytes]:
        """Sign ``data`` with RS256: RSASSA-PKCS1-v1_5 over its SHA-256 digest.

        Args:
            data: the JWS signing input; the signer hashes it (do not pre-hash).

        Returns:
            The raw signature bytes (the modulus length: 256 for RSA-2048), or an
            awaitable of them for signers that do their work elsewhere (a thread, an HSM).
            A sync result costs the caller no event-loop hop.
        """
        ...
