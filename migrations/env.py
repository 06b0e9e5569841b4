"""Alembic environment: target metadata is every SQLModel table in vsr_core.models."""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

import vsr_core.models  # noqa: F401  (registers the tables on SQLModel.metadata)
from migrations.runner import include_object
from vsr_core.db import make_engine

config = context.config
target_metadata = SQLModel.metadata


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connectable = config.attributes.get("connection")
    if connectable is not None:
        _run(connectable)
        return
    engine = make_engine(str(config.get_main_option("sqlalchemy.url")))
    try:
        with engine.connect() as connection:
            _run(connection)
    finally:
        engine.dispose()


def _run(connection) -> None:  # type: ignore[no-untyped-def]
    sqlite = connection.dialect.name == "sqlite"
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=sqlite,  # SQLite cannot ALTER much
        compare_type=True,
        include_object=include_object(connection.dialect.name),
    )
    if not sqlite:
        with context.begin_transaction():
            context.run_migrations()
        return
    # Batch mode copies a table and drops the old one; with foreign keys on, dropping a
    # referenced table (example, under vote) fails or deletes. The pragma is a no-op inside
    # a transaction, so it is set on the raw connection before Alembic begins one, and every
    # reference is checked before the migration's transaction commits.
    raw = connection.connection.driver_connection
    raw.execute("PRAGMA foreign_keys=OFF")
    try:
        with context.begin_transaction():
            context.run_migrations()
            broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
            if broken:
                raise RuntimeError(f"migration left broken references: {broken[:5]}")
    finally:
        raw.execute("PRAGMA foreign_keys=ON")


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
