"""The schema exists only through Alembic, and the migrated schema matches the models."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect
from sqlmodel import SQLModel

from migrations.runner import include_object
from vsr_core.db import make_engine


def test_migrated_schema_matches_models(db_url: str) -> None:
    engine = make_engine(db_url)
    with engine.connect() as conn:
        opts = {"compare_type": True, "include_object": include_object(conn.dialect.name)}
        ctx = MigrationContext.configure(conn, opts=opts)
        diff = compare_metadata(ctx, SQLModel.metadata)
    engine.dispose()
    assert diff == [], f"models and migrations differ: {diff}"


def test_upgrade_creates_every_table(db_url: str) -> None:
    engine = make_engine(db_url)
    names = set(inspect(engine).get_table_names())
    engine.dispose()
    assert set(SQLModel.metadata.tables) <= names
    assert "alembic_version" in names


def test_single_migration_head() -> None:
    from migrations.runner import current_heads

    assert len(current_heads()) == 1, "migrations have diverged into several heads"


def test_downgrade_to_base_and_back(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from migrations.runner import downgrade, upgrade

    url = f"sqlite:///{tmp_path / 'x.db'}"
    upgrade(url)
    downgrade(url, "base")
    engine = make_engine(url)
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    engine.dispose()
    upgrade(url)


def test_timestamps_are_aware_utc(session) -> None:  # type: ignore[no-untyped-def]
    from vsr_core.models import Worker

    w = Worker(source="invite", external_id="tz-check", roles=["annotator"])
    session.add(w)
    session.commit()
    session.expire_all()
    got = session.get(Worker, w.id)
    assert got is not None and got.created_at.tzinfo is not None
    assert got.created_at.utcoffset().total_seconds() == 0
