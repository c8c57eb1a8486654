"""URL helpers shared by the library's rooms: is a host loopback, and a URL fit to show."""

from __future__ import annotations

import ipaddress
import re
from typing import Final

__all__ = ["is_loopback", "redact_url"]

# A query parameter named like a password (libpq reads ``password`` and ``sslpassword``).
_SECRET_PARAM: Final = re.compile(r"([?&][^=&#]*password=)[^&#]*", re.IGNORECASE)


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
    """``text`` (a URL, or ``--option=URL``) as a message or a log line may show it.

    Works on text too malformed to parse: everything before the last ``@`` ahead of the
    query (the user and the password) becomes ``***``, and so does the value of every query
    parameter whose name ends in ``password``. Text without either is returned unchanged.
    """
    scheme_end = text.find("://")
    start = scheme_end + 3 if scheme_end >= 0 else 0
    query = len(text)
    for stop in "?#":
        found = text.find(stop, start)
        if found >= 0:
            query = min(query, found)
    at = text.rfind("@", start, query)
    head = text[:start] + "***" + text[at:query] if at >= 0 else text[:query]
    return head + _SECRET_PARAM.sub(r"\1***", text[query:])
