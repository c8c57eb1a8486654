"""Proxy settings: parsing, credentials kept apart, HTTPS_PROXY / NO_PROXY resolution."""

from __future__ import annotations

import base64

import pytest
from yarl import URL

from payments_async import ConfigurationError, Credentials, PaymentsClient
from payments_async._proxy import Proxy, no_proxy_matches, proxy_from_env, resolve_proxy

SECRET = "pr0xy-p@ss"
BANK = URL("https://api.bank.example")


def _basic(proxy: Proxy) -> tuple[str, str]:
    """The user and password a proxy's Proxy-Authorization header carries."""
    assert proxy.authorization is not None
    scheme, _, encoded = proxy.authorization.partition(" ")
    assert scheme == "Basic"
    user, _, password = base64.b64decode(encoded).decode().partition(":")
    return user, password


def test_a_colon_in_the_proxy_user_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="must not contain ':'") as info:
        Proxy.parse("http://a%3Ab:pw-secret@proxy:3128")
    assert "pw-secret" not in str(info.value)


def test_credentials_are_split_off_and_never_printed() -> None:
    proxy = Proxy.parse("http://alice:pr0xy-p%40ss@proxy.corp:3128")
    assert proxy.url == URL("http://proxy.corp:3128")
    assert _basic(proxy) == ("alice", SECRET)
    assert proxy.headers == {"Proxy-Authorization": proxy.authorization}
    for text in (str(proxy), repr(proxy), f"{proxy}"):
        assert SECRET not in text
        assert "pr0xy" not in text
        assert "proxy.corp:3128" in text


def test_proxy_without_credentials() -> None:
    proxy = Proxy.parse("https://proxy.corp:8443/")
    assert (proxy.url, proxy.authorization, proxy.headers) == (
        URL("https://proxy.corp:8443"),
        None,
        None,
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("socks5://u:pw-secret@proxy:1080", "scheme 'socks5' is not supported"),
        ("proxy.corp:3128", "must be an http:// or https:// proxy URL"),
        ("http://u:pw-secret@proxy:3128/path", "must not carry a path"),
        ("http://u:pw-secret@proxy:3128?x=1", "must not carry a path"),
        ("", "must be an http:// or https:// proxy URL"),
    ],
)
def test_bad_proxy_urls_are_refused_without_echoing_them(value: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as info:
        Proxy.parse(value)
    assert "pw-secret" not in str(info.value)


def test_explicit_proxy_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://env-proxy:1")
    chosen = resolve_proxy("http://mine:2", trust_env=True, base_url=BANK)
    assert chosen is not None
    assert chosen.url == URL("http://mine:2")


def test_environment_is_read_only_when_trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://u:env-secret@env-proxy:3128")
    assert resolve_proxy(None, trust_env=False, base_url=BANK) is None
    chosen = resolve_proxy(None, trust_env=True, base_url=BANK)
    assert chosen is not None
    assert chosen.url == URL("http://env-proxy:3128")
    assert _basic(chosen) == ("u", "env-secret")


def test_scheme_picks_the_variable_and_lower_case_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://plain:1")
    monkeypatch.setenv("HTTPS_PROXY", "http://upper:2")
    monkeypatch.setenv("https_proxy", "http://lower:3")
    https = proxy_from_env(BANK)
    plain = proxy_from_env(URL("http://127.0.0.1:8765"))
    assert https is not None
    assert plain is not None
    assert (https.url.host, plain.url.host) == ("lower", "plain")


def test_no_proxy_bypasses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    monkeypatch.setenv("NO_PROXY", "localhost, .bank.example")
    assert proxy_from_env(BANK) is None
    assert proxy_from_env(URL("https://other.example")) is not None


def test_bad_proxy_in_the_environment_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "ftp://u:env-secret@proxy:21")
    with pytest.raises(ConfigurationError, match="HTTPS_PROXY must be") as info:
        resolve_proxy(None, trust_env=True, base_url=BANK)
    assert "env-secret" not in str(info.value)


@pytest.mark.parametrize(
    ("host", "port", "no_proxy", "bypass"),
    [
        ("api.bank.example", 443, "*", True),
        ("api.bank.example", 443, "bank.example", True),
        ("api.bank.example", 443, ".bank.example", True),
        ("api.bank.example", 443, "API.Bank.Example", True),
        ("notbank.example", 443, "bank.example", False),
        ("api.bank.example", 443, "bank.example:443", True),
        ("api.bank.example", 8443, "bank.example:443", False),
        ("127.0.0.1", 8765, "127.0.0.1", True),
        ("127.0.0.1", 8765, "127.0.0.0/8", True),
        ("10.1.2.3", 443, "127.0.0.0/8, 192.168.0.0/16", False),
        ("::1", 443, "::1", True),
        ("[::1]", 443, "[::1]:443", True),
        ("api.bank.example", 443, "", False),
        ("api.bank.example", 443, " , ,", False),
    ],
)
def test_no_proxy_rules(host: str, port: int, no_proxy: str, bypass: bool) -> None:
    assert no_proxy_matches(host, port, no_proxy) is bypass


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"proxy": 3128}, "proxy must be a URL string"),
        ({"trust_env": "yes"}, "trust_env must be True or False"),
        ({"proxy": "socks5://u:pw-secret@h:1"}, "scheme 'socks5' is not supported"),
    ],
)
def test_client_refuses_bad_proxy_settings(
    rsa_credentials: Credentials, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message) as info:
        PaymentsClient(rsa_credentials, base_url="https://api.bank.example", **kwargs)  # type: ignore[arg-type]
    assert "pw-secret" not in str(info.value)


def test_client_repr_never_shows_proxy_credentials(rsa_credentials: Credentials) -> None:
    client = PaymentsClient(
        rsa_credentials,
        base_url="https://api.bank.example",
        proxy="http://alice:pr0xy-p%40ss@proxy.corp:3128",
    )
    assert "pr0xy" not in repr(client)
    assert "pr0xy" not in repr(vars(client._pipeline.transport))
