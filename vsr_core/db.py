"""Engine and session factories. Nothing is created at import time."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from sqlmodel import Session, create_engine

from vsr_core.settings import Settings


def normalise_url(url: str) -> str:
    """Accept the URLs people paste (postgres://, postgresql://) and pick the psycopg 3 driver."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


# Up to 40 connections per process: FastAPI runs sync endpoints and dependencies in a 40-thread
# pool, and a smaller pool lets threads that hold a connection starve the others under load.
# With the validation API's lean pool (Settings.api_threads, 4) a server process may open 44:
# two such processes (one docker-compose.yml replica, `--workers 2`) stay within PostgreSQL's
# default max_connections (100), a third does not (docs/scaling.md; docker-compose.yml raises
# the limit).
POOL_SIZE = 10
MAX_OVERFLOW = 30
# How long a SQLite writer waits for another's write lock before giving up with "database is
# locked" (the web app then answers 503 with Retry-After, webapp.http.db_retry). At 30 s,
# concurrent settings saves held every server thread waiting, clients timed out and even
# /healthz took 9-20 s; a site's own writes are short, so a longer wait means a bulk job holds
# the database and the client had better come back later.
SQLITE_BUSY_TIMEOUT_SECONDS = 5.0


def make_engine(settings: Settings | str) -> Engine:
    """Create an engine for a Settings object or a bare URL."""
    url = normalise_url(settings if isinstance(settings, str) else settings.database_url)
    echo = False if isinstance(settings, str) else settings.sql_echo
    if url.startswith("sqlite"):
        engine = create_engine(
            url,
            echo=echo,
            connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_SECONDS},
        )
        _configure_sqlite(engine)
        return engine
    return create_engine(
        url, echo=echo, pool_pre_ping=True, pool_size=POOL_SIZE, max_overflow=MAX_OVERFLOW
    )


def make_lean_engine(engine: Engine, pool_size: int) -> Engine:
    """A second, small pool on the same PostgreSQL database without pre-ping, for a hot path
    that runs in at most ``pool_size`` threads and retries once on a dropped connection
    (``is_dropped_connection``). The ping is a network round trip on every checkout (about
    a tenth of a validation round trip's CPU); the retry makes it unnecessary where the work
    is idempotent. Its connections plan each prepared statement once (``GENERIC_PLANS``).
    SQLite has no connection to lose: the same engine is returned.
    """
    if engine.dialect.name != "postgresql":
        return engine
    return create_engine(
        engine.url,
        echo=engine.echo,
        pool_pre_ping=False,
        pool_size=pool_size,
        max_overflow=0,
        connect_args={"options": _with_generic_plans(engine.url.query.get("options"))},
    )


def _with_generic_plans(options: str | tuple[str, ...] | None) -> str:
    """The URL's own ``options`` (e.g. ``-c search_path=...``) with GENERIC_PLANS added:
    connect_args replace the URL's value, so it is kept here rather than lost."""
    given = " ".join(options) if isinstance(options, tuple) else (options or "")
    return f"{given} {GENERIC_PLANS}".strip()


# The hot path's connections reuse one plan per prepared statement (psycopg prepares a
# statement on its fifth run). In PostgreSQL's default mode, a statement whose generic plan
# it estimates costlier than planning each run afresh is planned on every run: the lease
# statement was (0.5-0.75 ms of PostgreSQL CPU per validation round trip), though its generic
# plan is the same ordered walk of ix_example_open (tests/webapp/validate/test_queue_plan.py
# checks that plan at 10x). Every statement on this pool looks rows up by key or walks an
# index the same way whatever the values.
GENERIC_PLANS = "-c plan_cache_mode=force_generic_plan"


def is_dropped_connection(exc: BaseException) -> bool:
    """True for a database error raised because the connection was lost (SQLAlchemy has
    already invalidated the pool's older connections); retrying on a new one is safe for
    idempotent work."""
    return isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)


def _configure_sqlite(engine: Engine) -> None:
    # WAL lets readers work while a writer commits; foreign keys are off by default in SQLite.
    # BEGIN IMMEDIATE takes the write lock up front so two concurrent lease transactions
    # serialise instead of both reading the same free row (SQLite has no SELECT FOR UPDATE).
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):  # type: ignore[no-untyped-def]
        dbapi_conn.isolation_level = None  # let SQLAlchemy's "begin" event issue BEGIN
        cur = dbapi_conn.cursor()
        if engine.url.database not in (None, "", ":memory:"):
            cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA busy_timeout={int(SQLITE_BUSY_TIMEOUT_SECONDS * 1000)}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):  # type: ignore[no-untyped-def]
        # A long reader (an export's snapshot) begins DEFERRED: under WAL it reads one
        # snapshot without the write lock, so the site's writers are not kept waiting.
        deferred = conn.get_execution_options().get(READ_SNAPSHOT_OPTION, False)
        conn.exec_driver_sql("BEGIN" if deferred else "BEGIN IMMEDIATE")


# Execution option of a connection that only reads, for as long as it takes (see
# read_snapshot_options).
READ_SNAPSHOT_OPTION = "vsr_read_snapshot"


def read_snapshot_options(engine: Engine) -> dict[str, Any]:
    """Execution options of a connection that reads one consistent snapshot and writes
    nothing: REPEATABLE READ on PostgreSQL; on SQLite a DEFERRED transaction (WAL keeps its
    snapshot) that leaves the write lock to the site."""
    if is_postgres(engine):
        return {"isolation_level": "REPEATABLE READ"}
    return {READ_SNAPSHOT_OPTION: True}


def is_postgres(engine: Engine) -> bool:
    return engine.dialect.name == "postgresql"


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """A session that commits on success and rolls back on any error."""
    with Session(engine) as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
