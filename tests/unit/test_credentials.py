"""Credentials: immutable, secret-free repr, env only via from_env, two signing modes."""

from __future__ import annotations

import copy
import math
import pickle
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

from payments_async import check_key_id_and_issuer
from payments_async._constants import (
    SANDBOX_ASSERTION,
    SANDBOX_CLIENT_ID,
    SANDBOX_CLIENT_SECRET,
    SANDBOX_ISSUER,
    SANDBOX_KEY_ID,
    SANDBOX_SCA_TOKEN,
)
from payments_async._credentials import ENV_VARS, Credentials
from payments_async._errors import ConfigurationError
from payments_async._jwt import RegisteredKey, verify_assertion, verify_sca_token
from payments_async._keys import private_key_pem
from tests.support.auth import CLIENT_ID, CLIENT_SECRET, ISSUER, KEY_ID


@pytest.fixture
def key_file(tmp_path: Path, rsa_key: RSAPrivateKey) -> Path:
    path = tmp_path / "client-private.pem"
    path.write_bytes(private_key_pem(rsa_key))
    return path


@pytest.fixture
def creds(rsa_key: RSAPrivateKey) -> Credentials:
    return Credentials(CLIENT_ID, CLIENT_SECRET, key_id=KEY_ID, issuer=ISSUER, private_key=rsa_key)


def _env(key_file: Path) -> dict[str, str]:
    return {
        "PAYMENTS_CLIENT_ID": CLIENT_ID,
        "PAYMENTS_CLIENT_SECRET": CLIENT_SECRET,
        "PAYMENTS_KEY_ID": KEY_ID,
        "PAYMENTS_ISSUER": ISSUER,
        "PAYMENTS_PRIVATE_KEY_FILE": str(key_file),
    }


def test_repr_shows_no_secret_and_no_key_material(
    creds: Credentials, rsa_key: RSAPrivateKey
) -> None:
    text = repr(creds) + str(creds) + repr(creds.signer())
    assert CLIENT_SECRET not in text
    assert CLIENT_ID in text
    assert KEY_ID in text
    pem_line = private_key_pem(rsa_key).decode().splitlines()[1]
    assert pem_line not in text
    assert str(rsa_key.private_numbers().d)[:20] not in text


def test_credentials_are_immutable(creds: Credentials) -> None:
    with pytest.raises(AttributeError):
        creds.client_secret = "other"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del creds.client_id  # type: ignore[misc]
    assert copy.deepcopy(creds) is creds


def test_credentials_refuse_pickling(creds: Credentials) -> None:
    with pytest.raises(TypeError):
        pickle.dumps(creds)


def test_private_key_is_loaded_once_from_any_source(rsa_key: RSAPrivateKey, key_file: Path) -> None:
    for source in (key_file, str(key_file), private_key_pem(rsa_key), rsa_key):
        c = Credentials(CLIENT_ID, CLIENT_SECRET, key_id=KEY_ID, issuer=ISSUER, private_key=source)
        assert isinstance(c.private_key, RSAPrivateKey)
        assert c.private_key.private_numbers() == rsa_key.private_numbers()
        assert c.signer() is c.signer()


async def test_signed_mode_tokens_verify(creds: Credentials, rsa_key: RSAPrivateKey) -> None:
    keys = {KEY_ID: RegisteredKey(KEY_ID, ISSUER, rsa_key.public_key())}
    signer = creds.signer()
    assert (
        verify_assertion((await signer.sign_assertion()).value, keys=keys, client_id=CLIENT_ID)[
            "sub"
        ]
        == CLIENT_ID
    )
    signed = await signer.sign_sca_token(b"{}", payment_id="P")
    assert verify_sca_token(signed.value, b"{}", keys=keys)["payment_id"] == "P"
    assert 170 < signed.remaining() <= 180
    assert (await signer.sign_assertion()).value != (
        await signer.sign_assertion()
    ).value  # fresh jti each time


async def test_sandbox_mode_sends_the_predefined_tokens() -> None:
    creds = Credentials.sandbox()
    assert (creds.client_id, creds.client_secret) == (SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET)
    assert (creds.key_id, creds.issuer) == (SANDBOX_KEY_ID, SANDBOX_ISSUER)
    assert creds.sandbox_tokens is True
    assert creds.private_key is None
    signer = creds.signer()
    assert (await signer.sign_assertion()).value == SANDBOX_ASSERTION
    assert (await signer.sign_sca_token(b"anything", payment_id="x")).value == SANDBOX_SCA_TOKEN
    assert (await signer.sign_sca_token(b"{}")).value == SANDBOX_SCA_TOKEN
    assert (await signer.sign_sca_token(b"{}")).expires_at == math.inf
    assert (await signer.sign_assertion()).value == SANDBOX_ASSERTION


def test_missing_key_in_signed_mode_points_to_the_sandbox_mode() -> None:
    with pytest.raises(ConfigurationError, match=r"private_key.*sandbox"):
        Credentials(CLIENT_ID, CLIENT_SECRET, key_id=KEY_ID, issuer=ISSUER)


