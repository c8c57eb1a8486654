"""The sandbox's registry of clients: id, secret and registered public keys (kid, iss)."""

from __future__ import annotations

import hmac
from dataclasses import dataclass, field

from .._constants import SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET
from .._errors import ConfigurationError
from .._jwt import RegisteredKey
from .._keys import load_public_key

__all__ = ["ClientRecord", "Registry"]


@dataclass(slots=True)
class ClientRecord:
    """A registered client.

    Attributes:
        client_id: what it sends as Basic user and ``X-Service-Client-Id``.
        secret: its client secret (never logged).
        keys: its public keys by kid, each with the iss registered with it.
        key_pems: the PEM text of each key by kid (for persistence).
        predefined: True for the sandbox's predefined client, which may also use the
            predefined tokens.
    """

    client_id: str
    secret: str = field(repr=False)
    keys: dict[str, RegisteredKey] = field(default_factory=dict)
    key_pems: dict[str, str] = field(default_factory=dict, repr=False)
    predefined: bool = False

    def secret_matches(self, secret: str) -> bool:
        """Constant-time comparison of a presented secret."""
        return hmac.compare_digest(self.secret.encode(), secret.encode())


class Registry:
    """Clients by id; the predefined sandbox client is always present.

    Keys are loaded and checked once, at registration: verification never parses PEM.
    """

    def __init__(self) -> None:
        self._clients: dict[str, ClientRecord] = {
            SANDBOX_CLIENT_ID: ClientRecord(
                SANDBOX_CLIENT_ID, SANDBOX_CLIENT_SECRET, predefined=True
            )
        }

    def get(self, client_id: str) -> ClientRecord | None:
        """The client with this id, or None."""
        return self._clients.get(client_id)

    def __len__(self) -> int:
        return len(self._clients)

    def clients(self) -> list[ClientRecord]:
        """Every registered client."""
        return list(self._clients.values())

    def register(
        self,
        client_id: str,
        secret: str,
        public_key_pem: str | bytes,
        *,
        kid: str,
        iss: str,
    ) -> ClientRecord:
        """Register a client and a public key, or add a key to an existing client.

        Args:
            client_id: the client id.
            secret: the client secret; for an existing client it must match.
            public_key_pem: the RSA public key in PEM (unencrypted, >= 2048 bits).
            kid: the key id its JWTs carry in the header.
            iss: the issuer its JWTs carry in ``iss``.

        Returns:
            The client record.

        Raises:
            ConfigurationError: the key is malformed, not RSA or under 2048 bits (the
                spec's rule), an id/kid/iss is empty, or the secret does not match the
                existing client's.
        """
        if not client_id or not secret or not kid or not iss:
            raise ConfigurationError("client_id, secret, kid and iss must not be empty")
        key = load_public_key(public_key_pem)
        pem = (
            public_key_pem.decode("ascii") if isinstance(public_key_pem, bytes) else public_key_pem
        )
        record = self._clients.get(client_id)
        if record is None:
            record = ClientRecord(client_id, secret)
        elif not record.secret_matches(secret):
            raise ConfigurationError(f"client {client_id!r} exists with a different secret")
        record.keys[kid] = RegisteredKey(kid=kid, iss=iss, public_key=key)
        record.key_pems[kid] = pem
        self._clients[client_id] = record
        return record
