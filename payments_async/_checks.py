"""Checks of the arguments a caller passes, before anything is sent."""

from __future__ import annotations

import re
import unicodedata

from ._errors import ConfigurationError, ValidationError

__all__ = ["check_key_id_and_issuer", "check_payments_service_id"]

# The service's ids are 1-128 of these characters; nothing else can reach a URL path.
_PAYMENTS_SERVICE_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")


def check_payments_service_id(value: object) -> str:
    """Return ``value`` if it can be a ``paymentsServiceId``: 1-128 of ``[A-Za-z0-9_-]``.

    An id that passes cannot change the URL path it is put in (no slashes, dots,
    percent signs, controls or empty ids).

    Raises:
        ValidationError: ``value`` is not such a string (path ``$.paymentsServiceId``).
    """
    if not isinstance(value, str) or not _PAYMENTS_SERVICE_ID.fullmatch(value):
        raise ValidationError.single("$.paymentsServiceId", "must be 1-128 of [A-Za-z0-9_-]")
    return value


def check_key_id_and_issuer(key_id: str, issuer: str) -> None:
    """Refuse a key id (JWT ``kid``) or issuer (``iss``) holding whitespace or a control
    character.

    Both are registered with the service and compared exactly: a space or a newline (from
    a copied line, say) would make every token request fail with a 401 that does not say
    why. Unicode format and unassigned characters count as control characters here.

    Raises:
        ConfigurationError: the first of them that holds such a character, named with its
            position (the value itself is not secret, but may be long).
    """
    for name, value in (("key_id", key_id), ("issuer", issuer)):
        for index, char in enumerate(value):
            if char.isspace() or unicodedata.category(char).startswith("C"):
                raise ConfigurationError(
                    f"{name} must not hold whitespace or control characters "
                    f"({unicodedata.name(char, f'U+{ord(char):04X}')} at position {index})"
                )
