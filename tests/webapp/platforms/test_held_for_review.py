"""A flagged worker's submission is held for a person's review by `vsr platform plan`: no
approve, reject or bonus is planned (nothing rejected automatically), the evidence is
printed, and once a person approves it the next plan approves the work."""

from __future__ import annotations

import pytest
from sqlmodel import Session, select

from tests.support import platform_work as work
from tests.support.fake_prolific import State
from tests.webapp.platforms.test_engine import client, platform_study
from vsr_cli.platform import _print_held
from vsr_core import audit
from vsr_core.audit import Actor
from vsr_core.models import AuditKind, PlatformSubmission
from webapp.platforms.engine import Rules, plan, sync


def test_flagged_worker_is_held_then_approved_after_review(
    session: Session, fake: tuple[str, State], capsys: pytest.CaptureFixture[str]
) -> None:
    url, state = fake
    p = client(url)
    row = platform_study(session, p, "validate")
    s = work.scene(session)
    bot, person = work.worker(session, "B"), work.worker(session, "P")
    for w, sub, n in ((bot, "sB", 40), (person, "sP", 3)):
        work.votes(
            session,
            work.batch(session, w, work.prolific_entry(row.external_id, sub), kind="validate"),
            s,
            n,
        )
        state.add_submission(row.external_id, sub, w.external_id, "AWAITING REVIEW")
    sync(session, p, row, {})
    added = plan(session, row, Rules(min_items=1))
    assert [(a.kind, a.target) for a in added] == [("approve", "sP")]
    subs = list(session.exec(select(PlatformSubmission)))
    _print_held(session, row, subs)
    out = capsys.readouterr().out
    assert "held for review sB" in out and "answered True 40 of 40 times" in out
    # The evidence batch by batch, each batch's signals counted alone.
    (line,) = [x for x in out.splitlines() if x.startswith("  batch #")]
    assert line.endswith("40 answers, 0 measured; answered True 40 of 40 times (entropy 0.00 bits)")
    assert "sP" not in out
    audit.record(
        session,
        Actor(name="reviewer"),
        AuditKind.authenticity_approve,
        study_id=row.study_id,
        target=f"worker {bot.id}",
        change={"flags": ["same_answer"]},
    )
    session.commit()
    again = plan(session, row, Rules(min_items=1))
    assert [(a.kind, a.target) for a in again] == [("approve", "sB")]
