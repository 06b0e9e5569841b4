"""A cross-site page cannot cast a vote with the worker's cookie (docs/security.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from tests.support.webapp_coco import make_app, set_study
from tests.webapp.validate.test_routes import seed_examples, start
from vsr_core.models import Vote


@pytest.fixture
def site(db_url: str, engine: Engine, coco_dir: Path, tmp_path: Path) -> Any:
    with Session(engine) as s:
        seed_examples(s, coco_dir)
    set_study(db_url, gold_rate=0.0)
    return make_app(
        db_url, tmp_path, image_root=coco_dir / "images", base_url="https://vsr.example.org"
    )


def _votes(engine: Engine) -> int:
    with Session(engine) as s:
        return len(s.exec(select(Vote)).all())


def test_cross_site_vote_is_refused(site: Any, engine: Engine) -> None:
    # The site behind https: the cookie is Secure and SameSite=None (MTurk's iframe).
    client = TestClient(site, base_url="https://vsr.example.org", raise_server_exceptions=False)
    csrf = start(client, "victim")
    item = client.get("/api/validate/item")
    assert item.headers["X-CSRF-Token"] == csrf  # the site's own script reads it here
    lease = item.json()["item"]["assignment_id"]
    body = f'{{"assignment_id":"{lease}","value":false}}'
    # What a page on another site can send with the worker's cookie: no custom header.
    del client.headers["X-CSRF-Token"]
    plain = client.post(
        "/api/validate/votes",
        content=body,
        headers={"Content-Type": "text/plain", "Origin": "https://evil.example"},
    )
    assert plain.status_code == 415, plain.text
    form = client.post(
        "/api/validate/votes",
        content=body,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert form.status_code == 415
    no_token = client.post(
        "/api/validate/votes", content=body, headers={"Content-Type": "application/json"}
    )
    assert no_token.status_code == 403 and "X-CSRF-Token" in no_token.json()["detail"]
    wrong = client.post(
        "/api/validate/votes",
        content=body,
        headers={"Content-Type": "application/json", "X-CSRF-Token": "guess"},
    )
    assert wrong.status_code == 403
    evil = client.post(
        "/api/validate/votes",
        content=body,
        headers={
            "Content-Type": "application/json",
            "X-CSRF-Token": csrf,
            "Origin": "https://evil.example",
        },
    )
    assert evil.status_code == 403 and "did not come from this site" in evil.json()["detail"]
    assert _votes(engine) == 0
    # The site's own call: JSON, the token, its own Origin (BASE_URL or its own host).
    for origin in ("https://vsr.example.org", None):
        headers = {"Content-Type": "application/json; charset=utf-8", "X-CSRF-Token": csrf}
        if origin:
            headers["Origin"] = origin
        ok = client.post("/api/validate/votes", content=body, headers=headers)
        assert ok.status_code in (200, 201), ok.text
    assert _votes(engine) == 1


def test_pair_images_need_the_signature_a_page_gave(
    db_url: str, engine: Engine, coco_dir: Path, tmp_path: Path
) -> None:
    """Sequential pair ids no longer open every pair's image (signed image addresses)."""
    import re

    from tests.support.webapp_coco import client_for, make_pairs, start_prolific

    with Session(engine) as s:
        pair_ids = make_pairs(s, coco_dir, 3)
    app = make_app(db_url, tmp_path, image_root=coco_dir / "images")
    outsider = client_for(app)
    for pair_id in pair_ids:
        for slot in (1, 2):
            r = outsider.get(f"/images/pair/{pair_id}/{slot}.jpg")
            assert r.status_code == 404 and r.content[:2] != b"\xff\xd8"
            forged = outsider.get(f"/images/pair/{pair_id}/{slot}.jpg?s={'0' * 32}")
            assert forged.status_code == 404
    worker = client_for(app)
    start_prolific(worker, "signed")
    page = worker.get("/generate").text
    srcs = re.findall(r'"(/images/pair/\d+/[12]\.jpg\?s=[0-9a-f]+)"', page)
    assert len(srcs) == 2, page[:500]
    for src in srcs:
        r = client_for(app).get(src)  # the address itself is the permission (like a cache)
        assert r.status_code == 200 and r.content[:2] == b"\xff\xd8"
    other_slot = (
        srcs[0].replace("/1.jpg?", "/2.jpg?")
        if "/1.jpg?" in srcs[0]
        else (srcs[0].replace("/2.jpg?", "/1.jpg?"))
    )
    assert client_for(app).get(other_slot).status_code == 404  # one signature, one image


def test_cross_site_caption_is_refused(
    db_url: str, engine: Engine, coco_dir: Path, tmp_path: Path
) -> None:
    """The generation API has the same guard as the vote API."""
    from tests.support.webapp_coco import client_for, make_pairs, start_prolific
    from vsr_core.models import Annotation

    with Session(engine) as s:
        make_pairs(s, coco_dir, 2)
    app = make_app(db_url, tmp_path, image_root=coco_dir / "images")
    client = client_for(app)
    csrf = start_prolific(client, "writer")
    task = client.get("/api/generate/task")
    assert task.headers["X-CSRF-Token"] == csrf
    body = {
        "assignment_id": task.json()["assignment_id"],
        "client_token": "cross-site-1",
        "relation": "on top of",
        "ent1": "a",
        "true_image": 1,
    }
    del client.headers["X-CSRF-Token"]
    assert client.post("/api/generate/annotations", json=body).status_code == 403
    assert (
        client.post(
            "/api/generate/annotations",
            json=body,
            headers={"X-CSRF-Token": csrf, "Origin": "https://evil.example"},
        ).status_code
        == 403
    )
    with Session(engine) as s:
        assert s.exec(select(Annotation)).all() == []
    ok = client.post("/api/generate/annotations", json=body, headers={"X-CSRF-Token": csrf})
    assert ok.status_code == 201, ok.text
