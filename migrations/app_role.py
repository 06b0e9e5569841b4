"""The web app's own PostgreSQL role: it may read and write the site's tables but only add to
and read the audit trail, so the running site cannot rewrite its history.

The role that runs the migrations owns every table; an owner can disable the audit triggers
(``ALTER TABLE auditevent DISABLE TRIGGER``) and a superuser can skip them altogether
(``SET session_replication_role = replica``). The app therefore logs in as another role that
is neither: :func:`grant_app_role`, run by the owner after each upgrade
(``vsr db upgrade --app-role NAME``), gives it DML on every table, SELECT and INSERT only on
``auditevent``, SELECT only on ``alembic_version``, and the same on tables later migrations
make (default privileges). Making the login roles themselves is the database superuser's
job (docs/deployment.md, ``deploy/postgres/init-roles.sh``).
"""

from __future__ import annotations

import re

from sqlalchemy import text
from sqlalchemy.engine import Connection

from vsr_core.db import make_engine
from vsr_core.models import AuditEvent

ROLE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
AUDIT_TABLE = AuditEvent.__tablename__
VERSION_TABLE = "alembic_version"


class AppRoleError(ValueError):
    """The role cannot be the app's restricted role (the message says why)."""


def grant_statements(role: str, database: str) -> list[str]:
    """The statements that make ``role`` the app's restricted role in ``database``."""
    if not ROLE_NAME.fullmatch(role):
        raise AppRoleError(f"{role!r} is not a role name here: lower-case letters, digits, _")
    r = f'"{role}"'
    return [
        f'GRANT CONNECT ON DATABASE "{database}" TO {r}',
        f"GRANT USAGE ON SCHEMA public TO {r}",
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {r}",
        f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {r}",
        # Tables of later migrations (made by the role running this): the same DML.
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE "
        f"ON TABLES TO {r}",
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO {r}",
        # The trail: add and read only. TRIGGER would let it make triggers of its own.
        f"REVOKE UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER ON {AUDIT_TABLE} FROM {r}",
        f"REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON {VERSION_TABLE} FROM {r}",
        f"REVOKE CREATE ON SCHEMA public FROM {r}",
    ]


def _check_role(conn: Connection, role: str) -> None:
    row = conn.execute(
        text("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = :r"), {"r": role}
    ).first()
    if row is None:
        raise AppRoleError(
            f"there is no role {role!r}: the database superuser makes it first "
            "(CREATE ROLE ... LOGIN; docs/deployment.md)"
        )
    if row[0]:
        raise AppRoleError(f"{role!r} is a superuser: it could skip the audit trail's triggers")
    owner = conn.execute(
        text("SELECT tableowner FROM pg_tables WHERE schemaname = 'public' AND tablename = :t"),
        {"t": AUDIT_TABLE},
    ).scalar()
    if owner == role or conn.execute(text("SELECT current_user")).scalar() == role:
        raise AppRoleError(
            f"{role!r} owns the tables (it ran the migrations), so it could disable the "
            "audit triggers: give the app a role of its own"
        )


def grant_app_role(database_url: str, role: str) -> None:
    """Run, as the tables' owner, the grants that make ``role`` the app's restricted role."""
    engine = make_engine(database_url)
    try:
        if engine.dialect.name != "postgresql":
            raise AppRoleError("--app-role is for PostgreSQL (SQLite has no roles)")
        with engine.begin() as conn:
            _check_role(conn, role)
            database = conn.execute(text("SELECT current_database()")).scalar()
            for statement in grant_statements(role, str(database)):
                conn.exec_driver_sql(statement)
    finally:
        engine.dispose()
