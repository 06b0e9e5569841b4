"""A CSRF token that is not ASCII (superscript and full-width digits, Arabic-Indic digits, a
lone surrogate, bytes that are not UTF-8) is a 403 in plain words on every form and API that
checks one, never a 500: ``hmac.compare_digest`` raises TypeError on a ``str`` with non-ASCII
characters, so every comparison is on bytes (``webapp.http.tokens``). On both backends."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session

from tests.support.admins import create_owner
from tests.support.webapp_coco import client_for, enter, form_field, make_app

PASSWORD = "correct horse battery"
# As they arrive in an urlencoded body: the last two are a UTF-8 lone surrogate (U+D800) and
# bytes that decode to nothing.
FORM_VALUES = ["%C2%B2", "%EF%BC%91%EF%BC%92", "%D9%A3", "%ED%A0%80", "%FF%FE", "%C3%A9" * 40]
# As a header carries them (latin-1): superscript two, a-acute, NBSP.
HEADER_VALUES = ["\u00b2".encode("latin-1"), "\u00e9\u00e9".encode("latin-1"), b"\xa0"]
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@pytest.fixture
def site(db_url: str, engine: Engine, tmp_path: Path) -> Any:
    with Session(engine) as s:
        create_owner(s, "alice", PASSWORD)
    return make_app(db_url, tmp_path)


def _admin(client: Any) -> str:
    page = client.get("/admin/login")
    token = form_field(page.text, "csrf_token")
    r = client.post(
        "/admin/login",
        data={"username": "alice", "password": PASSWORD, "csrf_token": token, "next": "/admin"},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    m = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/admin").text)
    assert m
    return m.group(1)


def _refused(r: Any) -> None:
    assert r.status_code == 403, (r.status_code, r.text[:300])
    assert "did not come from this site" in r.text


def test_a_non_ascii_token_is_a_403_on_every_check(site: Any) -> None:
    anonymous = client_for(site)
    anonymous.get("/admin/login")  # the pre-login cookie: the token is what is compared
    for value in FORM_VALUES:
        body = f"username=alice&password=x&csrf_token={value}&next=%2Fadmin"
        _refused(anonymous.post("/admin/login", content=body, headers=FORM))

    admin = client_for(site)
    good = _admin(admin)
    for value in FORM_VALUES:
        _refused(admin.post("/admin/settings", content=f"csrf_token={value}", headers=FORM))
    for raw in HEADER_VALUES:
        r = admin.post("/admin/settings", data={"csrf_token": good}, headers={"X-CSRF-Token": raw})
        _refused(r)
    assert admin.get("/admin").status_code == 200  # the session still works

    worker = client_for(site)
    enter(worker, "PROLIFIC_PID=w1&STUDY_ID=s&SESSION_ID=t", kind="validate")
    for value in FORM_VALUES:
        _refused(worker.post("/begin/validate", content=f"csrf={value}", headers=FORM))
    for raw in HEADER_VALUES:
        r = worker.post(
            "/api/validate/votes",
            json={"assignment_id": "1." + "A" * 22, "value": True},
            headers={"X-CSRF-Token": raw},
        )
        _refused(r)
