"""Roles per study, the full matrix: every admin route of the app, GET and POST, asked by an
owner, a researcher and a viewer of the study, an admin with no role at all and the owner of
another study, on SQLite and PostgreSQL (docs/dashboard.md, "Roles").

The least role each route needs is written here, not read from the code under test; the
routes are read from the app, so a new admin route without an entry here fails the test.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from tests.webapp.admin.test_admin import PASSWORD, _admin_routes, csrf_of, make_admin_app
from tests.webapp.http.test_studies import make_two_studies
from vsr_core.models import (
    AdminRole,
    AuditEvent,
    Batch,
    BatchKind,
    BatchStatus,
    Example,
    Job,
    PlatformStudy,
    Study,
    Worker,
)
from vsr_core.standing import standing
from vsr_core.types import utcnow
from webapp.admin.auth import create_admin

PUBLIC = "public"  # the login form: anyone
ANY_ADMIN = "any admin"  # logout: any logged-in admin, whatever their roles
# A worker's block in every study: researcher in the chosen study (else the usual 403) and
# owner of every study (else a 403 that says so); nobody here owns both studies.
EVERY_STUDY_OWNER = "owner of every study"
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
    ("POST", "/admin/workers/{worker_id}/everywhere"): EVERY_STUDY_OWNER,
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
    if expected == EVERY_STUDY_OWNER:
        return False
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
        ids = _study_rows(s, 1)
        ids |= {
            "kind": "nosuch",  # a job kind that does not exist: nothing starts
            "name": "relations",
            "ps": "999999",  # no such platform study: nothing is sent anywhere
            "what": "sync",
        }
        others = _study_rows(s, zh_id)  # the same kinds of rows, in vsr-zh
        platform = PlatformStudy(study_id=zh_id, platform="prolific", external_id="zh-matrix")
        s.add(platform)
        s.commit()
        others |= {"kind": "build", "name": "relations", "ps": str(platform.id), "what": "sync"}
        slugs = (default.slug, zh.slug)
    app = make_admin_app(db_url, engine, tmp_path)
    return {"app": app, "ids": ids, "others": others, "slugs": slugs, "zh_id": zh_id}


def _study_rows(s: Session, study_id: int) -> dict[str, str]:
    """A worker who took part in the study (a validation batch), a finished job and an
    Example of the study, by the names the routes' paths give them."""
    worker = Worker(source="prolific", external_id=f"w-matrix-{study_id}", roles=["validate"])
    job = Job(study_id=study_id, kind="build", status="succeeded")
    s.add(worker)
    s.add(job)
    s.commit()
    assert worker.id is not None and job.id is not None
    s.add(
        Batch(
            study_id=study_id,
            worker_id=worker.id,
            kind=BatchKind.validate.value,
            size=5,
            deadline=utcnow() + timedelta(hours=1),
        )
    )
    s.commit()
    example = s.exec(
        select(Example).where(Example.study_id == study_id).order_by(col(Example.id))
    ).first()
    assert example is not None
    return {"example_id": str(example.id), "worker_id": str(worker.id), "job_id": str(job.id)}


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
                    elif expected == EVERY_STUDY_OWNER:
                        needed = "this needs researcher" if role == VIEWER else "every study"
                        assert needed in r.text, where
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


def test_every_route_refuses_another_studys_ids(world: dict[str, Any], engine: Engine) -> None:
    """Each route with an id in its path, asked in vsr by its owner (and by an owner of
    vsr-zh working in vsr) with vsr-zh's worker, Example, job and platform study: a 403 or
    404 in plain words, and nothing of vsr-zh changes or is recorded."""
    app, others, zh_id = world["app"], world["others"], world["zh_id"]
    study_a, _ = world["slugs"]
    with Session(engine) as s:
        create_admin(s, "both-owner", PASSWORD, grants={1: OWNER, zh_id: OWNER})
        trail_before = len(s.exec(select(AuditEvent.id)).all())
    routes = [r for r in _admin_routes(app) if "{" in r[1]]
    assert routes
    asked = 0
    for name in ("owner", "both-owner"):
        client = TestClient(app)
        token = _login(client, name)
        for method, path in routes:
            url = re.sub(r"\{(\w+)\}", lambda m: others[m.group(1)], path)
            if "{name}" in path or "{kind}" in path:
                continue  # a chart's or a job kind's name belongs to no study
            data = {
                "csrf_token": token,
                "reason": "cross",
                "flagged": "true",
                "extra_votes": "1",
                "decision": "true",
                "gold": "true",
            }
            r = client.request(
                method,
                f"{url}?study={study_a}",
                data=data if method == "POST" else None,
                headers={"accept": "text/html"},
                follow_redirects=False,
            )
            where = (name, method, url, r.status_code, r.text[:200])
            assert r.status_code in (403, 404), where
            assert "Traceback" not in r.text, where
            asked += 1
    assert asked >= 2 * 15
    with Session(engine) as s:
        worker = s.get(Worker, int(others["worker_id"]))
        example = s.get(Example, int(others["example_id"]))
        job = s.get(Job, int(others["job_id"]))
        assert worker is not None and example is not None and job is not None
        assert standing(s, worker, zh_id) == standing(s, worker, 1)
        assert not standing(s, worker, zh_id).blocked and not standing(s, worker, zh_id).flagged
        assert not example.is_gold and example.target_votes is None and job.status == "succeeded"
        open_batches = s.exec(
            select(Batch).where(Batch.worker_id == worker.id, Batch.status == BatchStatus.open)
        ).all()
        assert len(open_batches) == 1
        # Only the logins are recorded: no action reached vsr-zh.
        kinds = {e.kind for e in s.exec(select(AuditEvent)).all()[trail_before:]}
        assert kinds <= {"login"}, kinds
