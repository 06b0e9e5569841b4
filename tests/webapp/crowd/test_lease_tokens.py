"""Lease ids travel as opaque tokens ("<id>.<HMAC>", webapp.crowd.lease_tokens, docs/security.md)
in the task forms, the JSON APIs and the validation image's address; a bare, guessed or
sequential id, or another worker's token, is refused before any lookup and stores nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, func, select

from tests.support.webapp_coco import (
    answer,
    client_for,
    form_field,
    lease_id_of,
    make_app,
    make_pairs,
    set_study,
    start_prolific,
    task,
)
from tests.webapp.validate.test_routes import seed_examples, start
from vsr_core.models import Annotation, Vote
from webapp.crowd.lease_tokens import lease_from_token, lease_token

SECRET = "s" * 40


def _count(engine: Engine, model: Any) -> int:
    with Session(engine) as s:
        return int(s.exec(select(func.count()).select_from(model)).one())


def test_tokens_are_exact_and_bound_to_worker_and_lease() -> None:
    token = lease_token(SECRET, 7, 42)
    assert lease_from_token(SECRET, 7, token) == 42
    lease, signature = token.split(".")
    assert lease == "42" and len(signature) == 22
    for bad in (
        "42",
        "43." + signature,
        token + "\n",
        " " + token,
        "042." + signature,
        "\u0664\u0662." + signature,
        token[:-1],
        token + "A",
        "99999999999." + signature,
    ):
        assert lease_from_token(SECRET, 7, bad) is None, bad
    assert lease_from_token(SECRET, 8, token) is None  # another worker
    assert lease_from_token("t" * 40, 7, token) is None  # another site's key


@pytest.fixture
def validation_site(db_url: str, engine: Engine, coco_dir: Path, tmp_path: Path) -> Any:
    with Session(engine) as s:
        seed_examples(s, coco_dir)
    set_study(db_url, gold_rate=0.0)
    return make_app(db_url, tmp_path, image_root=coco_dir / "images")


def test_a_bare_or_borrowed_lease_id_casts_no_vote(validation_site: Any, engine: Engine) -> None:
    client = client_for(validation_site)
    csrf = start(client, "tokens")
    token = client.get("/api/validate/item").json()["item"]["assignment_id"]
    bare = str(lease_id_of(token))
    # The sequential id that used to travel opens nothing: API, form, image.
    for guess in (bare, int(bare), str(int(bare) + 1)):
        r = client.post("/api/validate/votes", json={"assignment_id": guess, "value": True})
        assert r.status_code in (404, 422), r.text
    r = client.post("/api/validate/votes", json={"assignment_id": bare, "value": True})
    assert r.status_code == 404 and "not one of yours" in r.json()["detail"]
    form = client.post(
        "/validate",
        data={"csrf": csrf, "assignment_id": bare, "answer": "true"},
        follow_redirects=False,
    )
    assert form.status_code == 404 and "not one of yours" in form.text
    assert client.get(f"/images/validate/{bare}.jpg").status_code == 404
    assert client.get(f"/images/validate/{token}.jpg").status_code == 200
    # Another worker's session does not accept this worker's token.
    other = client_for(validation_site)
    start(other, "tokens2")
    r = other.post("/api/validate/votes", json={"assignment_id": token, "value": True})
    assert r.status_code == 404
    assert other.get(f"/images/validate/{token}.jpg").status_code == 404
    assert _count(engine, Vote) == 0
    # The token the site gave out works.
    r = client.post("/api/validate/votes", json={"assignment_id": token, "value": True})
    assert r.status_code == 201, r.text
    # The HTML page carries the same kind of token.
    page = client.get("/validate")
    secret = validation_site.state.settings.secret_key
    assert (
        lease_from_token(
            secret, _worker_id(engine, "tokens"), form_field(page.text, "assignment_id")
        )
        is not None
    )
    assert _count(engine, Vote) == 1


def _worker_id(engine: Engine, external_id: str) -> int:
    from vsr_core.models import Worker

    with Session(engine) as s:
        worker = s.exec(select(Worker).where(Worker.external_id == external_id)).one()
        assert worker.id is not None
        return worker.id


def test_a_bare_lease_id_stores_no_caption(
    db_url: str, engine: Engine, coco_dir: Path, tmp_path: Path
) -> None:
    with Session(engine) as s:
        make_pairs(s, coco_dir, 3)
    client = client_for(make_app(db_url, tmp_path))
    start_prolific(client, "captoken")
    fields = task(client)
    bare = str(lease_id_of(fields["assignment_id"]))
    r = client.post("/generate", data=answer(fields, assignment_id=bare), follow_redirects=False)
    assert r.status_code == 403 and "not assigned to you" in r.text
    api = client.get("/api/generate/task").json()
    assert api["assignment_id"] == fields["assignment_id"]
    body = {
        "assignment_id": bare,
        "client_token": "guess-token-1",
        "relation": "near",
        "ent1": "a",
        "true_image": 1,
    }
    assert client.post("/api/generate/annotations", json=body).status_code == 403
    assert _count(engine, Annotation) == 0
    body["assignment_id"] = fields["assignment_id"]
    assert client.post("/api/generate/annotations", json=body).status_code == 201
    assert _count(engine, Annotation) == 1
