"""Who we are: client id and secret, the registered kid/iss and the signing key."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Final, NoReturn, Protocol

from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

from ._checks import check_key_id_and_issuer
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
from ._jwt import JwtSigner, MaybeAwaitable, SignedToken
from ._keys import PrivateKeySource
from .signing import KeySigner, Signer

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
    are signed with the client's key, in an HSM, or are the sandbox's predefined values.
    The methods are coroutines returning a `payments_async._jwt.SignedToken` (value and
    expiry), whether the key signs in process, in a thread pool or in an HSM.
    """

    key_id: str

    async def sign_assertion(
        self, *, now: float | None = None, lifetime: float = ASSERTION_LIFETIME
    ) -> SignedToken:
        """The authentication JWT for the token request, with its expiry."""
        ...

    async def sign_sca_token(
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
    """Signs with the client's signer: a `JwtSigner` bound to one client id."""

    __slots__ = ("_client_id", "_jwt", "key_id")

    def __init__(self, jwt: JwtSigner, client_id: str) -> None:
        self._jwt = jwt
        self._client_id = client_id
        self.key_id = jwt.key_id

    def __repr__(self) -> str:
        return f"<signer {self._jwt!r} client_id={self._client_id!r}>"

    async def sign_assertion(
        self, *, now: float | None = None, lifetime: float = ASSERTION_LIFETIME
    ) -> SignedToken:
        return await _settled(self._jwt.sign_assertion(self._client_id, now=now, lifetime=lifetime))

    async def sign_sca_token(
        self,
        body: bytes,
        *,
        payment_id: str | None = None,
        now: float | None = None,
        lifetime: float = SCA_TOKEN_LIFETIME,
    ) -> SignedToken:
        return await _settled(
            self._jwt.sign_sca_token(body, payment_id=payment_id, now=now, lifetime=lifetime)
        )


async def _settled(signed: MaybeAwaitable[SignedToken]) -> SignedToken:
    """The token of a ``JwtSigner``: at once from a sync `Signer`, awaited from an async one
    (the `Signer` protocol lets ``sign`` return either; this is the one place that asks)."""
    return signed if isinstance(signed, SignedToken) else await signed


class _SandboxSigner:
    """Returns the sandbox's predefined tokens; they never expire on our side."""

    __slots__ = ("key_id",)

    def __init__(self, key_id: str) -> None:
        self.key_id = key_id

    _ASSERTION: ClassVar[SignedToken] = SignedToken(SANDBOX_ASSERTION, math.inf)
    _SCA: ClassVar[SignedToken] = SignedToken(SANDBOX_SCA_TOKEN, math.inf)

    def __repr__(self) -> str:
        return "<signer sandbox predefined tokens>"

    async def sign_assertion(
        self, *, now: float | None = None, lifetime: float = ASSERTION_LIFETIME
    ) -> SignedToken:
        return self._ASSERTION

    async def sign_sca_token(
        self,
        body: bytes,
        *,
        payment_id: str | None = None,
        now: float | None = None,
        lifetime: float = SCA_TOKEN_LIFETIME,
    ) -> SignedToken:
        return self._SCA


class Credentials:
    """The client's identity: client id and secret, registered kid and iss, signing key.

    Immutable. A private key is loaded and checked once, here (parsing a PEM is slow);
    ``repr`` never shows the client secret, key material or a PIN.

    Three modes:

    * **key** (``private_key=``): the assertion and SCA tokens are RS256 JWTs signed in
      process with this key (a `payments_async.signing.KeySigner`: the default
      and fastest path). ``key_id`` and ``issuer`` must be the values registered with the
      service together with the public key.
    * **signer** (``signer=``): the same JWTs, signed by any
      `payments_async.signing.Signer`: a thread pool, an HSM through PKCS#11, or
      your own. The private key never has to be in the process. ``key_id`` defaults to
      ``signer.key_id`` (and must equal it if given).
    * **sandbox tokens** (``sandbox_tokens=True``, see `sandbox`): the client sends
      the sandbox's predefined assertion and SCA token (``SANDBOX_ASSERTION``,
      ``SANDBOX_SCA_TOKEN``) instead of signing, so you can try the sandbox without keys.

    To move to a new key while a client runs, build new credentials and pass them to
    `PaymentsClient.rotate_credentials`.

    Args:
        client_id: the client id (HTTP Basic user, ``sub`` of the assertion,
            ``X-Service-Client-Id``). Must not contain ``:``.
        client_secret: the client secret (HTTP Basic password).
        key_id: the registered key id (JWT header ``kid``). Required unless ``signer``
            gives it.
        issuer: the registered issuer (JWT claim ``iss``).
        private_key: the RSA private key: a key object, PEM bytes or text, or a path to an
            unencrypted PEM file.
        signer: a `payments_async.signing.Signer` instead of ``private_key``.
        sandbox_tokens: use the sandbox's predefined tokens instead of signing.

    Raises:
        ConfigurationError: a missing value, not exactly one of ``private_key``,
            ``signer`` and ``sandbox_tokens``, a kid that differs from the signer's, or a
            key the service would reject (encrypted, not RSA, fewer than 2048 bits,
            malformed, missing file).
    """

    __slots__ = (
        "_signer",
        "client_id",
        "client_secret",
        "issuer",
        "key_id",
        "key_signer",
        "private_key",
        "sandbox_tokens",
    )

    client_id: str
    client_secret: str
    key_id: str
    issuer: str
    key_signer: Signer | None
    """The `payments_async.signing.Signer` in use; None with sandbox tokens."""
    private_key: RSAPrivateKey | None
    sandbox_tokens: bool
    _signer: RequestSigner

    def __init__(
        self,
        client_id: str,
        client_secret: str,
        *,
        key_id: str | None = None,
        issuer: str,
        private_key: PrivateKeySource | None = None,
        signer: Signer | None = None,
        sandbox_tokens: bool = False,
    ) -> None:
        if signer is not None and key_id is None and isinstance(signer, Signer):
            key_id = signer.key_id
        named = (
            ("client_id", client_id),
            ("client_secret", client_secret),
            ("key_id", key_id),
            ("issuer", issuer),
        )
        for name, value in named:
            if not isinstance(value, str) and not (name == "key_id" and value is None):
                raise ConfigurationError(f"{name} must be a str, got {type(value).__name__}")
        missing = [name for name, value in named if not value]
        if missing:
            raise ConfigurationError(f"credentials incomplete: missing {', '.join(missing)}")
        kid: str = key_id or ""  # not empty: checked just above
        check_key_id_and_issuer(kid, issuer)
        if ":" in client_id:
            # HTTP Basic cannot carry a ':' in the user part.
            raise ConfigurationError("client_id must not contain ':'")
        given = [
            name
            for name, value in (
                ("private_key", private_key is not None),
                ("signer", signer is not None),
                ("sandbox_tokens=True", sandbox_tokens),
            )
            if value
        ]
        if len(given) > 1:
            raise ConfigurationError(
                f"pass exactly one of private_key, signer and sandbox_tokens=True, not "
                f"{'both' if len(given) == 2 else 'all of'} {' and '.join(given)}"
            )
        key_signer: Signer | None
        request_signer: RequestSigner
        if sandbox_tokens:
            key_signer = None
            request_signer = _SandboxSigner(kid)
        else:
            if private_key is not None:
                key_signer = KeySigner(private_key, key_id=kid)
            elif signer is not None:
                key_signer = signer
            else:
                raise ConfigurationError(
                    "credentials incomplete: missing private_key or signer (or use "
                    "Credentials.sandbox() to try the sandbox with its predefined tokens)"
                )
            jwt = JwtSigner(key_signer, key_id=kid, issuer=issuer)
            request_signer = _KeySigner(jwt, client_id)
        key = key_signer.private_key if isinstance(key_signer, KeySigner) else None
        setter = object.__setattr__
        setter(self, "client_id", client_id)
        setter(self, "client_secret", client_secret)
        setter(self, "key_id", kid)
        setter(self, "issuer", issuer)
        setter(self, "key_signer", key_signer)
        setter(self, "private_key", key)
        setter(self, "sandbox_tokens", sandbox_tokens)
        setter(self, "_signer", request_signer)

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise AttributeError(f"Credentials are immutable; cannot set {name!r}")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"Credentials are immutable; cannot delete {name!r}")

    def __repr__(self) -> str:
        if self.key_signer is None:
            key = "sandbox predefined tokens"
        elif self.private_key is not None:
            key = f"RSA-{self.private_key.key_size}"
        else:
            key = repr(self.key_signer)
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
            In key or signer mode, one bound to ``client_id``, ``key_id`` and ``issuer``;
            in sandbox-tokens mode, one that returns the predefined tokens (expiry
            ``inf``).
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
        """Build credentials from environment variables: the only place the library reads them
        (the command line also reads its own, such as ``PAYMENTS_CREDENTIALS_FILE``).

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
