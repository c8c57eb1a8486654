"""Fixtures the integration modules share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.signing import SoftHsm, init_token


@pytest.fixture(scope="session")
def softhsm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SoftHsm]:
    """One SoftHSM2 token for the whole run (skips, naming the install command, without it).

    Session-wide: SoftHSM2 reads its configuration once per process, when its module is
    first loaded, so every module's keys live in this one token (each under its labels).
    """
    yield from init_token(tmp_path_factory.mktemp("softhsm"))


@pytest.fixture(params=["sqlite", "postgresql"])
def journal_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A bulk journal of every store: a SQLite file, then a PostgreSQL database."""
    if request.param == "sqlite":
        yield str(tmp_path / "run.journal.sqlite")
    else:
        yield str(request.getfixturevalue("pg_dsn"))
