"""The exact hostile inputs that once reached a 500 (docs/security.md): each now gets a 4xx
naming the field and stores nothing, on SQLite and PostgreSQL
(tests/webapp/http/test_fuzz_every_param.py sends such values to every parameter of every
route)."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from tests.support.admins import create_owner
from tests.support.webapp_coco import client_for, form_field, make_app, start_prolific, task
from tests.webapp.admin.test_admin import PASSWORD, login, make_admin_app
from tests.webapp.validate.test_routes import seed_examples, start
from vsr_core.models import Annotation, Vote


def _count(engine: Engine, model: Any) -> int:
    with Session(engine) as s:
        return int(s.exec(select(func.count()).select_from(model)).one())


def test_nul_in_skip_comment_is_refused_by_form_and_api(site: Any, engine: Engine) -> None:
    client = client_for(site)
    start_prolific(client, "nul")
    fields = task(client)
    form = dict(fields, action="skip", skip_reason="unidentifiable", skip_comment="too\x00dark")
    r = client.post("/generate", data=form, follow_redirects=False)
    assert r.status_code == 400 and "skip_comment" in r.text and "NUL" in r.text
    r = client.post(
        "/api/generate/annotations",
        json={
            "assignment_id": fields["assignment_id"],
            "client_token": fields["client_token"],
            "action": "skip",
            "skip_reason": "unidentifiable",
            "skip_comment": "too\x00dark",
        },
    )
    assert r.status_code == 400, r.text
    assert "skip_comment" in r.json()["detail"]
    assert _count(engine, Annotation) == 0
    # the same lease still takes a clean answer
    form["skip_comment"] = "too dark"
    assert client.post("/generate", data=form, follow_redirects=False).status_code == 303
    assert _count(engine, Annotation) == 1


def test_unicode_digits_in_duration_are_no_duration(
    db_url: str, engine: Engine, coco_dir: Path, tmp_path: Path
) -> None:
    with Session(engine) as s:
        seed_examples(s, coco_dir)
    client = client_for(make_app(db_url, tmp_path, image_root=coco_dir / "images"))
    csrf = start(client, "digits")
    page = client.get("/validate")
    lease = form_field(page.text, "assignment_id")
    r = client.post(
        "/validate",
        data={"csrf": csrf, "assignment_id": lease, "answer": "true", "duration_ms": "\u00b2"},
        follow_redirects=False,
    )
    assert r.status_code == 303 and r.headers["location"] == "/validate", r.text
    with Session(engine) as s:
        vote = s.exec(select(Vote)).one()
        assert vote.duration_ms is None
    bad_next = client.post(
        "/api/validate/votes?next=\u00b2", json={"assignment_id": lease, "value": True}
    )
    assert bad_next.status_code == 422 and "next" in bad_next.json()["detail"]


@pytest.fixture
def admin_app(db_url: str, engine: Engine, tmp_path: Path) -> Any:
    with Session(engine) as s:
        create_owner(s, "alice", PASSWORD)
    return make_admin_app(db_url, engine, tmp_path)


@pytest.mark.parametrize("query", ["q=x%00", "relation=x%00", "concept=x%00"])
def test_nul_in_admin_search_is_a_400_naming_the_field(admin_app: Any, query: str) -> None:
    client = client_for(admin_app)
    login(client)
    r = client.get(f"/admin/data?{query}")
    assert r.status_code == 400, r.text
    text = html.unescape(r.text)
    assert f"The query field {query.split('=')[0]!r} contains a NUL" in text


@pytest.mark.parametrize(
    "url",
    [
        "/admin/examples/99999999999999999999",
        "/admin/examples/99999999999999999999/image",
        "/admin/workers/99999999999999999999",
        "/admin/jobs/99999999999999999999/download",
        "/admin/api/jobs/-99999999999999999999",
        "/admin/workers/2147483648",
    ],
)
def test_huge_ids_are_a_422_naming_the_id(admin_app: Any, url: str) -> None:
    client = client_for(admin_app)
    login(client)
    r = client.get(url)
    assert r.status_code == 422, r.text
    assert "_id" in r.text
