"""The PKCS#11 signer: the private key stays in a hardware security module (extra ``pkcs11``)."""

from __future__ import annotations

import asyncio
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar, NoReturn, final

from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey, RSAPublicNumbers

from .._constants import MIN_RSA_BITS, PKCS11_SIGN_MECHANISM
from .._errors import ConfigurationError, SigningError
from .._keys import public_key_pem
from ._key import check_key_id

__all__ = ["Pkcs11Signer"]

_EXTRA_HINT = "pip install 'payments-async[pkcs11]'"


def _import_pkcs11() -> ModuleType:
    """python-pkcs11, imported only when a Pkcs11Signer is built (it is an optional extra)."""
    try:
        import pkcs11
    except ImportError as exc:
        raise ConfigurationError(
            f"Pkcs11Signer needs the optional extra 'pkcs11' (python-pkcs11): {_EXTRA_HINT}"
        ) from exc
    return pkcs11


class _Library:
    """One loaded PKCS#11 module and the one thread that may call into it.

    python-pkcs11 initialises the module with ``C_Initialize(NULL)``: the application
    promises not to call it from several threads at once, so every call (open, login,
    sign, close) goes through one worker thread per library, shared by every signer that
    uses it (a key rotation on one token has two signers on the same library). The
    signers of one token also share one logged-in session: login state belongs to the
    application, and closing the session that logged in would end it for the others.
    ``sessions`` is touched only on the worker thread.
    """

    _registry: ClassVar[dict[str, _Library]] = {}  # guarded by _registry_lock
    _registry_lock = threading.Lock()

    def __init__(self, path: str) -> None:
        self.path = path
        self.users = 0
        self.sessions: dict[str, list[Any]] = {}  # token label -> [session, signers]
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="payments-pkcs11")

    @classmethod
    def acquire(cls, path: str) -> _Library:
        with cls._registry_lock:
            lib = cls._registry.get(path)
            if lib is None:
                lib = cls._registry[path] = _Library(path)
            lib.users += 1
            return lib

    def release(self) -> None:
        with self._registry_lock:
            self.users -= 1
            if self.users > 0:
                return
            del self._registry[self.path]
        self.executor.shutdown(wait=True)


@final
class Pkcs11Signer:
    """Signs in a PKCS#11 token (an HSM, a smart card, SoftHSM2): the key never leaves it.

    The token computes RSASSA-PKCS1-v1_5 over SHA-256 itself (mechanism
    ``CKM_SHA256_RSA_PKCS``); the process only ever holds a handle to the key. Every call
    into the PKCS#11 module runs on one worker thread per module (python-pkcs11 releases
    the GIL while the token signs), so the event loop keeps running; `sign` returns
    an awaitable and must be called from a running loop (the client does).

    The constructor loads the module, opens a session, logs in and finds the key, so a
    wrong path, label or PIN fails here, at start-up, with a clear error. The PIN is used
    for the login and not kept. Signers of the same token in one process share its
    session and login (the second one's PIN is not checked again). Close the signer when
    done (``close()`` or a ``with`` block); the last one of a token closes the session.

    Requires the optional extra ``pkcs11`` (``pip install 'payments-async[pkcs11]'``).

    Args:
        library: path of the vendor's PKCS#11 module (``.so``), e.g.
            ``/usr/lib/softhsm/libsofthsm2.so``.
        token_label: the label of the token holding the key.
        key_label: the label (``CKA_LABEL``) of the RSA private key in the token.
        pin: the token's user PIN (a secret: never shown in reprs or errors).
        key_id: the kid registered with the service for this key.

    Raises:
        ConfigurationError: the extra is not installed, the module cannot be loaded, no
            such token or key, the PIN is refused, or the key is not RSA of at least 2048
            bits.
    """

    __slots__ = ("_closed", "_key", "_key_id", "_key_label", "_lib", "_public", "_token_label")

    def __init__(
        self,
        library: str | os.PathLike[str],
        *,
        token_label: str,
        key_label: str,
        pin: str,
        key_id: str,
    ) -> None:
        self._key_id = check_key_id(key_id)
        for name, value in (("token_label", token_label), ("key_label", key_label)):
            if not isinstance(value, str) or not value:
                raise ConfigurationError(f"{name} must be a non-empty string")
        if not isinstance(pin, str) or not pin:
            raise ConfigurationError("pin must be a non-empty string")
        pkcs11 = _import_pkcs11()
        path = str(Path(library))
        self._key_label = key_label
        self._token_label = token_label
        self._closed = False
        self._lib = _Library.acquire(path)
        try:
            future = self._lib.executor.submit(
                _open, pkcs11, self._lib, token_label, key_label, pin
            )
            try:
                self._key, self._public = future.result()
            except pkcs11.PKCS11Error as exc:
                # What the steps above do not name (a device error, a token removed
                # meanwhile...): its PKCS#11 name, never the PIN.
                raise ConfigurationError(
                    f"the PKCS#11 token {token_label!r} failed to open: {type(exc).__name__}"
                ) from None
        except BaseException:
            self._lib.release()
            raise

    @property
    def key_id(self) -> str:
        """The kid this key is registered under."""
        return self._key_id

    def public_key(self) -> RSAPublicKey:
        """The public half (read from the token), to register with the service."""
        return self._public

    def public_key_pem(self) -> bytes:
        """The public half as SubjectPublicKeyInfo PEM: what you register with the service."""
        return public_key_pem(self._public)

    def sign(self, data: bytes) -> asyncio.Future[bytes]:
        """RS256-sign ``data`` in the token, on the module's worker thread.

        Args:
            data: the JWS signing input (the token hashes it).

        Returns:
            A future of the signature bytes, bound to the running loop.

        Raises:
            SigningError: the signer is closed; through the future, the token refused
                or failed the operation.
        """
        if self._closed:
            raise SigningError(f"the Pkcs11Signer for kid {self._key_id!r} is closed")
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(self._lib.executor, self._sign_blocking, data)

    def _sign_blocking(self, data: bytes) -> bytes:
        pkcs11 = _import_pkcs11()
        try:
            signature = self._key.sign(data, mechanism=pkcs11.Mechanism[PKCS11_SIGN_MECHANISM])
        except pkcs11.PKCS11Error as exc:
            raise SigningError(
                f"the PKCS#11 token refused to sign for kid {self._key_id!r}: {type(exc).__name__}"
            ) from exc
        return bytes(signature)

    def close(self) -> None:
        """Close the session (after the signatures in progress). Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._lib.executor.submit(_close, self._lib, self._token_label).result()
        finally:
            self._lib.release()

    def __enter__(self) -> Pkcs11Signer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return (
            f"Pkcs11Signer(key_id={self._key_id!r}, key_label={self._key_label!r}, "
            f"key=RSA-{self._public.key_size}){state}"
        )

    def __reduce__(self) -> NoReturn:
        raise TypeError("Pkcs11Signer holds a token session and cannot be pickled")


def _open(
    pkcs11: ModuleType, library: _Library, token_label: str, key_label: str, pin: str
) -> tuple[Any, RSAPublicKey]:
    """On the module's thread: load, open and log in (once per token), find the key."""
    entry = library.sessions.get(token_label)
    if entry is None:
        entry = [_login(pkcs11, library.path, token_label, pin), 0]
    try:
        key, public = _find_key(pkcs11, entry[0], token_label, key_label)
    except BaseException:
        if entry[1] == 0:
            entry[0].close()
        raise
    entry[1] += 1
    library.sessions[token_label] = entry
    return key, public


