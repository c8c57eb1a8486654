"""Outbound proxy settings: parse, keep credentials apart (never printed), read the environment."""

from __future__ import annotations

import base64
import ipaddress
import urllib.request
from dataclasses import dataclass, field

from yarl import URL

from ._errors import ConfigurationError

__all__ = ["Proxy", "no_proxy_matches", "proxy_from_env", "resolve_proxy"]

_SCHEMES = ("http", "https")


@dataclass(frozen=True, slots=True)
class Proxy:
    """A forward proxy: its address (no credentials) and its Basic credentials, if any.

    ``str()`` and ``repr()`` show the address only; the credentials are sent in
    ``Proxy-Authorization`` and nowhere else.
    """

    url: URL
    authorization: str | None = field(default=None, repr=False, compare=False)
    """The ``Proxy-Authorization`` header value (``Basic ...``), or None: a secret."""

    @property
    def headers(self) -> dict[str, str] | None:
        """The headers to send to the proxy itself (its credentials), or None."""
        if self.authorization is None:
            return None
        return {"Proxy-Authorization": self.authorization}

    def __str__(self) -> str:
        return str(self.url)

    @classmethod
    def parse(cls, value: str | URL, *, source: str = "proxy") -> Proxy:
        """Read ``scheme://[user:password@]host:port`` (user and password percent-encoded).

        Args:
            value: the proxy URL.
            source: what to call it in an error (``proxy``, ``HTTPS_PROXY``...).

        Raises:
            ConfigurationError: not an absolute http(s) URL with a host, or it carries a
                path, query or fragment. The message never repeats the credentials.
        """
        try:
            url = URL(str(value))
        except (TypeError, ValueError):
            raise ConfigurationError(f"{source} is not a URL") from None
        if url.scheme not in _SCHEMES or not url.host:
            scheme = url.scheme or "none"
            raise ConfigurationError(
                f"{source} must be an http:// or https:// proxy URL with a host "
                f"(scheme {scheme!r} is not supported)"
            )
        if url.path not in ("", "/") or url.query_string or url.fragment:
            raise ConfigurationError(f"{source} must not carry a path, query or fragment")
        authorization = None
        if url.user is not None or url.password is not None:
            user = url.user or ""
            if ":" in user:
                raise ConfigurationError(f"{source}: the user name must not contain ':'")
            # yarl decodes the percent-encoding: "p%40ss" is the password "p@ss". The header
            # is built here (RFC 7617, UTF-8) rather than with aiohttp.BasicAuth and
            # proxy_auth=, which aiohttp 3.14 deprecates.
            pair = f"{user}:{url.password or ''}".encode()
            authorization = "Basic " + base64.b64encode(pair).decode("ascii")
        return cls(url.with_user(None).with_path(""), authorization)


def proxy_from_env(base_url: URL) -> Proxy | None:
    """The proxy the environment asks for ``base_url``: ``HTTPS_PROXY`` / ``HTTP_PROXY``
    (or ``ALL_PROXY``; lower-case names win, as in curl and urllib), unless ``NO_PROXY``
    lists the host. Read when called, once per client.

    Raises:
        ConfigurationError: the variable holds an unusable proxy URL.
    """
    proxies = urllib.request.getproxies_environment()
    value = proxies.get(base_url.scheme) or proxies.get("all")
    if not value:
        return None
    no_proxy = proxies.get("no")
    if no_proxy and no_proxy_matches(base_url.host or "", base_url.port, no_proxy):
        return None
    return Proxy.parse(value, source=f"{base_url.scheme.upper()}_PROXY")


def no_proxy_matches(host: str, port: int | None, no_proxy: str) -> bool:
    """Whether ``NO_PROXY`` exempts ``host``: curl's rules (``*``, a domain and its
    subdomains with or without a leading dot, an exact IP, an IP network in CIDR form,
    an optional ``:port``), case-insensitive.
    """
    host = host.strip("[]").lower()
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True
        name, _, entry_port = entry.rpartition(":") if _has_port(entry) else (entry, "", "")
        if entry_port and (port is None or entry_port != str(port)):
            continue
        name = name.strip("[]")
        if ip is not None and "/" in name:
            try:
                if ip in ipaddress.ip_network(name, strict=False):
                    return True
            except ValueError:
                pass
            continue
        name = name.lstrip(".")
        if host == name or host.endswith("." + name):
            return True
    return False


def _has_port(entry: str) -> bool:
    if entry.startswith("["):  # [v6]:port
        return "]:" in entry
    return entry.count(":") == 1  # a bare IPv6 address has several


def resolve_proxy(proxy: str | URL | None, *, trust_env: bool, base_url: URL) -> Proxy | None:
    """The proxy a client uses: ``proxy`` if given, else the environment's if ``trust_env``.

    Raises:
        ConfigurationError: an unusable proxy URL.
    """
    if proxy is not None:
        return Proxy.parse(proxy)
    if trust_env:
        return proxy_from_env(base_url)
    return None
