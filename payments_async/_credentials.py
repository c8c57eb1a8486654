"""Who we are: client id and secret, the registered kid/iss and the signing key."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Final, NoReturn, Protocol

from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

from ._constants import (
    ASSERTION_LIFETIME,
    SANDBOX_ASSERTION,
    SANDBOX_CLIENT_ID,
    SANDBOX_CLIENT_SECRET,
    SANDBOX_ISSUER,
    SANDBOX_KEY_ID,
    SANDBOX_SCA_TOKEN,
    SCA_TOKEN_LIFETIME,
)
from ._errors import ConfigurationError
from ._jwt import JwtSigner, SignedToken
from ._keys import PrivateKeySource, load_private_key

__all__ = ["ENV_VARS", "Credentials", "RequestSigner"]

ENV_CLIENT_ID: Final = "PAYMENTS_CLIENT_ID"
ENV_CLIENT_SECRET: Final = "PAYMENTS_CLIENT_SECRET"
ENV_KEY_ID: Final = "PAYMENTS_KEY_ID"
ENV_ISSUER: Final = "PAYMENTS_ISSUER"
ENV_PRIVATE_KEY_FILE: Final = "PAYMENTS_PRIVATE_KEY_FILE"
ENV_VARS: Final = (ENV_CLIENT_ID, ENV_CLIENT_SECRET, ENV_KEY_ID, ENV_ISSUER, ENV_PRIVATE_KEY_FILE)


class RequestSigner(Protocol):
    """Makes the assertion and SCA tokens, whichever mode the credentials are in.

    The token session and the client use only this, so they do not care whether tokens
    are signed with the client's key or are the sandbox's predefined values. The
    methods return a :class:`~payments_async._jwt.SignedToken` (value and expiry).
    """

    def sign_assertion(
        self, *, now: float | None = None, lifetime: float = ASSERTION_LIFETIME
    ) -> SignedToken:
        """The authentication JWT for the token request, with its expiry."""
        ...

    def sign_sca_token(
        self,
        body: bytes,
        *,
        payment_id: str | None = None,
        now: float | None = None,
        lifetime: float = SCA_TOKEN_LIFETIME,
    ) -> SignedToken:
        """The SCA JWT for these exact body bytes, with its expiry."""
        ...


class _KeySigner:
    """Signs with the client's key: a :class:`JwtSigner` bound to one client id."""

    __slots__ = ("_client_id", "_jwt")

    def __init__(self, jwt: JwtSigner, client_id: str) -> None:
        self._jwt = jwt
        self._client_id = client_id

    def __repr__(self) -> str:
        return f"<signer {self._jwt!r} client_id={self._client_id!r}>"

    def sign_assertion(
        self, *, now: float | None = None, lifetime: float = ASSERTION_LIFETIME
    ) -> SignedToken:
        return self._jwt.sign_assertion(self._client_id, now=now, lifetime=lifetime)

    def sign_sca_token(
        self,
        body: bytes,
        *,
        payment_id: str | None = None,
        now: float | None = None,
        lifetime: float = SCA_TOKEN_LIFETIME,
    ) -> SignedToken:
        return self._jwt.sign_sca_token(body, payment_id=payment_id, now=now, lifetime=lifetime)


class _SandboxSigner:
    """Returns the sandbox's predefined tokens; they never expire on our side."""

    __slots__ = ()

    _ASSERTION: ClassVar[SignedToken] = SignedToken(SANDBOX_ASSERTION, math.inf)
    _SCA: ClassVar[SignedToken] = SignedToken(SANDBOX_SCA_TOKEN, math.inf)

    def __repr__(self) -> str:
        return "<signer sandbox predefined tokens>"

    def sign_assertion(
        self, *, now: float | None = None, lifetime: float = ASSERTION_LIFETIME
    ) -> SignedToken:
        return self._ASSERTION

    def sign_sca_token(
        self,
        body: bytes,
        *,
        payment_id: str | None = None,
        now: float | None = None,
        lifetime: float = SCA_TOKEN_LIFETIME,
    ) -> SignedToken:
        return self._SCA


