"""Helpers of the proxy tests: a real forward proxy process and a self-signed TLS certificate.

The proxy is proxy.py from PyPI, started on a free loopback port with Basic
authentication; its access log tells which requests went through it. The TLS sandbox
serves the sandbox application with a self-signed certificate for ``localhost`` and
``127.0.0.1`` made here with ``cryptography``; clients trust it through ``ssl_context``.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from payments_async import Credentials

PROXY_USER = "proxy-user"
PROXY_PASSWORD = "Pr0xy-S3cret-w0rd"  # distinctive, so a leak is easy to find
_START_TIMEOUT = 30.0


@dataclass(frozen=True)
class ForwardProxy:
    """A running proxy.py: where it listens and what it logged."""

    host: str
    port: int
    log_file: Path

    @property
    def url(self) -> str:
        """The proxy URL without credentials."""
        return f"http://{self.host}:{self.port}"

    @property
    def url_with_credentials(self) -> str:
        return f"http://{PROXY_USER}:{PROXY_PASSWORD}@{self.host}:{self.port}"

    def access_log(self) -> list[str]:
        """The access-log lines so far (one per proxied request or tunnel)."""
        if not self.log_file.exists():
            return []
        return [line for line in self.log_file.read_text().splitlines() if "access_log" in line]


def start_proxy(tmp: Path) -> tuple[subprocess.Popen[bytes], ForwardProxy]:
    port_file = tmp / "proxy.port"
    log_file = tmp / "proxy.log"
    cmd = [
        sys.executable,
        "-m",
        "proxy",
        "--hostname",
        "127.0.0.1",
        "--port",
        "0",
        "--port-file",
        str(port_file),
        "--basic-auth",
        f"{PROXY_USER}:{PROXY_PASSWORD}",
        "--num-workers",
        "1",
        "--num-acceptors",
        "1",
        "--log-file",
        str(log_file),
        "--log-level",
        "INFO",
    ]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")},
    )
    deadline = time.monotonic() + _START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"proxy.py exited with {proc.returncode}")
        text = port_file.read_text().strip() if port_file.exists() else ""
        if text.isdigit():
            return proc, ForwardProxy("127.0.0.1", int(text), log_file)
        time.sleep(0.05)
    proc.terminate()
    raise RuntimeError("proxy.py did not start in time")


def stop_proxy(proc: subprocess.Popen[bytes]) -> None:
    """Terminate a proxy started by :func:`start_proxy` and reap it (idempotent)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass(frozen=True)
class Tls:
    """A self-signed certificate: the server's context and a client context trusting it."""

    server: ssl.SSLContext
    client: ssl.SSLContext


def make_tls(tmp: Path) -> Tls:
    """A fresh self-signed certificate for ``localhost`` and ``127.0.0.1``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=10))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file = tmp / "cert.pem"
    key_file = tmp / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert_file, key_file)
    client = ssl.create_default_context(cafile=str(cert_file))
    return Tls(server, client)


@dataclass(frozen=True)
class TlsSandbox:
    """The sandbox served over TLS, a registered client and the context trusting it."""

    url: str
    port: int
    credentials: Credentials
    client_ssl: ssl.SSLContext
    app: web.Application
