"""Helpers of the signing tests: the whole flow, recording signers, a SoftHSM2 token."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

from payments_async import (
    KeySigner,
    Outcome,
    PaymentsClient,
    PollPolicy,
    RetryPolicy,
    Timeout,
)
from payments_async.sandbox import SandboxConfig
from tests.factories import cancellation_for, credit_transfer

SOFTHSM_INSTALL = "apt-get update && apt-get install -y softhsm2"
PKCS11_INSTALL = "pip install 'payments-async[pkcs11]'"
SOFTHSM_LIBRARIES = (
    "/usr/lib/softhsm/libsofthsm2.so",
    "/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so",
    "/usr/lib/aarch64-linux-gnu/softhsm/libsofthsm2.so",
    "/usr/local/lib/softhsm/libsofthsm2.so",
)
TOKEN_LABEL = "payments-async-test"
USER_PIN = "4711-test-pin"
SO_PIN = "0815-test-so-pin"
FAST_POLL = PollPolicy(initial=0.02, maximum=0.05, not_found_grace=0.5)
FLOW_CONFIG = SandboxConfig(processing_delay=0.4, settlement_delay=0.1)


def client_options() -> dict[str, Any]:
    return {
        "retry": RetryPolicy.for_testing(attempts=3),
        "timeout": Timeout(total=10),
        "poll": FAST_POLL,
    }


async def whole_flow(client: PaymentsClient) -> None:
    """Token, pacs.008, its status, camt.056 and its camt.029 outcome: every signed call."""
    assert await client.access_token_lifetime() > 0
    payment = credit_transfer()
    sub = await client.submit_credit_transfer(payment)
    assert sub.created
    assert await client.get_credit_transfer_status(sub.payments_service_id) is not None
    cxl = await client.request_cancellation(cancellation_for(payment))
    assert cxl.created
    outcome = await client.wait_for_cancellation_outcome(cxl.payments_service_id, timeout=10)
    assert outcome.outcome is Outcome.ACCEPTED


def token_kind(data: bytes) -> str:
    """ "assertion" or "sca" for a JWS signing input (the SCA token has an ``hd`` claim)."""
    payload = data.split(b".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + b"=" * (-len(payload) % 4)))
    return "sca" if "hd" in claims else "assertion"


class RecordingSigner:
    """A sync Signer around a KeySigner that records what it signed (assertion / sca)."""

    def __init__(self, key: RSAPrivateKey, key_id: str) -> None:
        self._inner = KeySigner(key, key_id=key_id)
        self.key_id = key_id
        self.signed: list[str] = []

    def sign(self, data: bytes) -> bytes:
        self.signed.append(token_kind(data))
        return self._inner.sign(data)


class GatedSigner:
    """An async Signer that, while its gate is closed, holds every signature until opened."""

    def __init__(self, key: RSAPrivateKey, key_id: str) -> None:
        self._inner = KeySigner(key, key_id=key_id)
        self.key_id = key_id
        self.signed: list[str] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.waiting = asyncio.Event()

    async def sign(self, data: bytes) -> bytes:
        if not self.gate.is_set():
            self.waiting.set()
            await self.gate.wait()
        self.signed.append(token_kind(data))
        return self._inner.sign(data)


# --- SoftHSM2 -----------------------------------------------------------------------------


@dataclass(frozen=True)
class SoftHsm:
    """An initialised SoftHSM2 token in a temporary directory."""

    library: str
    token_label: str
    pin: str


def softhsm_library() -> str | None:
    return next((p for p in SOFTHSM_LIBRARIES if Path(p).exists()), None)


def require_softhsm() -> str:
    """The SoftHSM2 module path, or skip with the exact install command."""
    try:
        import pkcs11  # noqa: F401
    except ImportError:
        pytest.skip(f"python-pkcs11 is not installed: {PKCS11_INSTALL}")
    library = softhsm_library()
    if library is None or shutil.which("softhsm2-util") is None:
        pytest.skip(f"SoftHSM2 is not installed: {SOFTHSM_INSTALL}")
    return library


def init_token(tmp: Path) -> Iterator[SoftHsm]:
    """Create a token in ``tmp`` and point SoftHSM2 at it for the whole run.

    SoftHSM2 reads ``SOFTHSM2_CONF`` once, when the module is first loaded into the
    process, so one token directory serves every test of the run.
    """
    library = require_softhsm()
    tokens = tmp / "tokens"
    tokens.mkdir()
    conf = tmp / "softhsm2.conf"
    conf.write_text(
        f"directories.tokendir = {tokens}\nobjectstore.backend = file\nlog.level = ERROR\n"
    )
    previous = os.environ.get("SOFTHSM2_CONF")
    os.environ["SOFTHSM2_CONF"] = str(conf)
    try:
        subprocess.run(
            [
                "softhsm2-util",
                "--init-token",
                "--free",
                "--label",
                TOKEN_LABEL,
                "--pin",
                USER_PIN,
                "--so-pin",
                SO_PIN,
            ],
            check=True,
            capture_output=True,
        )
        yield SoftHsm(library, TOKEN_LABEL, USER_PIN)
    finally:
        if previous is None:
            os.environ.pop("SOFTHSM2_CONF", None)
        else:
            os.environ["SOFTHSM2_CONF"] = previous


def generate_token_key(hsm: SoftHsm, label: str) -> None:
    """Generate an RSA-2048 key pair inside the token: sensitive, never extractable."""
    import pkcs11
    from pkcs11 import Attribute, KeyType

    token = pkcs11.lib(hsm.library).get_token(token_label=hsm.token_label)
    try:
        session = token.open(rw=True, user_pin=hsm.pin)
    except pkcs11.UserAlreadyLoggedIn:
        session = token.open(rw=True)
    with session:
        session.generate_keypair(
            KeyType.RSA,
            2048,
            label=label,
            store=True,
            public_template={Attribute.VERIFY: True},
            private_template={
                Attribute.SIGN: True,
                Attribute.SENSITIVE: True,
                Attribute.EXTRACTABLE: False,
            },
        )


def private_key_attributes(hsm: SoftHsm, label: str) -> dict[str, object]:
    """What the token tells about a private key: flags, and whether its secrets are readable."""
    import pkcs11
    from pkcs11 import Attribute, ObjectClass

    token = pkcs11.lib(hsm.library).get_token(token_label=hsm.token_label)
    try:
        session = token.open(user_pin=hsm.pin)
    except pkcs11.UserAlreadyLoggedIn:
        session = token.open()
    with session:
        key = session.get_key(object_class=ObjectClass.PRIVATE_KEY, label=label)
        out: dict[str, object] = {
            "sensitive": key[Attribute.SENSITIVE],
            "extractable": key[Attribute.EXTRACTABLE],
            "never_extractable": key[Attribute.NEVER_EXTRACTABLE],
        }
        for name, attribute in (
            ("private_exponent", Attribute.PRIVATE_EXPONENT),
            ("prime_1", Attribute.PRIME_1),
        ):
            try:
                key[attribute]
            except pkcs11.AttributeSensitive:
                out[name] = "sensitive"
            else:
                out[name] = "readable"
        return out
