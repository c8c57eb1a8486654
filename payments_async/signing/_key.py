"""The in-process key signer: today's behaviour, the default and the fastest path."""

from __future__ import annotations

from typing import Final, NoReturn, final

from cryptography.hazmat.primitives.asymmetric.padding import PKCS1v15
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey, RSAPublicKey
from cryptography.hazmat.primitives.hashes import SHA256

from .._errors import ConfigurationError
from .._keys import PrivateKeySource, load_private_key, public_key_pem

__all__ = ["InProcessKey", "KeySigner", "check_key_id"]

PKCS1: Final = PKCS1v15()
SHA_256: Final = SHA256()


def check_key_id(key_id: object) -> str:
    """The kid, refused when empty or not text."""
    if not isinstance(key_id, str) or not key_id:
        raise ConfigurationError("key_id (the JWT header kid) must be a non-empty string")
    return key_id


class InProcessKey:
    """What the in-process signers share: a checked RSA key and its kid."""

    __slots__ = ("_key", "_key_id")

    def __init__(self, private_key: PrivateKeySource, *, key_id: str) -> None:
        self._key_id = check_key_id(key_id)
        self._key = load_private_key(private_key)

    @property
    def key_id(self) -> str:
        """The kid this key is registered under."""
        return self._key_id

    @property
    def private_key(self) -> RSAPrivateKey:
        """The RSA private key (a secret: never log it)."""
        return self._key

    def public_key(self) -> RSAPublicKey:
        """The public half, to register with the service."""
        return self._key.public_key()

    def public_key_pem(self) -> bytes:
        """The public half as SubjectPublicKeyInfo PEM: what you register with the service."""
        return public_key_pem(self._key)

    def __reduce__(self) -> NoReturn:
        raise TypeError(f"{type(self).__name__} holds a private key and cannot be pickled")


@final
class KeySigner(InProcessKey):
    """Signs with an RSA private key held in this process, on the calling thread.

    The signature is computed on the calling thread (in the client, the event loop's) and
    returned directly (no await, no thread hop).

    Args:
        private_key: an ``RSAPrivateKey``, PEM bytes or text, or a path to an unencrypted
            PEM file (checked: RSA, >= 2048 bits).
        key_id: the kid registered with the service for this key.

    Raises:
        ConfigurationError: a bad key or an empty kid (the message never shows key
            material).
    """

    __slots__ = ()

    def sign(self, data: bytes) -> bytes:
        """RS256-sign ``data`` now, on this thread.

        Args:
            data: the JWS signing input.

        Returns:
            The signature bytes.
        """
        return self._key.sign(data, PKCS1, SHA_256)

    def __repr__(self) -> str:
        return f"KeySigner(key_id={self._key_id!r}, key=RSA-{self._key.key_size})"
