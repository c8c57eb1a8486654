"""Suite-wide fixtures: a clean environment for every test."""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from hypothesis import settings

from payments_async import Credentials

# Small fake servers over real HTTP (see support/http_servers.py), for the tests that ask.
from tests.support.http_servers import serve  # noqa: F401

# A real PostgreSQL started by the suite (see support/postgres.py), for the tests that ask.
from tests.support.postgres import pg_dsn, postgres_server  # noqa: F401
from tests.support.reliability import FIGURES, merge_figures

# Property tests without a count of their own run `dev`'s examples (quick, for `make unit`
# and a developer's runs) or `ci`'s (`make test` sets HYPOTHESIS_PROFILE=ci). No example
# has a deadline: on a loaded machine (the tests run side by side, -n) hypothesis's 200 ms
# per example timed the machine, not the code, and failed a correct test as flaky.
settings.register_profile("dev", max_examples=100, deadline=None)
settings.register_profile("ci", max_examples=1000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

_ENV_TO_CLEAR = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "PAYMENTS_CLIENT_ID",
    "PAYMENTS_CLIENT_SECRET",
    "PAYMENTS_KEY_ID",
    "PAYMENTS_ISSUER",
    "PAYMENTS_PRIVATE_KEY_FILE",
    "PAYMENTS_CREDENTIALS_FILE",
    "PAYMENTS_PROXY",
)


# aioresponses cannot build responses for aiohttp >= 3.14, so `make test-latest` runs without
# it: the test modules that use it (directly or through tests/unit/conftest.py's mock_http fixture)
# are not collected there, and the header of the run says so. Everything else runs.
_HAVE_AIORESPONSES = importlib.util.find_spec("aioresponses") is not None
_USES_AIORESPONSES = re.compile(rb"\baioresponses\b|\bmock_http\b")
_left_out: list[str] = []


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Without aioresponses installed, leave out the test modules that need it."""
    if _HAVE_AIORESPONSES or collection_path.suffix != ".py":
        return None
    if not collection_path.name.startswith("test_"):
        return None
    if _USES_AIORESPONSES.search(collection_path.read_bytes()):
        _left_out.append(collection_path.name)
        return True
    return None


# The folders whose tests take seconds each (real processes, servers, PostgreSQL), run first.
_LONG_FIRST = ("reliability", "integration", "benchmarks")


def _run_order(item: pytest.Item) -> int:
    """Where ``item``'s folder comes in the run: the long tests' folders first, then the
    rest (tests/unit, the contract tests at the top), which take milliseconds each."""
    folder = item.path.parent.name
    return _LONG_FIRST.index(folder) if folder in _LONG_FIRST else len(_LONG_FIRST)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test of a module that uses aioresponses: `make test` runs those (and only
    those) again in .venv, on the aiohttp that aioresponses supports (``-m aioresponses``).

    Then order the run so that the tests that take seconds start first and the many short
    ones come last (each module's tests stay together, in their order): pytest-xdist's
    workers then end together on short tests instead of one of them starting a long test
    when the others are nearly done."""
    uses: dict[Path, bool] = {}
    for item in items:
        path = item.path
        if path not in uses:
            uses[path] = bool(_USES_AIORESPONSES.search(path.read_bytes()))
        if uses[path]:
            item.add_marker(pytest.mark.aioresponses)
    items.sort(key=_run_order)


def pytest_report_header(config: pytest.Config) -> str:
    """Name the aiohttp the run uses, and what was left out for want of aioresponses."""
    import aiohttp

    if _HAVE_AIORESPONSES:
        return f"aiohttp {aiohttp.__version__}, with aioresponses"
    return f"aiohttp {aiohttp.__version__}, without aioresponses: its test modules are not run"


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In a pytest-xdist worker, hand the reliability figures to the controlling process."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["reliability_figures"] = json.loads(json.dumps(FIGURES, default=str))


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """pytest-xdist: a worker finished; keep its reliability figures for the summary."""
    merge_figures(getattr(node, "workeroutput", {}).get("reliability_figures", {}))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """List the modules left out (the header is printed before collection), and every
    figure the reliability tests measured (from every worker)."""
    if _left_out:
        names = ", ".join(sorted(_left_out))
        terminalreporter.write_line(f"not collected (they need aioresponses): {names}")
    if FIGURES:
        terminalreporter.section("reliability figures")
        for section in sorted(FIGURES):
            figures = ", ".join(f"{k}={v}" for k, v in FIGURES[section].items())
            terminalreporter.write_line(f"{section}: {figures}")


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy, CA bundle or credentials from the developer's shell leaks into a test."""
    for name in _ENV_TO_CLEAR:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def rsa_private_key() -> RSAPrivateKey:
    """One 2048-bit key for the whole run: generating keys is slow."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="session")
def rsa_credentials(rsa_private_key: RSAPrivateKey) -> Credentials:
    """Signed-mode credentials for a client that no server knows (mocked transports)."""
    return Credentials(
        "test-client",
        "test-secret-value",
        key_id="test-kid",
        issuer="test-issuer",
        private_key=rsa_private_key,
    )