class Credentials:
    """The client's identity: client id and secret, registered kid and iss, private key.

    Immutable. The private key is loaded and checked once, here (PEM parsing costs tens
    of milliseconds); ``repr`` never shows the client secret or key material.

    Two modes:

    * **signed** (default): the assertion and SCA tokens are RS256 JWTs signed with
      ``private_key``; ``key_id`` and ``issuer`` must be the values registered with the
      service together with the public key.
    * **sandbox tokens** (``sandbox_tokens=True``, see :meth:`sandbox`): the client sends
      the sandbox's predefined assertion and SCA token (``SANDBOX_ASSERTION``,
      ``SANDBOX_SCA_TOKEN``) instead of signing, so you can try the sandbox without keys.
      No private key is used.

    Args:
        client_id: the client id (HTTP Basic user, ``sub`` of the assertion,
            ``X-Service-Client-Id``). Must not contain ``:``.
        client_secret: the client secret (HTTP Basic password).
        key_id: the registered key id (JWT header ``kid``).
        issuer: the registered issuer (JWT claim ``iss``).
        private_key: the RSA private key: a key object, PEM bytes or text, or a path to an
            unencrypted PEM file. Required in signed mode; must be None in sandbox-tokens
            mode.
        sandbox_tokens: use the sandbox's predefined tokens instead of signing.

    Raises:
        ConfigurationError: a missing value, or a key the service would reject (encrypted,
            not RSA, fewer than 2048 bits, malformed, missing file).
    """

    __slots__ = (
        "_signer",
        "client_id",
        "client_secret",
        "issuer",
        "key_id",
        "private_key",
        "sandbox_tokens",
    )

    client_id: str
    client_secret: str
    key_id: str
    issuer: str
    private_key: RSAPrivateKey | None
    sandbox_tokens: bool
    _signer: RequestSigner

    def __init__(
        self,
        client_id: str,
        client_secret: str,
        *,
        key_id: str,
        issuer: str,
        private_key: PrivateKeySource | None = None,
        sandbox_tokens: bool = False,
    ) -> None:
        for name, value in (
            ("client_id", client_id),
            ("client_secret", client_secret),
            ("key_id", key_id),
            ("issuer", issuer),
        ):
            if not isinstance(value, str):
                raise ConfigurationError(f"{name} must be a str, got {type(value).__name__}")
        missing = [
            name
            for name, value in (
                ("client_id", client_id),
                ("client_secret", client_secret),
                ("key_id", key_id),
                ("issuer", issuer),
            )
            if not value
        ]
        if missing:
            raise ConfigurationError(f"credentials incomplete: missing {', '.join(missing)}")
        if ":" in client_id:
            # HTTP Basic cannot carry a ':' in the user part.
            raise ConfigurationError("client_id must not contain ':'")
        key: RSAPrivateKey | None
        signer: RequestSigner
        if sandbox_tokens:
            if private_key is not None:
                raise ConfigurationError(
                    "sandbox_tokens mode sends the predefined tokens and signs nothing; "
                    "pass either private_key or sandbox_tokens=True, not both"
                )
            key = None
            signer = _SandboxSigner()
        else:
            if private_key is None:
                raise ConfigurationError(
                    "credentials incomplete: missing private_key (or use "
                    "Credentials.sandbox() to try the sandbox with its predefined tokens)"
                )
            key = load_private_key(private_key)
            signer = _KeySigner(JwtSigner(key, key_id=key_id, issuer=issuer), client_id)
        setter = object.__setattr__
        setter(self, "client_id", client_id)
        setter(self, "client_secret", client_secret)
        setter(self, "key_id", key_id)
        setter(self, "issuer", issuer)
        setter(self, "private_key", key)
        setter(self, "sandbox_tokens", sandbox_tokens)
        setter(self, "_signer", signer)

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise AttributeError(f"Credentials are immutable; cannot set {name!r}")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"Credentials are immutable; cannot delete {name!r}")

    def __repr__(self) -> str:
        if self.private_key is None:
            key = "sandbox predefined tokens"
        else:
            key = f"RSA-{self.private_key.key_size}"
        return (
            f"Credentials(client_id={self.client_id!r}, key_id={self.key_id!r}, "
            f"issuer={self.issuer!r}, key={key}, client_secret=***)"
        )

    def __reduce__(self) -> NoReturn:
        # Pickling would copy the secret and the private key into bytes on disk or the wire.
        raise TypeError("Credentials cannot be pickled")

    def __copy__(self) -> Credentials:
        return self  # immutable

    def __deepcopy__(self, memo: dict[int, Any]) -> Credentials:
        return self

    def signer(self) -> RequestSigner:
        """The object that makes this client's assertion and SCA tokens (built once).

        Returns:
            In signed mode, a signer bound to ``client_id``, ``key_id`` and ``issuer``; in
            sandbox-tokens mode, one that returns the predefined tokens (expiry ``inf``).
        """
        return self._signer

    @classmethod
    def sandbox(cls) -> Credentials:
        """The sandbox's predefined client, sending its predefined tokens (no keys needed).

        Uses ``SANDBOX_CLIENT_ID``, ``SANDBOX_CLIENT_SECRET``, ``SANDBOX_KEY_ID`` and
        ``SANDBOX_ISSUER``; these values are public and documented, not secrets.
        """
        return cls(
            SANDBOX_CLIENT_ID,
            SANDBOX_CLIENT_SECRET,
            key_id=SANDBOX_KEY_ID,
            issuer=SANDBOX_ISSUER,
            sandbox_tokens=True,
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Credentials:
        """Build credentials from environment variables: the only place the package reads them.

        Variables (all required):

        * ``PAYMENTS_CLIENT_ID``: the client id.
        * ``PAYMENTS_CLIENT_SECRET``: the client secret.
        * ``PAYMENTS_KEY_ID``: the registered key id (JWT ``kid``).
        * ``PAYMENTS_ISSUER``: the registered issuer (JWT ``iss``).
        * ``PAYMENTS_PRIVATE_KEY_FILE``: path to the unencrypted RSA private key PEM.

        Args:
            environ: the mapping to read; ``os.environ`` if None.

        Raises:
            ConfigurationError: a variable is missing or empty (all missing names are
                listed), or the key file is unusable.
        """
        env = os.environ if environ is None else environ
        missing = [name for name in ENV_VARS if not env.get(name)]
        if missing:
            raise ConfigurationError(
                f"missing environment variable{'s' if len(missing) > 1 else ''}: "
                + ", ".join(missing)
            )
        key_file = env[ENV_PRIVATE_KEY_FILE]
        return cls(
            env[ENV_CLIENT_ID],
            env[ENV_CLIENT_SECRET],
            key_id=env[ENV_KEY_ID],
            issuer=env[ENV_ISSUER],
            # A Path, so a value is always read as a file name, never as inline PEM.
            private_key=Path(key_file),
        )
