"""Fixtures of the sandbox integration tests, loaded by a module's ``pytest_plugins``."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
import pytest_asyncio

from payments_async.sandbox import SandboxConfig
from payments_async.testing import ManualClock, SandboxHandle, sandbox_server
from tests.support.sandbox import PROCESSING_DELAY, SETTLEMENT_DELAY, RawClient, client_for


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def sandbox_config(clock: ManualClock) -> SandboxConfig:
    return SandboxConfig(
        clock=clock, processing_delay=PROCESSING_DELAY, settlement_delay=SETTLEMENT_DELAY
    )


@pytest_asyncio.fixture
async def sandbox(sandbox_config: SandboxConfig) -> AsyncIterator[SandboxHandle]:
    async with sandbox_server(sandbox_config) as sb:
        yield sb


@pytest_asyncio.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
def client(http: aiohttp.ClientSession, sandbox: SandboxHandle) -> RawClient:
    return client_for(http, sandbox)
