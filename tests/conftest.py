"""Shared fixtures: a real SQLite file and a real PostgreSQL database, both migrated by Alembic.

Every run creates its own PostgreSQL database (dropped at the end), so parallel runs never
share state. Set VSR_TEST_PG_ADMIN_URL to point elsewhere; when CI is set an unreachable
PostgreSQL is a failure, not a skip.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine, make_url
from sqlmodel import Session, SQLModel

import vsr_core.models  # noqa: F401
from vsr_core.db import make_engine

# Most tests use short readable worker ids ("PROLIFIC_PID=v1"); production checks each
# platform's exact format (tests/webapp/crowd/test_ids.py tests that setting explicitly).
os.environ.setdefault("PLATFORM_ID_FORMATS", "safe")
# The fuzz tests read the routes from /openapi.json (off by default on a live site).
os.environ.setdefault("API_DOCS", "1")
# Likewise many test workers come from one address; tests/webapp/http/test_rate_limits.py
# sets limits.
for _name in ("NEW_WORKERS_PER_ADDRESS", "NEW_WORKERS_PER_STUDY", "NEW_BATCHES_PER_ADDRESS"):
    os.environ.setdefault(_name, "0")

# The real data (VSR release, COCO subsets): VSR_DATA_DIR, else a `shared` folder beside the
# repository (`vsr data fetch` fills one, docs/dataset.md).
SHARED = Path(
    os.environ.get("VSR_DATA_DIR") or Path(__file__).resolve().parents[1].parent / "shared"
)
COCO_DIR = SHARED / "coco"
VSR_DIR = SHARED / "vsr"
PG_ADMIN_URL = os.environ.get(
    "VSR_TEST_PG_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
BACKENDS = [b for b in os.environ.get("VSR_TEST_BACKENDS", "sqlite,postgresql").split(",") if b]


def _pg_reachable() -> str | None:
    try:
        eng = make_engine(PG_ADMIN_URL)
        with eng.connect() as c:
            c.execute(text("select 1"))
        eng.dispose()
        return None
    except Exception as exc:  # pragma: no cover - depends on the machine
        return str(exc).splitlines()[0]


def _create_pg_database() -> str:
    # VSR_TEST_PG_PREFIX: on a server shared by several people, each their own names.
    prefix = os.environ.get("VSR_TEST_PG_PREFIX", "vsr_test")
    name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin = make_engine(PG_ADMIN_URL).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)


def _drop_pg_database(url: str) -> None:
    name = make_url(url).database
    admin = make_engine(PG_ADMIN_URL).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def require_backend(name: str) -> None:
    if name not in BACKENDS:
        pytest.skip(f"backend {name} not selected (VSR_TEST_BACKENDS)")
    if name == "postgresql":
        err = _pg_reachable()
        if err:
            if os.environ.get("CI"):
                pytest.fail(f"PostgreSQL unreachable at {PG_ADMIN_URL}: {err}")
            pytest.skip(f"PostgreSQL unreachable: {err}")


@pytest.fixture(scope="session")
def migrated_urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Lazily created, migrated databases per backend, shared by the whole session."""
    urls: dict[str, str] = {}
    yield urls
    if "postgresql" in urls:
        _drop_pg_database(urls["postgresql"])


def _migrated_url(backend: str, urls: dict[str, str], tmp: pytest.TempPathFactory) -> str:
    if backend not in urls:
        from migrations.runner import upgrade

        if backend == "sqlite":
            url = f"sqlite:///{tmp.mktemp('sqlite') / 'vsr.db'}"
        else:
            url = _create_pg_database()
        upgrade(url)
        urls[backend] = url
    return urls[backend]


def _audit_migration() -> Any:
    """Migration 0017's module (its file name starts with a digit: loaded by path)."""
    import importlib.util

    path = Path(__file__).parents[1] / "migrations/versions/0017_roles_and_audit.py"
    spec = importlib.util.spec_from_file_location("migration_0017", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _truncate_all(engine: Engine) -> None:
    tables = [t.name for t in SQLModel.metadata.sorted_tables]
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            # The audit trail refuses TRUNCATE by trigger; replica mode (superuser only) is
            # PostgreSQL's own switch for not firing triggers, here only between tests.
            conn.exec_driver_sql("SET LOCAL session_replication_role = replica")
            conn.execute(text("TRUNCATE " + ", ".join(f'"{t}"' for t in tables) + " CASCADE"))
        else:
            conn.exec_driver_sql("PRAGMA defer_foreign_keys=ON")
            # SQLite has no switch for triggers: the audit trail's are dropped for the
            # DELETE and made again from the migration's own statements.
            conn.exec_driver_sql("DROP TRIGGER IF EXISTS auditevent_no_update")
            conn.exec_driver_sql("DROP TRIGGER IF EXISTS auditevent_no_delete")
            for t in reversed(tables):
                conn.execute(text(f'DELETE FROM "{t}"'))
            for statement in _audit_migration()._SQLITE_TRIGGERS:
                conn.exec_driver_sql(statement)
    # Every database has its default study (migration 0007); rows made without a study
    # belong to it.
    from vsr_core.studies.store import ensure_default_study

    with Session(engine) as s:
        ensure_default_study(s)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    require_backend(request.param)
    return str(request.param)


@pytest.fixture
def db_url(
    backend: str, migrated_urls: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> str:
    """URL of an empty, migrated database of the current backend (parametrised)."""
    url = _migrated_url(backend, migrated_urls, tmp_path_factory)
    eng = make_engine(url)
    _truncate_all(eng)
    eng.dispose()
    return url


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    eng = make_engine(db_url)
    yield eng
    eng.dispose()


@pytest.fixture
def session(engine: Engine) -> Iterator[Session]:
    with Session(engine) as s:
        yield s


@pytest.fixture
def sqlite_url(migrated_urls: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> str:
    """An empty migrated SQLite database (for tests that need only one backend)."""
    url = _migrated_url("sqlite", migrated_urls, tmp_path_factory)
    eng = make_engine(url)
    _truncate_all(eng)
    eng.dispose()
    return url


@pytest.fixture
def pg_url(migrated_urls: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> str:
    """An empty migrated PostgreSQL database (for PostgreSQL-only tests)."""
    require_backend("postgresql")
    url = _migrated_url("postgresql", migrated_urls, tmp_path_factory)
    eng = make_engine(url)
    _truncate_all(eng)
    eng.dispose()
    return url


@pytest.fixture(scope="session")
def coco_dir() -> Path:
    if not COCO_DIR.is_dir():
        pytest.skip(f"real COCO data not found at {COCO_DIR}")
    return COCO_DIR


@pytest.fixture(scope="session")
def vsr_dir() -> Path:
    if not VSR_DIR.is_dir():
        pytest.skip(f"real VSR data not found at {VSR_DIR}")
    return VSR_DIR


@pytest.fixture
def site(db_url: str, engine: Engine, coco_dir: Path, tmp_path: Path) -> Any:
    """The annotation site on the current backend with 6 pairs from the real COCO subset
    (test modules that need other seed data define their own ``site``)."""
    from tests.support.webapp_coco import make_app, make_pairs

    with Session(engine) as s:
        make_pairs(s, coco_dir, 6)
    return make_app(db_url, tmp_path)
