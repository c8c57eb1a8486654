"""Fixtures of the unit tests: the suite's RSA keys, mocked HTTP, a scripted token endpoint."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

from payments_async._keys import generate_private_key
from tests.support.auth import TOKEN_URL, TokenServer

if TYPE_CHECKING:  # imported where used: most unit modules run without aioresponses
    from aioresponses import aioresponses


@pytest.fixture(scope="session")
def rsa_key(rsa_private_key: RSAPrivateKey) -> RSAPrivateKey:
    """The suite's one 2048-bit key (tests/conftest.py): generating RSA keys is slow."""
    return rsa_private_key


@pytest.fixture(scope="session")
def other_rsa_key() -> RSAPrivateKey:
    """A second key, for "signed with the wrong key" cases."""
    return generate_private_key(2048)


@pytest.fixture
def mock_http() -> Iterator[aioresponses]:
    """aioresponses (the test extra pins aiohttp < 3.14, which it supports)."""
    from aioresponses import aioresponses

    with aioresponses() as mocked:
        yield mocked


@pytest.fixture
def token_server(mock_http: aioresponses) -> TokenServer:
    """A token endpoint answering 200 with a new token per call, unless scripted."""
    server = TokenServer()
    mock_http.post(TOKEN_URL, callback=server.respond, repeat=True)
    return server
