"""An owner sees the records of no study (logins, failed logins, accounts) only of admins who
hold a role in a study the owner holds one in: before, any study's owner read every admin's
logins on the site (when and from which account each colleague of another lab logged in)."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session

from tests.webapp.admin.test_admin import csrf_of, login, make_admin_app
from tests.webapp.admin.test_audit_trail import _all_pages, _expected, _trail
from vsr_core.models import AdminRole, StudyRoleGrant
from webapp.admin.auth import create_admin

DAVE_PASSWORD = "dave's long password 1"


def test_an_owner_sees_only_logins_of_admins_of_their_studies(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    ids = _trail(engine)  # alice: owner of the default study, viewer of vsr-zh
    with Session(engine) as s:
        dave = create_admin(s, "dave", DAVE_PASSWORD)  # owner of vsr-other only
        s.add(StudyRoleGrant(admin_id=dave.id or 0, study_id=ids["other"], role=AdminRole.owner))
        s.commit()
    app = make_admin_app(db_url, engine, tmp_path)
    dave_client = TestClient(app)
    form = dave_client.get("/admin/login")
    wrong = {"username": "dave", "password": "not it", "csrf_token": csrf_of(form.text)}
    assert dave_client.post("/admin/login", data=wrong).status_code == 401
    login(dave_client, "dave", DAVE_PASSWORD)
    alice_client = TestClient(app)
    login(alice_client)

    def unscoped_of(name: str) -> list[int]:
        return _expected(
            engine,
            lambda r: r["study_id"] is None and name in (r["actor"], r["target"]),
        )

    dave_rows, alice_rows = unscoped_of("dave"), unscoped_of("alice")
    assert len(dave_rows) == 2 and len(alice_rows) == 9  # a failed login and a login
    seen_by_alice = set(_all_pages(alice_client, "/admin/audit?scope=all"))
    assert set(alice_rows) <= seen_by_alice
    assert not set(dave_rows) & seen_by_alice
    seen_by_dave = set(_all_pages(dave_client, "/admin/audit?scope=all&study=vsr-other"))
    assert set(dave_rows) <= seen_by_dave
    assert not set(alice_rows) & seen_by_dave
