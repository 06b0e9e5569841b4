"""The worker page shows a flagged worker's authenticity evidence, marks them held for
review, and a person's approval is audited and releases the hold (both backends)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from tests.support import platform_work as work
from tests.support.admins import create_owner
from tests.webapp.admin.test_admin import PASSWORD, login, make_admin_app
from vsr_core.authenticity_db import assess_workers, batch_assessments, held_for_review
from vsr_core.models import Assignment, AuditEvent, AuditKind, Example, ItemSignal, Vote


def _seed(engine: Engine) -> tuple[int, int]:
    """A bot that answered True 40 times and pressed a hidden canary; a person with 3 votes."""
    with Session(engine) as s:
        create_owner(s, "alice", PASSWORD)
        scene = work.scene(s)
        bot, person = work.worker(s, "bot"), work.worker(s, "person")
        work.votes(s, work.batch(s, bot, {}, kind="validate"), scene, 40)
        work.votes(s, work.batch(s, person, {}, kind="validate"), scene, 3)
        first = s.exec(select(Vote).where(Vote.worker_id == bot.id)).first()
        assert first is not None and bot.id is not None and person.id is not None
        s.add(ItemSignal(study_id=1, worker_id=bot.id, vote_id=first.id, shown_ms=900, canary=True))
        s.commit()
        return bot.id, person.id


def test_evidence_hold_and_audited_approval(db_url: str, engine: Engine, tmp_path: Path) -> None:
    bot, person = _seed(engine)
    client = TestClient(make_admin_app(db_url, engine, tmp_path))
    token = login(client)
    page = client.get(f"/admin/workers/{bot}").text
    assert "held for review" in page
    assert "answered True 40 of 40 times" in page
    assert "acted on a control no person can see on 1 item(s)" in page
    calm = client.get(f"/admin/workers/{person}").text
    assert "Nothing unusual" in calm and "held for review" not in calm
    with Session(engine) as s:
        assert set(held_for_review(s, 1, [bot, person])) == {bot}
    url = f"/admin/workers/{bot}/authenticity-approve"
    assert client.post(url, data={"csrf_token": "forged"}).status_code == 403
    anon: Any = TestClient(client.app)
    assert anon.post(url, data={"csrf_token": token}, follow_redirects=False).status_code in (
        303,
        401,
        403,
    )
    with Session(engine) as s:
        assert held_for_review(s, 1, [bot]) != {}  # neither of those approved anything
    r = client.post(url, data={"csrf_token": token}, follow_redirects=False)
    assert r.status_code == 303, r.text
    with Session(engine) as s:
        (event,) = s.exec(
            select(AuditEvent).where(AuditEvent.kind == AuditKind.authenticity_approve)
        ).all()
        assert event.target == f"worker {bot}" and event.study_id == 1
        assert set(event.change["flags"]) == {"same_answer", "canary"}
        assert held_for_review(s, 1, [bot]) == {}
        # Approval in study 1 says nothing about another study's work.
        assert held_for_review(s, 2, [bot]) == {}  # no votes there: nothing to hold
    after = client.get(f"/admin/workers/{bot}").text
    assert "approved after review" in after and "answered True 40 of 40 times" in after


def test_each_batch_has_its_own_evidence(db_url: str, engine: Engine, tmp_path: Path) -> None:
    """Signals counted per batch: a clean validation batch, one where the hidden canary was
    pressed, and a caption batch with a paste (its items reach the batch through the
    caption's lease), on the worker page; the worker as a whole carries both flags."""
    with Session(engine) as s:
        create_owner(s, "alice", PASSWORD)
        scene = work.scene(s)
        w = work.worker(s, "mixed")
        assert w.id is not None
        clean, pressed = (work.batch(s, w, {}, kind="validate") for _ in range(2))
        written = work.batch(s, w, {}, kind="generate")
        for b, canary in ((clean, False), (pressed, True)):
            work.votes(s, b, scene, 12)
            mine = (
                select(Vote)
                .join(Assignment, col(Assignment.id) == Vote.assignment_id)
                .where(Assignment.batch_id == b.id)
                .order_by(col(Vote.id))
            )
            for i, vote in enumerate(s.exec(mine).all()):
                signal = ItemSignal(
                    study_id=1,
                    worker_id=w.id,
                    vote_id=vote.id,
                    shown_ms=1500 + 211 * i,
                    key_events=1,
                    canary=canary and i == 0,
                )
                s.add(signal)
            s.commit()
        (example,) = work.captions(s, written, scene, 1)
        ann = s.get(Example, example)
        assert ann is not None and ann.annotation_id is not None
        s.add(
            ItemSignal(
                study_id=1,
                worker_id=w.id,
                annotation_id=ann.annotation_id,
                shown_ms=9000,
                key_events=30,
                pasted=True,
            )
        )
        s.commit()
        per_batch = batch_assessments(s, 1, w.id)
        whole = assess_workers(s, 1, [w.id])[w.id]
        ids = (clean.id or 0, pressed.id or 0, written.id or 0)
    assert {str(f) for f in whole.flags} >= {"canary", "paste"}
    assert set(per_batch) == set(ids)
    flags = [sorted(str(f) for f in per_batch[b].flags) for b in ids]
    counts = [
        (per_batch[b].summary["answers"], per_batch[b].summary["items_measured"]) for b in ids
    ]
    assert counts == [(12, 12), (12, 12), (0, 1)]
    assert "canary" in flags[1] and "canary" not in flags[0] and flags[2] == ["paste"]
    client = TestClient(make_admin_app(db_url, engine, tmp_path))
    login(client)
    page = client.get(f"/admin/workers/{w.id}").text
    assert "authenticity (this batch alone)" in page
    assert "12 answers, 12 measured" in page and "0 answers, 1 measured" in page
    assert "pasted text into 1 caption(s)" in page