def _close(library: _Library, token_label: str) -> None:
    """On the module's thread: the last signer of a token closes its session."""
    entry = library.sessions[token_label]
    entry[1] -= 1
    if entry[1] == 0:
        del library.sessions[token_label]
        entry[0].close()


def _login(pkcs11: ModuleType, path: str, token_label: str, pin: str) -> Any:
    try:
        lib = pkcs11.lib(path)
    except pkcs11.PKCS11Error as exc:
        raise ConfigurationError(f"cannot load the PKCS#11 module {path!r}: {exc}") from None
    try:
        token = lib.get_token(token_label=token_label)
    except (pkcs11.NoSuchToken, pkcs11.MultipleTokensReturned) as exc:
        raise ConfigurationError(
            f"no single PKCS#11 token labelled {token_label!r} in {path!r} ({type(exc).__name__})"
        ) from None
    try:
        return token.open(user_pin=pin)
    except pkcs11.UserAlreadyLoggedIn:
        # Login state is per application and token: something else in this process
        # logged in already, so this session is logged in too.
        return token.open()
    except (pkcs11.PinIncorrect, pkcs11.PinInvalid, pkcs11.PinLenRange) as exc:
        raise ConfigurationError(
            f"the PKCS#11 token {token_label!r} refused the PIN ({type(exc).__name__})"
        ) from None
    except pkcs11.PinLocked:
        raise ConfigurationError(f"the PIN of PKCS#11 token {token_label!r} is locked") from None


def _find_key(
    pkcs11: ModuleType, session: Any, token_label: str, key_label: str
) -> tuple[Any, RSAPublicKey]:
    attribute = pkcs11.Attribute
    try:
        key = session.get_key(object_class=pkcs11.ObjectClass.PRIVATE_KEY, label=key_label)
    except (pkcs11.NoSuchKey, pkcs11.MultipleObjectsReturned) as exc:
        raise ConfigurationError(
            f"no single private key labelled {key_label!r} on PKCS#11 token "
            f"{token_label!r} ({type(exc).__name__})"
        ) from None
    if key.key_type != pkcs11.KeyType.RSA:
        raise ConfigurationError(
            f"the key {key_label!r} on token {token_label!r} is not RSA; the service requires RSA"
        )
    modulus = int.from_bytes(key[attribute.MODULUS], "big")
    exponent = int.from_bytes(key[attribute.PUBLIC_EXPONENT], "big")
    public = RSAPublicNumbers(exponent, modulus).public_key()
    if public.key_size < MIN_RSA_BITS:
        raise ConfigurationError(
            f"the key {key_label!r} is {public.key_size} bits; the service requires RSA "
            f"keys of at least {MIN_RSA_BITS} bits"
        )
    return key, public
