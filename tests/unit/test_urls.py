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
        # A password with "/", "?" or "#" unencoded: libpq reads it up to its "@".
        ("postgresql://u:pa/ss@h/db", "postgresql://***@h/db"),
        ("postgresql://u:pa?ss@h/db", "postgresql://***@h/db"),
        ("postgresql://u:pa#ss@h/db?sslmode=require", "postgresql://***@h/db?sslmode=require"),
        ("postgresql://u:pa?ss@h", "postgresql://***@h"),
        ("postgres://h?PassWord=s3&sslmode=require", "postgres://h?PassWord=***&sslmode=require"),
        ("postgresql:///db?host=/tmp&password=s3", "postgresql:///db?host=/tmp&password=***"),
        ("postgresql://h/db?user=a@b", "postgresql://h/db?user=a@b"),
        # libpq's key=value form, a value quoted or not.
        ("host=h user=u password=s3 dbname=d", "host=h user=u password=*** dbname=d"),
        ("host=h sslpassword = 's 3\\' x' dbname=d", "host=h sslpassword = *** dbname=d"),
        ("password authentication failed for user u", "password authentication failed for user u"),
        # A "#" inside a query password: libpq reads it as part of the value.
        ("postgresql://h/db?password=sec#ret", "postgresql://h/db?password=***"),
        # An "@" inside a key=value password; the host stays shown.
        ("host=127.0.0.1 port=1 password=se@cret", "host=127.0.0.1 port=1 password=***"),
        ("(password=s3)", "(password=***"),
        ("host=h,password=s3", "host=h,password=***"),
        # A "/" then a "?" inside the password.
        ("postgresql://u:pa/s?s@h/db", "postgresql://***@h/db"),
        # An "@" in a query or a fragment is not userinfo.
        ("http://host?next=x@y", "http://host?next=x@y"),
        ("postgresql://h?user=a@b", "postgresql://h?user=a@b"),
        ("http://host:80/x#frag@y", "http://host:80/x#frag@y"),
        # Several URLs and addresses in one message: each on its own.
        (
            "cannot reach http://u:p@h1/x: see admin@example.com",
            "cannot reach http://***@h1/x: see admin@example.com",
        ),
        ("from http://a/x to https://u:p@b/y", "from http://a/x to https://***@b/y"),
        # A password holding a space.
        ("postgresql://bulk:pw secret@localhost/q", "postgresql://***@localhost/q"),
        ("(postgresql://u:a b c@h/db): refused", "(postgresql://***@h/db): refused"),
        # user:password@host without a scheme, alone or quoted in a message.
        ("user:pw-Secret1@host", "***@host"),
        ("bad address 'u:p/w@h:5432/db'", "bad address '***@h:5432/db'"),
        ("mail admin@example.com at 10:30", "mail admin@example.com at 10:30"),
    ],
)
def test_redact_url_hides_credentials_only(text: str, shown: str) -> None:
    assert redact_url(text) == shown
