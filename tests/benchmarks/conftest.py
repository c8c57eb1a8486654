"""The benchmark smoke tests need the ``bench`` extra: without it they skip, naming it."""

from __future__ import annotations

import importlib.util

import pytest

# What benchmarks/ imports beyond the test extras (pyproject's `bench` extra).
_BENCH_MODULES = ("httpx", "pydantic", "matplotlib", "jwt", "psutil", "pgserver", "procrastinate")
_MISSING = tuple(name for name in _BENCH_MODULES if importlib.util.find_spec(name) is None)


@pytest.fixture(scope="session", autouse=True)  # before the modules' own fixtures run
def _bench_extra_installed() -> None:
    """Skip, with the install command, where the bench extra is not installed."""
    if _MISSING:
        pytest.skip(
            f"needs the bench extra (pip install -e '.[bench]'); missing: {', '.join(_MISSING)}"
        )
