"""URL helpers shared by the library's rooms: is a host loopback, and a URL fit to show."""

from __future__ import annotations

import ipaddress
import re
from typing import Final

__all__ = ["is_loopback", "redact_url"]

# A URL in a text: a scheme, then everything up to the next white space; a password may
# hold white space, so ``user:`` then anything up to an ``@`` before any ``/`` is taken too.
_URL: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://(?:[^\s/@:]*:[^/@\n]*@)?\S*")
# A query parameter named like a password (libpq reads ``password`` and ``sslpassword``);
# its value runs to the next ``&``: libpq takes a ``#`` there as part of it.
_SECRET_PARAM: Final = re.compile(r"([?&][^=&#\s]*password=)[^&\s]*", re.IGNORECASE)
# The same in libpq's ``key=value`` form (``host=db password='a b'``): quoted, or one word.
_SECRET_KEYWORD: Final = re.compile(
    r"((?:^|[\s'\"(,])\w*password\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s']\S*)", re.IGNORECASE
)
# ``user:password@host`` without a scheme, a word of its own (not a ``key=value``).
_BARE_USERINFO: Final = re.compile(r"(?<![^\s'\"(])[^\s:@=/'\"()]+:(?!//)[^\s=]*@(?=[^\s@])")
# ``host:port/``: the part before a path is a host with its port, not ``user:password``.
_HOST_PORT: Final = re.compile(r"[^:@/]*:\d*/")


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and any loopback address (IPv4 or IPv6, brackets allowed).

    A host name other than ``localhost`` is never loopback here: nothing is resolved.
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def redact_url(text: str) -> str:
    """``text`` (a URL, ``--option=URL``, a libpq ``key=value`` string or a message holding
    some) as a message or a log line may show it.

    Works on text too malformed to parse. In each URL, the user and the password (what
    comes before the ``@`` that ends them) become ``***``; so does the value of every query
    parameter or ``key=value`` pair whose name ends in ``password``. A password holding an
    unencoded ``/``, ``?``, ``#`` or ``@`` is hidden whole. Text without a password or a user
    is returned unchanged.
    """
    shown = _URL.sub(lambda match: _without_userinfo(match.group(0)), text)
    shown = _BARE_USERINFO.sub("***@", shown)
    return _SECRET_KEYWORD.sub(r"\1***", _SECRET_PARAM.sub(r"\1***", shown))


def _without_userinfo(url: str) -> str:
    start = url.index("://") + 3
    path = url.find("/", start)
    # The userinfo ends at the last "@" before the path ...
    at = url.rfind("@", start, path) if path >= 0 else -1
    if at < 0:
        # ... or, for a password holding "/" (or a URL without a path), at the last "@"
        # after something shaped like user:password (a ":", no "=" of a query, no port).
        at = url.rfind("@", start)
        while at >= 0:
            userinfo = url[start:at]
            if ":" in userinfo and "=" not in userinfo and not _HOST_PORT.match(userinfo):
                break
            at = url.rfind("@", start, at)
    return url[:start] + "***" + url[at:] if at >= 0 else url
