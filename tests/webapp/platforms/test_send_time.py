"""Money decided on the facts at the moment it is sent: a returned submission or a worker
flagged after the plan gets nothing, a bonus waits for its own approve, kept work validated
after the plan is paid by a later plan, a claim lost to another apply pays nothing, and a
submission that stopped after one item of its batch is not approved."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import update
from sqlmodel import Session, col, select

from tests.support import platform_work as work
from tests.support.fake_prolific import State
from tests.support.qualification import study_text
from tests.webapp.platforms.test_engine import client, platform_study
from vsr_core import standing
from vsr_core.models import (
    Example,
    PlatformAction,
    PlatformLedger,
    PlatformStudy,
    PlatformSubmission,
    Worker,
)
from vsr_core.studies.store import create_study
from webapp.platforms import settlement
from webapp.platforms.engine import Rules, apply, plan, sync
from webapp.platforms.prolific import ProlificPlatform
from webapp.platforms.standing import worker_standing

RULES = Rules(bonus_cents_per_kept=50)
ROOT = Path(__file__).resolve().parents[3]


def _one_writer(
    session: Session, url: str, state: State, kept: int = 8, pending: int = 0
) -> tuple[PlatformStudy, Worker, list[int]]:
    """Worker P wrote ``kept`` kept captions and ``pending`` not yet validated ones in
    their session's batch (its size: all of them) of one Prolific study."""
    p = client(url)
    study = platform_study(session, p)
    who = work.worker(session, "P")
    b = work.batch(session, who, work.prolific_entry(study.external_id, "sP"), size=kept + pending)
    ids = work.captions(session, b, work.scene(session), kept=kept + pending)
    if pending:
        session.execute(
            update(Example)
            .where(col(Example.id).in_(ids[kept:]))
            .values(queue_settled=False, queue_votes=1, queue_agree=1)
        )
        session.commit()
    state.add_submission(study.external_id, "sP", "P", "AWAITING REVIEW")
    sync(session, p, study, {})
    return study, who, ids[kept:]


def _states(session: Session) -> dict[str, tuple[str, dict[str, Any]]]:
    session.expire_all()
    return {
        a.idempotency_key.split("-")[2]: (a.state, dict(a.response or {}))
        for a in session.exec(select(PlatformAction).order_by(col(PlatformAction.id)))
    }


def test_a_submission_returned_after_the_plan_gets_nothing(
    session: Session, fake: tuple[str, State]
) -> None:
    url, state = fake
    study, _, _ = _one_writer(session, url, state)
    assert sorted(a.kind for a in plan(session, study, RULES)) == ["approve", "bonus"]
    state.submissions["sP"]["status"] = "RETURNED"
    p = client(url)
    sync(session, p, study, {})
    apply(session, p, study)
    assert state.paid == [] and state.transitions == []
    assert state.count("POST", "bonus-payments") == 0
    got = _states(session)
    assert got["approve"][0] == "cancelled" and got["bonus"][0] == "cancelled"
    assert "returned" in got["bonus"][1]["cancelled"]
    money = settlement.paid_for(session, study)
    (sub,) = money.values()
    assert (sub["paid"], sub["pending"], sub["closed"]) == (0, 0, 400)
    assert any("returned" in why for why in sub["closed_why"])
    # What the page and `vsr platform plan` print for it.
    row = session.exec(select(PlatformSubmission)).one()
    line = settlement.money_line(sub, row.quality, row.status)
    assert line == "paid 0c, pending 0c, closed 400c (submission returned on the platform)"
    (cancelled,) = [a for a in settlement.cancelled_actions(session, study) if a.kind == "approve"]
    assert cancelled.response == {"cancelled": "submission returned on the platform"}


def test_a_return_not_synced_yet_stops_the_bonus(session: Session, fake: tuple[str, State]) -> None:
    """Prolific refuses the approve of a returned submission: its bonus is not set up."""
    url, state = fake
    study, _, _ = _one_writer(session, url, state)
    plan(session, study, RULES)
    state.submissions["sP"]["status"] = "RETURNED"
    apply(session, client(url), study)
    assert state.paid == [] and state.count("POST", "bonus-payments") == 0
    got = _states(session)
    assert got["approve"][0] == "failed" and got["bonus"][0] == "cancelled"
    assert "approve is failed" in got["bonus"][1]["cancelled"]


def test_a_worker_flagged_after_the_plan_is_not_paid(
    session: Session, fake: tuple[str, State]
) -> None:
    url, state = fake
    study, who, _ = _one_writer(session, url, state)
    plan(session, study, RULES)
    who.flagged, who.flag_reason = True, "gold failures"
    session.add(who)
    session.commit()
    apply(session, client(url), study)
    assert state.paid == [] and state.transitions == []
    got = _states(session)
    assert got["bonus"] == ("cancelled", {"cancelled": "worker flagged: gold failures"})
    # The next plan judges the submission on the facts now: rejected.
    assert [a.kind for a in plan(session, study, RULES)] == ["reject"]


