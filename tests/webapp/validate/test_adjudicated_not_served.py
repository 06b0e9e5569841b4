"""The validation queue stops asking for votes on an Example an admin settled, and asks again
once the settlement is withdrawn (real COCO pairs, both backends, through HTTP)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from tests.support.admins import create_owner
from tests.support.webapp_coco import client_for, make_app, set_study
from tests.webapp.admin.test_admin import PASSWORD, login
from tests.webapp.validate.test_routes import seed_examples, start
from vsr_core.models import Assignment, Example


def _served(client: Any) -> None:
    """Answer every item of the worker's batch."""
    item = client.get("/api/validate/item").json()
    while item and not item.get("finished") and item.get("item"):
        aid = item["item"]["assignment_id"]
        out = client.post("/api/validate/votes", json={"assignment_id": aid, "value": True})
        assert out.status_code == 201, out.text
        item = client.get("/api/validate/item").json()


def test_adjudicated_examples_leave_the_queue(
    db_url: str, engine: Engine, coco_dir: Path, tmp_path: Path
) -> None:
    with Session(engine) as s:
        ids = seed_examples(s, coco_dir)  # 4 captions, their True and False Examples
        create_owner(s, "alice", PASSWORD)
    set_study(db_url, gold_rate=0.0)
    app = make_app(db_url, tmp_path, image_root=coco_dir / "images")
    admin = client_for(app)
    token = login(admin)
    # Settle both halves of three captions: only the fourth caption is left to judge.
    settled = ids[:6]
    r = admin.post(
        "/admin/data/adjudicate",
        data={
            "csrf_token": token,
            "scope": "ids",
            "ids": [str(i) for i in settled],
            "decision": "excluded",
            "reason": "blurry photos",
        },
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    worker = client_for(app)
    start(worker, "v-after-adjudication")
    _served(worker)
    with Session(engine) as s:
        leased = {a.example_id for a in s.exec(select(Assignment)).all()}
        assert leased and leased <= set(ids[6:]), leased
        assert all(not s.get(Example, i).queue_open for i in settled)  # type: ignore[union-attr]
    # Withdrawn: the queue's own rule decides again, so the Example is served again.
    r = admin.post(
        f"/admin/examples/{settled[0]}/adjudicate",
        data={"csrf_token": token, "decision": "withdraw", "reason": "the photo is fine"},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    with Session(engine) as s:
        assert s.get(Example, settled[0]).queue_open  # type: ignore[union-attr]
    # A fresh server process: this one keeps the lowest open id for a second (the queue's
    # floor, webapp.validate.strategy), so an Example re-opened below it waits that long.
    again = client_for(make_app(db_url, tmp_path, image_root=coco_dir / "images"))
    start(again, "v-after-withdrawal")
    _served(again)
    with Session(engine) as s:
        leased = {a.example_id for a in s.exec(select(Assignment)).all()}
        assert settled[0] in leased and not (leased & set(settled[1:]))
