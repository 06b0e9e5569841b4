"""The validation pages and JSON API on both backends, on real COCO images and instances."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from tests.support.webapp_coco import (
    client_for,
    enter,
    form_field,
    lease_id_of,
    make_app,
    make_pairs,
    set_study,
)
from vsr_core.captions import render_caption
from vsr_core.models import Annotation, Batch, Example, ImagePair, Vote, Worker

RELATIONS = ["left of", "on top of", "in front of", "near", "under", "behind"]


def seed_examples(session: Session, coco_dir: Path, n_pairs: int = 4) -> list[int]:
    """Real pairs, each with an author's annotation and its two Examples (True/False)."""
    ids: list[int] = []
    for k, pair_id in enumerate(make_pairs(session, coco_dir, n_pairs)):
        pair = session.get(ImagePair, pair_id)
        assert pair is not None
        author = Worker(source="invite", external_id=f"author{k}", roles=["generate", "validate"])
        session.add(author)
        session.flush()
        rel = RELATIONS[k % len(RELATIONS)]
        ann = Annotation(
            pair_id=pair_id,
            worker_id=author.id,  # type: ignore[arg-type]
            relation=rel,
            subj=pair.concept_a,
            obj=pair.concept_b,
            true_image_id=pair.image1_id,
        )
        session.add(ann)
        session.flush()
        for image_id, label in ((pair.image1_id, True), (pair.image2_id, False)):
            ex = Example(
                image_id=image_id,
                caption=render_caption(pair.concept_a, rel, pair.concept_b),
                relation=rel,
                subj=pair.concept_a,
                obj=pair.concept_b,
                label=label,
                origin="human",
                annotation_id=ann.id,
                author_id=author.id,
            )
            session.add(ex)
            session.flush()
            assert ex.id is not None
            ids.append(ex.id)
    session.commit()
    return ids


@pytest.fixture
def site(db_url: str, engine: Engine, coco_dir: Path, tmp_path: Path) -> Any:
    with Session(engine) as s:
        seed_examples(s, coco_dir)
    set_study(db_url, gold_rate=0.0)
    return make_app(db_url, tmp_path, image_root=coco_dir / "images")