def test_standing_at_send_time_is_the_studys_own(session: Session, fake: tuple[str, State]) -> None:
    """A block in another study leaves this study's money alone; a flag in this study alone
    stops the money planned before it."""
    url, state = fake
    study, who, _ = _one_writer(session, url, state)
    other = create_study(session, study_text(""), "lab.toml")
    session.commit()
    assert other.id is not None and who.id is not None
    standing.set_blocked(session, who, other.id, True, "elsewhere only")
    session.commit()
    assert worker_standing(session, study.study_id, who.id) is None
    plan(session, study, RULES)
    standing.set_flagged(session, who, study.study_id, True, "speeding here")
    session.commit()
    assert worker_standing(session, study.study_id, who.id) == "worker flagged: speeding here"
    apply(session, client(url), study)
    assert state.paid == [] and state.transitions == []
    assert _states(session)["bonus"] == (
        "cancelled",
        {"cancelled": "worker flagged: speeding here"},
    )


def test_a_bonus_waits_for_its_approve(session: Session, fake: tuple[str, State]) -> None:
    """The approve's answer is a 500 before anything happened (the client cannot tell): the
    bonus stays planned until the approve is confirmed, then it is paid once."""
    url, state = fake
    study, _, _ = _one_writer(session, url, state)
    plan(session, study, RULES)
    state.fail_before, state.slow_paths = 1, ("/transition/",)
    p = client(url)
    apply(session, p, study)
    assert state.paid == [] and state.count("POST", "bonus-payments") == 0
    got = _states(session)
    assert got["approve"][0] == "sending" and got["bonus"][0] == "planned"
    apply(session, p, study, stale_after=timedelta(0))
    assert state.transitions == [("sP", "APPROVED")] and state.paid == [("P", 4.0)]


def test_kept_work_validated_after_the_plan_is_paid_later(
    session: Session, fake: tuple[str, State]
) -> None:
    """8 captions not validated at plan time are pending, not credited at 0p; once kept, the
    next plan pays them (£4.00) with a bonus of its own, once."""
    url, state = fake
    study, _, open_ids = _one_writer(session, url, state, kept=0, pending=8)
    assert [a.kind for a in plan(session, study, RULES)] == ["approve"]
    assert session.exec(select(PlatformLedger)).all() == []
    sub = session.exec(select(PlatformSubmission)).one()
    assert sub.quality["pending"] == 8
    p = client(url)
    apply(session, p, study)
    assert plan(session, study, RULES) == []  # still undecided: nothing new
    session.execute(
        update(Example)
        .where(col(Example.id).in_(open_ids))
        .values(queue_settled=True, queue_votes=3, queue_agree=3)
    )
    session.commit()
    later = plan(session, study, RULES)
    assert [(a.kind, a.amount_cents) for a in later] == [("bonus", 400)]
    apply(session, p, study)
    assert plan(session, study, RULES) == []
    apply(session, p, study)
    assert state.paid == [("P", 4.0)]
    (money,) = settlement.paid_for(session, study).values()
    assert (money["kept"], money["paid"], money["pending"]) == (8, 400, 0)


class _Overtaken(ProlificPlatform):
    """Another apply takes the claim over (a reconcile with a tiny --stale-minutes, then
    its own claim) while this one is setting the bonus up."""

    def __init__(self, session: Session, **kw: Any) -> None:
        super().__init__(**kw)
        self.db = session

    def bonus(self, *args: Any, **kw: Any) -> dict[str, Any]:
        from vsr_core.types import utcnow

        with Session(self.db.get_bind()) as other:
            other.execute(
                update(PlatformAction)
                .where(col(PlatformAction.kind) == "bonus")
                .values(sent_at=utcnow() + timedelta(seconds=1))
            )
            other.commit()
        return super().bonus(*args, **kw)


def test_a_claim_taken_over_before_the_pay_pays_nothing(
    session: Session, fake: tuple[str, State]
) -> None:
    url, state = fake
    study, _, _ = _one_writer(session, url, state)
    plan(session, study, RULES)
    from tests.support.fake_prolific import TOKEN

    p = _Overtaken(session, base_url=url, token=TOKEN, sleep=lambda s: None)
    apply(session, p, study)
    assert state.count("POST", "bonus-payments") == 1  # the set-up: pays nothing
    assert state.count("POST", "/pay/") == 0 and state.paid == []
    bonus = session.exec(select(PlatformAction).where(PlatformAction.kind == "bonus")).one()
    assert bonus.state == "sending"  # the other apply's to settle


def test_stale_minutes_has_a_floor() -> None:
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("vsr")),
            "platform",
            "apply",
            "--platform",
            "prolific",
            "--platform-study",
            "1",
            "--stale-minutes",
            "0",
            "--database-url",
            "sqlite:////nonexistent/x.db",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode != 0
    assert done.stderr.strip().count("\n") == 0 and "--stale-minutes" in done.stderr
    assert "Traceback" not in done.stderr


def test_one_item_of_four_is_not_approved(session: Session, fake: tuple[str, State]) -> None:
    """No min_items set: the batch's own target (its size) is the minimum."""
    url, state = fake
    p = client(url)
    study = platform_study(session, p)
    who = work.worker(session, "P")
    b = work.batch(session, who, work.prolific_entry(study.external_id, "sP"), size=4)
    work.captions(session, b, work.scene(session), kept=1)
    state.add_submission(study.external_id, "sP", "P", "AWAITING REVIEW")
    sync(session, p, study, {})
    (action,) = plan(session, study, Rules(bonus_cents_per_kept=50))
    assert action.kind == "reject" and "fewer than the 4 required" in action.reason
