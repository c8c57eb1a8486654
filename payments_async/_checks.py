"""Checks of the arguments a caller passes, before anything is sent."""

from __future__ import annotations

import re

from ._errors import ValidationError

__all__ = ["check_payments_service_id"]

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
