"""Sync, plan and apply on the fake Prolific and a real database, including a process killed
between 'sending' and the call and after the call: nothing is approved, rejected or paid twice."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import Session, select

from tests.support.fake_prolific import TOKEN, State
from vsr_core.models import (
    Example,
    Image,
    PlatformAction,
    PlatformStudy,
    PlatformSubmission,
    Worker,
)
from webapp.platforms.engine import CRASH_ENV, Rules, apply, plan, reconcile, sync
from webapp.platforms.prolific import ProlificPlatform

# Settled by validation, every vote agreeing with the label: kept.
KEPT: dict[str, Any] = {"queue_settled": True, "queue_votes": 3, "queue_agree": 3}

ROOT = Path(__file__).resolve().parents[3]
RULES = Rules(min_items=1, bonus_cents_per_kept=20)


def _seed(session: Session, url: str, state: State) -> PlatformStudy:
    """Three participants: p1 wrote 2 captions, p2 did nothing, p3 returned."""
    p = ProlificPlatform(base_url=url, token=TOKEN)
    ext = p.create_draft({"name": "s", "external_study_url": "https://x/start",
                          "total_available_places": 3, "reward": 100,
                          "estimated_completion_time": 5})
    p.publish(ext)
    workers = {pid: Worker(source="prolific", external_id=pid) for pid in ("p1", "p2", "p3")}
    session.add_all(workers.values())
    img = Image(coco_id=1, file_name="a.jpg", coco_split="val2017", width=10, height=10)
    session.add(img)
    session.commit()
    for caption in ("The cat is on the mat.", "The dog is under the table."):
        session.add(Example(image_id=img.id or 0, caption=caption, relation="on", subj="cat",
                            obj="mat", label=True, author_id=workers["p1"].id, **KEPT))
    # Written but not kept: still open, and settled with 1 of 3 votes agreeing.
    not_kept: list[dict[str, Any]] = [{"queue_settled": False, "queue_votes": 1, "queue_agree": 1},
                                      {"queue_settled": True, "queue_votes": 3, "queue_agree": 1}]
    for extra in not_kept:
        session.add(Example(image_id=img.id or 0, caption="The cat is near the mat.",
                            relation="near", subj="cat", obj="mat", label=True,
                            author_id=workers["p1"].id, **extra))
    study = PlatformStudy(platform="prolific", external_id=ext)
    session.add(study)
    session.commit()
    state.add_submission(ext, "s1", "p1", "AWAITING REVIEW")
    state.add_submission(ext, "s2", "p2", "AWAITING REVIEW")
    state.add_submission(ext, "s3", "p3", "RETURNED")
    sync(session, p, study, {})
    return study


def test_plan_is_deterministic_and_apply_sends_once(
    session: Session, fake: tuple[str, State]
) -> None:
    url, state = fake
    study = _seed(session, url, state)
    first = plan(session, study, RULES)
    assert sorted((a.kind, a.target, a.amount_cents) for a in first) == [
        ("approve", "s1", None), ("bonus", "s1", 40), ("reject", "s2", None)]
    assert plan(session, study, RULES) == []  # planning again adds nothing
    p = ProlificPlatform(base_url=url, token=TOKEN)
    assert apply(session, p, study) == {"done": 3, "failed": 0}
    assert apply(session, p, study) == {"done": 0, "failed": 0}
    assert sorted(state.transitions) == [("s1", "APPROVED"), ("s2", "REJECTED")]
    assert state.paid == [("p1", 0.40)]
    subs = {s.external_id: s for s in session.exec(select(PlatformSubmission))}
    assert subs["s1"].quality["kept_captions"] == 2 and subs["s1"].quality["items"] == 4
    assert subs["s3"].status == "RETURNED"


@pytest.mark.parametrize("point", ["after_sending", "after_call"])
def test_killed_mid_apply_never_sends_twice(
    db_url: str, engine: Engine, fake: tuple[str, State], point: str
) -> None:
    url, state = fake
    with Session(engine) as session:
        study = _seed(session, url, state)
        plan(session, study, Rules(min_items=1, bonus_cents_per_kept=0))
        study_id = study.id
    env = {**os.environ, CRASH_ENV: point, "PYTHONPATH": str(ROOT)}
    child = subprocess.run(
        [sys.executable, "tests/support/platform_apply.py", db_url, url, str(study_id)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )
    assert child.returncode == 9, child.stderr[-2000:]
    with Session(engine) as session:
        states = [a.state for a in session.exec(select(PlatformAction))]
        assert states.count("sending") == 1  # the crash left exactly one row in flight
        again = session.get(PlatformStudy, study_id)
        assert again is not None
        p = ProlificPlatform(base_url=url, token=TOKEN)
        # A fresh 'sending' row may be in flight in another apply: left alone...
        assert reconcile(session, p, again) == 0
        # ...until it is older than any live call (here: at once).
        counts = apply(session, p, again, stale_after=timedelta(0))
        assert counts["failed"] == 0
        assert {a.state for a in session.exec(select(PlatformAction))} == {"done"}
    assert sorted(state.transitions) == [("s1", "APPROVED"), ("s2", "REJECTED")]
