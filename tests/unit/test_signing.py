"""The Signer protocol and the built-in signers: RS256 that verifies, sync or async, no leaks."""

from __future__ import annotations

import asyncio
import pickle
import sys
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.padding import PKCS1v15
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from cryptography.hazmat.primitives.hashes import SHA256

from payments_async import (
    ConfigurationError,
    Credentials,
    KeySigner,
    PaymentsError,
    Pkcs11Signer,
    Signer,
    SigningError,
    ThreadPoolSigner,
)
from payments_async._jwt import JwtSigner, RegisteredKey, SignedToken, verify_sca_token
from payments_async._keys import private_key_pem, public_key_pem

KID = "kid-1"
ISS = "iss-1"
BODY = b'{"fitoFICstmrCdtTrf":{"grpHdr":{"msgId":"M-1"}}}'


def _verifies(key: RSAPrivateKey, data: bytes, signature: bytes) -> None:
    key.public_key().verify(signature, data, PKCS1v15(), SHA256())  # raises if not


def _keys(key: RSAPrivateKey) -> dict[str, RegisteredKey]:
    return {KID: RegisteredKey(KID, ISS, key.public_key())}


class AsyncSigner:
    """A user's own signer, async: how a remote KMS or HSM client would look."""

    def __init__(self, key: RSAPrivateKey, key_id: str = KID) -> None:
        self.key_id = key_id
        self._key = key
        self.calls = 0

    async def sign(self, data: bytes) -> bytes:
        self.calls += 1
        await asyncio.sleep(0)
        return self._key.sign(data, PKCS1v15(), SHA256())


class FuncSigner:
    """A signer whose sign() is any function: for failure cases."""

    def __init__(self, fn: Callable[[bytes], Any], key_id: str = KID) -> None:
        self.key_id = key_id
        self._fn = fn

    def sign(self, data: bytes) -> Any:
        return self._fn(data)


# --- KeySigner ---------------------------------------------------------------------------


def test_key_signer_signs_rs256_synchronously(rsa_key: RSAPrivateKey) -> None:
    signer = KeySigner(rsa_key, key_id=KID)
    signature = signer.sign(b"abc")
    assert isinstance(signature, bytes)  # no awaitable: the fast path has no hop
    _verifies(rsa_key, b"abc", signature)
    assert isinstance(signer, Signer)
    assert signer.key_id == KID


def test_key_signers_give_the_public_pem_to_register(rsa_key: RSAPrivateKey) -> None:
    expected = public_key_pem(rsa_key)
    with ThreadPoolSigner(rsa_key, key_id=KID) as threaded:
        assert threaded.public_key_pem() == expected
    assert KeySigner(rsa_key, key_id=KID).public_key_pem() == expected
    assert b"PRIVATE" not in expected


def test_key_signer_accepts_pem_and_refuses_bad_input(rsa_key: RSAPrivateKey) -> None:
    assert KeySigner(private_key_pem(rsa_key), key_id=KID).key_id == KID
    with pytest.raises(ConfigurationError, match="key_id"):
        KeySigner(rsa_key, key_id="")
    with pytest.raises(ConfigurationError, match="malformed"):
        KeySigner(b"-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n", key_id=KID)


def test_key_signers_never_show_or_pickle_the_key(rsa_key: RSAPrivateKey) -> None:
    pem = private_key_pem(rsa_key).decode()
    body = pem.splitlines()[1]
    with ThreadPoolSigner(rsa_key, key_id=KID) as threaded:
        for signer in (KeySigner(rsa_key, key_id=KID), threaded):
            assert body not in repr(signer)
            assert "RSA-2048" in repr(signer)
            with pytest.raises(TypeError, match="cannot be pickled"):
                pickle.dumps(signer)


# --- JwtSigner around a Signer -----------------------------------------------------------


def test_jwt_with_key_signer_returns_the_token_without_an_awaitable(
    rsa_key: RSAPrivateKey,
) -> None:
    jwt = JwtSigner(KeySigner(rsa_key, key_id=KID), issuer=ISS)
    token = jwt.sign_sca_token(BODY)
    assert isinstance(token, SignedToken)
    claims = verify_sca_token(token.value, BODY, keys=_keys(rsa_key))
    assert claims["iss"] == ISS


