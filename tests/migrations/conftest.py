"""Databases at an older revision, for the tests of one migration on populated data."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from migrations.runner import upgrade
from tests.conftest import _create_pg_database, _drop_pg_database


@pytest.fixture
def database_at(backend: str, tmp_path: Path) -> Iterator[Callable[[str], str]]:
    """``database_at("0006")``: the URL of a fresh database of the current backend, migrated to
    that revision only (dropped after the test on PostgreSQL)."""
    made: list[str] = []

    def make(revision: str) -> str:
        url = (
            f"sqlite:///{tmp_path / f'at-{revision}.db'}"
            if backend == "sqlite"
            else _create_pg_database()
        )
        upgrade(url, revision)
        made.append(url)
        return url

    yield make
    if backend == "postgresql":
        for url in made:
            _drop_pg_database(url)
