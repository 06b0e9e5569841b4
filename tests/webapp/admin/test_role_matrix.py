"""Roles per study, the full matrix: every admin route of the app, GET and POST, asked by an
owner, a researcher and a viewer of the study, an admin with no role at all and the owner of
another study, on SQLite and PostgreSQL (docs/dashboard.md, "Roles").

The least role each route needs is written here, not read from the code under test; the
routes are read from the app, so a new admin route without an entry here fails the test.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from tests.webapp.admin.test_admin import PASSWORD, _admin_routes, csrf_of, make_admin_app
from tests.webapp.http.test_studies import make_two_studies
from vsr_core.models import AdminRole, Example, Job, Study, Worker
from webapp.admin.auth import create_admin

PUBLIC = "public"  # the login form: anyone
ANY_ADMIN = "any admin"  # logout: any logged-in admin, whatever their roles
VIEWER, RESEARCHER, OWNER = AdminRole.viewer, AdminRole.researcher, AdminRole.owner

# (method, path) -> the least role it needs in the chosen study.
EXPECTED: dict[tuple[str, str], str | AdminRole] = {
    ("GET", "/admin/login"): PUBLIC,
    ("POST", "/admin/login"): PUBLIC,
    ("POST", "/admin/logout"): ANY_ADMIN,
    # Reading: every page, JSON, chart and download.
    ("GET", "/admin"): VIEWER,
    ("GET", "/admin/api/overview.json"): VIEWER,
    ("GET", "/admin/charts/throughput.svg"): VIEWER,
    ("GET", "/admin/quality"): VIEWER,
    ("GET", "/admin/api/quality.json"): VIEWER,
    ("GET", "/admin/charts/{name}.svg"): VIEWER,
    ("GET", "/admin/workers"): VIEWER,
    ("GET", "/admin/api/workers.json"): VIEWER,
    ("GET", "/admin/workers/{worker_id}"): VIEWER,
    ("GET", "/admin/bursts"): VIEWER,
    ("GET", "/admin/data"): VIEWER,
    ("GET", "/admin/examples/{example_id}"): VIEWER,
    ("GET", "/admin/examples/{example_id}/image"): VIEWER,
    ("GET", "/admin/examples/{example_id}/thumb"): VIEWER,
    ("GET", "/admin/settings"): VIEWER,
    ("GET", "/admin/pipeline"): VIEWER,
    ("GET", "/admin/api/jobs"): VIEWER,
    ("GET", "/admin/api/jobs/{job_id}"): VIEWER,
    ("GET", "/admin/jobs/{job_id}/download"): VIEWER,
    ("GET", "/admin/revalidation"): VIEWER,
    ("GET", "/admin/api/revalidation.json"): VIEWER,
    ("GET", "/admin/platform"): VIEWER,
    ("GET", "/admin/audit"): VIEWER,
    ("GET", "/admin/audit.jsonl"): VIEWER,
    # Changing the study's settings, data, workers and jobs.
    ("POST", "/admin/settings"): RESEARCHER,
    ("POST", "/admin/settings/invites"): RESEARCHER,
    ("POST", "/admin/jobs/{kind}"): RESEARCHER,
    ("POST", "/admin/jobs/{job_id}/cancel"): RESEARCHER,
    ("POST", "/admin/examples/{example_id}/gold"): RESEARCHER,
    ("POST", "/admin/examples/{example_id}/requeue"): RESEARCHER,
    ("POST", "/admin/workers/{worker_id}/block"): RESEARCHER,
    ("POST", "/admin/workers/{worker_id}/unblock"): RESEARCHER,
    ("POST", "/admin/workers/{worker_id}/flag"): RESEARCHER,
    ("POST", "/admin/workers/{worker_id}/authenticity-approve"): RESEARCHER,
    ("POST", "/admin/revalidation"): RESEARCHER,
    ("POST", "/admin/bursts/cut"): RESEARCHER,
    ("POST", "/admin/examples/{example_id}/adjudicate"): RESEARCHER,
    ("POST", "/admin/data/adjudicate"): RESEARCHER,
    ("POST", "/admin/label-models/fit"): RESEARCHER,
    # Money and the study's admins.
    ("POST", "/admin/platform/create"): OWNER,
    ("POST", "/admin/platform/{ps}/{what}"): OWNER,
    ("GET", "/admin/members"): OWNER,
    ("POST", "/admin/members/grant"): OWNER,
    ("POST", "/admin/members/revoke"): OWNER,
    ("POST", "/admin/members/create"): OWNER,
}

# Who asks: their role in the study the requests choose (None: no role there).
ASKERS: dict[str, AdminRole | None] = {
    "owner": OWNER,
    "researcher": RESEARCHER,
    "viewer": VIEWER,
    "nobody": None,  # an admin account with no role in any study
    "other-owner": None,  # owner of the other study only
}


def _login(client: TestClient, username: str) -> str:
    form = client.get("/admin/login")
    r = client.post(
        "/admin/login",
        data={"username": username, "password": PASSWORD, "csrf_token": csrf_of(form.text)},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    # The logout form on any admin page (the error page too) carries the CSRF token.
    return csrf_of(client.get("/admin", headers={"accept": "text/html"}).text)


def _allowed(expected: str | AdminRole, role: AdminRole | None) -> bool:
    if expected in (PUBLIC, ANY_ADMIN):
        return True
    assert isinstance(expected, AdminRole)
    return role is not None and role.allows(expected)


@pytest.fixture
def world(db_url: str, engine: Engine, coco_dir: Path, tmp_path: Path) -> dict[str, Any]:
    zh_id = make_two_studies(engine, coco_dir)
    with Session(engine) as s:
        default = s.get(Study, 1)
        zh = s.get(Study, zh_id)
        assert default is not None and zh is not None
        for name, role in ASKERS.items():
            grants = {1: role} if role is not None else {}
            if name == "other-owner":
                grants = {zh_id: OWNER}
            create_admin(s, name, PASSWORD, grants=grants)
        worker = Worker(source="prolific", external_id="w-matrix", roles=["validate"])
        job = Job(study_id=1, kind="build", status="succeeded")
        s.add(worker)
        s.add(job)
        s.commit()
        example = s.exec(
            select(Example).where(Example.study_id == 1).order_by(col(Example.id))
        ).first()
        assert example is not None and worker.id is not None and job.id is not None
        ids = {
            "example_id": str(example.id),
            "worker_id": str(worker.id),
            "job_id": str(job.id),
            "kind": "nosuch",  # a job kind that does not exist: nothing starts
            "name": "relations",
            "ps": "999999",  # no such platform study: nothing is sent anywhere
            "what": "sync",
        }
        slugs = (default.slug, zh.slug)
    app = make_admin_app(db_url, engine, tmp_path)
    return {"app": app, "ids": ids, "slugs": slugs}


def test_every_admin_route_answers_each_role(world: dict[str, Any]) -> None:
    app, ids = world["app"], world["ids"]
    study_a, _ = world["slugs"]
    routes = _admin_routes(app)
    missing = sorted(set(routes) - set(EXPECTED))
    assert not missing, f"admin routes without an expected role in this test: {missing}"
    stale = sorted(set(EXPECTED) - set(routes))
    assert not stale, f"expected roles for routes the app no longer has: {stale}"

    clients: dict[str, tuple[TestClient, str]] = {}
    for name in ASKERS:
        client = TestClient(app)
        clients[name] = (client, _login(client, name))

    answers = 0
    for method, path in routes:
        expected = EXPECTED[(method, path)]
        if expected == PUBLIC or path == "/admin/logout":
            continue  # the login form is open; logging out would end the reused sessions
        url = re.sub(r"\{(\w+)\}", lambda m: ids[m.group(1)], path) + f"?study={study_a}"
        for name, role in ASKERS.items():
            client, token = clients[name]
            data = {"csrf_token": token} if method == "POST" else None
            for accept in ("text/html", "application/json"):
                r = client.request(
                    method, url, data=data, headers={"accept": accept}, follow_redirects=False
                )
                where = (name, method, url, accept, r.status_code, r.text[:300])
                assert r.status_code < 500, where
                assert not (
                    r.status_code == 303 and r.headers["location"].startswith("/admin/login")
                ), where  # the session was never lost
                if _allowed(expected, role):
                    assert r.status_code != 403, where
                else:
                    assert r.status_code == 403, where
                    if name == "nobody":
                        assert "no role in any study yet" in r.text, where
                    elif role is None:
                        assert f"no role in the study {study_a}" in r.text, where
                    else:
                        assert isinstance(expected, AdminRole)
                        assert (
                            f"Your role in the study {study_a} is {role.value}; this needs "
                            f"{expected.value}." in r.text
                        ), where
                answers += 1
    assert answers == 2 * len(ASKERS) * (len(routes) - 3)

    # Logout: any admin, with or without a role.
    for name in ASKERS:
        client, token = clients[name]
        r = client.post("/admin/logout", data={"csrf_token": token}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"].startswith("/admin/login"), name


def test_switcher_lists_only_studies_with_a_role(world: dict[str, Any]) -> None:
    app = world["app"]
    study_a, study_b = world["slugs"]
    other = TestClient(app)
    form = other.get("/admin/login")
    r = other.post(
        "/admin/login",
        data={"username": "other-owner", "password": PASSWORD, "csrf_token": csrf_of(form.text)},
        follow_redirects=False,
    )
    assert r.status_code == 303
    # Without a choice, the default study (no role there) sends them to theirs.
    r = other.get("/admin", headers={"accept": "text/html"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/admin?study={study_b}"
    page = other.get(r.headers["location"], headers={"accept": "text/html"})
    assert page.status_code == 200
    options = re.findall(r'<option value="([^"]*)"', page.text)
    assert options == [study_b]
    assert 'title="your role in vsr-zh: owner"' in page.text
    settings = other.get("/admin/settings", headers={"accept": "text/html"}).text
    assert 'href="/admin/members"' in settings
    # Choosing a study without a role is refused, and not remembered.
    r = other.get(f"/admin/settings?study={study_a}", headers={"accept": "text/html"})
    assert r.status_code == 403 and f"no role in the study {study_a}" in r.text
    assert "set-cookie" not in r.headers or f"vsr_admin_study={study_a}" not in r.headers.get(
        "set-cookie", ""
    )
    # The remembered choice is still their own study: its settings page answers.
    assert other.get("/admin/settings", headers={"accept": "text/html"}).status_code == 200
    # A viewer sees no Members link; an admin with no role anywhere gets a page saying so.
    viewer = TestClient(app)
    _login(viewer, "viewer")
    page = viewer.get(f"/admin/settings?study={study_a}", headers={"accept": "text/html"})
    assert page.status_code == 200 and 'href="/admin/members"' not in page.text
    page = viewer.get(f"/admin?study={study_a}", headers={"accept": "text/html"})
    assert re.findall(r'<option value="([^"]*)"', page.text) == [study_a]
    nobody = TestClient(app)
    _login(nobody, "nobody")
    r = nobody.get("/admin", headers={"accept": "text/html"})
    assert r.status_code == 403 and "no role in any study yet" in r.text
