"""The command line's defaults and environment variables, on one screen."""

from __future__ import annotations

from typing import Final

CLI_RETRY_TIMEOUT: Final = 5.0
"""Seconds for one operation, all retries and the token fetch included (a person waits)."""
CLI_PROBE_TIMEOUT: Final = 1.5
"""Seconds for the TCP probe that names why the service cannot be reached."""
CLI_MAX_JSON_DEPTH: Final = 64
"""JSON input nested deeper than this is refused, not recursed into."""
CLI_MAX_FILE_BYTES: Final = 4 * 1024 * 1024
"""Largest file the command line reads whole (a message, a credentials file, a PIN or key
file): a larger one, or one that never ends (``/dev/zero``, a pipe), is refused after
reading at most this many bytes. Bulk inputs are streamed and have no such cap."""
CLI_MAX_KEYGEN_BITS: Final = 8192
"""Largest RSA modulus ``keygen --bits`` makes (larger keys take minutes to generate and
make every signature slow; the service needs at least 2048)."""

ENV_BASE_URL: Final = "PAYMENTS_BASE_URL"
ENV_PROXY: Final = "PAYMENTS_PROXY"
ENV_CA_FILE: Final = "PAYMENTS_CA_FILE"
ENV_CREDENTIALS: Final = "PAYMENTS_CREDENTIALS_FILE"
ENV_NOTIFY_PASSWORD: Final = "PAYMENTS_NOTIFY_PASSWORD"
SANDBOX_URL: Final = "http://127.0.0.1:8765"
"""Where ``payments-async sandbox`` listens (the service address with ``--sandbox``)."""
