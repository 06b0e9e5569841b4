"""Sync, plan and apply on the fake Prolific and a real database: each submission is judged
and paid on the work in its own batches, the ledger pays each unit once, and a process
killed before or after a call never sends anything twice."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from tests.support import platform_work as work
from tests.support.fake_prolific import TOKEN, State
from vsr_core.models import (
    PlatformAction,
    PlatformLedger,
    PlatformStudy,
    PlatformSubmission,
)
from vsr_core.studies.store import create_study
from webapp.platforms.engine import Rules, apply, plan, reconcile, sync
from webapp.platforms.prolific import ProlificPlatform

ROOT = Path(__file__).resolve().parents[3]
ZH_FILE = ROOT / "studies" / "vsr-zh.toml"
RULES = Rules(min_items=1, bonus_cents_per_kept=20)


def client(url: str, **kw: float) -> ProlificPlatform:
    return ProlificPlatform(base_url=url, token=TOKEN, sleep=lambda s: None, **kw)  # type: ignore[arg-type]


def platform_study(
    session: Session, p: ProlificPlatform, kind: str = "generate", study_id: int = 1
) -> PlatformStudy:
    ext = p.create_draft(
        {
            "name": kind,
            "external_study_url": "https://x/start",
            "total_available_places": 3,
            "reward": 100,
            "estimated_completion_time": 5,
        },
        f"m-{kind}",
    )
    p.publish(ext)
    row = PlatformStudy(
        study_id=study_id,
        platform="prolific",
        external_id=ext,
        state="published",
        settings={"kind": kind, "reward_cents": 100},
    )
    session.add(row)
    session.commit()
    return row


def _seed(session: Session, url: str, state: State) -> PlatformStudy:
    """Three participants: p1 wrote 2 kept and 2 not kept captions in its session's batch,
    p2 did nothing, p3 returned."""
    p = client(url)
    study = platform_study(session, p)
    s = work.scene(session)
    p1 = work.worker(session, "p1")
    work.worker(session, "p2")
    work.worker(session, "p3")
    b = work.batch(session, p1, work.prolific_entry(study.external_id, "s1"))
    work.captions(session, b, s, kept=2, not_kept=2)
    state.add_submission(study.external_id, "s1", "p1", "AWAITING REVIEW")
    state.add_submission(study.external_id, "s2", "p2", "AWAITING REVIEW")
    state.add_submission(study.external_id, "s3", "p3", "RETURNED")
    sync(session, p, study, {})
    return study


def test_plan_is_deterministic_and_apply_sends_once(
    session: Session, fake: tuple[str, State]
) -> None:
    url, state = fake
    study = _seed(session, url, state)
    first = plan(session, study, RULES)
    assert sorted((a.kind, a.target, a.amount_cents) for a in first) == [
        ("approve", "s1", None),
        ("bonus", "s1", 40),
        ("reject", "s2", None),
    ]
    assert plan(session, study, RULES) == []  # planning again adds nothing
    p = client(url)
    assert apply(session, p, study)["done"] == 3
    assert apply(session, p, study)["done"] == 0
    assert sorted(state.transitions) == [("s1", "APPROVED"), ("s2", "REJECTED")]
    assert state.paid == [("p1", 0.40)]
    subs = {s.external_id: s for s in session.exec(select(PlatformSubmission))}
    assert subs["s1"].quality["kept_captions"] == 2 and subs["s1"].quality["items"] == 4
    assert subs["s3"].status == "RETURNED"
    # The confirmed transitions show at once, not "AWAITING REVIEW" until the next sync.
    assert (subs["s1"].status, subs["s2"].status) == ("APPROVED", "REJECTED")
    ledger = session.exec(select(PlatformLedger)).all()
    assert len(ledger) == 4 and {r.submission_id for r in ledger} == {subs["s1"].id}
    assert sum(r.cents for r in ledger) == 40 and sum(r.kept for r in ledger) == 2


def test_three_platform_studies_pay_one_bonus(session: Session, fake: tuple[str, State]) -> None:
    """A worker wrote 4 captions (8 kept Examples) in one Prolific study, then submitted the
    completion code of two more (one a validation study) in which they did nothing: one
    approval, one bonus of £4.00; the other two are rejected."""
    url, state = fake
    p = client(url)
    a, b, c = (platform_study(session, p, k) for k in ("generate", "generate", "validate"))
    who = work.worker(session, "P")
    s = work.scene(session)
    work.captions(
        session, work.batch(session, who, work.prolific_entry(a.external_id, "sA")), s, kept=8
    )
    # Their session in C opened a validation batch and did nothing in it.
    work.batch(session, who, work.prolific_entry(c.external_id, "sC"), kind="validate")
    for row, sub in ((a, "sA"), (b, "sB"), (c, "sC")):
        state.add_submission(row.external_id, sub, "P", "AWAITING REVIEW")
        sync(session, p, row, {})
    rules = Rules(min_items=1, bonus_cents_per_kept=50)
    for row in (a, b, c):
        plan(session, row, rules)
        apply(session, p, row)
    assert state.paid == [("P", 4.0)]
    assert sorted(state.transitions) == [("sA", "APPROVED"), ("sB", "REJECTED"), ("sC", "REJECTED")]
    sub_a = session.exec(
        select(PlatformSubmission).where(PlatformSubmission.external_id == "sA")
    ).one()
    ledger = session.exec(select(PlatformLedger)).all()
    assert len(ledger) == 8 and {r.submission_id for r in ledger} == {sub_a.id}


def test_validation_only_study_approves_no_caption_work(
    session: Session, fake: tuple[str, State]
) -> None:
    """In a validation platform study, caption work done in another platform study earns
    neither approval nor a kept-caption bonus; votes in its own batch are the work."""
    url, state = fake
    p = client(url)
    gen, val = platform_study(session, p, "generate"), platform_study(session, p, "validate")
    s = work.scene(session)
    writer, voter = work.worker(session, "Q"), work.worker(session, "V")
    for w, sub in ((writer, "gQ"), (voter, "gV")):
        work.captions(
            session, work.batch(session, w, work.prolific_entry(gen.external_id, sub)), s, kept=4
        )
    work.votes(
        session,
        work.batch(session, voter, work.prolific_entry(val.external_id, "vV"), kind="validate"),
        s,
        3,
    )
    state.add_submission(val.external_id, "vQ", "Q", "AWAITING REVIEW")
    state.add_submission(val.external_id, "vV", "V", "AWAITING REVIEW")
    sync(session, p, val, {})
    added = plan(session, val, Rules(min_items=1, bonus_cents_per_kept=50))
    assert sorted((x.kind, x.target, x.amount_cents) for x in added) == [
        ("approve", "vV", None),
        ("reject", "vQ", None),
    ]
    q = {x.target: x.reason for x in added}
    assert "0 items done in this study's batches" in q["vQ"]


def test_votes_in_another_study_approve_nobody(session: Session, fake: tuple[str, State]) -> None:
    """200 workers whose only vote was in another study (even from a batch whose entry
    carries the same session id): none approved."""
    url, state = fake
    p = client(url)
    other = create_study(session, ZH_FILE.read_text(encoding="utf-8"), str(ZH_FILE))
    row = platform_study(session, p, "validate")
    s = work.scene(session, other.id or 1)
    for i in range(200):
        w = work.worker(session, f"w{i}")
        work.votes(
            session,
            work.batch(
                session,
                w,
                work.prolific_entry(row.external_id, f"s{i}"),
                kind="validate",
                study_id=other.id or 1,
            ),
            s,
            1,
        )
        state.add_submission(row.external_id, f"s{i}", f"w{i}", "AWAITING REVIEW")
    sync(session, p, row, {})
    added = plan(session, row, Rules(min_items=1))
    assert {x.kind for x in added} == {"reject"} and len(added) == 200
    assert session.exec(select(PlatformLedger)).all() == []


def test_the_ledger_refuses_a_unit_twice(session: Session, fake: tuple[str, State]) -> None:
    """A unit the ledger credits to one submission is never paid to another: plan leaves it
    out, and the database refuses a second row for it whatever the code does."""
    url, state = fake
    study = _seed(session, url, state)
    plan(session, study, RULES)
    row = session.exec(select(PlatformLedger)).first()
    assert row is not None
    sub2 = session.exec(
        select(PlatformSubmission).where(PlatformSubmission.external_id == "s2")
    ).one()
    session.add(
        PlatformLedger(
            unit_kind=row.unit_kind,
            unit_id=row.unit_id,
            platform_study_id=study.id or 0,
            submission_id=sub2.id or 0,
            batch_id=row.batch_id,
            cents=20,
        )
    )
    with pytest.raises(IntegrityError):
        session.commit()
    session.rollback()


@pytest.mark.parametrize("point", ["before_call", "after_call"])
def test_killed_mid_apply_never_sends_twice(
    db_url: str, engine: Engine, fake: tuple[str, State], point: str
) -> None:
    url, state = fake
    with Session(engine) as session:
        study = _seed(session, url, state)
        plan(session, study, Rules(min_items=1, bonus_cents_per_kept=0))
        study_id = study.id
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.run(
        [sys.executable, "tests/support/platform_apply.py", db_url, url, str(study_id), point],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert child.returncode == 9, child.stderr[-2000:]
    with Session(engine) as session:
        states = [a.state for a in session.exec(select(PlatformAction))]
        assert states.count("sending") == 1  # the crash left exactly one row in flight
        again = session.get(PlatformStudy, study_id)
        assert again is not None
        p = client(url)
        # A fresh 'sending' row may be in flight in another apply: left alone...
        assert reconcile(session, p, again) == 0
        # ...until it is older than any live call (here: at once); the status is read.
        counts = apply(session, p, again, stale_after=timedelta(0))
        assert counts["failed"] == 0
        assert {a.state for a in session.exec(select(PlatformAction))} == {"done"}
    assert sorted(state.transitions) == [("s1", "APPROVED"), ("s2", "REJECTED")]
    # Each decision reached Prolific once (before_call: never sent before the crash).
    assert [
        path
        for m, path in state.received
        if m == "POST" and path.startswith("/api/v1/submissions/") and path.endswith("/transition/")
    ] in (
        [f"/api/v1/submissions/{s}/transition/" for s in order]
        for order in (("s1", "s2"), ("s2", "s1"))
    )


def test_slow_pay_is_sent_once_and_left_for_a_person(
    session: Session, fake: tuple[str, State]
) -> None:
    """Pay carried out but answered after the client gave up: one pay request, the action
    'unknown' (never re-sent, by this apply or a later one), the bonus paid once."""
    url, state = fake
    study = _seed(session, url, state)
    plan(session, study, RULES)
    state.slow, state.slow_paths = 0.6, ("/pay/",)
    p = client(url, timeout=0.2)
    counts = apply(session, p, study)
    assert counts == {"done": 2, "failed": 0, "unknown": 1, "sending": 0}
    state.slow = 0.0
    for _ in range(2):
        apply(session, p, study, stale_after=timedelta(0))
    assert state.count("POST", "/pay/") == 1 and state.paid == [("p1", 0.40)]
    bonus = session.exec(select(PlatformAction).where(PlatformAction.kind == "bonus")).one()
    assert bonus.state == "unknown" and bonus.response and bonus.response["setup"]["id"]


def test_a_lost_set_up_is_paid_once_after_reconcile(
    session: Session, fake: tuple[str, State]
) -> None:
    """The set-up answered 502 after it was stored: pay was never sent, so the bonus waits in
    'sending' and, once stale, is set up again and paid once (the first set-up is unpaid)."""
    url, state = fake
    study = _seed(session, url, state)
    plan(session, study, RULES)
    state.fail_after, state.slow_paths = 1, ("/bonus-payments/",)
    p = client(url)
    assert apply(session, p, study)["sending"] == 1
    assert state.count("POST", "/pay/") == 0
    apply(session, p, study, stale_after=timedelta(0))
    assert state.count("POST", "/submissions/bonus-payments/") == 2
    assert state.count("POST", "/pay/") == 1 and state.paid == [("p1", 0.40)]


def test_an_approve_answered_502_after_the_write_is_done(
    session: Session, fake: tuple[str, State]
) -> None:
    url, state = fake
    study = _seed(session, url, state)
    plan(session, study, Rules(min_items=1))
    state.fail_after, state.slow_paths = 1, ("/submissions/s1/transition/",)
    assert apply(session, client(url), study)["done"] == 2
    assert state.count("POST", "/submissions/s1/transition/") == 1
    assert sorted(state.transitions) == [("s1", "APPROVED"), ("s2", "REJECTED")]
    # The lost answer, settled by reading the platform, still sets the status shown.
    subs = {s.external_id: s.status for s in session.exec(select(PlatformSubmission))}
    assert (subs["s1"], subs["s2"]) == ("APPROVED", "REJECTED")
