"""Key loading refuses what the service would reject, with a message naming the problem."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

from payments_async import _keys
from payments_async._errors import ConfigurationError
from payments_async._keys import (
    generate_key_pair,
    generate_private_key,
    load_private_key,
    load_public_key,
    private_key_pem,
    public_key_pem,
)

Enc = serialization.Encoding
Fmt = serialization.PrivateFormat


def _pem(key: object, fmt: serialization.PrivateFormat = Fmt.PKCS8, password: bytes | None = None):
    enc = (
        serialization.BestAvailableEncryption(password)
        if password
        else serialization.NoEncryption()
    )
    return key.private_bytes(Enc.PEM, fmt, enc)  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def small_key() -> RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=1024)


@pytest.fixture(scope="module")
def ec_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _same(a: RSAPrivateKey, b: RSAPrivateKey) -> bool:
    return a.private_numbers() == b.private_numbers()


def test_loads_pem_bytes_text_paths_and_objects(rsa_key: RSAPrivateKey, tmp_path: Path) -> None:
    pem = private_key_pem(rsa_key)
    file = tmp_path / "k.pem"
    file.write_bytes(pem)
    for src in (pem, pem.decode(), file, str(file), rsa_key):
        loaded = load_private_key(src)
        assert isinstance(loaded, RSAPrivateKey)
        assert _same(loaded, rsa_key)


def test_loads_traditional_openssl_pem(rsa_key: RSAPrivateKey) -> None:
    assert _same(load_private_key(_pem(rsa_key, Fmt.TraditionalOpenSSL)), rsa_key)


def test_1024_bit_key_is_refused(small_key: RSAPrivateKey) -> None:
    with pytest.raises(ConfigurationError, match=r"1024 bits.*at least 2048"):
        load_private_key(_pem(small_key))
    with pytest.raises(ConfigurationError, match="1024 bits"):
        load_private_key(small_key)


@pytest.mark.parametrize("fmt", [Fmt.PKCS8, Fmt.TraditionalOpenSSL])
def test_encrypted_pem_is_refused(rsa_key: RSAPrivateKey, fmt: serialization.PrivateFormat) -> None:
    pem = _pem(rsa_key, fmt, password=b"pw")
    with pytest.raises(ConfigurationError, match="encrypted") as info:
        load_private_key(pem)
    assert "-----" not in str(info.value)


def test_ec_key_is_refused(ec_key: ec.EllipticCurvePrivateKey) -> None:
    with pytest.raises(ConfigurationError, match=r"not RSA \(got an EC key\)"):
        load_private_key(_pem(ec_key))


@pytest.mark.parametrize(
    "src",
    [
        b"not a key at all",
        b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        "-----BEGIN RSA PRIVATE KEY-----\ngarbage\n-----END RSA PRIVATE KEY-----\n",
    ],
)
def test_malformed_pem_is_refused(src: bytes | str) -> None:
    with pytest.raises(ConfigurationError, match="malformed") as info:
        load_private_key(src)
    assert "garbage" not in str(info.value)
    assert "AAAA" not in str(info.value)


def test_missing_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    with pytest.raises(ConfigurationError, match="not found") as info:
        load_private_key(missing)
    assert str(missing) in str(info.value)


def test_public_key_where_private_expected(rsa_key: RSAPrivateKey) -> None:
    with pytest.raises(ConfigurationError, match="got a public key"):
        load_private_key(public_key_pem(rsa_key))


def test_wrong_type_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="not int"):
        load_private_key(42)  # type: ignore[arg-type]


def test_error_messages_never_contain_key_material(rsa_key: RSAPrivateKey) -> None:
    pem = private_key_pem(rsa_key)
    body_line = pem.decode().splitlines()[1]
    broken = pem.replace(body_line.encode(), body_line[::-1].encode())
    with pytest.raises(ConfigurationError) as info:
        load_private_key(broken)
    assert body_line not in str(info.value)
    assert body_line[::-1] not in str(info.value)


def test_load_public_key(rsa_key: RSAPrivateKey, small_key: RSAPrivateKey, ec_key: object) -> None:
    pem = public_key_pem(rsa_key)
    assert load_public_key(pem).public_numbers() == rsa_key.public_key().public_numbers()
    assert load_public_key(pem.decode()).key_size == 2048
    pkcs1 = rsa_key.public_key().public_bytes(Enc.PEM, serialization.PublicFormat.PKCS1)
    assert load_public_key(pkcs1).key_size == 2048
    with pytest.raises(ConfigurationError, match="1024 bits"):
        load_public_key(public_key_pem(small_key))
    ec_pub = ec_key.public_key().public_bytes(  # type: ignore[attr-defined]
        Enc.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    with pytest.raises(ConfigurationError, match="not RSA"):
        load_public_key(ec_pub)
    with pytest.raises(ConfigurationError, match="malformed"):
        load_public_key(b"-----BEGIN PUBLIC KEY-----\nxx\n-----END PUBLIC KEY-----\n")


def test_load_public_key_refuses_a_private_key_without_echoing_it(rsa_key: RSAPrivateKey) -> None:
    pem = private_key_pem(rsa_key)
    with pytest.raises(ConfigurationError, match="got a private key") as info:
        load_public_key(pem)
    assert pem.decode().splitlines()[1] not in str(info.value)


def test_generate_private_key_refuses_small_sizes() -> None:
    with pytest.raises(ConfigurationError, match="at least 2048"):
        generate_private_key(1024)


@pytest.fixture
def fast_keygen(monkeypatch: pytest.MonkeyPatch, rsa_key: RSAPrivateKey) -> None:
    """generate_key_pair with the session key instead of a fresh (slow) 3072-bit one."""

    def fake(bits: int = 3072) -> RSAPrivateKey:
        _keys._check_bits(bits, "the requested key size")
        return rsa_key

    monkeypatch.setattr(_keys, "generate_private_key", fake)


@pytest.mark.usefixtures("fast_keygen")
def test_generate_key_pair_writes_a_0600_private_key(
    tmp_path: Path, rsa_key: RSAPrivateKey
) -> None:

    files = generate_key_pair(tmp_path / "keys", name="acme")
    assert files.private_key_path.name == "acme-private.pem"
    assert stat.S_IMODE(files.private_key_path.stat().st_mode) == 0o600
    private = load_private_key(files.private_key_path)
    public = load_public_key(files.public_key_path.read_bytes())
    assert private.public_key().public_numbers() == public.public_numbers()
    assert _same(private, rsa_key)


@pytest.mark.usefixtures("fast_keygen")
def test_generate_key_pair_never_overwrites(tmp_path: Path) -> None:
    generate_key_pair(tmp_path)
    before = (tmp_path / "client-private.pem").read_bytes()
    with pytest.raises(ConfigurationError, match="overwrite"):
        generate_key_pair(tmp_path)
    assert (tmp_path / "client-private.pem").read_bytes() == before


@pytest.mark.usefixtures("fast_keygen")
def test_generate_key_pair_checks_name_and_bits(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="file name"):
        generate_key_pair(tmp_path, name="../evil")
    with pytest.raises(ConfigurationError, match="at least 2048"):
        generate_key_pair(tmp_path, bits=1024)


def test_generate_key_pair_with_a_real_2048_bit_keygen(tmp_path: Path) -> None:
    files = generate_key_pair(tmp_path, bits=2048)
    assert load_private_key(files.private_key_path).key_size == 2048
