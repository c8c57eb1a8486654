"""Load and check RSA keys (PEM, unencrypted, >= 2048 bits) and write new key pairs."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed448, ed25519, rsa
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey, RSAPublicKey

from ._constants import DEFAULT_KEYGEN_BITS, MIN_RSA_BITS
from ._errors import ConfigurationError

__all__ = [
    "KeyPairFiles",
    "PrivateKeySource",
    "PublicKeySource",
    "generate_key_pair",
    "generate_private_key",
    "load_private_key",
    "load_public_key",
    "private_key_pem",
    "public_key_pem",
]

PrivateKeySource: TypeAlias = bytes | str | os.PathLike[str] | RSAPrivateKey
"""PEM bytes, PEM text, a path (``str`` not starting with ``-----BEGIN``), or a key."""

PublicKeySource: TypeAlias = bytes | str | RSAPublicKey
"""PEM bytes or text of a SubjectPublicKeyInfo / PKCS#1 public key, or a key."""

_PEM_MARKER = "-----BEGIN"
_RSA_PUBLIC_EXPONENT = 65537


@dataclass(frozen=True, slots=True)
class KeyPairFiles:
    """Where :func:`generate_key_pair` wrote the two PEM files."""

    private_key_path: Path
    public_key_path: Path


def _check_bits(bits: int, what: str) -> None:
    if bits < MIN_RSA_BITS:
        raise ConfigurationError(
            f"{what} is {bits} bits; the service requires RSA keys of at least {MIN_RSA_BITS} bits"
        )


def _show_path(path: Path) -> str:
    """A path for an error message, unless the "path" is really key text put there by mistake."""
    text = str(path)
    if _PEM_MARKER in text or "\n" in text or len(text) > 1024:
        return "(a value that looks like key text, not a file path)"
    return repr(text)


def _read_pem(src: bytes | str | os.PathLike[str], what: str) -> bytes:
    """Return PEM bytes from PEM bytes, PEM text or a file path."""
    if isinstance(src, bytes):
        return src
    if isinstance(src, str) and src.lstrip().startswith(_PEM_MARKER):
        return src.encode("ascii", errors="replace")
    path = Path(src)
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ConfigurationError(f"{what} file not found: {_show_path(path)}") from None
    except IsADirectoryError:
        raise ConfigurationError(f"{what} path is a directory: {_show_path(path)}") from None
    except OSError as exc:
        # The OS message names the problem (permission denied...), never file contents.
        raise ConfigurationError(
            f"cannot read {what} file {_show_path(path)}: {exc.strerror or type(exc).__name__}"
        ) from None


def load_private_key(src: PrivateKeySource) -> RSAPrivateKey:
    """Load the client's RSA private key once, refusing anything the service would reject.

    Loading a PEM is slow: do it once per client, never per request.

    Args:
        src: an ``RSAPrivateKey``, PEM bytes, PEM text, or a path to a PEM file
            (``os.PathLike`` or a ``str`` that does not start with ``-----BEGIN``).

    Returns:
        The key, checked.

    Raises:
        ConfigurationError: the file is missing or unreadable, the PEM is malformed or
            password-protected, the key is not RSA, or it has fewer than 2048 bits. The
            message names the problem and never contains key material.
    """
    if isinstance(src, RSAPrivateKey):
        _check_bits(src.key_size, "the private key")
        return src
    if not isinstance(src, bytes | str | os.PathLike):
        raise ConfigurationError(
            f"private key must be PEM bytes, PEM text, a path or an RSAPrivateKey, "
            f"not {type(src).__name__}"
        )
    data = _read_pem(src, "private key")
    if b"ENCRYPTED" in data:
        raise ConfigurationError(
            "the private key PEM is encrypted (password-protected); the client needs an "
            "unencrypted PEM (the service's key rule: PEM without password protection)"
        )
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError:
        # cryptography's way of saying "a password is needed".
        raise ConfigurationError(
            "the private key PEM is encrypted (password-protected); the client needs an "
            "unencrypted PEM"
        ) from None
    except (ValueError, UnsupportedAlgorithm):
        if b"PUBLIC KEY" in data:
            raise ConfigurationError("expected a private key but got a public key PEM") from None
        raise ConfigurationError(
            "the private key is malformed: not a readable PEM private key"
        ) from None
    if not isinstance(key, RSAPrivateKey):
        raise ConfigurationError(
            f"the private key is not RSA (got {_key_kind(key)}); the service requires RSA"
        )
    _check_bits(key.key_size, "the private key")
    return key