async def test_jwt_with_an_async_signer_is_awaited_and_verifies(rsa_key: RSAPrivateKey) -> None:
    signer = AsyncSigner(rsa_key)
    jwt = JwtSigner(signer, issuer=ISS)
    pending = jwt.sign_sca_token(BODY, payment_id="P-1")
    assert not isinstance(pending, SignedToken)
    token = await pending
    claims = verify_sca_token(token.value, BODY, keys=_keys(rsa_key))
    assert claims["payment_id"] == "P-1"
    assert signer.calls == 1


async def test_sync_helpers_refuse_an_async_signer_clearly(rsa_key: RSAPrivateKey) -> None:
    jwt = JwtSigner(AsyncSigner(rsa_key), issuer=ISS)
    with pytest.raises(SigningError, match="is async"):
        jwt.sca_token(BODY)
    with pytest.raises(SigningError, match="is async"):
        jwt.assertion("client")


def test_jwt_signer_checks_the_signer_and_its_kid(rsa_key: RSAPrivateKey) -> None:
    with pytest.raises(ConfigurationError, match="does not match"):
        JwtSigner(KeySigner(rsa_key, key_id=KID), key_id="other", issuer=ISS)
    with pytest.raises(ConfigurationError, match="must implement"):
        JwtSigner(object(), issuer=ISS)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="key_id"):
        JwtSigner(FuncSigner(lambda d: b"", key_id=""), issuer=ISS)
    with pytest.raises(ConfigurationError, match="key_id"):
        JwtSigner(rsa_key, issuer=ISS)  # a bare key needs its kid


def _raise(_: bytes) -> bytes:
    raise RuntimeError("device unplugged")


async def _async_raise() -> bytes:
    raise OSError("connection to HSM lost")


async def _async_text() -> str:
    return "not bytes"


@pytest.mark.parametrize(
    ("sign", "message"),
    [
        (_raise, "failed: RuntimeError: device unplugged"),
        (lambda d: "signature-as-text", "returned str"),
        (lambda d: _async_raise(), "failed: OSError: connection to HSM lost"),
        (lambda d: _async_text(), "returned str"),
    ],
)
async def test_a_failing_signer_raises_signing_error_naming_the_kid(
    sign: Callable[[bytes], Any], message: str
) -> None:
    jwt = JwtSigner(FuncSigner(sign), issuer=ISS)

    async def sign_fully() -> SignedToken:
        result = jwt.sign_sca_token(BODY)
        return await result if isinstance(result, Awaitable) else result

    with pytest.raises(SigningError, match=message) as info:
        await sign_fully()
    assert KID in str(info.value)
    assert isinstance(info.value, PaymentsError)


# --- ThreadPoolSigner --------------------------------------------------------------------


class CountingExecutor(ThreadPoolExecutor):
    """A real thread pool that records which threads ran work."""

    def __init__(self) -> None:
        super().__init__(max_workers=2, thread_name_prefix="counting")
        self.threads: set[str] = set()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        def run() -> Any:
            self.threads.add(threading.current_thread().name)
            return fn(*args, **kwargs)

        return super().submit(run)


async def test_thread_pool_signer_signs_off_the_event_loop_thread(rsa_key: RSAPrivateKey) -> None:
    executor = CountingExecutor()
    try:
        signer = ThreadPoolSigner(rsa_key, key_id=KID, executor=executor)
        jwt = JwtSigner(signer, issuer=ISS)
        tokens = await asyncio.gather(*(jwt.sign_sca_token(BODY) for _ in range(8)))  # type: ignore[misc]
        for token in tokens:
            verify_sca_token(token.value, BODY, keys=_keys(rsa_key))
        assert executor.threads
        assert threading.current_thread().name not in executor.threads
        assert all(name.startswith("counting") for name in executor.threads)
        signer.close()
        # A borrowed executor stays open for its owner.
        assert executor.submit(lambda: 1).result() == 1
    finally:
        executor.shutdown()


