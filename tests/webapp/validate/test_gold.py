"""Gold checks on both backends: mixing rate, accuracy tracking, flagging and blocking."""

from __future__ import annotations

import random
from datetime import timedelta

from sqlmodel import Session, select

from tests.webapp.validate.support import make_example, make_image, make_worker
from vsr_core.audit import Actor
from vsr_core.models import Assignment, Example, Worker
from vsr_core.standing import standing
from vsr_core.studies.settings import StudyConfig
from vsr_core.types import utcnow
from webapp.admin.actions import set_gold
from webapp.validate import audit, gold
from webapp.validate import queue as vq
from webapp.validate.strategy import ExampleStrategy

ADMIN = Actor("admin", None)


def strat(**changes: object) -> ExampleStrategy:
    return ExampleStrategy(config=StudyConfig(**changes), rng=random.Random(7))


def take(session: Session, worker: Worker, s: ExampleStrategy) -> Assignment | None:
    vq.begin_batch(session, worker, s)
    item = vq.next_item(session, worker, s)
    if item is None or item.lease_id is None:
        return None
    return session.get(Assignment, item.lease_id)


def answer(session: Session, worker: Worker, s: ExampleStrategy, value: bool) -> Example | None:
    lease = take(session, worker, s)
    if lease is None:
        return None
    assert lease.id is not None
    vq.record_vote(session, worker, lease.id, value, s)
    ex = session.get(Example, lease.example_id)
    assert ex is not None
    return ex


def test_gold_is_served_to_everyone_once_and_never_to_its_author(session: Session) -> None:
    img = make_image(session)
    author = make_worker(session, "author")
    g = make_example(session, img, is_gold=True, gold_label=False, author=author)
    make_example(session, img)
    s = strat(gold_rate=1.0)
    # Gold is not capped at the vote target: five validators all get it first.
    for i in range(5):
        w = make_worker(session, f"v{i}")
        first = answer(session, w, s, False)
        assert first is not None and first.id == g.id
        second = answer(session, w, s, True)
        assert second is not None and second.id != g.id or second is None  # never twice
    first_for_author = answer(session, author, s, True)
    assert first_for_author is None or first_for_author.id != g.id


def test_gold_rate_mixes_in_roughly_that_share(session: Session) -> None:
    img = make_image(session)
    golds = {make_example(session, img, is_gold=True, gold_label=True).id for _ in range(30)}
    for _ in range(90):
        make_example(session, img)
    w = make_worker(session, "v")
    s = strat(gold_rate=0.25, gold_min_answers=1000)
    served = [answer(session, w, s, True) for _ in range(80)]
    n_gold = sum(1 for ex in served if ex is not None and ex.id in golds)
    # Binomial(80, 0.25): mean 20, sd 3.9; the seeded stream must land well inside.
    assert 8 <= n_gold <= 32, n_gold
    none = strat(gold_rate=0.0)
    w2 = make_worker(session, "v2")
    assert all((ex := answer(session, w2, none, True)) and ex.id not in golds for _ in range(20))


def test_accuracy_below_threshold_flags_after_min_answers(session: Session) -> None:
    img = make_image(session)
    for _ in range(4):
        make_example(session, img, is_gold=True, gold_label=True)
    make_example(session, img)
    w = make_worker(session, "careless")
    s = strat(gold_rate=1.0, gold_min_answers=3, gold_accuracy_threshold=0.7)
    answer(session, w, s, True)  # right
    answer(session, w, s, False)  # wrong: 1/2, but fewer than 3 answers yet
    assert not standing(session, w, 1).flagged
    answer(session, w, s, False)  # wrong: 1/3 = 33% < 70% after 3 answers
    here = standing(session, w, 1)
    assert here.flagged and not here.blocked
    assert here.flag_reason is not None and "1/3" in here.flag_reason
    # Flagged in this study only: another study sees the worker as before.
    session.refresh(w)
    assert not w.flagged and not standing(session, w, 2).flagged
    assert w.id is not None
    score = gold.gold_score(session, w.id)
    assert (score.answered, score.correct) == (3, 1)


def test_block_on_failure_releases_open_leases(session: Session) -> None:
    img = make_image(session)
    make_example(session, img, is_gold=True, gold_label=True)
    make_example(session, img, is_gold=True, gold_label=True)
    regular = make_example(session, img)
    w = make_worker(session, "bad")
    s = strat(
        gold_rate=1.0, gold_min_answers=2, gold_accuracy_threshold=0.5, block_on_gold_failure=True
    )
    answer(session, w, s, False)  # first gold: wrong
    late = take(session, w, s)  # second gold, left open (say, in another tab) until it expires
    assert late is not None and late.id is not None
    late.lease_expires_at = utcnow() - timedelta(seconds=1)
    session.add(late)
    session.commit()
    held = take(session, w, s)  # no unseen gold left: the regular item, leased and open
    assert held is not None and held.example_id == regular.id
    session.refresh(regular)
    assert regular.queue_leases == 1
    out = vq.record_vote(session, w, late.id, False, s)  # the late gold answer: wrong again
    assert out.created and out.flagged
    session.refresh(regular)
    here = standing(session, w, 1)
    assert here.blocked and here.flagged and regular.queue_leases == 0
    session.refresh(w)
    assert not w.blocked  # blocked in this study, not in every study
    active = session.exec(
        select(Assignment).where(Assignment.worker_id == w.id, Assignment.status == "active")
    ).all()
    assert active == []
    assert audit.audit_counters(session) == []


def test_gold_report_worst_first(session: Session) -> None:
    img = make_image(session)
    ex = make_example(session, img)
    set_gold(
        session, ex, True, False, actor=ADMIN
    )  # the dashboard's action: gold, known answer False
    a, b = make_worker(session, "a"), make_worker(session, "b")
    s = strat(gold_rate=1.0)
    answer(session, a, s, False)
    answer(session, b, s, True)
    report = gold.gold_report(session)
    assert [(r.worker_id, r.answered, r.correct) for r in report] == [(b.id, 1, 0), (a.id, 1, 1)]
    assert report[0].accuracy == 0.0 and report[1].accuracy == 1.0


def test_marking_gold_with_leases_out_keeps_the_queue_counters_exact(session: Session) -> None:
    """An admin marks an Example gold while a validator holds it, and later unmarks it: the
    lease count follows the flag (gold Examples' leases are not counted), so the counters stay
    exact and the Example is served again in full once it is a regular item."""
    img = make_image(session)
    ex = make_example(session, img)
    a, b, c, d = (make_worker(session, n) for n in "abcd")
    s = strat(gold_rate=0.0, votes_per_example=3)
    held = take(session, a, s)
    assert held is not None and held.example_id == ex.id and held.id is not None
    set_gold(session, ex, True, True, actor=ADMIN)
    assert audit.audit_counters(session) == []
    vq.record_vote(session, a, held.id, True, s)  # the held item is answered as gold
    assert audit.audit_counters(session) == []
    second = take(session, b, s)  # gold is not served as a regular item
    assert second is None
    session.refresh(ex)
    set_gold(session, ex, False, None, actor=ADMIN)
    assert audit.audit_counters(session) == []
    for w in (c, d):  # a regular item again: it takes its votes from new validators
        lease = take(session, w, s)
        assert lease is not None and lease.example_id == ex.id
    assert audit.audit_counters(session) == []
