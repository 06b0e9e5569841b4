"""The separate app role docs/dashboard.md ("Audit trail") advises for PostgreSQL: made with the
documented statements, it adds and reads records and writes other tables, but cannot update,
delete or truncate a record, nor switch the triggers off."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import DBAPIError
from sqlmodel import Session

from vsr_core import audit
from vsr_core.db import make_engine
from vsr_core.models import AuditKind

DOCS = Path(__file__).resolve().parents[2] / "docs" / "dashboard.md"


def _documented_statements() -> list[str]:
    section = DOCS.read_text(encoding="utf-8").split("## Audit trail", 1)[1]
    block = section.split("```sql", 1)[1].split("```", 1)[0]
    lines = [line.split("--", 1)[0].strip() for line in block.splitlines()]
    return [st.strip() for st in " ".join(line for line in lines if line).split(";") if st.strip()]


def test_the_documented_app_role_cannot_change_the_trail(engine: Engine) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL roles")
    role = f"audit_test_app_{uuid.uuid4().hex[:8]}"
    database = make_url(engine.url).database
    statements = [
        re.sub(r"\bvsr_app\b", role, st)
        .replace("DATABASE vsr ", f'DATABASE "{database}" ')
        .replace("PASSWORD '...'", "PASSWORD 'audit-app-pw'")
        for st in _documented_statements()
    ]
    assert any(st.startswith("REVOKE UPDATE, DELETE, TRUNCATE ON auditevent") for st in statements)
    with engine.begin() as conn:
        for st in statements:
            conn.execute(text(st))
    app = make_engine(
        make_url(engine.url).set(username=role, password="audit-app-pw").render_as_string(False)
    )
    try:
        with Session(app) as s:
            audit.record(s, audit.Actor("alice"), AuditKind.login, study_id=None, target="alice")
            s.commit()
        assert [r["actor"] for r in audit.stream(app)] == ["alice"]
        with app.begin() as conn:
            conn.execute(text("UPDATE study SET name = name"))  # the rest of the site works
        for statement in (
            "UPDATE auditevent SET actor = 'mallory'",
            "DELETE FROM auditevent",
            "TRUNCATE auditevent",
            "SET session_replication_role = replica",
            "ALTER TABLE auditevent DISABLE TRIGGER auditevent_no_change",
        ):
            with (
                pytest.raises(DBAPIError, match="permission denied|must be owner"),
                app.begin() as conn,
            ):
                conn.execute(text(statement))
        assert [r["actor"] for r in audit.stream(app)] == ["alice"]
    finally:
        app.dispose()
        with engine.begin() as conn:
            conn.execute(text(f'DROP OWNED BY "{role}"'))
            conn.execute(text(f'DROP ROLE "{role}"'))