async def test_thread_pool_signer_after_close_raises_signing_error(rsa_key: RSAPrivateKey) -> None:
    signer = ThreadPoolSigner(rsa_key, key_id=KID, max_workers=1)
    assert isinstance(await signer.sign(b"x"), bytes)
    signer.close()
    signer.close()  # idempotent
    with pytest.raises(SigningError, match="closed"):
        signer.sign(b"x")
    assert "closed" in repr(signer)


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_thread_pool_signer_refuses_nonsense_worker_counts(
    rsa_key: RSAPrivateKey, bad: object
) -> None:
    with pytest.raises(ConfigurationError, match="max_workers"):
        ThreadPoolSigner(rsa_key, key_id=KID, max_workers=bad)  # type: ignore[arg-type]


def test_thread_pool_signer_refuses_both_an_executor_and_a_worker_count(
    rsa_key: RSAPrivateKey,
) -> None:
    with ThreadPoolExecutor(1) as executor, pytest.raises(ConfigurationError, match="not both"):
        ThreadPoolSigner(rsa_key, key_id=KID, executor=executor, max_workers=2)


# --- Pkcs11Signer without its extra ------------------------------------------------------


def test_pkcs11_signer_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pkcs11", None)  # import pkcs11 -> ImportError
    with pytest.raises(ConfigurationError, match=r"payments-async\[pkcs11\]"):
        Pkcs11Signer("/nonexistent.so", token_label="t", key_label="k", pin="1234", key_id=KID)


def test_importing_the_package_does_not_import_pkcs11() -> None:
    code = "import sys, payments_async, payments_async.signing; print('pkcs11' in sys.modules)"
    import subprocess

    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False"


# --- Credentials with a signer -----------------------------------------------------------


def test_credentials_take_the_kid_from_the_signer(rsa_key: RSAPrivateKey) -> None:
    signer = AsyncSigner(rsa_key, key_id="hsm-kid")
    creds = Credentials("client", "secret-value", issuer=ISS, signer=signer)
    assert creds.key_id == "hsm-kid"
    assert creds.key_signer is signer
    assert creds.private_key is None
    assert "secret-value" not in repr(creds)


def test_credentials_from_a_key_expose_its_key_signer(rsa_key: RSAPrivateKey) -> None:
    creds = Credentials("client", "s", key_id=KID, issuer=ISS, private_key=rsa_key)
    assert isinstance(creds.key_signer, KeySigner)
    assert creds.private_key is rsa_key


def test_credentials_refuse_a_kid_other_than_the_signers(rsa_key: RSAPrivateKey) -> None:
    with pytest.raises(ConfigurationError, match="does not match"):
        Credentials("c", "s", key_id="other", issuer=ISS, signer=AsyncSigner(rsa_key))


def test_credentials_refuse_two_ways_of_signing(rsa_key: RSAPrivateKey) -> None:
    with pytest.raises(ConfigurationError, match="exactly one"):
        Credentials(
            "c", "s", key_id=KID, issuer=ISS, private_key=rsa_key, signer=AsyncSigner(rsa_key)
        )
    with pytest.raises(ConfigurationError, match="exactly one"):
        Credentials(
            "c", "s", key_id=KID, issuer=ISS, signer=AsyncSigner(rsa_key), sandbox_tokens=True
        )


def test_credentials_refuse_an_object_that_is_not_a_signer() -> None:
    with pytest.raises(ConfigurationError):
        Credentials("c", "s", key_id=KID, issuer=ISS, signer=object())  # type: ignore[arg-type]


async def test_credentials_with_an_async_signer_make_verifiable_tokens(
    rsa_key: RSAPrivateKey,
) -> None:
    creds = Credentials("client", "s", issuer=ISS, signer=AsyncSigner(rsa_key))
    pending = creds.signer().sign_sca_token(BODY)
    assert not isinstance(pending, SignedToken)
    token = await pending
    verify_sca_token(token.value, BODY, keys=_keys(rsa_key))
