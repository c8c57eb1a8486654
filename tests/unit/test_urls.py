"""The shared URL helpers: which hosts are loopback, and URLs fit for messages and logs."""

from __future__ import annotations

import pytest

from payments_async._urls import is_loopback, redact_url


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.1", False),
        ("example.com", False),
        ("localhost.example.com", False),
        ("", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("http://user:pw@host:1/x", "http://***@host:1/x"),
        ("https://host/x?a=1&password=s3&b=2", "https://host/x?a=1&password=***&b=2"),
        ("postgresql://h/db?sslpassword=s3", "postgresql://h/db?sslpassword=***"),
        ("postgresql://u:p@w@h/db", "postgresql://***@h/db"),  # the last @ ends the userinfo
        ("--dsn=postgresql://u:p@h/db", "--dsn=postgresql://***@h/db"),
        ("http://host/x#frag@not-userinfo", "http://host/x#frag@not-userinfo"),
        ("http://[::1]:80/notifications", "http://[::1]:80/notifications"),
        ("not a url at all", "not a url at all"),
    ],
)
def test_redact_url_hides_credentials_only(text: str, shown: str) -> None:
    assert redact_url(text) == shown
