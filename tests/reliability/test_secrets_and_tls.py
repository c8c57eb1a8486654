"""Item 7: secrets never leak (logs at DEBUG from every logger, exception texts and
tracebacks, reprs), TLS is verified unless the caller trusts a certificate explicitly,
and plain http is refused for anything but loopback."""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import logging
import ssl
import time
import traceback
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from cryptography.x509.oid import NameOID

from payments_async import (
    ConfigurationError,
    Credentials,
    PaymentsClient,
    PaymentsError,
    TransportError,
    build_credit_transfer,
)
from payments_async._constants import SCA_HEADER
from payments_async._instrument import Exchange
from payments_async._transport import Transport
from payments_async.sandbox import FaultConfig, SandboxConfig, create_app
from payments_async.testing import sandbox_server
from tests.factories import cancellation, credit_transfer
from tests.support.reliability import FAST_POLL, fast_retry, record

# --- secrets -------------------------------------------------------------------------------


class _Capture(logging.Handler):
    """Keeps every record's message, extras and formatted traceback as text."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.texts: list[str] = []
        self.records = 0
        self._fmt = logging.Formatter()

    def emit(self, rec: logging.LogRecord) -> None:
        self.records += 1
        self.texts.append(rec.getMessage())
        self.texts.append(repr(rec.__dict__))
        if rec.exc_info:
            self.texts.append(self._fmt.formatException(rec.exc_info))


def _wire_tap(seen: dict[str, set[str]]) -> aiohttp.TraceConfig:
    """Record every secret that goes over the wire: Basic, bearer, assertion, SCA token."""
    tap = aiohttp.TraceConfig()

    async def on_start(_: Any, __: Any, params: aiohttp.TraceRequestStartParams) -> None:
        auth = params.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            seen["access token"].add(auth[7:])
        elif auth.startswith("Basic "):
            seen["basic credentials"].add(auth[6:])
        if SCA_HEADER in params.headers:
            seen["SCA token"].add(params.headers[SCA_HEADER])

    async def on_chunk(_: Any, __: Any, params: aiohttp.TraceRequestChunkSentParams) -> None:
        form = urllib.parse.parse_qs(params.chunk.decode("latin-1"))
        for value in form.get("assertion", []):
            seen["assertion"].add(value)

    tap.on_request_start.append(on_start)
    tap.on_request_chunk_sent.append(on_chunk)
    return tap


def _key_secrets(key: RSAPrivateKey) -> dict[str, set[str]]:
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    trad = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()
    lines = {ln for text in (pem, trad) for ln in text.splitlines() if len(ln) >= 40}
    n = key.private_numbers()
    numbers = {n.d, n.p, n.q, n.dmp1, n.dmq1, n.iqmp}
    return {
        "private key PEM": {pem, trad, *lines},
        "private key numbers": {str(x) for x in numbers} | {format(x, "x") for x in numbers},
    }


def _exception_texts(exc: BaseException) -> list[str]:
    return [str(exc), repr(exc), "".join(traceback.format_exception(exc))]


async def test_no_secret_in_logs_errors_or_reprs(caplog: pytest.LogCaptureFixture) -> None:
    capture = _Capture()
    root = logging.getLogger()
    root.addHandler(capture)
    caplog.set_level(logging.DEBUG)  # every logger, DEBUG, restored afterwards
    seen: dict[str, set[str]] = {
        k: set() for k in ("access token", "basic credentials", "SCA token", "assertion")
    }
    texts: list[str] = []
    errors: list[PaymentsError] = []
    config = SandboxConfig(processing_delay=0.3, settlement_delay=0.2)
    try:
        async with (
            sandbox_server(config) as sb,
            aiohttp.ClientSession(trace_configs=[_wire_tap(seen)]) as http,
        ):
            creds = sb.credentials
            assert creds is not None
            assert sb.private_key is not None
            client = PaymentsClient(
                creds, base_url=sb.url, session=http, **fast_retry(attempts=2), poll=FAST_POLL
            )
            async with client:
                texts.append(f"{await client.access_token_lifetime()}")
                # The demo's path: pay, read, cancel (accepted), cancel late (rejected),
                # resubmit (replayed).
                first = credit_transfer()
                sub = await client.submit_credit_transfer(first)
                texts += [
                    repr(sub),
                    repr(await client.get_credit_transfer_status(sub.payments_service_id)),
                ]
                e2e = first.fito_fi_cstmr_cdt_trf.cdt_trf_tx_inf[0].pmt_id.end_to_end_id
                cxl = await client.request_cancellation(cancellation(e2e))
                outcome = await client.wait_for_cancellation_outcome(
                    cxl.payments_service_id, timeout=10
                )
                texts += [repr(cxl), repr(outcome)]
                late = credit_transfer()
                late_sub = await client.submit_credit_transfer(late)
                texts.append(
                    repr(
                        await client.wait_for_payment_status(
                            late_sub.payments_service_id, timeout=10
                        )
                    )
                )
                late_e2e = late.fito_fi_cstmr_cdt_trf.cdt_trf_tx_inf[0].pmt_id.end_to_end_id
                late_cxl = await client.request_cancellation(cancellation(late_e2e))
                texts.append(
                    repr(
                        await client.wait_for_cancellation_outcome(
                            late_cxl.payments_service_id, timeout=10
                        )
                    )
                )
                texts.append(repr(await client.submit_credit_transfer(first)))  # replayed
                # Error paths: revoked token (401, refresh), faults, 404, bad input.
                sb.server.state.revoke_tokens()
                texts.append(repr(await client.get_credit_transfer_status(sub.payments_service_id)))
                for faults in (
                    FaultConfig(commit_then_drop=1.0),
                    FaultConfig(error_502=1.0),
                    FaultConfig(rate_limit_429=1.0, retry_after=0),
                    FaultConfig(latency=1.0, latency_seconds=0.3),
                ):
                    sb.server.set_faults(faults)
                    try:
                        await client.submit_credit_transfer(credit_transfer())
                    except PaymentsError as exc:
                        errors.append(exc)
                sb.server.set_faults(FaultConfig())
                for bad in (
                    lambda: client.get_credit_transfer_status("pmt-unknown"),
                    lambda: client.get_cancellation_outcome("../../etc/passwd"),
                ):
                    try:
                        await bad()
                    except PaymentsError as exc:
                        errors.append(exc)
                try:
                    build_credit_transfer(
                        debtor_name="A",
                        debtor_iban="XX00",
                        debtor_agent_id="1",
                        creditor_name="B",
                        creditor_iban="XX00",
                        creditor_agent_id="2",
                        amount="-1",
                    )
                except PaymentsError as exc:
                    errors.append(exc)
                texts += [
                    repr(client),
                    repr(creds),
                    repr(creds.signer()),
                    repr(client._pipeline.tokens),
                ]
                texts.append(repr(client._pipeline.tokens.current))
            # Credentials the service refuses: a wrong secret, an unregistered key id.
            for wrong in (
                Credentials(
                    creds.client_id,
                    "not-the-secret",
                    key_id=creds.key_id,
                    issuer=creds.issuer,
                    private_key=sb.private_key,
                ),
                Credentials(
                    creds.client_id,
                    creds.client_secret,
                    key_id="other-kid",
                    issuer=creds.issuer,
                    private_key=sb.private_key,
                ),
            ):
                async with PaymentsClient(wrong, base_url=sb.url, session=http) as bad_client:
                    try:
                        await bad_client.access_token_lifetime()
                    except PaymentsError as exc:
                        errors.append(exc)
    finally:
        root.removeHandler(capture)
    for err in errors:
        texts += _exception_texts(err)
    texts += capture.texts
    haystack = "\n".join(texts)

    secrets: dict[str, set[str]] = {"client secret": {creds.client_secret}}
    secrets.update(_key_secrets(sb.private_key))
    secrets.update(seen)
    # JWT signature segments too, in case something logged a token cut in the middle.
    for kind in ("SCA token", "assertion"):
        secrets[f"{kind} signature"] = {t.rsplit(".", 1)[-1] for t in seen[kind]}
    assert all(seen.values()), {k: len(v) for k, v in seen.items()}  # the tap saw each kind
    leaks = [kind for kind, values in secrets.items() for v in values if v and v in haystack]
    kinds = {type(e).__name__ for e in errors}
    record(
        "secrets scan",
        log_records=capture.records,
        exceptions=len(errors),
        exception_kinds=sorted(kinds),
        haystack_chars=len(haystack),
        secrets_scanned=sum(len(v) for v in secrets.values()),
        leaks=len(leaks),
    )
    assert capture.records > 50
    assert {"OutcomeUnknownError", "AuthenticationError", "ValidationError"} <= kinds
    assert not leaks, f"secrets found in logs/errors/reprs: {sorted(set(leaks))}"


# --- TLS ---------------------------------------------------------------------------------


def _self_signed(key: RSAPrivateKey, names: list[x509.GeneralName]) -> bytes:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "payments-async test")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


@pytest_asyncio.fixture
async def tls_sandbox(
    tmp_path: Path, rsa_private_key: RSAPrivateKey
) -> AsyncIterator[tuple[str, bytes, Credentials]]:
    """The sandbox app over https on 127.0.0.1, with a self-signed certificate."""
    cert_pem = _self_signed(rsa_private_key, [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    (tmp_path / "cert.pem").write_bytes(cert_pem)
    (tmp_path / "key.pem").write_bytes(
        rsa_private_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    app = create_app(SandboxConfig())
    runner = web.AppRunner(app, shutdown_timeout=0.1, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_ctx)
    await site.start()
    try:
        yield f"https://127.0.0.1:{runner.addresses[0][1]}", cert_pem, Credentials.sandbox()
    finally:
        await runner.cleanup()


async def test_untrusted_certificate_is_refused_at_the_transport(
    tls_sandbox: tuple[str, bytes, Credentials],
) -> None:
    url, _, _ = tls_sandbox
    transport = Transport(url)
    try:
        with pytest.raises(TransportError) as info:
            await transport.request(Exchange("GET", "/payments/pacs002/v12/x", "r1", 1), {})
    finally:
        await transport.aclose()
    assert info.value.request_sent is False
    assert isinstance(info.value.__cause__, aiohttp.ClientConnectorCertificateError)


async def test_untrusted_certificate_fails_the_client_fast(
    tls_sandbox: tuple[str, bytes, Credentials],
) -> None:
    """No retries for a certificate that stays untrusted (it used to take the token
    session's whole 30 s fetch deadline)."""
    url, _, creds = tls_sandbox
    start = time.monotonic()
    async with PaymentsClient(creds, base_url=url, **fast_retry()) as client:
        with pytest.raises(TransportError) as info:
            async with asyncio.timeout(3):
                await client.submit_credit_transfer(credit_transfer())
    elapsed = time.monotonic() - start
    record("TLS untrusted certificate (client)", error="TransportError", seconds=round(elapsed, 3))
    assert info.value.request_sent is False


async def test_a_context_that_trusts_the_certificate_works(
    tls_sandbox: tuple[str, bytes, Credentials],
) -> None:
    url, cert_pem, creds = tls_sandbox
    trusting = ssl.create_default_context(cadata=cert_pem.decode())
    async with PaymentsClient(creds, base_url=url, ssl_context=trusting) as client:
        sub = await client.submit_credit_transfer(credit_transfer())
    assert sub.created


async def test_a_certificate_for_another_name_is_refused(
    tls_sandbox: tuple[str, bytes, Credentials], rsa_private_key: RSAPrivateKey
) -> None:
    """Trusting a certificate issued for another host name does not make it valid here."""
    url, _, _ = tls_sandbox
    other = _self_signed(rsa_private_key, [x509.DNSName("payments.example.com")])
    transport = Transport(url, ssl_context=ssl.create_default_context(cadata=other.decode()))
    try:
        with pytest.raises(TransportError):
            await transport.request(Exchange("GET", "/x", "r2", 1), {})
    finally:
        await transport.aclose()


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com",
        "http://10.0.0.1:8080",
        "http://192.168.1.10",
        "http://[2001:db8::1]",
        "http://127.0.0.1.nip.io",
        "http://localhost.example.com",
        "ftp://127.0.0.1",
        "ws://127.0.0.1",
        "https://user:pw@payments.example.com",
        "//payments.example.com",
    ],
)
def test_unsafe_base_urls_are_refused(url: str) -> None:
    with pytest.raises(ConfigurationError):
        PaymentsClient(Credentials.sandbox(), base_url=url)


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8765", "http://localhost:1", "http://[::1]:2", "http://127.1.2.3"]
)
async def test_loopback_http_is_allowed(url: str) -> None:
    async with PaymentsClient(Credentials.sandbox(), base_url=url) as client:
        assert client.base_url.startswith("http://")


async def test_ssl_context_is_honoured_with_a_borrowed_session(
    tls_sandbox: tuple[str, bytes, Credentials],
) -> None:
    """A borrowed session verifies with the default CAs; the ssl_context passed to the
    client must still apply to every request (it used to be silently ignored)."""
    url, cert_pem, creds = tls_sandbox
    trusting = ssl.create_default_context(cadata=cert_pem.decode())
    async with aiohttp.ClientSession() as session:
        async with PaymentsClient(
            creds, base_url=url, session=session, ssl_context=trusting, **fast_retry()
        ) as client:
            sub = await client.submit_credit_transfer(credit_transfer())
        assert not session.closed
    assert sub.created
