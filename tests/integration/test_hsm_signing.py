"""Pkcs11Signer against a real SoftHSM2 token: the whole flow, the key never leaves the token.

Skipped, with the exact install command in the reason, where SoftHSM2 or python-pkcs11 is
missing (``.ci/run`` installs SoftHSM2 when apt is available).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cryptography.hazmat.primitives.asymmetric.padding import PKCS1v15
from cryptography.hazmat.primitives.hashes import SHA256

from payments_async import (
    ConfigurationError,
    Credentials,
    PaymentsClient,
    Pkcs11Signer,
    SigningError,
)
from payments_async.testing import sandbox_server
from tests.support import signing as signing_support
from tests.support.signing import (
    FLOW_CONFIG,
    SoftHsm,
    client_options,
    generate_token_key,
    private_key_attributes,
    whole_flow,
)

KEY_A = "payments-key-a"
KEY_B = "payments-key-b"
ISSUER = "hsm-issuer"


@pytest.fixture(scope="module")
def hsm(softhsm: SoftHsm) -> SoftHsm:
    generate_token_key(softhsm, KEY_A)
    generate_token_key(softhsm, KEY_B)
    return softhsm


@pytest.fixture
def signer_a(hsm: SoftHsm) -> Iterator[Pkcs11Signer]:
    with Pkcs11Signer(
        hsm.library, token_label=hsm.token_label, key_label=KEY_A, pin=hsm.pin, key_id="hsm-a"
    ) as signer:
        yield signer


async def test_whole_flow_with_the_key_in_the_token(hsm: SoftHsm, signer_a: Pkcs11Signer) -> None:
    async with sandbox_server(FLOW_CONFIG, register_key=False) as sb:
        sb.server.register_client(
            "hsm-client",
            "hsm-secret",
            signer_a.public_key_pem(),
            kid="hsm-a",
            iss=ISSUER,
        )
        creds = Credentials("hsm-client", "hsm-secret", issuer=ISSUER, signer=signer_a)
        assert creds.key_id == "hsm-a"
        assert creds.private_key is None  # the process holds no key, only a handle
        async with PaymentsClient(creds, base_url=sb.url, **client_options()) as client:
            await whole_flow(client)
        stats = sb.server.stats()
        assert stats["payments_stored"] == 1
        assert stats["cancellations_stored"] == 1
    # The token generated the key and will not give up its secret parts.
    attributes = private_key_attributes(hsm, KEY_A)
    assert attributes == {
        "sensitive": True,
        "extractable": False,
        "never_extractable": True,
        "private_exponent": "sensitive",
        "prime_1": "sensitive",
    }


async def test_token_signature_is_rs256_under_the_tokens_public_key(
    signer_a: Pkcs11Signer,
) -> None:
    data = b"header.payload"
    signature = await signer_a.sign(data)
    assert len(signature) == 256
    signer_a.public_key().verify(signature, data, PKCS1v15(), SHA256())  # raises if not


async def test_rotation_between_two_keys_of_one_token(hsm: SoftHsm) -> None:
    """Two signers share the module's one thread and the token's one login."""
    with (
        Pkcs11Signer(
            hsm.library, token_label=hsm.token_label, key_label=KEY_A, pin=hsm.pin, key_id="a"
        ) as old,
        Pkcs11Signer(
            hsm.library, token_label=hsm.token_label, key_label=KEY_B, pin=hsm.pin, key_id="b"
        ) as new,
    ):
        async with sandbox_server(FLOW_CONFIG, register_key=False) as sb:
            for signer in (old, new):
                sb.server.register_client(
                    "rot",
                    "rot-secret",
                    signer.public_key_pem(),
                    kid=signer.key_id,
                    iss=ISSUER,
                )
            first = Credentials("rot", "rot-secret", issuer=ISSUER, signer=old)
            second = Credentials("rot", "rot-secret", issuer=ISSUER, signer=new)
            async with PaymentsClient(first, base_url=sb.url, **client_options()) as client:
                await whole_flow(client)
                await client.rotate_credentials(second)
                old.close()  # nothing signs with the old key any more
                await whole_flow(client)
            assert sb.server.stats()["payments_stored"] == 2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"pin": "wrong-pin-0000"}, "refused the PIN"),
        ({"token_label": "no-such-token"}, "no single PKCS#11 token"),
        ({"key_label": "no-such-key"}, "no single private key"),
        ({"library": "/nonexistent/libpkcs11.so"}, "cannot load the PKCS#11 module"),
    ],
)
def test_set_up_mistakes_fail_at_construction_without_the_pin(
    hsm: SoftHsm, change: dict[str, str], message: str
) -> None:
    args = {
        "library": hsm.library,
        "token_label": hsm.token_label,
        "key_label": KEY_A,
        "pin": hsm.pin,
    } | change
    with pytest.raises(ConfigurationError, match=message) as info:
        Pkcs11Signer(**args, key_id="k")
    assert hsm.pin not in str(info.value)
    assert "wrong-pin-0000" not in str(info.value)


async def test_a_closed_signer_refuses_to_sign(hsm: SoftHsm) -> None:
    signer = Pkcs11Signer(
        hsm.library, token_label=hsm.token_label, key_label=KEY_A, pin=hsm.pin, key_id="k"
    )
    assert hsm.pin not in repr(signer)
    signer.close()
    signer.close()
    with pytest.raises(SigningError, match="closed"):
        signer.sign(b"x")


def test_without_softhsm_the_tests_skip_naming_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(signing_support, "SOFTHSM_LIBRARIES", ("/nonexistent/libsofthsm2.so",))
    with pytest.raises(
        pytest.skip.Exception, match=r"apt-get update && apt-get install -y softhsm2"
    ):
        signing_support.require_softhsm()


def test_any_other_token_error_at_start_up_is_a_configuration_error_without_the_pin(
    hsm: SoftHsm, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pkcs11

    from payments_async.signing import _pkcs11

    def device_error(*args: object) -> None:
        raise pkcs11.DeviceError()

    monkeypatch.setattr(_pkcs11, "_open", device_error)
    with pytest.raises(ConfigurationError, match="failed to open: DeviceError") as caught:
        Pkcs11Signer(
            hsm.library, token_label=hsm.token_label, key_label=KEY_A, pin=hsm.pin, key_id="x"
        )
    assert hsm.pin not in str(caught.value)
    assert caught.value.__cause__ is None
