"""The Members page: a study's owner lists its admins, grants, changes and takes away roles
and creates admin accounts, over HTTP on both backends; the study keeps an owner and every
change is in the audit trail (docs/dashboard.md, "Roles")."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from tests.webapp.admin.test_admin import PASSWORD, csrf_of, login, make_admin_app
from vsr_core.models import AdminRole, AdminUser, AuditEvent
from vsr_core.roles import role_in
from webapp.admin.auth import create_admin


def _rows(page: str) -> list[tuple[str, str]]:
    """(username, role) of each row of the members table."""
    found = re.findall(
        r'<tr data-username="([^"]+)">\s*<td>[^<]*(?:<span[^>]*>[^<]*</span>)?</td>\s*'
        r"<td>(\w+)</td>",
        page,
    )
    return [(u, r) for u, r in found]


def _role(engine: Engine, username: str) -> str | None:
    with Session(engine) as s:
        user = s.exec(select(AdminUser).where(AdminUser.username == username)).one()
        assert user.id is not None
        role = role_in(s, user.id, 1)
        return role.value if role is not None else None


def test_owner_manages_the_study_admins(db_url: str, engine: Engine, tmp_path: Path) -> None:
    with Session(engine) as s:
        create_admin(s, "olga", PASSWORD, grants={1: AdminRole.owner})
        create_admin(s, "rita", PASSWORD)
    app: Any = make_admin_app(db_url, engine, tmp_path)
    owner = TestClient(app)
    token = login(owner, "olga")
    page = owner.get("/admin/members")
    assert page.status_code == 200
    assert _rows(page.text) == [("olga", "owner")]

    def post(path: str, **form: str) -> Any:
        return owner.post(
            f"/admin/members/{path}", data={"csrf_token": token, **form}, follow_redirects=False
        )

    # Grant an existing admin, change the role, and see it listed.
    r = post("grant", username="rita", role="viewer")
    assert r.status_code == 303 and r.headers["location"] == "/admin/members"
    page = owner.get("/admin/members")
    assert "rita is now viewer of vsr." in page.text
    assert _rows(page.text) == [("olga", "owner"), ("rita", "viewer")]
    assert post("grant", username="rita", role="researcher").status_code == 303
    assert _role(engine, "rita") == "researcher"
    # The study's only owner cannot step down or be removed.
    r = post("grant", username="olga", role="viewer")
    assert r.status_code == 409 and "only owner" in r.text
    r = post("revoke", username="olga")
    assert r.status_code == 409 and "only owner" in r.text
    assert _role(engine, "olga") == "owner"
    # Bad input: plain 4xx, nothing changed.
    assert post("grant", username="nobody-here", role="viewer").status_code == 404
    assert post("grant", username="rita", role="god").status_code == 422
    assert post("grant", username="<script>", role="viewer").status_code == 422
    # A new admin account, created as viewer of this study, logs in and reads it.
    r = post("create", username="vera", password="short", role="viewer")
    assert r.status_code == 422 and "at least 12" in r.text
    r = post("create", username="vera", password=PASSWORD, role="viewer")
    assert r.status_code == 303
    assert post("create", username="vera", password=PASSWORD, role="viewer").status_code == 422
    vera = TestClient(app)
    login(vera, "vera")
    assert vera.get("/admin/settings").status_code == 200
    assert vera.get("/admin/members").status_code == 403
    # A second owner lets the first step down; then the old owner cannot manage any more.
    assert post("grant", username="rita", role="owner").status_code == 303
    assert post("grant", username="olga", role="viewer").status_code == 303
    r = post("revoke", username="vera")
    assert r.status_code == 403 and "Your role in the study vsr is viewer" in r.text
    rita = TestClient(app)
    rita_token = login(rita, "rita")
    r = rita.post(
        "/admin/members/revoke",
        data={"csrf_token": rita_token, "username": "vera"},
        follow_redirects=False,
    )
    assert r.status_code == 303 and _role(engine, "vera") is None
    assert vera.get("/admin/settings").status_code == 403

    with Session(engine) as s:
        events = s.exec(select(AuditEvent).order_by(col(AuditEvent.id))).all()
        got = [(e.actor, e.via, e.study_id, e.kind, e.target, e.change) for e in events]
        vera_id = s.exec(select(AdminUser.id).where(AdminUser.username == "vera")).one()
    role_changes = [g for g in got if g[3] in ("role_grant", "role_revoke", "admin_create")]
    assert role_changes == [
        ("system", "cli", 1, "role_grant", "olga", {"before": None, "after": "owner"}),
        ("olga", "dashboard", 1, "role_grant", "rita", {"before": None, "after": "viewer"}),
        ("olga", "dashboard", 1, "role_grant", "rita", {"before": "viewer", "after": "researcher"}),
        ("olga", "dashboard", None, "admin_create", "admin vera", {"admin_id": vera_id}),
        ("olga", "dashboard", 1, "role_grant", "vera", {"before": None, "after": "viewer"}),
        ("olga", "dashboard", 1, "role_grant", "rita", {"before": "researcher", "after": "owner"}),
        ("olga", "dashboard", 1, "role_grant", "olga", {"before": "owner", "after": "viewer"}),
        ("rita", "dashboard", 1, "role_revoke", "vera", {"before": "viewer", "after": None}),
    ]
    assert csrf_of(owner.get("/admin").text)  # the demoted owner is still logged in
