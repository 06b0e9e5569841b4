"""The shipped deployment cannot rewrite its audit trail (docs/deployment.md): the owner role
runs `vsr db upgrade --app-role APP`, and the app's role, on the real PostgreSQL, may work the
site's tables and add to and read the trail, but is refused UPDATE, DELETE and TRUNCATE of
it, replica mode (which skips triggers) and disabling the triggers. Before, compose ran the
app as the database superuser, which did all of these."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlmodel import Session, select

from tests.conftest import PG_ADMIN_URL, require_backend
from vsr_core.audit import Actor
from vsr_core.db import make_engine
from vsr_core.models import DEFAULT_STUDY_ID, AuditEvent
from vsr_core.studies.settings import save_study_config

VSR = str(Path(sys.executable).parent / "vsr")
INIT_ROLES = Path(__file__).parents[2] / "deploy/postgres/init-roles.sh"  # compose runs it


def _superuser(sql: str) -> None:
    engine = make_engine(PG_ADMIN_URL).execution_options(isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.exec_driver_sql(sql)
    engine.dispose()


@pytest.fixture
def roles() -> Iterator[tuple[str, str, str]]:
    """(owner URL, app URL, app role): the roles and database made by the script compose runs
    in a new PostgreSQL, under names of this test's own."""
    require_backend("postgresql")
    tag = uuid.uuid4().hex[:8]
    owner, app, database = f"vsr_owner_{tag}", f"vsr_app_{tag}", f"vsr_roles_{tag}"
    base = make_url(PG_ADMIN_URL).set(database=database)
    names = {"VSR_OWNER_ROLE": owner, "VSR_APP_ROLE": app, "VSR_DATABASE": database}
    env = {
        **os.environ,
        **names,
        "VSR_OWNER_PASSWORD": "owner-pw",
        "VSR_APP_PASSWORD": "app-pw",
        "POSTGRES_USER": base.username or "postgres",
        "PGHOST": base.host or "127.0.0.1",
        "PGPORT": str(base.port or 5432),
    }
    made = subprocess.run(["sh", str(INIT_ROLES)], env=env, capture_output=True, text=True)
    try:
        assert made.returncode == 0, made.stderr
        yield (
            base.set(username=owner).render_as_string(hide_password=False),
            base.set(username=app).render_as_string(hide_password=False),
            app,
        )
    finally:
        _superuser(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        _superuser(f'DROP ROLE IF EXISTS "{app}"')
        _superuser(f'DROP ROLE IF EXISTS "{owner}"')


def _vsr(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": url}
    return subprocess.run([VSR, *args], env=env, capture_output=True, text=True, timeout=300)


def _refused(conn_url: str, sql: str) -> str:
    engine = make_engine(conn_url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(sql)
    except DBAPIError as exc:
        return str(exc.orig).splitlines()[0]
    finally:
        engine.dispose()
    raise AssertionError(f"the app's role was allowed: {sql}")


def test_the_apps_role_cannot_rewrite_the_trail(roles: tuple[str, str, str]) -> None:
    owner_url, app_url, app = roles
    res = _vsr(owner_url, "db", "upgrade", "--app-role", app)
    assert res.returncode == 0, res.stderr
    assert "never change it" in res.stdout

    engine = make_engine(app_url)
    with Session(engine) as session:  # the site's own work: a settings save and its record
        save_study_config(session, {"gold_rate": 0.1}, DEFAULT_STUDY_ID, actor=Actor("cli:test"))
        save_study_config(session, {"gold_rate": 0.2}, DEFAULT_STUDY_ID, actor=Actor("cli:test"))
        assert len(session.exec(select(AuditEvent)).all()) == 2
    engine.dispose()

    refusals = {
        sql: _refused(app_url, sql)
        for sql in (
            "UPDATE auditevent SET actor = 'someone else'",
            "DELETE FROM auditevent",
            "TRUNCATE auditevent",
            "SET session_replication_role = replica",
            "ALTER TABLE auditevent DISABLE TRIGGER ALL",
            "ALTER TABLE auditevent DISABLE TRIGGER auditevent_no_change",
            "DROP TRIGGER auditevent_no_change ON auditevent",
            "CREATE TABLE public.mine (x int)",
            "UPDATE alembic_version SET version_num = '0001'",
        )
    }
    for sql, message in refusals.items():
        assert "permission denied" in message or "must be owner" in message, (sql, message)
    # The trail the app wrote is still there, untouched (read as the owner).
    engine = make_engine(owner_url)
    with engine.connect() as conn:
        actors = conn.execute(text("SELECT actor FROM auditevent")).scalars().all()
        assert actors == ["cli:test", "cli:test"]
    engine.dispose()


def test_the_owner_or_a_superuser_is_refused_as_the_apps_role(
    roles: tuple[str, str, str],
) -> None:
    owner_url, _app_url, _app = roles
    owner = make_url(owner_url).username
    assert owner is not None
    res = _vsr(owner_url, "db", "upgrade", "--app-role", owner)
    assert res.returncode == 1 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "owns the tables" in res.stderr
    res = _vsr(owner_url, "db", "upgrade", "--app-role", "postgres")
    assert res.returncode == 1 and "is a superuser" in res.stderr, res.stderr


def test_compose_migrates_as_the_owner_and_serves_as_the_apps_role() -> None:
    import yaml

    compose = yaml.safe_load((INIT_ROLES.parents[2] / "docker-compose.yml").read_text())
    services = compose["services"]

    def user(service: str) -> str:
        url = str(services[service]["environment"]["DATABASE_URL"])
        return url.split("//")[1].split(":")[0]

    assert user("migrate") == "vsr_owner"
    assert user("web") == "vsr_app"
    assert services["migrate"]["command"][-2:] == ["--app-role", "vsr_app"]
    assert services["db"]["environment"]["POSTGRES_USER"] == "postgres"
    mounts = services["db"]["volumes"]
    assert any(
        m.startswith("./deploy/postgres/init-roles.sh:/docker-entrypoint-initdb.d/") for m in mounts
    )
