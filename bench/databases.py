"""Fresh, migrated databases for the benchmarks (SQLite files or PostgreSQL databases)."""

from __future__ import annotations

from pathlib import Path


def fresh_database(url: str | None, tmp: Path, name: str = "vsr_bench") -> str:
    """A new, migrated database: a SQLite file ``<name>.db`` in ``tmp`` when ``url`` is None,
    or, on the server of a PostgreSQL ``url``, the database ``name`` dropped and created
    again. Never the URL's own database: a benchmark pointed at a real deployment's URL must
    not wipe it."""
    from migrations.runner import upgrade

    if url is None:
        url = f"sqlite:///{tmp / (name + '.db')}"
    elif url.startswith("postgresql"):
        from sqlalchemy import text
        from sqlalchemy.engine import make_url

        from vsr_core.db import make_engine

        url = make_url(url).set(database=name).render_as_string(hide_password=False)
        db = make_url(url).database
        admin = make_engine(make_url(url).set(database="postgres").render_as_string(False))
        with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
            c.execute(text(f'CREATE DATABASE "{db}"'))
        admin.dispose()
    upgrade(url)
    return url


def drop_database(url: str) -> None:
    """Drop a PostgreSQL benchmark database (a SQLite file goes with its temporary folder)."""
    if not url.startswith("postgresql"):
        return
    from sqlalchemy import text
    from sqlalchemy.engine import make_url

    from vsr_core.db import make_engine

    admin = make_engine(make_url(url).set(database="postgres").render_as_string(False))
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)'))
    admin.dispose()
