"""The service's edition as one value: the operations' paths and the client-id header."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ._constants import (
    CAMT029_PATH,
    CAMT056_PATH,
    CLIENT_ID_HEADER,
    PACS002_PATH,
    PACS008_PATH,
    PACS028_PATH,
    REQUEST_ID_HEADER,
    SCA_HEADER,
    TOKEN_PATH,
)
from ._errors import ConfigurationError

__all__ = ["ServiceProfile", "check_request_path"]

# Segments of letters, digits, "_", "-" and "." (a version such as v10.1), no dot segment.
_PATH = re.compile(r"(?:/[A-Za-z0-9_.~-]+)+")
_DOT_SEGMENT = re.compile(r"/\.{1,2}(?=/|$)")
# An HTTP field name (RFC 9110, 5.1: a token).
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# Headers the client sets for its own reasons: a profile cannot rename one onto them.
_RESERVED_HEADERS = frozenset(
    name.lower()
    for name in (
        "Authorization",
        SCA_HEADER,
        REQUEST_ID_HEADER,
        "Accept",
        "Content-Type",
        "Content-Length",
        "User-Agent",
        "Host",
        "Proxy-Authorization",
        "Cookie",
    )
)
_PATH_FIELDS = ("pacs008_path", "pacs002_path", "camt056_path", "camt029_path", "pacs028_path")


def check_request_path(path: object, *, name: str = "path") -> str:
    """``path`` if it is a path of the service's own (``/segment/...``), else an error.

    A path is relative to the base URL: it starts with one ``/`` and holds letters,
    digits and ``_ . ~ -`` in its segments; no scheme, host, query, ``.`` or ``..``
    segment, white space or percent-encoding.

    Raises:
        ConfigurationError: ``path`` is not such a path (the message says why).
    """
    if not isinstance(path, str):
        raise ConfigurationError(f"{name} must be a string, got {type(path).__name__}")
    if not path.startswith("/") or path.startswith("//") or "://" in path:
        raise ConfigurationError(f"{name} must be a path starting with '/', got {path[:80]!r}")
    if _DOT_SEGMENT.search(path):
        raise ConfigurationError(f"{name} must not hold a '.' or '..' segment: {path[:80]!r}")
    if not _PATH.fullmatch(path):
        raise ConfigurationError(
            f"{name} may hold only letters, digits, '/', '_', '.', '~' and '-' "
            f"(no query, no empty segment, no trailing '/'): {path[:80]!r}"
        )
    return path


@dataclass(frozen=True, slots=True)
class ServiceProfile:
    """Where the service's edition puts each operation, and what it calls the client id.

    The defaults are the specification's. Providers move version segments between
    editions of their documentation (``/payments/pacs008/v08`` in one, ``v10`` in
    another) and rename the client-id header; a profile names them once, for the client
    (``PaymentsClient(profile=...)``), the command line (``--profile`` or the ``profile``
    table of the credentials file) and the sandbox (which then answers at these paths).

    Args:
        pacs008_path: where credit transfers are POSTed.
        pacs002_path: where a payment's status report is read (``/{id}`` is appended).
        camt056_path: where cancellation requests are POSTed.
        camt029_path: where a cancellation's resolution is read (``/{id}`` is appended).
        pacs028_path: where requests for status update (pacs.028) are POSTed.
        client_id_header: the request header that names the client.

    Raises:
        ConfigurationError: a path is not a plain path of the service (see
            `check_request_path`), two operations share one, one is the token endpoint's,
            or the header is not a field name or is one the client sets itself.
    """

    pacs008_path: str = PACS008_PATH
    pacs002_path: str = PACS002_PATH
    camt056_path: str = CAMT056_PATH
    camt029_path: str = CAMT029_PATH
    pacs028_path: str = PACS028_PATH
    client_id_header: str = CLIENT_ID_HEADER

    def __post_init__(self) -> None:
        paths = [check_request_path(getattr(self, name), name=name) for name in _PATH_FIELDS]
        if len(set(paths)) != len(paths):
            raise ConfigurationError("each operation of a ServiceProfile needs its own path")
        if TOKEN_PATH in paths:
            raise ConfigurationError(f"{TOKEN_PATH} is the token endpoint, not an operation")
        header = self.client_id_header
        if not isinstance(header, str) or not _HEADER_NAME.fullmatch(header):
            raise ConfigurationError(f"client_id_header must be an HTTP header name: {header!r}")
        if header.lower() in _RESERVED_HEADERS:
            raise ConfigurationError(
                f"client_id_header cannot be {header!r}: the client sets that header itself"
            )

    @classmethod
    def from_mapping(cls, values: Mapping[str, object]) -> ServiceProfile:
        """A profile from field names and values; fields left out keep the spec's value.

        Raises:
            ConfigurationError: a name that is no field's, or a value the profile refuses.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigurationError(
                f"no such profile field: {', '.join(unknown)} (known: {', '.join(sorted(known))})"
            )
        return cls(**values)  # type: ignore[arg-type]  # each value is checked on creation

    @classmethod
    def parse(cls, items: Iterable[str]) -> ServiceProfile:
        """A profile from ``field=value`` texts, as the command line takes them.

        Raises:
            ConfigurationError: a text without ``=``, an unknown field, a refused value.
        """
        values: dict[str, object] = {}
        for item in items:
            name, sep, value = item.partition("=")
            if not sep:
                raise ConfigurationError(f"a profile setting is field=value, got {item!r}")
            values[name.strip()] = value.strip()
        return cls.from_mapping(values)