def load_public_key(pem: PublicKeySource) -> RSAPublicKey:
    """Load an RSA public key and apply the service's registration rule.

    The sandbox uses this to register client keys.

    Args:
        pem: PEM bytes or text (SubjectPublicKeyInfo ``PUBLIC KEY`` or PKCS#1
            ``RSA PUBLIC KEY``), or an ``RSAPublicKey``.

    Returns:
        The key, checked.

    Raises:
        ConfigurationError: malformed PEM, a non-RSA key, or fewer than 2048 bits.
    """
    if isinstance(pem, RSAPublicKey):
        _check_bits(pem.key_size, "the public key")
        return pem
    if isinstance(pem, str):
        data = pem.encode("ascii", errors="replace")
    elif isinstance(pem, bytes):
        data = pem
    else:
        raise ConfigurationError(
            f"public key must be PEM bytes, PEM text or an RSAPublicKey, not {type(pem).__name__}"
        )
    if b"PRIVATE KEY" in data:
        # Never echo it, and never accept a private key where a public one belongs.
        raise ConfigurationError("expected a public key but got a private key PEM")
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm):
        raise ConfigurationError(
            "the public key is malformed: not a readable PEM public key"
        ) from None
    if not isinstance(key, RSAPublicKey):
        raise ConfigurationError(
            f"the public key is not RSA (got {_key_kind(key)}); the service requires RSA"
        )
    _check_bits(key.key_size, "the public key")
    return key


def _key_kind(key: object) -> str:
    """Name a non-RSA key's type for an error message."""
    kinds: tuple[tuple[tuple[type, ...], str], ...] = (
        ((ec.EllipticCurvePrivateKey, ec.EllipticCurvePublicKey), "an EC key"),
        ((ed25519.Ed25519PrivateKey, ed25519.Ed25519PublicKey), "an Ed25519 key"),
        ((ed448.Ed448PrivateKey, ed448.Ed448PublicKey), "an Ed448 key"),
        ((dsa.DSAPrivateKey, dsa.DSAPublicKey), "a DSA key"),
    )
    for types, label in kinds:
        if isinstance(key, types):
            return label
    return f"a {type(key).__name__}"


def public_key_pem(key: RSAPrivateKey | RSAPublicKey) -> bytes:
    """Return the SubjectPublicKeyInfo PEM of a key: what the client registers.

    Args:
        key: a private key (its public half is used) or a public key.
    """
    public = key.public_key() if isinstance(key, RSAPrivateKey) else key
    return public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def private_key_pem(key: RSAPrivateKey) -> bytes:
    """Return the unencrypted PKCS#8 PEM of a private key (for key files and tests).

    The result is a secret: write it to a 0600 file, never log it.
    """
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def generate_private_key(bits: int = DEFAULT_KEYGEN_BITS) -> RSAPrivateKey:
    """Generate a fresh RSA private key (slow: ~0.1 s for 2048 bits, more for 3072).

    Args:
        bits: modulus size; at least 2048.

    Raises:
        ConfigurationError: ``bits`` is below 2048.
    """
    _check_bits(bits, "the requested key size")
    return rsa.generate_private_key(public_exponent=_RSA_PUBLIC_EXPONENT, key_size=bits)


def generate_key_pair(
    directory: str | os.PathLike[str],
    *,
    name: str = "client",
    bits: int = DEFAULT_KEYGEN_BITS,
) -> KeyPairFiles:
    """Generate a key pair and write ``<name>-private.pem`` (mode 0600) and ``<name>-public.pem``.

    Register the public PEM with the service together with your kid and iss. Existing
    files are never overwritten.

    Args:
        directory: where to write; created (mode 0700) if missing.
        name: file name stem.
        bits: RSA modulus size; at least 2048.

    Returns:
        The paths of the two files.

    Raises:
        ConfigurationError: ``bits`` below 2048, a bad ``name``, a file already exists,
            or the directory cannot be written.
    """
    if not name or os.sep in name or (os.altsep and os.altsep in name) or name in {".", ".."}:
        raise ConfigurationError(f"key pair name must be a plain file name stem, got {name!r}")
    key = generate_private_key(bits)
    folder = Path(directory)
    private_path = folder / f"{name}-private.pem"
    public_path = folder / f"{name}-public.pem"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        for path in (private_path, public_path):
            if path.exists():
                raise ConfigurationError(f"refusing to overwrite existing key file {str(path)!r}")
        # O_EXCL + mode at creation: the private key is never readable by others, not even
        # for an instant between write and chmod.
        fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(private_key_pem(key))
        os.chmod(private_path, 0o600)  # in case a umask or ACL widened it
        fd = os.open(public_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "wb") as fh:
            fh.write(public_key_pem(key))
    except FileExistsError as exc:
        raise ConfigurationError(
            f"refusing to overwrite existing key file {exc.filename!r}"
        ) from None
    except OSError as exc:
        raise ConfigurationError(
            f"cannot write the key pair in {str(folder)!r}: {exc.strerror or type(exc).__name__}"
        ) from None
    return KeyPairFiles(private_key_path=private_path, public_key_path=public_path)