def start(client: Any, pid: str) -> str:
    csrf = enter(client, f"PROLIFIC_PID={pid}&STUDY_ID=st&SESSION_ID=se", kind="validate")
    r = client.post("/begin/validate", data={"csrf": csrf}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/validate", r.text
    return csrf


def test_instructions_batch_defaults_and_page(
    site: Any, engine: Engine, db_url: str, tmp_path: Path, coco_dir: Path
) -> None:
    client = client_for(site)
    csrf = enter(client, "PROLIFIC_PID=v1&STUDY_ID=st&SESSION_ID=se", kind="validate")
    instr = client.get("/instructions/validate")
    assert instr.status_code == 200
    assert "500" in instr.text and "90 minutes" in instr.text and "either frame" in instr.text
    assert "press <kbd>T</kbd> for True" in instr.text
    client.post("/begin/validate", data={"csrf": csrf})
    with Session(engine) as s:
        (batch,) = s.exec(select(Batch)).all()
        # 8 Examples of 4 captions: one half of each fits in a batch (4), not 8, not 500
        assert (batch.kind, batch.size) == ("validate", 4)
        assert 89 * 60 <= (batch.deadline - batch.created_at).total_seconds() <= 90 * 60
    page = client.get("/validate")
    assert page.status_code == 200
    with Session(engine) as s:
        first = s.exec(select(Example).order_by(col(Example.id))).first()
        assert first is not None
    assert first.caption in page.text
    assert 'id="btn-true"' in page.text and 'id="btn-false"' in page.text
    assert "/images/validate/" in page.text  # the marked JPEG, addressed by the lease
    # The label, gold flag and origin do not reach the page: flipping them changes nothing.
    with Session(engine) as s:
        row = s.get(Example, first.id)
        assert row is not None
        row.label, row.is_gold, row.gold_label = not row.label, True, row.label
        row.origin = "adversarial"
        s.add(row)
        s.commit()
    # A fresh app (as after a restart: no cached display) with the same signed cookie.
    fresh = client_for(make_app(db_url, tmp_path, image_root=coco_dir / "images"))
    fresh.cookies = client.cookies
    again = fresh.get("/validate")
    assert again.status_code == 200
    strip = re.compile(r'data-seconds="\d+"|nonce="[^"]+"')  # the clock; a per-request nonce
    assert strip.sub("", again.text) == strip.sub("", page.text)
    # "left of": the frame rule is repeated and the optional frame question is asked.
    assert first.relation == "left of"
    assert 'id="frame-rule"' in page.text and 'name="reference_frame"' in page.text


def test_html_vote_records_frame_and_moves_on(site: Any, engine: Engine) -> None:
    client = client_for(site)
    start(client, "v1")
    page = client.get("/validate")
    fields = {k: form_field(page.text, k) for k in ("csrf", "assignment_id")}
    r = client.post(
        "/validate",
        data=fields | {"answer": "true", "reference_frame": "intrinsic", "duration_ms": "1234"},
        follow_redirects=False,
    )
    assert r.status_code == 303 and r.headers["location"] == "/validate"
    # The same form again (double click, back button): nothing new is stored.
    client.post("/validate", data=fields | {"answer": "false"}, follow_redirects=False)
    with Session(engine) as s:
        (vote,) = s.exec(select(Vote)).all()
        assert (vote.value, vote.reference_frame, vote.duration_ms) == (True, "intrinsic", 1234)
    nxt = client.get("/validate")
    assert form_field(nxt.text, "assignment_id") != fields["assignment_id"]
    bad = client.post("/validate", data=fields | {"answer": "maybe"})
    assert bad.status_code == 422 and "answer" in bad.text
    forged = client.post("/validate", data={**fields, "csrf": "nope", "answer": "true"})
    assert forged.status_code == 403


def test_json_api_round_trip_idempotent_and_owned(site: Any, engine: Engine) -> None:
    a, b = client_for(site), client_for(site)
    start(a, "va")
    start(b, "vb")
    item = a.get("/api/validate/item").json()
    # 8 Examples of 4 captions exist: the batch holds one half of each, not the study's 500.
    assert item["batch_size"] == 4 and item["done"] == 0 and not item["finished"]
    public = item["item"]
    assert set(public) == {
        "assignment_id",
        "caption",
        "subj",
        "obj",
        "relation",
        "frame_question",
        "image",
    }
    assert public["image"]["marked"] is True and public["image"]["src"].endswith(".jpg")
    img = a.get(public["image"]["src"])
    assert img.status_code == 200 and img.headers["content-type"] == "image/jpeg"
    assert img.content[:2] == b"\xff\xd8"
    assert b.get(public["image"]["src"]).status_code == 404  # someone else's lease
    body = {"assignment_id": public["assignment_id"], "value": False}
    assert b.post("/api/validate/votes", json=body).status_code == 404
    first = a.post("/api/validate/votes?next=1", json=body)
    assert first.status_code == 201, first.text
    out = first.json()
    assert (
        out["created"]
        and out["done"] == 1
        and out["next"]["item"]["assignment_id"] != (public["assignment_id"])
    )
    again = a.post("/api/validate/votes", json=body | {"value": True})
    assert again.status_code == 200 and again.json()["vote_id"] == out["vote_id"]
    assert again.json()["value"] is False  # the first answer stands
    bad = a.post("/api/validate/votes", json={"assignment_id": "x", "value": True})
    assert bad.status_code == 404 and "not one of yours" in bad.json()["detail"]
    bad = a.post("/api/validate/votes", json={"assignment_id": 1, "value": True})
    assert bad.status_code == 422 and "detail" in bad.json()
    frame = a.post("/api/validate/votes", json=body | {"reference_frame": "absolute"})
    assert frame.status_code == 422
    anon = client_for(site).get("/api/validate/item")
    assert anon.status_code == 401 and "link" in anon.json()["detail"]
    with Session(engine) as s:
        assert len(s.exec(select(Vote)).all()) == 1


def test_author_never_gets_own_examples_and_batch_completes(
    site: Any, engine: Engine, db_url: str
) -> None:
    set_study(db_url, validate_batch_size=3, completion_code="VALDONE", gold_rate=0.0)
    with Session(engine) as s:
        author = s.exec(select(Worker).where(Worker.external_id == "author0")).one()
        own = {e.id for e in s.exec(select(Example).where(Example.author_id == author.id))}
        token = "tok-author0"
        from vsr_core.models import InviteToken

        s.add(InviteToken(token=token, roles=[], worker_id=author.id))
        s.commit()
    client = client_for(site)
    csrf = enter(client, f"token={token}", kind="validate")
    client.post("/begin/validate", data={"csrf": csrf})
    seen = []
    for _ in range(3):
        item = client.get("/api/validate/item").json()["item"]
        seen.append(item["assignment_id"])
        r = client.post(
            "/api/validate/votes", json={"assignment_id": item["assignment_id"], "value": True}
        )
        assert r.status_code == 201
    assert r.json()["finished"] and r.json()["completion_code"] == "VALDONE"
    with Session(engine) as s:
        voted = {v.example_id for v in s.exec(select(Vote))}
    assert voted and not (voted & own)
    done = client.get("/validate", follow_redirects=True)
    assert done.status_code == 200 and "VALDONE" in done.text


def test_gold_items_look_like_any_other(site: Any, engine: Engine, db_url: str) -> None:
    with Session(engine) as s:
        ex = s.exec(select(Example).order_by(col(Example.id).desc())).first()
        assert ex is not None
        ex.is_gold, ex.gold_label = True, ex.label
        s.add(ex)
        s.commit()
        gold_caption = ex.caption
    set_study(db_url, gold_rate=1.0)
    client = client_for(site)
    start(client, "vg")
    gold_item = client.get("/api/validate/item").json()["item"]
    assert gold_item["caption"] == gold_caption
    client.post(
        "/api/validate/votes", json={"assignment_id": gold_item["assignment_id"], "value": True}
    )
    plain_item = client.get("/api/validate/item").json()["item"]
    assert set(gold_item) == set(plain_item)
    assert set(gold_item["image"]) == set(plain_item["image"])


def test_blocked_worker_is_refused(site: Any, engine: Engine) -> None:
    client = client_for(site)
    start(client, "vx")
    leased = client.get("/api/validate/item").json()["item"]["assignment_id"]
    with Session(engine) as s:
        w = s.exec(select(Worker).where(Worker.external_id == "vx")).one()
        w.blocked = True
        s.add(w)
        s.commit()
    r = client.get("/api/validate/item")
    assert r.status_code == 403 and "cannot take part" in r.json()["detail"]
    # The vote path reads the blocked flag with the lease (no separate worker lookup).
    r = client.post("/api/validate/votes", json={"assignment_id": leased, "value": True})
    assert r.status_code == 403 and "cannot take part" in r.json()["detail"]
    with Session(engine) as s:
        assert s.exec(select(Vote)).all() == []


def test_api_recovers_from_dropped_database_connections(
    pg_url: str, coco_dir: Path, tmp_path: Path
) -> None:
    """The API's own pool has no pre-ping: a connection PostgreSQL dropped (a restart, an
    admin's pg_terminate_backend) fails once inside the request, which is retried on a
    fresh connection; the worker sees nothing and no vote is lost or doubled."""
    from sqlalchemy import text

    from vsr_core.db import make_engine

    engine = make_engine(pg_url)
    with Session(engine) as s:
        seed_examples(s, coco_dir)
    set_study(pg_url, gold_rate=0.0)
    app = make_app(pg_url, tmp_path, image_root=coco_dir / "images")
    client = client_for(app)
    start(client, "vdrop")

    def drop_every_other_connection() -> int:
        with engine.connect() as c:
            killed = c.execute(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            ).scalar_one()
        engine.dispose()
        return int(killed)

    item = client.get("/api/validate/item").json()["item"]
    assert drop_every_other_connection() >= 1  # the API pool's idle connection among them
    r = client.post(
        "/api/validate/votes?next=1", json={"assignment_id": item["assignment_id"], "value": True}
    )
    assert r.status_code == 201, r.text
    assert r.json()["created"] and r.json()["next"]["item"] is not None
    drop_every_other_connection()
    again = client.get("/api/validate/item")
    assert again.status_code == 200
    assert again.json()["item"]["assignment_id"] == r.json()["next"]["item"]["assignment_id"]
    with Session(engine) as s:
        votes = s.exec(select(Vote)).all()
        assert [(v.assignment_id, v.value) for v in votes] == [
            (lease_id_of(item["assignment_id"]), True)
        ]
    engine.dispose()


def test_pages_carry_security_headers_and_a_nonced_script(site: Any) -> None:
    client = client_for(site)
    start(client, "vcsp")
    page = client.get("/validate")
    assert page.status_code == 200
    policy = page.headers["content-security-policy"]
    assert (
        "script-src 'self' 'nonce-" in policy
        and "'unsafe-inline'" not in policy.split("script-src")[1].split(";")[0]
    )
    assert "frame-ancestors 'self' https://www.mturk.com" in policy  # MTurk frames HITs
    nonce = policy.split("'nonce-")[1].split("'")[0]
    assert f'<script nonce="{nonce}">' in page.text
    assert client.get("/validate").headers["content-security-policy"] != policy  # per request
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["referrer-policy"] == "same-origin"
    admin = client.get("/admin/login")
    assert "frame-ancestors 'none'" in admin.headers["content-security-policy"]
    api = client.get("/api/validate/item")
    assert "content-security-policy" not in api.headers  # JSON is no document
    assert api.headers["x-content-type-options"] == "nosniff"