def test_key_and_sandbox_tokens_together_are_refused(rsa_key: RSAPrivateKey) -> None:
    with pytest.raises(ConfigurationError, match="not both"):
        Credentials(
            CLIENT_ID,
            CLIENT_SECRET,
            key_id=KEY_ID,
            issuer=ISSUER,
            private_key=rsa_key,
            sandbox_tokens=True,
        )


@pytest.mark.parametrize("field", ["client_id", "client_secret", "key_id", "issuer"])
def test_empty_values_are_refused(field: str, rsa_key: RSAPrivateKey) -> None:
    values = {
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "key_id": KEY_ID,
        "issuer": ISSUER,
    }
    values[field] = ""
    with pytest.raises(ConfigurationError, match=field):
        Credentials(
            values["client_id"],
            values["client_secret"],
            key_id=values["key_id"],
            issuer=values["issuer"],
            private_key=rsa_key,
        )


def test_colon_in_client_id_is_refused(rsa_key: RSAPrivateKey) -> None:
    with pytest.raises(ConfigurationError, match="':'"):
        Credentials("a:b", CLIENT_SECRET, key_id=KEY_ID, issuer=ISSUER, private_key=rsa_key)


def test_bad_key_is_refused_at_construction(tmp_path: Path, rsa_key: RSAPrivateKey) -> None:
    encrypted = rsa_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"pw"),
    )
    with pytest.raises(ConfigurationError, match="encrypted"):
        Credentials(CLIENT_ID, CLIENT_SECRET, key_id=KEY_ID, issuer=ISSUER, private_key=encrypted)


def test_from_env_reads_the_five_documented_variables(
    key_file: Path, rsa_key: RSAPrivateKey
) -> None:

    assert set(ENV_VARS) == set(_env(key_file))
    creds = Credentials.from_env(_env(key_file))
    assert (creds.client_id, creds.client_secret) == (CLIENT_ID, CLIENT_SECRET)
    assert (creds.key_id, creds.issuer) == (KEY_ID, ISSUER)
    assert creds.private_key is not None
    assert creds.private_key.private_numbers() == rsa_key.private_numbers()
    for name in ENV_VARS:
        assert name in (Credentials.from_env.__doc__ or "")


def test_from_env_defaults_to_os_environ(key_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in _env(key_file).items():
        monkeypatch.setenv(name, value)
    assert Credentials.from_env().client_id == CLIENT_ID


def test_from_env_lists_every_missing_name_and_no_value(key_file: Path) -> None:
    env = _env(key_file)
    del env["PAYMENTS_KEY_ID"]
    env["PAYMENTS_ISSUER"] = ""
    with pytest.raises(ConfigurationError) as info:
        Credentials.from_env(env)
    message = str(info.value)
    assert "PAYMENTS_KEY_ID" in message
    assert "PAYMENTS_ISSUER" in message
    assert "PAYMENTS_CLIENT_ID" not in message
    assert CLIENT_SECRET not in message


def test_from_env_treats_the_key_variable_as_a_path(key_file: Path, rsa_key: RSAPrivateKey) -> None:
    env = _env(key_file)
    env["PAYMENTS_PRIVATE_KEY_FILE"] = private_key_pem(rsa_key).decode()  # inline PEM: refused
    with pytest.raises(ConfigurationError, match=r"not found|cannot read") as info:
        Credentials.from_env(env)
    assert private_key_pem(rsa_key).decode().splitlines()[1] not in str(info.value)


def test_nothing_else_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # Variables set in the environment do not leak into explicitly built credentials.
    monkeypatch.setenv("PAYMENTS_CLIENT_ID", "from-env")
    assert Credentials.sandbox().client_id == SANDBOX_CLIENT_ID


@pytest.mark.parametrize(
    ("key_id", "issuer", "named"),
    [
        ("kid 1", ISSUER, "key_id must not hold whitespace or control characters (SPACE at"),
        (KEY_ID, "issuer\n", "issuer must not hold whitespace or control characters (U+000A at"),
        ("kid\t", ISSUER, "key_id must not hold whitespace or control characters (U+0009 at"),
        (KEY_ID, "iss\u200b", "issuer must not hold whitespace or control characters (ZERO WIDTH"),
        (KEY_ID, "iss\u00a0x", "issuer must not hold whitespace or control characters (NO-BREAK"),
        ("kid\x00", ISSUER, "key_id must not hold whitespace or control characters (U+0000 at"),
    ],
)
def test_kid_and_iss_with_whitespace_or_controls_are_refused(
    rsa_key: RSAPrivateKey, key_id: str, issuer: str, named: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Credentials(CLIENT_ID, CLIENT_SECRET, key_id=key_id, issuer=issuer, private_key=rsa_key)
    assert caught.value.message.startswith(named), caught.value.message
    with pytest.raises(ConfigurationError):
        check_key_id_and_issuer(key_id, issuer)


def test_kid_and_iss_of_any_other_printable_text_are_kept() -> None:
    check_key_id_and_issuer("kid-2026.11_ü:é/+=", "https://issuer.example/client-1")
