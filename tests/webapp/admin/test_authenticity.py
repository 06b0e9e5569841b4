"""The worker page shows a flagged worker's authenticity evidence, marks them held for
review, and a person's approval is audited and releases the hold (both backends)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from tests.support import platform_work as work
from tests.support.admins import create_owner
from tests.webapp.admin.test_admin import PASSWORD, login, make_admin_app
from vsr_core.authenticity_db import held_for_review
from vsr_core.models import AuditEvent, AuditKind, ItemSignal, Vote


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
